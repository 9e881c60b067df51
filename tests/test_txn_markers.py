"""WriteTxnMarkers and READ_COMMITTED reads on a real ReplicaManager and log, without
sockets (broker/txn_markers.py, broker/data_path.py): markers end transactions, wait for
the ISR like acks=all, fence stale epochs, and READ_COMMITTED fetches stop at the LSO and
name the aborted transactions."""

import time
import uuid

import pytest

from broker.data_path import DataPath
from broker.deferred import Deferred
from broker.replica_manager import ReplicaManager
from broker.txn_markers import TxnMarkerWriter
from broker_helpers import server_config
from kraft.protocol.error_codes import ErrorCode
from kraft.records import build_batch
from kraft.records.header import iter_batches
from metadata.image import EMPTY_IMAGE, MetadataImage, PartitionRegistration, TopicImage, frozen_map

TOPIC = "t"
OFFSETS = "__consumer_offsets"
LEADER, FOLLOWER = 1, 2
PID = 4000


def _broker(tmp_path, replicas):
    rm = ReplicaManager(LEADER, server_config(tmp_path, node_id=LEADER))
    topics = {}
    for i, name in enumerate((TOPIC, OFFSETS)):
        reg = PartitionRegistration(replicas=replicas, isr=replicas, leader=LEADER, leader_epoch=0,
                                    partition_epoch=0)
        topics[name] = TopicImage(name, uuid.UUID(int=i + 1), frozen_map({0: reg}))
    rm.on_image(EMPTY_IMAGE, MetadataImage(
        offset=1, topics_by_name=frozen_map(topics),
        topics_by_id=frozen_map({t.id: t for t in topics.values()})))
    return rm


@pytest.fixture
def single(tmp_path):
    rm = _broker(tmp_path, (LEADER,))
    yield DataPath(rm), TxnMarkerWriter(rm, 30000)
    rm.close()


@pytest.fixture
def replicated(tmp_path):
    rm = _broker(tmp_path, (LEADER, FOLLOWER))
    yield DataPath(rm), TxnMarkerWriter(rm, 30000)
    rm.close()


def txn_batch(seq: int, count: int = 2, pid: int = PID, epoch: int = 0, transactional=True) -> bytes:
    return build_batch([(b"k%d" % i, b"v%d" % (seq + i)) for i in range(count)], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, timestamp=int(time.time() * 1000),
                       transactional=transactional)


async def produce(dp, records, topic=TOPIC, transactional_id="tx", acks=1) -> tuple[int, int]:
    body = {"transactional_id": transactional_id, "acks": acks, "timeout_ms": 30000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]}
    out = await dp.produce(body, 9)
    if isinstance(out, Deferred):
        out = await out.finish()
    p = out["responses"][0]["partition_responses"][0]
    return p["error_code"], p["base_offset"]


def markers_body(commit: bool, topic=TOPIC, pid=PID, epoch=0, coordinator_epoch=0, partitions=(0,)) -> dict:
    return {"markers": [{"producer_id": pid, "producer_epoch": epoch, "transaction_result": commit,
                         "coordinator_epoch": coordinator_epoch,
                         "topics": [{"name": topic, "partition_indexes": list(partitions)}]}]}


async def write(writer, body) -> list[int]:
    out = writer.write(body, 1)
    if isinstance(out, Deferred):
        out = await out.finish()
    return [p["error_code"] for m in out["markers"] for t in m["topics"] for p in t["partitions"]]


async def fetch(dp, isolation: int, offset: int = 0) -> dict:
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": isolation, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": TOPIC, "topic_id": uuid.UUID(int=1), "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
                "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": []}
    return (await dp.fetch(body, 11))["responses"][0]["partitions"][0]


def offsets(records: bytes) -> list[tuple[int, bool]]:
    return [(h.base_offset, h.is_control) for _, h in iter_batches(records)]


async def test_an_open_transaction_holds_the_lso_and_a_commit_releases_it(single):
    dp, writer = single
    assert await produce(dp, txn_batch(0)) == (ErrorCode.NONE, 0)
    committed = await fetch(dp, 1)
    assert (committed["high_watermark"], committed["last_stable_offset"]) == (2, 0)
    assert committed["records"] == b"" and committed["aborted_transactions"] == []
    uncommitted = await fetch(dp, 0)
    assert offsets(uncommitted["records"]) == [(0, False)]
    assert await write(writer, markers_body(True)) == [ErrorCode.NONE]
    committed = await fetch(dp, 1)
    assert committed["last_stable_offset"] == 3
    assert offsets(committed["records"]) == [(0, False), (2, True)]
    assert committed["aborted_transactions"] == []


