"""kraft.log.Log: appends, reads, rolls, indexes, truncation, retention, flush, reopen."""

from __future__ import annotations

import os
import struct

import pytest
from test_log_helpers import make_batch

from kraft.log import (
    CorruptRecordError,
    Log,
    LogClosedError,
    LogConfig,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from kraft.records.header import iter_batches, parse_header


class Clock:
    def __init__(self, now: int = 1_000_000):
        self.now = now

    def __call__(self) -> int:
        return self.now


def open_log(path, clock=None, **config) -> Log:
    return Log.open(path, LogConfig(**config), clock=clock or Clock())


def fill(log: Log, n: int, *, count: int = 3, value_size: int = 40, ts0: int = 1_000_000) -> list[bytes]:
    """Append n leader batches; return each batch as stored (offsets assigned)."""
    out = []
    for i in range(n):
        buf = bytearray(make_batch(0, count, timestamp=ts0 + 10 * i, value_size=value_size))
        log.append(buf, assign_offsets=True)
        out.append(bytes(buf))
    return out


def segment_files(path) -> list[str]:
    return sorted(os.listdir(path))


def read_all(log: Log, start: int | None = None) -> bytes:
    out = bytearray()
    offset = log.log_start_offset if start is None else start
    while offset < log.log_end_offset:
        r = log.read(offset, 1 << 20)
        assert r.size > 0
        out += r.records
        offset = r.next_offset
    return bytes(out)


# -- appending and reading ---------------------------------------------------------------

def test_leader_append_assigns_offsets_and_reads_back_across_rolls(tmp_path):
    log = open_log(tmp_path, segment_bytes=1000, index_interval_bytes=200)
    stored = fill(log, 40)
    assert log.log_end_offset == 120
    assert len(log.segments) > 4
    headers = [parse_header(b) for b in stored]
    assert [h.base_offset for h in headers] == list(range(0, 120, 3))
    assert read_all(log) == b"".join(stored)
    # Every offset reads back the batch holding it, first.
    for offset in range(120):
        r = log.read(offset, 1)
        assert r.records == stored[offset // 3]
        assert r.first_offset == offset - offset % 3 and r.next_offset == r.first_offset + 3


def test_append_info(tmp_path):
    log = open_log(tmp_path)
    log.append(make_batch(0, 2), assign_offsets=True)
    data = make_batch(0, 4, timestamp=500, ts_step=100) + make_batch(0, 1, timestamp=600)
    info = log.append(data, assign_offsets=True)
    assert (info.first_offset, info.last_offset, info.batch_count, info.size) == (2, 6, 2, len(data))
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (800, 5)


def test_bytes_are_copied_and_bytearray_is_patched(tmp_path):
    log = open_log(tmp_path)
    log.append(make_batch(0, 5), assign_offsets=True)
    original = make_batch(0, 1)
    log.append(original, assign_offsets=True)
    assert parse_header(original).base_offset == 0
    patched = bytearray(make_batch(0, 1))
    log.append(patched, assign_offsets=True, leader_epoch=7)
    h = parse_header(patched)
    assert (h.base_offset, h.partition_leader_epoch) == (6, 7)
    assert log.read(6, 1000).records == bytes(patched)


def test_log_file_is_exactly_the_concatenated_batches(tmp_path):
    log = open_log(tmp_path, segment_bytes=700)
    stored = fill(log, 10)
    log.close()
    names = segment_files(tmp_path)
    logs = [n for n in names if n.endswith(".log")]
    assert all(len(n) == 24 and n[:20].isdigit() for n in logs)
    on_disk = b"".join((tmp_path / n).read_bytes() for n in logs)
    assert on_disk == b"".join(stored)
    for n in logs:  # each file starts with a batch whose base offset is the file name
        first = parse_header((tmp_path / n).read_bytes())
        assert first.base_offset == int(n[:20])
        assert f"{n[:20]}.index" in names and f"{n[:20]}.timeindex" in names


def _expected_index(segment_bytes: bytes, base: int, interval: int):
    """Kafka's rule, recomputed: an entry (last offset, position) for a batch once more than
    index.interval.bytes were appended since the last entry's batch."""
    entries, times = [], []
    since, max_ts = 0, (-1, -1)
    for pos, h in iter_batches(segment_bytes):
        if h.max_timestamp > max_ts[0]:
            max_ts = (h.max_timestamp, h.last_offset)
        if since > interval:
            entries.append((h.last_offset - base, pos))
            if not times or max_ts[0] > times[-1][0]:
                times.append((max_ts[0], max_ts[1] - base))
            since = 0
        since += h.size
    if max_ts[0] > (times[-1][0] if times else -1):
        times.append((max_ts[0], max_ts[1] - base))  # the closing entry
    return entries, times


def test_index_files_are_kafka_format(tmp_path):
    log = open_log(tmp_path, segment_bytes=3000, index_interval_bytes=250)
    fill(log, 60)
    log.close()
    checked = 0
    for name in segment_files(tmp_path):
        if not name.endswith(".log"):
            continue
        base = int(name[:20])
        entries, times = _expected_index((tmp_path / name).read_bytes(), base, 250)
        index = (tmp_path / f"{name[:20]}.index").read_bytes()
        timeindex = (tmp_path / f"{name[:20]}.timeindex").read_bytes()
        assert list(struct.iter_unpack(">ii", index)) == entries
        assert list(struct.iter_unpack(">qi", timeindex)) == times
        checked += len(entries)
    assert checked > 10


def test_index_interval_is_exceeded_not_reached(tmp_path):
    # With batches of exactly index.interval.bytes, Kafka indexes every other batch: an entry
    # needs *more* than the interval since the last one.  Recovery must agree with append.
    size = len(make_batch(0, 1))
    log = open_log(tmp_path, index_interval_bytes=size)
    for _ in range(7):
        log.append(make_batch(0, 1), assign_offsets=True)
    log.close()
    index = tmp_path / f"{0:020d}.index"
    expected = [(2, 2 * size), (4, 4 * size), (6, 6 * size)]
    assert list(struct.iter_unpack(">ii", index.read_bytes())) == expected
    index.unlink()
    log = Log.open(tmp_path, LogConfig(index_interval_bytes=size), clock=Clock())
    log.close()
    assert list(struct.iter_unpack(">ii", index.read_bytes())) == expected


def test_read_respects_max_bytes_with_whole_batches(tmp_path):
    log = open_log(tmp_path)
    stored = fill(log, 10)
    size = len(stored[0])
    r = log.read(0, 3 * size + size // 2)
    assert r.records == b"".join(stored[:3]) and r.next_offset == 9
    # A first batch larger than max_bytes still comes whole, unless min_one_batch=False.
    assert log.read(3, 1).records == stored[1]
    empty = log.read(3, 1, min_one_batch=False)
    assert empty.records == b"" and empty.size == 0


def test_read_stops_before_max_offset(tmp_path):
    log = open_log(tmp_path)
    stored = fill(log, 5)
    assert log.read(0, 1 << 20, max_offset=9).records == b"".join(stored[:3])
    # max_offset inside a batch excludes that batch.
    assert log.read(0, 1 << 20, max_offset=8).records == b"".join(stored[:2])
    assert log.read(6, 1 << 20, max_offset=7).records == b""
    assert log.read(9, 1 << 20, max_offset=9).size == 0


def test_read_location_for_sendfile(tmp_path):
    log = open_log(tmp_path, segment_bytes=800)
    stored = fill(log, 12)
    r = log.read(20, 300, load_bytes=False)
    assert r.records is None
    with open(r.path, "rb") as f:
        f.seek(r.position)
        data = f.read(r.size)
    assert data == log.read(20, 300).records
    assert parse_header(data).base_offset == 18
    assert data in b"".join(stored)


def test_a_read_at_the_tail_parses_only_the_batches_it_returns(tmp_path, monkeypatch):
    """Followers and consumers fetch from the last batches.  With the default index
    interval (4 KiB) the sparse index leaves ~50 small batches to walk header by header;
    the segment's memory of its last appends starts the walk at the batch wanted."""
    from kraft.log import scan

    log = open_log(tmp_path)
    batches = fill(log, 50, count=1, value_size=10)
    assert sum(map(len, batches)) < 4096  # no index entry among them
    parsed = []
    real = scan.parse_header
    monkeypatch.setattr(scan, "parse_header", lambda buf, off=0: parsed.append(off) or real(buf, off))
    for back in range(1, 8):
        parsed.clear()
        offset = log.log_end_offset - back
        r = log.read(offset, 1 << 20, load_bytes=False)
        assert (r.first_offset, r.size) == (offset, sum(map(len, batches[-back:])))
        assert len(parsed) <= back + 1, (back, len(parsed))
    log.close()


def test_a_truncated_tail_is_forgotten(tmp_path):
    """After a truncation, a batch appended in the cut batches' place spans their offsets:
    a read inside it must not start where a cut batch used to end."""
    log = open_log(tmp_path)
    kept = fill(log, 5, count=1)
    log.truncate_to(3)
    assert log.log_end_offset == 3
    wide = bytearray(make_batch(0, 6, timestamp=2_000_000, value_size=40))
    log.append(wide, assign_offsets=True)  # offsets 3..8, over the cut 3 and 4
    for offset in range(3, 9):
        assert log.read(offset, 1 << 20).records == bytes(wide)
    assert read_all(log) == b"".join(kept[:3]) + bytes(wide)
    log.close()


def test_read_out_of_range(tmp_path):
    log = open_log(tmp_path)
    fill(log, 3)
    assert log.read(9, 100).size == 0  # at the log end: empty, not an error
    with pytest.raises(OffsetOutOfRangeError) as e:
        log.read(10, 100)
    assert (e.value.log_start_offset, e.value.log_end_offset, e.value.error_code) == (0, 9, 1)
    log.delete_records_before(4)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, 100)
    # The batch holding the log start offset is returned whole.
    assert log.read(4, 100).first_offset == 3


def test_iter_batches(tmp_path):
    log = open_log(tmp_path, segment_bytes=600)
    stored = fill(log, 12)
    assert [h.base_offset for h, _ in log.iter_batches()] == list(range(0, 36, 3))
    got = [(h.base_offset, data) for h, data in log.iter_batches(16, with_data=True)]
    assert got == [(3 * i, stored[i]) for i in range(5, 12)]


# -- follower appends ----------------------------------------------------------------------

def test_follower_append_keeps_offsets_and_requires_increase(tmp_path):
    log = open_log(tmp_path)
    log.append(make_batch(0, 5), assign_offsets=False)
    log.append(make_batch(10, 2), assign_offsets=False)  # gaps are allowed (compaction)
    assert log.log_end_offset == 12
    with pytest.raises(UnexpectedAppendOffsetError) as e:
        log.append(make_batch(11, 1), assign_offsets=False)
    assert (e.value.first_offset, e.value.expected_at_least) == (11, 12)
    with pytest.raises(UnexpectedAppendOffsetError):  # out of order inside one append
        log.append(make_batch(20, 3) + make_batch(21, 1), assign_offsets=False)
    assert log.log_end_offset == 12
    assert [h.base_offset for h, _ in log.iter_batches()] == [0, 10]
    assert log.read(7, 100).first_offset == 10


def test_truncate_into_a_gap_ends_after_the_last_kept_batch(tmp_path):
    log = open_log(tmp_path, segment_bytes=300)
    log.append(make_batch(0, 5, value_size=30), assign_offsets=False)
    log.append(make_batch(10, 2, value_size=30), assign_offsets=False)  # rolls: base 10
    assert [s.base_offset for s in log.segments] == [0, 10]
    log.truncate_to(11)
    assert log.log_end_offset == 5 and [s.base_offset for s in log.segments] == [0]
    log.close()
    log = Log.open(tmp_path, LogConfig(segment_bytes=300), clock=Clock())
    assert log.log_end_offset == 5


def test_follower_append_verifies_crc(tmp_path):
    log = open_log(tmp_path)
    bad = bytearray(make_batch(0, 2))
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append(bytes(bad), assign_offsets=False)
    with pytest.raises(CorruptRecordError):
        log.append(make_batch(0, 2)[:-3], assign_offsets=True)  # torn input
    with pytest.raises(CorruptRecordError):
        log.append(b"", assign_offsets=True)
    assert log.log_end_offset == 0 and log.size_in_bytes == 0


def test_size_limits(tmp_path):
    log = open_log(tmp_path, max_message_bytes=200, segment_bytes=400)
    with pytest.raises(RecordTooLargeError):
        log.append(make_batch(0, 1, value_size=300), assign_offsets=True)
    log.append(make_batch(0, 1, value_size=300), assign_offsets=False)  # followers: no limit
    with pytest.raises(RecordBatchTooLargeError):
        log.append(make_batch(5, 1, value_size=500), assign_offsets=False)


# -- rolling -----------------------------------------------------------------------------------

def test_roll_on_segment_bytes(tmp_path):
    log = open_log(tmp_path, segment_bytes=1000)
    stored = fill(log, 20)
    size = len(stored[0])
    per_segment = 1000 // size
    assert [s.base_offset for s in log.segments] == list(range(0, 60, 3 * per_segment))
    assert all(s.size <= 1000 for s in log.segments)


def test_roll_on_segment_ms(tmp_path):
    clock = Clock(5_000)
    log = open_log(tmp_path, clock, segment_ms=1000)
    log.append(make_batch(0, 1, timestamp=5_000), assign_offsets=True)
    clock.now = 5_900
    log.append(make_batch(0, 1, timestamp=5_900), assign_offsets=True)
    assert len(log.segments) == 1
    clock.now = 6_001  # more than segment.ms after the first batch's timestamp
    log.append(make_batch(0, 1, timestamp=6_001), assign_offsets=True)
    assert [s.base_offset for s in log.segments] == [0, 2]
    # An empty active segment is never rolled for time.
    clock.now = 100_000
    assert log.roll() == 3
    log.append(make_batch(0, 1, timestamp=100_000), assign_offsets=True)
    assert [s.base_offset for s in log.segments] == [0, 2, 3]


def test_old_timestamps_roll_by_their_own_span_not_the_clock(tmp_path):
    """Kafka's timeWaitedForRoll: batches stamped years ago (a replay, a migration) share a
    segment while their timestamps stay within segment.ms of its first one."""
    clock = Clock(10_000_000)
    log = open_log(tmp_path, clock, segment_ms=1000)
    for ts in (5_000, 5_500, 4_000, 5_900):
        log.append(make_batch(0, 1, timestamp=ts), assign_offsets=True)
    assert len(log.segments) == 1
    log.append(make_batch(0, 1, timestamp=6_001), assign_offsets=True)
    assert [s.base_offset for s in log.segments] == [0, 4]


def test_roll_when_index_full(tmp_path):
    # 24 bytes of index: three offset-index entries, two time-index entries.
    log = open_log(tmp_path, segment_index_bytes=24, index_interval_bytes=1)
    fill(log, 12, count=1)
    for seg in log.segments[:-1]:
        assert seg.time_index.is_full or seg.offset_index.is_full
    assert len(log.segments) >= 3
    assert read_all(log) == b"".join(d for _, d in log.iter_batches(with_data=True))


def test_roll_when_relative_offset_overflows(tmp_path):
    log = open_log(tmp_path)
    log.append(make_batch(0, 1), assign_offsets=False)
    far = 2**31 + 5
    log.append(make_batch(far, 1), assign_offsets=False)
    assert [s.base_offset for s in log.segments] == [0, far]
    assert log.read(1, 100).first_offset == far


# -- timestamps -------------------------------------------------------------------------------

def test_offset_for_timestamp(tmp_path):
    log = open_log(tmp_path, segment_bytes=900, index_interval_bytes=100)
    for i in range(30):  # batch i: offsets 3i..3i+2, timestamps 1000+100i .. +20
        log.append(make_batch(0, 3, timestamp=1000 + 100 * i, ts_step=10), assign_offsets=True)
    assert log.offset_for_timestamp(0).offset == 0
    assert log.offset_for_timestamp(1020).offset == 0
    found = log.offset_for_timestamp(1021)
    assert (found.offset, found.max_timestamp) == (3, 1120)
    assert parse_header(found.batch).base_offset == 3
    for i in range(30):
        assert log.offset_for_timestamp(1000 + 100 * i + 15).offset == 3 * i
    assert log.offset_for_timestamp(1000 + 100 * 29 + 21) is None
    log.delete_records_before(50)
    assert log.offset_for_timestamp(0).offset == 50


def test_offset_for_timestamp_with_out_of_order_timestamps(tmp_path):
    log = open_log(tmp_path, index_interval_bytes=1)
    for ts in [100, 300, 200, 400, 250]:
        log.append(make_batch(0, 1, timestamp=ts), assign_offsets=True)
    assert log.offset_for_timestamp(150).offset == 1
    assert log.offset_for_timestamp(350).offset == 3
    assert log.offset_for_timestamp(401) is None


# -- truncation --------------------------------------------------------------------------------

def test_truncate_mid_segment(tmp_path):
    log = open_log(tmp_path)
    stored = fill(log, 10)
    assert log.truncate_to(12)
    assert log.log_end_offset == 12
    assert read_all(log) == b"".join(stored[:4])
    assert not log.truncate_to(12)
    info = log.append(make_batch(0, 1), assign_offsets=True)
    assert info.first_offset == 12


def test_truncate_inside_a_batch_drops_the_whole_batch(tmp_path):
    log = open_log(tmp_path)
    stored = fill(log, 4)
    log.truncate_to(7)  # batch 6..8 holds 7
    assert log.log_end_offset == 6
    assert read_all(log) == b"".join(stored[:2])


def test_truncate_across_segments(tmp_path):
    log = open_log(tmp_path, segment_bytes=500, index_interval_bytes=50)
    stored = fill(log, 30)
    before = len(log.segments)
    log.truncate_to(31)
    assert log.log_end_offset == 30
    assert len(log.segments) < before
    assert read_all(log) == b"".join(stored[:10])
    # Appends go on in the (now active) older segment; offsets continue from the end.
    more = fill(log, 5)
    assert parse_header(more[0]).base_offset == 30
    assert read_all(log) == b"".join(stored[:10] + more)
    log.truncate_to(0)
    assert (log.log_start_offset, log.log_end_offset, log.size_in_bytes) == (0, 0, 0)


def test_truncate_fully_and_start_at(tmp_path):
    log = open_log(tmp_path, segment_bytes=500)
    fill(log, 10)
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (1000, 1000, 1000)
    assert [s.base_offset for s in log.segments] == [1000]
    assert log.append(make_batch(0, 2), assign_offsets=True).first_offset == 1000
    assert [n for n in segment_files(tmp_path) if n.endswith(".log")] == [f"{1000:020d}.log"]
    # Truncating below the first segment restarts the log there.
    log.truncate_to(10)
    assert (log.log_start_offset, log.log_end_offset) == (10, 10)


# -- log start offset and retention ----------------------------------------------------------

def test_delete_records_before(tmp_path):
    log = open_log(tmp_path, segment_bytes=500, file_delete_delay_ms=0)
    fill(log, 20)
    bases = [s.base_offset for s in log.segments]
    assert log.delete_records_before(bases[2] + 1) == bases[2] + 1
    assert [s.base_offset for s in log.segments] == bases[2:]
    assert log.log_start_offset == bases[2] + 1
    assert log.delete_records_before(3) == bases[2] + 1  # never moves backwards
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(log.log_end_offset + 1)
    assert log.delete_records_before(log.log_end_offset) == 60
    assert log.read(60, 100).size == 0
    assert [s.base_offset for s in log.segments] == bases[-1:]


def test_retention_by_time(tmp_path):
    clock = Clock(1_000_000)
    log = open_log(tmp_path, clock, segment_bytes=500, retention_ms=10_000, file_delete_delay_ms=0)
    fill(log, 10, ts0=1_000_000)  # timestamps 1_000_000 .. 1_000_090
    old_end = log.log_end_offset
    fill(log, 10, ts0=1_005_000)
    clock.now = 1_005_000 + 10_000
    assert log.apply_retention() > 0
    assert log.log_start_offset == log.segments[0].base_offset
    assert all(s.largest_timestamp() >= 1_005_000 for s in log.segments)
    assert log.log_start_offset <= old_end
    # Retention stops below the given bound (the high watermark).
    clock.now = 10**9
    before = [s.base_offset for s in log.segments]
    assert log.apply_retention(upper_bound_offset=before[1]) == 1
    # With everything expired the log rolls and keeps an empty active segment.
    log.apply_retention()
    assert [s.base_offset for s in log.segments] == [log.log_end_offset]
    assert log.log_start_offset == log.log_end_offset == 60
    assert log.append(make_batch(0, 1), assign_offsets=True).first_offset == 60


def test_retention_by_size(tmp_path):
    log = open_log(tmp_path, segment_bytes=500, retention_bytes=1200, retention_ms=-1,
                   file_delete_delay_ms=0)
    fill(log, 30)
    before = [(s.base_offset, s.size) for s in log.segments]
    # Kafka's rule: drop the oldest segments while the log stays >= retention.bytes.
    excess, expected = sum(size for _, size in before) - 1200, list(before)
    while excess - expected[0][1] >= 0:
        excess -= expected.pop(0)[1]
    assert log.apply_retention() == len(before) - len(expected)
    assert [(s.base_offset, s.size) for s in log.segments] == expected
    assert log.size_in_bytes >= 1200 > log.size_in_bytes - expected[0][1]
    assert log.log_start_offset == expected[0][0]
    assert log.apply_retention() == 0


def test_retention_by_size_deletes_down_to_exactly_the_limit(tmp_path):
    log = open_log(tmp_path, segment_bytes=500, retention_ms=-1, file_delete_delay_ms=0)
    fill(log, 30)
    first, second = log.segments[0], log.segments[1]
    log.update_config(LogConfig(segment_bytes=500, retention_ms=-1, file_delete_delay_ms=0,
                                retention_bytes=log.size_in_bytes - first.size))
    assert log.apply_retention() == 1
    assert log.segments[0] is second


def test_file_delete_delay(tmp_path):
    clock = Clock(0)
    log = open_log(tmp_path, clock, segment_bytes=500, file_delete_delay_ms=1000)
    fill(log, 10)
    first = log.segments[0].base_offset
    log.delete_records_before(log.segments[1].base_offset)
    deleted = sorted(n for n in os.listdir(tmp_path) if n.endswith(".deleted"))
    assert deleted == [f"{first:020d}{s}.deleted" for s in (".index", ".log", ".timeindex")]
    log.delete_expired_files(999)
    assert len([n for n in os.listdir(tmp_path) if n.endswith(".deleted")]) == 3
    log.delete_expired_files(1000)
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".deleted")]


