"""The client data path (broker.data_path) on a real ReplicaManager and log, without
sockets: acks=all answers wait for the ISR, retried idempotent batches included."""

import uuid

import pytest
import trio

from broker.data_path import DataPath
from broker.deferred import Deferred
from broker.replica_manager import ReplicaManager
from broker_helpers import server_config
from kraft.log.checkpoint import OffsetCheckpointFile
from kraft.protocol.error_codes import ErrorCode
from kraft.records import build_batch
from kraft.records.header import iter_batches
from metadata.image import EMPTY_IMAGE, MetadataImage, PartitionRegistration, TopicImage, frozen_map

TOPIC = "t"
TOPIC_ID = uuid.UUID(int=9)
LEADER, FOLLOWER = 1, 2


def one_partition_path(tmp_path, sendfile: bool = False, segment_bytes: int | None = None) -> DataPath:
    """Partition 0 of TOPIC led here, its follower in the ISR."""
    extra = {} if segment_bytes is None else {"log.segment.bytes": str(segment_bytes)}
    replicas = ReplicaManager(LEADER, server_config(tmp_path, node_id=LEADER, **extra))
    reg = PartitionRegistration(replicas=(LEADER, FOLLOWER), isr=(LEADER, FOLLOWER), leader=LEADER,
                                leader_epoch=0, partition_epoch=0)
    topic = TopicImage(TOPIC, TOPIC_ID, frozen_map({0: reg}))
    replicas.on_image(EMPTY_IMAGE, MetadataImage(offset=1, topics_by_name=frozen_map({TOPIC: topic}),
                                                 topics_by_id=frozen_map({TOPIC_ID: topic})))
    return DataPath(replicas, sendfile=sendfile)


@pytest.fixture
def data_path(tmp_path):
    path = one_partition_path(tmp_path)
    yield path
    path.replicas.close()


