"""The broker's side of log compaction: ReplicaManager runs the LogCleaner over hosted
compacted replicas, topic config changes reach open logs, and Produce refuses keyless
records on compacted topics.  In-process, on a hand-made metadata image."""

import uuid

import pytest
import trio

from broker.data_path import DataPath
from broker_helpers import server_config
from broker.replica_manager import ReplicaManager
from kraft.log.cleaner import CLEANER_OFFSET_CHECKPOINT
from kraft.log.segment import CLEANED_SUFFIX
from kraft.protocol.error_codes import ErrorCode
from kraft.records import RecordBatch, build_batch
from metadata.image import (
    EMPTY_IMAGE,
    ConfigResourceType,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
    frozen_map,
)

TOPIC = "t"
TOPIC_ID = uuid.UUID(int=7)
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "200", "min.cleanable.dirty.ratio": "0.01"}


def image(configs, *, offset=1, topic=True):
    reg = PartitionRegistration(replicas=(1,), isr=(1,), leader=1, leader_epoch=0, partition_epoch=0)
    topics = {TOPIC: TopicImage(TOPIC, TOPIC_ID, frozen_map({0: reg}))} if topic else {}
    return MetadataImage(offset=offset, topics_by_name=frozen_map(topics),
                         topics_by_id=frozen_map({t.id: t for t in topics.values()}),
                         configs=frozen_map({(ConfigResourceType.TOPIC, TOPIC): frozen_map(configs)}))


def fill(partition, rounds, keys=4):
    """``rounds`` batches of one value per key: one batch per segment at segment.bytes=200."""
    for r in range(rounds):
        partition.append_as_leader(bytearray(build_batch(
            [(b"k%d" % k, b"v%d-%d" % (k, r)) for k in range(keys)], timestamp=1)))


def values(partition):
    out = {}
    for _, data in partition.log.iter_batches(with_data=True):
        for offset, _, r in RecordBatch.decode(data).iter_resolved():
            out.setdefault(r.key, []).append((offset, r.value))
    return out


@pytest.fixture
def manager(tmp_path):
    rm = ReplicaManager(1, server_config(tmp_path))
    yield rm
    rm.close()


def test_a_round_cleans_a_compacted_leader_below_its_high_watermark(manager):
    manager.on_image(EMPTY_IMAGE, image(COMPACT))
    p = manager.get(TOPIC, 0)
    fill(p, 40)
    before = p.log.size_in_bytes
    assert p.state.high_watermark == p.log.log_end_offset == 160
    assert trio.run(manager.clean_logs) == 1
    assert p.log.size_in_bytes < before / 5
    seen = values(p)
    assert {k: v[-1][1] for k, v in seen.items()} == {b"k%d" % k: b"v%d-39" % k for k in range(4)}
    assert manager.cleaner.checkpointed_offset(p.log) == p.log.active_segment.base_offset
    assert trio.run(manager.clean_logs) == 0  # nothing dirty left


def test_nothing_at_or_above_the_high_watermark_is_cleaned(manager):
    manager.on_image(EMPTY_IMAGE, image(COMPACT))
    p = manager.get(TOPIC, 0)
    fill(p, 40)
    p.state.high_watermark = 20  # as if the followers had not caught up
    trio.run(manager.clean_logs)
    assert manager.cleaner.checkpointed_offset(p.log) <= 20
    seen = values(p)
    assert len([o for o, _ in seen[b"k0"] if o >= 20]) == 35  # records 20.. untouched


def test_a_truncation_while_preparing_discards_the_plan(manager):
    manager.on_image(EMPTY_IMAGE, image(COMPACT))
    p = manager.get(TOPIC, 0)
    fill(p, 40)
    prepare = manager.cleaner.prepare

    def prepare_then_truncate(*args, **kwargs):
        plan = prepare(*args, **kwargs)
        trio.from_thread.run_sync(p.truncate_to, 150)  # on the trio thread, as a fetcher would
        return plan

    manager.cleaner.prepare = prepare_then_truncate
    assert trio.run(manager.clean_logs) == 0
    assert p.truncations == 1 and p.log.log_end_offset == 148
    assert not list(p.log.dir.glob("*" + CLEANED_SUFFIX))
    assert len(values(p)[b"k0"]) == 37  # nothing was swapped in
    manager.cleaner.prepare = prepare
    p.state.high_watermark = p.log.log_end_offset
    assert trio.run(manager.clean_logs) == 1


def test_a_replica_removed_while_preparing_is_not_touched(manager):
    first = image(COMPACT)
    manager.on_image(EMPTY_IMAGE, first)
    p = manager.get(TOPIC, 0)
    fill(p, 40)
    prepare = manager.cleaner.prepare

    def prepare_then_remove(*args, **kwargs):
        plan = prepare(*args, **kwargs)
        trio.from_thread.run_sync(manager.on_image, first, image(COMPACT, offset=2, topic=False))
        return plan

    manager.cleaner.prepare = prepare_then_remove
    assert trio.run(manager.clean_logs) == 0
    assert manager.get(TOPIC, 0) is None and p.log.closed and not p.log.dir.exists()


