"""LogDir: partition directories, checkpoint files and the clean-shutdown marker."""

from __future__ import annotations

import os

import pytest
from test_log_helpers import make_batch

from kraft.log import CLEAN_SHUTDOWN_FILE, CheckpointError, LogConfig, LogDir

CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=100, file_delete_delay_ms=0)


def fill(log, n):
    for i in range(n):
        log.append(make_batch(0, 2, timestamp=1000 + i, value_size=30), assign_offsets=True)


def batches(log):
    return [data for _, data in log.iter_batches(with_data=True)]


def test_clean_close_and_reopen(tmp_path):
    d = LogDir.open(tmp_path, CONFIG, clock=lambda: 0)
    assert not d.had_clean_shutdown
    a, b = d.get_or_create(("orders", 0)), d.get_or_create(("orders", 1))
    assert d.get_or_create(("orders", 0)) is a
    fill(a, 20)
    fill(b, 3)
    a.delete_records_before(7)
    before = {tp: batches(log) for tp, log in d.logs.items()}
    d.close()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n2\norders 0 40\norders 1 6\n"
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n2\norders 0 7\norders 1 0\n"
    assert sorted(p for p in os.listdir(tmp_path) if not p.startswith(".") and "checkpoint" not in p) == [
        "orders-0", "orders-1"]

    d = LogDir.open(tmp_path, CONFIG, clock=lambda: 0)
    assert d.had_clean_shutdown
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()  # a crash from now on is unclean
    assert {tp: batches(log) for tp, log in d.logs.items()} == before
    a = d.get(("orders", 0))
    assert a.load_result.recovered == []
    assert (a.log_start_offset, a.log_end_offset, a.recovery_point) == (7, 40, 40)
    d.close()


def test_crash_recovers_from_the_checkpointed_recovery_point(tmp_path):
    d = LogDir.open(tmp_path, CONFIG, clock=lambda: 0)
    log = d.get_or_create(("t", 0))
    fill(log, 30)
    log.flush(30)
    d.checkpoint()
    fill(log, 5)
    before = batches(log)
    log.abandon()  # crash: no close, no marker

    d = LogDir.open(tmp_path, CONFIG, clock=lambda: 0)
    assert not d.had_clean_shutdown
    log = d.get(("t", 0))
    assert batches(log) == before
    assert log.recovery_point == 30
    # Only segments from the one holding the recovery point were rescanned.
    bases = [s.base_offset for s in log.segments]
    holding = max(b for b in bases if b <= 30)
    assert log.load_result.recovered == [b for b in bases if b >= holding]
    d.close()


def test_delete_partition(tmp_path):
    d = LogDir.open(tmp_path, CONFIG, clock=lambda: 0)
    fill(d.get_or_create(("gone", 0)), 3)
    d.get_or_create(("kept", 0))
    d.delete(("gone", 0))
    assert d.get(("gone", 0)) is None
    assert not (tmp_path / "gone-0").exists()
    d.close()
    assert "gone" not in (tmp_path / "recovery-point-offset-checkpoint").read_text()


def test_foreign_directories_are_ignored_and_half_deleted_ones_removed(tmp_path):
    (tmp_path / "not a partition").mkdir()
    (tmp_path / "orders-0-delete").mkdir()
    (tmp_path / "meta.properties").write_text("version=1\n")
    d = LogDir.open(tmp_path, CONFIG, clock=lambda: 0)
    assert d.logs == {}
    assert sorted(os.listdir(tmp_path)) == ["meta.properties", "not a partition"]


def test_corrupt_checkpoint_stops_the_open(tmp_path):
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n1\norders 0\n")
    with pytest.raises(CheckpointError, match="recovery-point-offset-checkpoint:3"):
        LogDir.open(tmp_path, CONFIG)


def test_per_partition_config(tmp_path):
    def config_for(tp):
        return LogConfig(segment_bytes=200 if tp.topic == "small" else 10_000)

    d = LogDir.open(tmp_path, config_for, clock=lambda: 0)
    fill(d.get_or_create(("small", 0)), 5)
    fill(d.get_or_create(("big", 0)), 5)
    assert len(d.get(("small", 0)).segments) == 5
    assert len(d.get(("big", 0)).segments) == 1
    d.close()
