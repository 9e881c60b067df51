"""Offset checkpoint files, the atomic writer, and LogConfig."""

from __future__ import annotations

import os

import pytest

from kraft.log import (
    CheckpointError,
    LogConfig,
    LogConfigError,
    OffsetCheckpointFile,
    TopicPartition,
)
from kraft.log.atomic import atomic_write
from kraft.log.checkpoint import parse_checkpoint


def test_checkpoint_round_trip_in_kafka_format(tmp_path):
    f = OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint")
    assert f.read() == {}
    f.write({("orders", 1): 987, ("orders", 0): 1234, ("__cluster_metadata", 0): 5})
    assert f.path.read_text() == "0\n3\n__cluster_metadata 0 5\norders 0 1234\norders 1 987\n"
    assert f.read() == {TopicPartition("orders", 0): 1234, TopicPartition("orders", 1): 987,
                        TopicPartition("__cluster_metadata", 0): 5}
    f.write({})
    assert f.path.read_text() == "0\n0\n" and f.read() == {}


def test_single_partition_convenience(tmp_path):
    f = OffsetCheckpointFile(tmp_path / "replication-offset-checkpoint")
    assert f.get(("t", 0)) is None and f.get(("t", 0), 0) == 0
    f.put(("t", 0), 10)
    f.put(("t", 1), 20)
    f.put(("t", 0), 11)
    assert f.read() == {("t", 0): 11, ("t", 1): 20}
    assert f.get(("t", 1)) == 20


def test_reads_what_kafka_writes(tmp_path):
    path = tmp_path / "log-start-offset-checkpoint"
    path.write_text("0\n2\nmy.topic_x-y 3 0\nmy.topic_x-y 12 42\n")
    assert OffsetCheckpointFile(path).read() == {("my.topic_x-y", 3): 0, ("my.topic_x-y", 12): 42}


@pytest.mark.parametrize("text, where", [
    ("", ":1:"),
    ("1\n0\n", ":1: malformed checkpoint: unsupported version"),
    ("0\n", ":2:"),
    ("0\nx\n", ":2:"),
    ("0\n2\nt 0 1\n", ":2: malformed checkpoint: header says 2 entries, the file has 1"),
    ("0\n1\nt 0\n", ":3:"),
    ("0\n1\nt zero 1\n", ":3:"),
    ("0\n1\nt 0 1 9\n", ":3:"),
    ("0\n2\nt 0 1\nt 0 2\n", ":4: malformed checkpoint: duplicate"),
])
def test_corrupt_checkpoint_is_a_clear_error(tmp_path, text, where):
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(CheckpointError) as e:
        OffsetCheckpointFile(path).read()
    assert str(path) in str(e.value) and where in str(e.value)


def test_binary_garbage_checkpoint(tmp_path):
    path = tmp_path / "cp"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(CheckpointError, match="cp"):
        OffsetCheckpointFile(path).read()


def test_illegal_topic_name_is_refused():
    with pytest.raises(CheckpointError):
        parse_checkpoint("0\n1\nbad/topic 0 1\n")
    with pytest.raises(CheckpointError):
        OffsetCheckpointFile("/nonexistent/x").write({("two words", 0): 1})


def test_atomic_write_replaces_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "file"
    atomic_write(path, b"one")
    atomic_write(path, b"two")
    assert path.read_bytes() == b"two"
    assert os.listdir(tmp_path) == ["file"]


def test_atomic_write_failure_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "file"
    atomic_write(path, b"old")

    def boom(src, dst):
        raise OSError("disk on fire")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        atomic_write(path, b"new")
    assert path.read_bytes() == b"old"


def test_topic_partition_dir_names():
    assert TopicPartition("orders", 3).dir_name() == "orders-3"
    assert TopicPartition.from_dir_name("my-topic-12") == ("my-topic", 12)
    assert TopicPartition.from_dir_name("__cluster_metadata-0") == ("__cluster_metadata", 0)
    for name in ["orders", "orders-", "orders-x", "orders-0-delete", "-1", "a b-1", "t-١"]:
        assert TopicPartition.from_dir_name(name) is None


# -- LogConfig ----------------------------------------------------------------------------

def test_log_config_defaults_are_kafkas():
    c = LogConfig()
    assert (c.segment_bytes, c.segment_ms, c.segment_index_bytes, c.index_interval_bytes) == (
        1073741824, 604800000, 10485760, 4096)
    assert (c.retention_ms, c.retention_bytes) == (604800000, -1)
    assert c.flush_messages == c.flush_ms == 2**63 - 1
    assert (c.max_message_bytes, c.file_delete_delay_ms) == (1048588, 60000)


def test_log_config_from_properties():
    c = LogConfig.from_properties({"segment.bytes": "1048576", "retention.ms": -1,
                                   "flush.messages": " 1 ", "cleanup.policy": "delete",
                                   "min.insync.replicas": "2"})
    assert (c.segment_bytes, c.retention_ms, c.flush_messages) == (1048576, -1, 1)
    base = LogConfig(segment_bytes=5000)
    assert LogConfig.from_properties({"retention.bytes": "10"}, base).segment_bytes == 5000
    assert LogConfig.from_properties(c.to_properties()) == c


@pytest.mark.parametrize("props, message", [
    ({"segment.byte": "1"}, "unknown topic configuration key 'segment.byte'"),
    ({"segment.bytes": "1GB"}, "segment.bytes must be an integer, got '1GB'"),
    ({"segment.bytes": "10"}, "invalid value 10 for segment.bytes"),
    ({"segment.bytes": str(2**31)}, "for segment.bytes: must be in [14, 2147483647]"),
    ({"retention.ms": "-2"}, "retention.ms"),
    ({"flush.messages": "0"}, "flush.messages"),
    ({"index.interval.bytes": True}, "index.interval.bytes must be an integer"),
    ({"segment.ms": "1.5"}, "segment.ms"),
])
def test_log_config_errors_name_the_key(props, message):
    with pytest.raises(LogConfigError) as e:
        LogConfig.from_properties(props)
    assert message in str(e.value)


def test_log_config_is_frozen():
    with pytest.raises(AttributeError):
        LogConfig().segment_bytes = 5  # type: ignore[misc]
    with pytest.raises(LogConfigError):
        LogConfig(segment_ms=0)
