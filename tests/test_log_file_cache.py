"""The bounded cache of open segment files (kraft/log/file_cache.py): a node's open
descriptors stay bounded however many partition logs it holds."""

from __future__ import annotations

import os

import pytest
from test_log_helpers import make_batch

from kraft.log import Log, LogConfig, LogDir
from kraft.log.file_cache import OpenFileCache


def open_fds(directory) -> int:
    """Descriptors this process holds on files under ``directory`` (others come and go with
    whatever else the test process runs: client threads, sockets)."""
    prefix = str(directory)
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith(prefix):
                count += 1
        except OSError:
            pass
    return count


def open_logs(tmp_path, n: int, files: OpenFileCache, **config) -> list[Log]:
    cfg = LogConfig.from_properties({k.replace("_", "."): str(v) for k, v in config.items()})
    return [Log.open(tmp_path / f"t-{i}", cfg, clock=lambda: 1_000_000, files=files) for i in range(n)]


def value_byte(batch: bytes) -> int:
    """make_batch's fill byte: the last byte of the (one) record's value, before the
    record's header count."""
    return batch[-2]


def read_values(log: Log) -> list[int]:
    """The fill byte of every batch, read through ``Log.read``."""
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 20, min_one_batch=True)
        out.extend(value_byte(b) for b in split_batches(result.records))
        offset = result.next_offset
    return out


def split_batches(data: bytes) -> list[bytes]:
    from kraft.records.header import iter_batches

    return [bytes(data[p:p + h.size]) for p, h in iter_batches(data, check_crc=False)]


def test_least_recently_used_file_is_closed_first(tmp_path):
    files = OpenFileCache(3)
    logs = open_logs(tmp_path, 3, files)
    assert all(log.active_segment.is_open for log in logs)
    logs[0].append(make_batch(0), assign_offsets=True)  # logs[1] is now the least recently used
    fourth = Log.open(tmp_path / "t-3", clock=lambda: 1_000_000, files=files)
    assert len(files) == 3 and files.evictions == 1
    assert [log.active_segment.is_open for log in logs] == [True, False, True]
    assert fourth.active_segment.is_open


def test_an_evicted_segment_reopens_with_its_data(tmp_path):
    files = OpenFileCache(2)
    logs = open_logs(tmp_path, 5, files)
    for round_ in range(3):  # every append after the first round reopens an evicted file
        for log in logs:
            log.append(make_batch(0, fill=round_), assign_offsets=True)
    assert len(files) == 2
    for log in logs:
        assert read_values(log) == [0, 1, 2]
        log.flush()  # fsync through a reopened descriptor
        assert log.truncate_to(2)
        assert read_values(log) == [0, 1]
    for log in logs:
        log.close()
    assert len(files) == 0
    reopened = Log.open(tmp_path / "t-4", files=files)
    assert read_values(reopened) == [0, 1]
    reopened.close()


def test_open_descriptors_stay_bounded_with_many_logs(tmp_path):
    """300 logs, each appended to, read and rolled: the process holds at most the cache's
    bound of segment descriptors (each log used to hold one per segment it had touched)."""
    files = OpenFileCache(16)
    before = open_fds(tmp_path)
    logs = open_logs(tmp_path, 300, files)
    peak = open_fds(tmp_path)
    for log in logs:
        log.append(make_batch(0, value_size=100), assign_offsets=True)
        log.roll()
        log.append(make_batch(0, value_size=100), assign_offsets=True)
        peak = max(peak, open_fds(tmp_path))
    for log in logs:
        assert len(read_values(log)) == 2
        peak = max(peak, open_fds(tmp_path))
    assert peak - before <= 16 + 2, f"{peak - before} descriptors open for 300 logs"
    for log in logs:
        log.close()
    assert open_fds(tmp_path) <= before


def test_log_dir_shares_the_bound(tmp_path):
    files = OpenFileCache(8)
    before = open_fds(tmp_path)
    d = LogDir.open(tmp_path, files=files)
    for i in range(50):
        d.get_or_create((f"topic{i}", 0)).append(make_batch(0), assign_offsets=True)
    assert open_fds(tmp_path) - before <= 8 + 2
    d.close()
    d = LogDir.open(tmp_path, files=files)
    assert open_fds(tmp_path) - before <= 8 + 2
    assert all(log.log_end_offset == 1 for log in d.logs.values())
    d.close()


def test_a_busy_active_segment_is_not_reopened(tmp_path):
    """Steady state: a partition appended to and fetched from all the time keeps its file
    open, whatever the cold partitions do."""
    files = OpenFileCache(4)
    busy, *cold = open_logs(tmp_path, 20, files)
    opens = None
    for i in range(200):
        busy.append(make_batch(0, fill=i), assign_offsets=True)
        busy.read(i, 1 << 16)
        cold[i % len(cold)].append(make_batch(0), assign_offsets=True)  # churns the cache
        if i == 0:
            opens = files.opens
    assert busy.active_segment.is_open
    # Each cold append reopens a cold file; the busy one was never among them.
    assert files.opens - opens == 199
    assert read_values(busy) == [i & 0xFF for i in range(200)]


def test_a_pinned_segment_survives_eviction_while_iterated(tmp_path):
    files = OpenFileCache(1)
    first, second = open_logs(tmp_path, 2, files, segment_bytes=10_000)
    for i in range(20):
        first.append(make_batch(0, fill=i), assign_offsets=True)
    seen = []
    for header, data in first.iter_batches(with_data=True):
        second.append(make_batch(0), assign_offsets=True)  # opens the other file meanwhile
        seen.append(value_byte(data))
    assert seen == list(range(20))
    second.close()
    third = Log.open(tmp_path / "t-2", files=files)  # the next open evicts the unpinned one
    assert len(files) == 1 and third.active_segment.is_open and not first.active_segment.is_open


def test_cache_bound_must_be_positive():
    with pytest.raises(ValueError):
        OpenFileCache(0)