def test_truncation_pulls_the_cleaner_checkpoint_back(manager):
    manager.on_image(EMPTY_IMAGE, image(COMPACT))
    p = manager.get(TOPIC, 0)
    fill(p, 40)
    trio.run(manager.clean_logs)
    assert manager.cleaner.checkpointed_offset(p.log) > 100
    p.truncate_to(100)  # the cleaned log holds no batch below 100: it ends at its start
    assert manager.cleaner.checkpointed_offset(p.log) == p.log.log_end_offset == 0
    p.restart_at(500)
    assert manager.cleaner.checkpointed_offset(p.log) == 0  # below the log: ignored, not moved on
    assert manager.cleaner.first_dirty_offset(p.log) == 500


def test_delete_policy_replicas_are_left_alone_until_altered(manager):
    plain = {"segment.bytes": "200"}
    first = image(plain)
    manager.on_image(EMPTY_IMAGE, first)
    p = manager.get(TOPIC, 0)
    fill(p, 40)
    assert trio.run(manager.clean_logs) == 0
    altered = image({**plain, "cleanup.policy": "compact"}, offset=2)
    manager.on_image(first, altered)
    assert p.log.config.compact and manager.get(TOPIC, 0) is p
    assert trio.run(manager.clean_logs) == 1


def test_unusable_topic_config_keeps_the_previous_one(manager):
    first = image(COMPACT)
    manager.on_image(EMPTY_IMAGE, first)
    p = manager.get(TOPIC, 0)
    manager.on_image(first, image({**COMPACT, "retention.bytes": "-7"}, offset=2))
    assert p.log.config.compact and p.log.config.retention_bytes == -1


def test_topic_config_applies_to_logs_found_at_startup(tmp_path):
    config = server_config(tmp_path)
    rm = ReplicaManager(1, config)
    rm.on_image(EMPTY_IMAGE, image(COMPACT))
    fill(rm.get(TOPIC, 0), 5)
    rm.close()
    again = ReplicaManager(1, config)
    try:
        assert again.log_dir.get((TOPIC, 0)).config.segment_bytes != 200  # opened with defaults
        again.on_image(EMPTY_IMAGE, image(COMPACT))
        log = again.get(TOPIC, 0).log
        assert log.config.compact and log.config.segment_bytes == 200
    finally:
        again.close()


def test_removing_a_replica_forgets_its_checkpoint(manager, tmp_path):
    first = image(COMPACT)
    manager.on_image(EMPTY_IMAGE, first)
    p = manager.get(TOPIC, 0)
    fill(p, 40)
    trio.run(manager.clean_logs)
    checkpoint = tmp_path / "data" / CLEANER_OFFSET_CHECKPOINT
    assert f"{TOPIC} 0 " in checkpoint.read_text()
    manager.on_image(first, image(COMPACT, offset=2, topic=False))
    assert manager.get(TOPIC, 0) is None
    assert f"{TOPIC} 0 " not in checkpoint.read_text()


def test_log_cleaner_enable_false_runs_nothing(tmp_path):
    rm = ReplicaManager(1, server_config(tmp_path, **{"log.cleaner.enable": "false"}))
    try:
        trio.run(rm.run_cleaner)  # returns at once instead of looping
    finally:
        rm.close()


def test_log_cleanup_policy_is_the_topic_default(tmp_path):
    rm = ReplicaManager(1, server_config(tmp_path, **{"log.cleanup.policy": "compact"}))
    try:
        rm.on_image(EMPTY_IMAGE, image({}))
        assert rm.get(TOPIC, 0).log.config.compact
    finally:
        rm.close()


@pytest.mark.parametrize("configs, error", [
    (COMPACT, ErrorCode.INVALID_RECORD),
    ({"cleanup.policy": "compact,delete"}, ErrorCode.INVALID_RECORD),
    ({"cleanup.policy": "delete"}, ErrorCode.NONE),
])
async def test_produce_without_a_key(manager, configs, error):
    manager.on_image(EMPTY_IMAGE, image(configs))
    data = DataPath(manager)
    keyed = build_batch([(b"k", b"v")], timestamp=1, compression=1)
    keyless = build_batch([(b"k", b"v"), (None, b"v")], timestamp=1, compression=1)

    async def produce(records):
        body = {"transactional_id": None, "acks": 1, "timeout_ms": 0, "topic_data": [
            {"name": TOPIC, "partition_data": [{"index": 0, "records": records}]}]}
        return (await data.produce(body, 9))["responses"][0]["partition_responses"][0]

    assert (await produce(keyed))["error_code"] == ErrorCode.NONE
    result = await produce(keyless)
    assert result["error_code"] == error
    if error:
        assert result["error_message"].startswith("Compacted topic cannot accept message without key")
        assert result["record_errors"][0]["batch_index"] == 1
        assert manager.get(TOPIC, 0).log.log_end_offset == 1  # nothing of it appended