def produce_body(acks: int, records: bytes, timeout_ms: int = 30000) -> dict:
    return {"transactional_id": None, "acks": acks, "timeout_ms": timeout_ms,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": records}]}]}


def idempotent_batch(sequence: int, count: int = 3) -> bytes:
    return build_batch([(None, b"v%d" % i) for i in range(count)], producer_id=7, producer_epoch=0,
                       base_sequence=sequence, timestamp=1)


def answer(body: dict) -> tuple[int, int]:
    p = body["responses"][0]["partition_responses"][0]
    return p["error_code"], p["base_offset"]


async def follower_fetches(data_path: DataPath, offset: int) -> None:
    await data_path.fetch({
        "replica_id": FOLLOWER, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "topics": [{"topic": TOPIC, "topic_id": TOPIC_ID, "partitions": [{
            "partition": 0, "current_leader_epoch": 0, "fetch_offset": offset, "last_fetched_epoch": 0,
            "log_start_offset": 0, "partition_max_bytes": 1 << 20}]}]}, 12)


async def test_acks_all_waits_for_the_follower(data_path):
    pending = await data_path.produce(produce_body(-1, idempotent_batch(0)), 9)
    assert isinstance(pending, Deferred)
    await follower_fetches(data_path, 3)
    assert answer(await pending.finish()) == (ErrorCode.NONE, 0)


async def test_a_retried_batch_waits_for_the_follower_like_the_first_attempt(data_path):
    """The idempotent producer retries a timed-out batch with the same sequence: the
    duplicate may be acknowledged only once the original is replicated (Kafka waits too).
    Answering at once acknowledged writes that an isolated leader alone held."""
    first = await data_path.produce(produce_body(-1, idempotent_batch(0)), 9)
    retry = await data_path.produce(produce_body(-1, idempotent_batch(0)), 9)
    assert isinstance(first, Deferred) and isinstance(retry, Deferred)
    with trio.move_on_after(0.05) as waiting:
        await retry.finish()
    assert waiting.cancelled_caught, "the retry was answered before the follower had the batch"
    await follower_fetches(data_path, 3)
    assert answer(await retry.finish()) == (ErrorCode.NONE, 0)  # the original offsets
    assert answer(await first.finish()) == (ErrorCode.NONE, 0)
    assert data_path.replicas.get(TOPIC, 0).log.log_end_offset == 3  # appended once


async def test_a_retry_that_is_never_replicated_times_out(data_path):
    await data_path.produce(produce_body(-1, idempotent_batch(0), timeout_ms=50), 9)
    retry = await data_path.produce(produce_body(-1, idempotent_batch(0), timeout_ms=50), 9)
    assert answer(await retry.finish()) == (ErrorCode.REQUEST_TIMED_OUT, 0)


async def test_with_acks_1_a_retry_is_answered_at_once_with_the_original_offset(data_path):
    assert answer(await data_path.produce(produce_body(1, idempotent_batch(0)), 9)) == (ErrorCode.NONE, 0)
    assert answer(await data_path.produce(produce_body(1, idempotent_batch(3)), 9)) == (ErrorCode.NONE, 3)
    assert answer(await data_path.produce(produce_body(1, idempotent_batch(0)), 9)) == (ErrorCode.NONE, 0)


# -- a follower's fetch session reads only the partitions that changed (issue 15) ---------

MANY = 40


@pytest.fixture
def many_path(tmp_path):
    replicas = ReplicaManager(LEADER, server_config(tmp_path, node_id=LEADER))
    reg = PartitionRegistration(replicas=(LEADER, FOLLOWER), isr=(LEADER, FOLLOWER), leader=LEADER,
                                leader_epoch=0, partition_epoch=0)
    topic = TopicImage(TOPIC, TOPIC_ID, frozen_map({i: reg for i in range(MANY)}))
    replicas.on_image(EMPTY_IMAGE, MetadataImage(offset=1, topics_by_name=frozen_map({TOPIC: topic}),
                                                 topics_by_id=frozen_map({TOPIC_ID: topic})))
    yield DataPath(replicas)
    replicas.close()


def session_fetch(session_id: int, epoch: int, offsets: dict[int, int], max_wait_ms: int) -> dict:
    return {"replica_id": FOLLOWER, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": session_id, "session_epoch": epoch,
            "topics": [{"topic": TOPIC, "topic_id": TOPIC_ID, "partitions": [{
                "partition": i, "current_leader_epoch": 0, "fetch_offset": o, "last_fetched_epoch": -1,
                "log_start_offset": 0, "partition_max_bytes": 1 << 20} for i, o in offsets.items()]}],
            "forgotten_topics_data": []}


def produce_to(index: int) -> dict:
    return {"transactional_id": None, "acks": 1, "timeout_ms": 30000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": index, "records": build_batch([(None, b"x")], timestamp=1)}]}]}


async def test_a_long_poll_wakes_when_a_partition_it_skipped_as_quiet_changes(many_path):
    """The session stops reading a partition whose follower is at the log end; a write to
    it must still end the follower's long poll at once (not after max_wait_ms)."""
    full = await many_path.fetch(session_fetch(0, 0, {i: 0 for i in range(MANY)}, 0), 12)
    sid = full["session_id"]
    assert sid and len(full["responses"][0]["partitions"]) == MANY

    async def write_later():
        await trio.sleep(0.2)
        await many_path.produce(produce_to(17), 9)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(write_later)
        started = trio.current_time()
        answer = await many_path.fetch(session_fetch(sid, 1, {}, 10_000), 12)
        waited = trio.current_time() - started
    parts = answer["responses"][0]["partitions"]
    assert [p["partition_index"] for p in parts] == [17] and parts[0]["records"]
    assert waited < 5, f"the long poll waited {waited:.1f}s for a write to a quiet partition"


async def test_a_quiet_follower_is_caught_up_when_its_partition_next_changes(many_path):
    """A follower at the log end whose partition saw no write for longer than the lag time
    stays in the ISR when the next write comes: its session's fetches skipped the
    partition, so they must count as caught up (Kafka's lastCaughtUpTime)."""
    lag_ms = 200
    sid = (await many_path.fetch(session_fetch(0, 0, {i: 0 for i in range(MANY)}, 0), 12))["session_id"]
    await many_path.fetch(session_fetch(sid, 1, {}, 0), 12)
    await trio.sleep(0.3)  # longer than the lag time, with nothing written
    await many_path.fetch(session_fetch(sid, 2, {}, 0), 12)  # the follower still fetches
    await many_path.produce(produce_to(3), 9)
    from kraft import clock
    proposal = many_path.replicas.get(TOPIC, 3).state.maybe_shrink_isr(clock.monotonic_ms(), lag_ms)
    assert proposal is None, f"a live follower at the log end was dropped: {proposal}"


async def test_the_isr_check_still_drops_a_follower_that_stops_fetching_after_a_write(many_path):
    """The periodic ISR check looks only at leaderships notified since the last check or
    left unsettled by it (an idle node no longer walks every replica): a write the
    follower never fetches must still cost it its ISR place after the lag time, even
    when the check in between found nothing to do yet, and no quiet partition goes."""
    from kraft import clock

    lag_ms = 30_000
    replicas = many_path.replicas
    sid = (await many_path.fetch(session_fetch(0, 0, {i: 0 for i in range(MANY)}, 0), 12))["session_id"]
    now = clock.monotonic_ms()
    replicas._check_isrs(now, lag_ms)  # everything settled: nothing proposed
    assert replicas.isr_proposals == []
    await many_path.produce(produce_to(5), 9)  # the follower fetches no more
    replicas._check_isrs(now + 10, lag_ms)  # within the lag time: not yet
    assert replicas.isr_proposals == []
    replicas._check_isrs(now + lag_ms + 1_000, lag_ms)
    proposed = {(p.index, proposal.new_isr) for p, proposal in replicas.isr_proposals}
    assert proposed == {(5, (LEADER,))}, proposed
    assert sid


async def test_a_produce_parses_each_batch_header_once(data_path):
    """The payload's headers are parsed (and CRC-checked) once, by validation; the append,
    its offset stamping and the producer state use those headers instead of parsing the
    bytes again (issue 17/19: a produce used to parse each header five times)."""
    import sys

    from kraft.records.header import parse_header

    batches = b"".join(build_batch([(None, b"v%d" % i)], producer_id=7, producer_epoch=0,
                                   base_sequence=i, timestamp=1) for i in range(3))
    calls = []
    sys.setprofile(lambda frame, event, arg: calls.append(1)
                   if event == "call" and frame.f_code is parse_header.__code__ else None)
    try:
        pending = await data_path.produce(produce_body(1, batches), 9)
    finally:
        sys.setprofile(None)
    assert answer(pending) == (ErrorCode.NONE, 0)
    assert data_path.replicas.get(TOPIC, 0).log.log_end_offset == 3
    assert len(calls) == 3, f"3 batch headers parsed {len(calls)} times"


async def test_a_follower_session_resolves_a_topic_id_its_leader_learns_later(tmp_path):
    """A follower's image can run ahead of its leader's: its first fetch (v15, topics by
    id) names a topic the leader does not know yet and is answered UNKNOWN_TOPIC_ID. The
    session keeps the partition; once the leader knows the topic, the next incremental fetch
    must read it (as Kafka resolves a session's unknown topic ids on each fetch), not answer
    UNKNOWN_TOPIC_ID forever, which kept the follower out of the ISR."""
    replicas = ReplicaManager(LEADER, server_config(tmp_path, node_id=LEADER))
    try:
        path = DataPath(replicas)
        body = session_fetch(0, 0, {0: 0}, 0)
        body["replica_state"] = {"replica_id": FOLLOWER, "replica_epoch": 5}
        first = await path.fetch(body, 15)
        assert first["responses"][0]["partitions"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID
        assert first["session_id"]
        reg = PartitionRegistration(replicas=(LEADER, FOLLOWER), isr=(LEADER, FOLLOWER), leader=LEADER,
                                    leader_epoch=0, partition_epoch=0)
        topic = TopicImage(TOPIC, TOPIC_ID, frozen_map({0: reg}))
        replicas.on_image(EMPTY_IMAGE, MetadataImage(offset=1, topics_by_name=frozen_map({TOPIC: topic}),
                                                     topics_by_id=frozen_map({TOPIC_ID: topic})))
        later = session_fetch(first["session_id"], 1, {}, 0)
        later["replica_state"] = {"replica_id": FOLLOWER, "replica_epoch": 5}
        second = await path.fetch(later, 15)
        parts = second["responses"][0]["partitions"]
        assert [(p["partition_index"], p["error_code"]) for p in parts] == [(0, ErrorCode.NONE)]
    finally:
        replicas.close()


async def test_the_hw_checkpoint_is_rewritten_when_a_high_watermark_moves_and_only_then(data_path):
    replicas = data_path.replicas
    checkpoint = replicas._hw_checkpoint.path
    replicas.checkpoint_high_watermarks()
    written = checkpoint.stat().st_ino  # each write replaces the file (atomic_write)
    replicas.checkpoint_high_watermarks()
    assert checkpoint.stat().st_ino == written  # nothing moved: not rewritten
    await data_path.produce(produce_body(-1, idempotent_batch(0)), 9)
    await follower_fetches(data_path, 3)  # the high watermark moves to 3
    replicas.checkpoint_high_watermarks()
    assert checkpoint.stat().st_ino != written
    assert OffsetCheckpointFile(checkpoint).read()[(TOPIC, 0)] == 3


def test_replicas_of_a_deleted_topic_or_moved_away_are_removed_and_no_others(tmp_path):
    replicas = ReplicaManager(LEADER, server_config(tmp_path, node_id=LEADER))

    def reg(*brokers):
        return PartitionRegistration(replicas=brokers, isr=brokers, leader=brokers[0], leader_epoch=0,
                                     partition_epoch=0)

    def image(offset, *topics):
        return MetadataImage(offset=offset, topics_by_name=frozen_map({t.name: t for t in topics}),
                             topics_by_id=frozen_map({t.id: t for t in topics}))

    doomed = TopicImage("doomed", uuid.UUID(int=1), frozen_map({0: reg(LEADER, FOLLOWER), 1: reg(FOLLOWER, LEADER)}))
    kept = TopicImage("kept", uuid.UUID(int=2), frozen_map({0: reg(LEADER), 1: reg(LEADER)}))
    first = image(1, doomed, kept)
    replicas.on_image(EMPTY_IMAGE, first)
    assert set(replicas.partitions) == {("doomed", 0), ("doomed", 1), ("kept", 0), ("kept", 1)}
    second = image(2, kept)  # "doomed" deleted; "kept" the same object: not looked at again
    replicas.on_image(first, second)
    assert set(replicas.partitions) == {("kept", 0), ("kept", 1)}
    moved = TopicImage("kept", kept.id, frozen_map({0: reg(LEADER), 1: reg(FOLLOWER)}))  # kept-1 moved away
    replicas.on_image(second, image(3, moved))
    assert set(replicas.partitions) == {("kept", 0)}
    replicas.close()


async def test_a_fetch_over_many_partitions_holds_at_most_max_open_descriptors(many_path, monkeypatch):
    """Past ``file_records.MAX_OPEN`` a fetch reads records into memory: a consumer fetching
    20,000 partitions once held a descriptor for each, and the node ran out of them."""
    from broker import file_records

    monkeypatch.setattr(file_records, "MAX_OPEN", 5)
    for i in range(MANY):
        await many_path.produce(produce_to(i), 9)
    consumer_fetch = {  # from the follower: a consumer would see nothing above the high watermark
        "replica_id": FOLLOWER, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "topics": [{"topic": TOPIC, "topic_id": TOPIC_ID, "partitions": [{
            "partition": i, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
            "log_start_offset": -1, "partition_max_bytes": 1 << 20} for i in range(MANY)]}]}
    copied = await many_path.fetch(consumer_fetch, 12)  # sendfile off: every record in memory
    many_path.sendfile = True
    before = file_records.FileRecords.open_count
    spliced = await many_path.fetch(consumer_fetch, 12)
    records = [p["records"] for p in spliced["responses"][0]["partitions"]]
    assert sum(isinstance(r, file_records.FileRecords) for r in records) == 5
    assert file_records.FileRecords.open_count == before + 5
    assert [r.read() if isinstance(r, file_records.FileRecords) else bytes(r) for r in records] == \
        [bytes(p["records"]) for p in copied["responses"][0]["partitions"]]
    for r in records:
        if isinstance(r, file_records.FileRecords):
            r.close()
    assert file_records.FileRecords.open_count == before


# -- min_bytes: a long poll adds up what the partitions gain (as Kafka's DelayedFetch) ---

def consumer_fetch(offset: int, min_bytes: int, max_wait_ms: int, replica_id: int = -1) -> dict:
    return {"replica_id": replica_id, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": 1 << 20,
            "isolation_level": 0, "topics": [{"topic": TOPIC, "topic_id": TOPIC_ID, "partitions": [{
                "partition": 0, "current_leader_epoch": 0, "fetch_offset": offset, "last_fetched_epoch": -1,
                "log_start_offset": 0, "partition_max_bytes": 1 << 20}]}]}


def fetched(answer: dict):
    return answer["responses"][0]["partitions"][0]["records"]


BATCH = build_batch([(None, b"x" * 100)], timestamp=1)


async def _write_replicated(data_path: DataPath, batches: int, every_s: float) -> None:
    """``batches`` acks=1 writes, each fetched by the follower (the high watermark moves)."""
    for _ in range(batches):
        await trio.sleep(every_s)
        await data_path.produce(produce_body(1, BATCH), 9)
        await follower_fetches(data_path, data_path.replicas.get(TOPIC, 0).log.log_end_offset)


@pytest.mark.parametrize("sendfile", [False, True])
async def test_a_consumer_fetch_answers_once_its_partition_gains_min_bytes(tmp_path, sendfile):
    """A fetch that finds some bytes, short of min_bytes, waits for more and answers as soon
    as they add up, with every byte from its offset: not after max_wait_ms with only what
    it first found.  A read made again counts its bytes out once, and closes its file."""
    from broker.file_records import FileRecords

    data_path = one_partition_path(tmp_path, sendfile)
    replicas = data_path.replicas
    try:
        await _write_replicated(data_path, 1, 0)
        open_before = FileRecords.open_count
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_write_replicated, data_path, 2, 0.2)
            started = trio.current_time()
            answer = await data_path.fetch(consumer_fetch(0, 3 * len(BATCH), 10_000), 12)
            waited = trio.current_time() - started
        records = fetched(answer)
        assert waited < 5, f"the fetch waited {waited:.1f}s though its bytes were there after 0.4s"
        assert len(records) == 3 * len(BATCH), "the answer must hold all three batches"
        assert isinstance(records, FileRecords) == sendfile
        data = records.read() if sendfile else records
        assert [h.base_offset for _, h in iter_batches(data)] == [0, 1, 2]
        assert replicas.topic_stats.all.bytes_out == 3 * len(BATCH), "bytes read twice were counted twice"
        if sendfile:
            assert FileRecords.open_count == open_before + 1, "the first read's descriptor was not closed"
            records.close()
    finally:
        replicas.close()


async def test_a_fetch_whose_wait_ends_answers_what_its_partition_gained_meanwhile(data_path):
    """Kafka answers an expired fetch by reading its partitions again: a batch that came
    during the wait is in the answer, though min_bytes was never reached."""
    await _write_replicated(data_path, 1, 0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_write_replicated, data_path, 1, 0.1)
        started = trio.current_time()
        answer = await data_path.fetch(consumer_fetch(0, 1 << 20, 600), 12)
        waited = trio.current_time() - started
    assert 0.5 < waited < 3
    assert len(fetched(answer)) == 2 * len(BATCH)


async def test_a_follower_fetch_adds_up_appends_not_yet_replicated(data_path):
    """A follower's min_bytes (replica.fetch.min.bytes) counts the leader's log end, not
    the high watermark: the appends the follower itself has to fetch."""
    await data_path.produce(produce_body(1, BATCH), 9)

    async def append_later():
        for _ in range(2):
            await trio.sleep(0.2)
            await data_path.produce(produce_body(1, BATCH), 9)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(append_later)
        started = trio.current_time()
        answer = await data_path.fetch(consumer_fetch(0, 3 * len(BATCH), 10_000, replica_id=FOLLOWER), 12)
        waited = trio.current_time() - started
    assert waited < 5 and len(fetched(answer)) == 3 * len(BATCH)
