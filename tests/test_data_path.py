"""The client data path (broker.data_path) on a real ReplicaManager and log, without
sockets: acks=all answers wait for the ISR, retried idempotent batches included."""

import uuid

import pytest
import trio

from broker.data_path import DataPath
from broker.network import Deferred
from broker.replica_manager import ReplicaManager
from broker_helpers import server_config
from kraft.protocol.error_codes import ErrorCode
from kraft.records import build_batch
from metadata.image import EMPTY_IMAGE, MetadataImage, PartitionRegistration, TopicImage, frozen_map

TOPIC = "t"
TOPIC_ID = uuid.UUID(int=9)
LEADER, FOLLOWER = 1, 2


@pytest.fixture
def data_path(tmp_path):
    replicas = ReplicaManager(LEADER, server_config(tmp_path, node_id=LEADER))
    reg = PartitionRegistration(replicas=(LEADER, FOLLOWER), isr=(LEADER, FOLLOWER), leader=LEADER,
                                leader_epoch=0, partition_epoch=0)
    topic = TopicImage(TOPIC, TOPIC_ID, frozen_map({0: reg}))
    replicas.on_image(EMPTY_IMAGE, MetadataImage(offset=1, topics_by_name=frozen_map({TOPIC: topic}),
                                                 topics_by_id=frozen_map({TOPIC_ID: topic})))
    yield DataPath(replicas)
    replicas.close()


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