# -- flush, close, reopen ---------------------------------------------------------------------

def test_flush_moves_the_recovery_point(tmp_path):
    log = open_log(tmp_path, segment_bytes=500)
    fill(log, 10)
    assert log.recovery_point == 0 and log.unflushed_messages == 30
    log.flush(12)
    assert log.recovery_point == 12
    log.flush()
    assert log.recovery_point == 30 and log.unflushed_messages == 0
    log.truncate_to(20)
    assert log.recovery_point == 18


def test_flush_policies(tmp_path):
    clock = Clock(0)
    log = open_log(tmp_path, clock, flush_messages=7)
    fill(log, 2)
    assert log.recovery_point == 0
    fill(log, 1)  # 9 unflushed >= 7
    assert log.recovery_point == 9
    log2 = open_log(tmp_path / "b", clock, flush_ms=100)
    fill(log2, 1)
    assert not log2.maybe_flush(99) and log2.recovery_point == 0
    clock.now = 100
    fill(log2, 1)  # the append applies flush.ms too
    assert log2.recovery_point == 6 and log2.last_flush_ms == 100


def test_reopen_after_clean_close_keeps_everything(tmp_path):
    clock = Clock()
    log = open_log(tmp_path, clock, segment_bytes=700, index_interval_bytes=100)
    stored = fill(log, 25)
    active_base = log.active_segment.base_offset
    log.close()
    files = {n: (tmp_path / n).read_bytes() for n in segment_files(tmp_path)
             if int(n[:20]) < active_base}
    log = Log.open(tmp_path, LogConfig(segment_bytes=700, index_interval_bytes=100), clock=clock,
                   recovery_point=75, had_clean_shutdown=True)
    assert log.load_result.recovered == []
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (0, 75, 75)
    assert read_all(log) == b"".join(stored)
    assert log.offset_for_timestamp(1_000_000 + 10 * 20).offset == 60
    more = fill(log, 3)
    assert parse_header(more[0]).base_offset == 75
    log.close()
    assert len(files) >= 6
    for name, content in files.items():  # inactive segments are untouched
        assert (tmp_path / name).read_bytes() == content


def test_closed_log_refuses_use(tmp_path):
    log = open_log(tmp_path)
    log.close()
    log.close()  # idempotent
    with pytest.raises(LogClosedError):
        log.append(make_batch(), assign_offsets=True)
    with pytest.raises(LogClosedError):
        log.read(0, 10)