async def test_an_aborted_transaction_is_named_to_read_committed_fetches(single):
    dp, writer = single
    await produce(dp, txn_batch(0))
    await produce(dp, txn_batch(2))
    assert await write(writer, markers_body(False)) == [ErrorCode.NONE]
    committed = await fetch(dp, 1)
    assert committed["last_stable_offset"] == 5
    assert committed["aborted_transactions"] == [{"producer_id": PID, "first_offset": 0}]
    assert (await fetch(dp, 0))["aborted_transactions"] is None
    plog = dp.replicas.get(TOPIC, 0).log
    entries = plog.segments[0].txn_index.entries
    assert [(e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset) for e in entries] == \
        [(PID, 0, 4, 5)]
    assert (plog.dir / "00000000000000000000.txnindex").stat().st_size == 34


async def test_a_marker_waits_for_the_isr(replicated):
    dp, writer = replicated
    await produce(dp, txn_batch(0))
    out = writer.write(markers_body(True), 1)
    assert isinstance(out, Deferred)
    await dp.fetch({"replica_id": FOLLOWER, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                    "isolation_level": 0, "topics": [{"topic": TOPIC, "topic_id": uuid.UUID(int=1), "partitions": [{
                        "partition": 0, "current_leader_epoch": 0, "fetch_offset": 3, "last_fetched_epoch": 0,
                        "log_start_offset": 0, "partition_max_bytes": 1 << 20}]}]}, 12)
    result = await out.finish()
    assert result["markers"][0]["topics"][0]["partitions"] == [{"partition_index": 0, "error_code": 0}]


async def test_marker_errors_are_kafkas(single):
    dp, writer = single
    await produce(dp, txn_batch(0, epoch=3))
    assert await write(writer, markers_body(True, epoch=2)) == [ErrorCode.INVALID_PRODUCER_EPOCH]
    assert await write(writer, markers_body(True, epoch=3, coordinator_epoch=5)) == [ErrorCode.NONE]
    assert await write(writer, markers_body(False, epoch=3, coordinator_epoch=4)) == \
        [ErrorCode.TRANSACTION_COORDINATOR_FENCED]
    assert await write(writer, markers_body(True, topic="nope")) == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert await write(writer, markers_body(True, pid=-1)) == [ErrorCode.INVALID_RECORD]
    assert await write(writer, markers_body(True, partitions=(7,))) == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]


async def test_produce_checks_transactions_as_kafka(single):
    dp, writer = single
    assert (await produce(dp, txn_batch(0), transactional_id=None))[0] == \
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert await produce(dp, txn_batch(0)) == (ErrorCode.NONE, 0)
    assert (await produce(dp, txn_batch(2, transactional=False)))[0] == ErrorCode.INVALID_TXN_STATE
    assert (await produce(dp, txn_batch(0, epoch=0)))[0] == ErrorCode.NONE  # a retry: duplicate
    await write(writer, markers_body(False, epoch=1))  # the coordinator fenced epoch 0
    assert (await produce(dp, txn_batch(2, epoch=0)))[0] == ErrorCode.INVALID_PRODUCER_EPOCH


async def test_committed_offsets_markers_reach_the_group_coordinator_hook(single):
    dp, writer = single
    seen = []
    dp.replicas.txn_marker_listeners.append(lambda *args: seen.append(args))
    await produce(dp, txn_batch(0), topic=OFFSETS)
    assert await write(writer, markers_body(True, topic=OFFSETS, epoch=0)) == [ErrorCode.NONE]
    assert await write(writer, markers_body(True, topic=TOPIC)) == [ErrorCode.NONE]
    assert seen == [(OFFSETS, 0, PID, 0, True)]


async def test_list_offsets_latest_is_the_lso_for_read_committed(single):
    dp, writer = single
    await produce(dp, txn_batch(0))

    def latest(isolation, timestamp=-1):
        body = {"replica_id": -1, "isolation_level": isolation, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}]}]}
        return dp.list_offsets(body, 5)["topics"][0]["partitions"][0]["offset"]
    assert (latest(0), latest(1)) == (2, 0)
    # Searches by timestamp (0: the first record; -3: the first record carrying the max
    # timestamp, both records here) stop there too.
    assert (latest(0, 0), latest(1, 0)) == (0, -1)
    assert (latest(0, -3), latest(1, -3)) == (0, -1)
    await write(writer, markers_body(True))
    assert (latest(0), latest(1)) == (3, 3)
    assert latest(1, 0) == 0


async def test_idle_producers_expire_but_not_with_a_transaction_open(single):
    dp, writer = single
    await produce(dp, txn_batch(0, pid=1))
    await produce(dp, txn_batch(0, pid=2, transactional=False), transactional_id=None)
    producers = dp.replicas.get(TOPIC, 0).producers
    day = dp.replicas.config["producer.id.expiration.ms"]
    assert day == 86400000  # Kafka's default
    assert dp.replicas.expire_producers(int(time.time() * 1000) + day) == 1
    assert 1 in producers and 2 not in producers
    await write(writer, markers_body(True, pid=1))
    assert dp.replicas.expire_producers(int(time.time() * 1000) + day) == 1
    assert 1 not in producers
