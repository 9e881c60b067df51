"""Crash recovery: a torn, garbage or zero-filled tail, lost or corrupt indexes."""

from __future__ import annotations

import os
import shutil
import struct

import pytest
from test_log_helpers import make_batch

from kraft.log import Log, LogConfig
from kraft.records.header import parse_header

CONFIG = LogConfig(segment_bytes=1200, index_interval_bytes=150)


def build(path, n: int = 30, config: LogConfig = CONFIG) -> tuple[Log, list[bytes]]:
    log = Log.open(path, config, clock=lambda: 0)
    stored = []
    for i in range(n):
        buf = bytearray(make_batch(0, 1 + i % 4, timestamp=10_000 + 10 * i, value_size=20 + i,
                                   fill=i + 1))
        log.append(buf, assign_offsets=True)
        stored.append(bytes(buf))
    return log, stored


def reopen(path, config: LogConfig = CONFIG, **kw) -> Log:
    return Log.open(path, config, clock=lambda: 0, **kw)


def contents(log: Log) -> list[bytes]:
    return [data for _, data in log.iter_batches(with_data=True)]


def last_log_file(path):
    return path / max(n for n in os.listdir(path) if n.endswith(".log"))


def end_of(batches: list[bytes]) -> int:
    return parse_header(batches[-1]).next_offset if batches else 0


def check_recovered(path, expected: list[bytes]) -> Log:
    """Reopen after a crash; the log must hold exactly ``expected`` and accept appends."""
    log = reopen(path)
    assert contents(log) == expected
    assert log.log_end_offset == end_of(expected)
    assert log.recovery_point <= log.log_end_offset
    info = log.append(make_batch(0, 2), assign_offsets=True)
    assert info.first_offset == end_of(expected)
    assert contents(log)[-1][8:] == make_batch(0, 2)[8:]
    return log


def test_garbage_after_the_last_batch_is_cut(tmp_path):
    log, stored = build(tmp_path)
    log.abandon()
    last = last_log_file(tmp_path)
    size = last.stat().st_size
    with open(last, "ab") as f:
        f.write(os.urandom(300))
    log = check_recovered(tmp_path, stored)
    assert log.load_result.truncated_bytes == 300
    log.close()
    assert last.stat().st_size > size  # the new batch went where the garbage was


@pytest.mark.parametrize("tail", ["zeros", "sparse"])
def test_zero_filled_tail_is_garbage(tmp_path, tail):
    log, stored = build(tmp_path)
    log.abandon()
    last = last_log_file(tmp_path)
    if tail == "zeros":  # a preallocated file: zeros after the data
        with open(last, "ab") as f:
            f.write(bytes(4096))
    else:  # a file extended but never written (a hole)
        os.truncate(last, last.stat().st_size + 8192)
    check_recovered(tmp_path, stored)


def test_torn_last_batch_at_every_byte(tmp_path):
    src = tmp_path / "src"
    log, stored = build(src)
    log.abandon()
    last_name = last_log_file(src).name
    full = (src / last_name).read_bytes()
    final = len(stored[-1])
    assert full.endswith(stored[-1])
    work = tmp_path / "work"
    for cut in range(1, final):
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(src, work)
        with open(work / last_name, "r+b") as f:
            f.truncate(len(full) - cut)
        reopened = check_recovered(work, stored[:-1])
        reopened.abandon()


def test_torn_batch_followed_by_zeros(tmp_path):
    # A crash can persist a page of a batch's end as zeros while the length is intact.
    log, stored = build(tmp_path)
    log.abandon()
    last = last_log_file(tmp_path)
    data = bytearray(last.read_bytes())
    data[-20:] = bytes(20)
    last.write_bytes(bytes(data))
    check_recovered(tmp_path, stored[:-1])


def test_bad_crc_mid_log_cuts_there_and_drops_later_segments(tmp_path):
    log, stored = build(tmp_path, 60)
    log.abandon()
    logs = sorted(n for n in os.listdir(tmp_path) if n.endswith(".log"))
    assert len(logs) >= 4
    victim = tmp_path / logs[1]
    data = bytearray(victim.read_bytes())
    first = parse_header(data)
    pos = first.size  # corrupt the second batch of the second segment
    data[pos + 70] ^= 0x01
    victim.write_bytes(bytes(data))
    expect_end = first.next_offset
    kept = [b for b in stored if parse_header(b).next_offset <= expect_end]
    log = check_recovered(tmp_path, kept)
    assert sorted(n for n in os.listdir(tmp_path) if n.endswith(".log")) == logs[:2]
    assert set(log.load_result.deleted) == {int(n[:20]) for n in logs[2:]}


def test_offsets_going_backwards_are_garbage(tmp_path):
    log, stored = build(tmp_path, 5)
    log.abandon()
    last = last_log_file(tmp_path)
    with open(last, "ab") as f:
        f.write(make_batch(2, 1))  # valid CRC, but offset 2 is already taken
    check_recovered(tmp_path, stored)


def test_segments_below_the_recovery_point_are_trusted(tmp_path):
    log, stored = build(tmp_path, 60)
    bases = [s.base_offset for s in log.segments]
    log.flush(bases[2] + 1)  # recovery point inside the third segment
    rp = log.recovery_point
    log.abandon()
    # Corrupt a batch in the first (flushed) segment: recovery must not even look.
    first = tmp_path / f"{0:020d}.log"
    data = bytearray(first.read_bytes())
    data[len(stored[0]) - 1] ^= 0xFF  # inside the first batch's CRC-covered bytes
    first.write_bytes(bytes(data))
    log = reopen(tmp_path, recovery_point=rp)
    assert log.load_result.recovered == bases[2:]
    assert log.log_end_offset == end_of(stored)
    assert log.recovery_point == rp
    # Without a recovery point everything is validated, and the damage found.
    log.abandon()
    log = reopen(tmp_path)
    assert log.log_end_offset == 0 and log.load_result.deleted == bases[1:]


def test_recovery_point_never_passes_the_recovered_end(tmp_path):
    log, stored = build(tmp_path)
    log.flush()
    log.abandon()
    last = last_log_file(tmp_path)
    os.truncate(last, last.stat().st_size - 5)  # lost writes, despite the "flush"
    log = reopen(tmp_path, recovery_point=end_of(stored))
    assert log.log_end_offset == end_of(stored[:-1])
    assert log.recovery_point == log.log_end_offset


def _index_files(path) -> dict[str, bytes]:
    return {n: (path / n).read_bytes() for n in sorted(os.listdir(path))
            if n.endswith((".index", ".timeindex"))}


@pytest.mark.parametrize("damage", ["missing", "missing-time", "odd-size", "past-end",
                                    "decreasing", "garbage"])
def test_damaged_index_is_rebuilt_after_clean_shutdown(tmp_path, damage):
    log, stored = build(tmp_path, 60)
    log.close()
    original = _index_files(tmp_path)
    victim = min(n for n in original if n.endswith(".index") and len(original[n]) >= 16)
    path = tmp_path / victim
    entries = list(struct.iter_unpack(">ii", original[victim]))
    if damage == "missing":
        path.unlink()
    elif damage == "missing-time":
        path = path.with_suffix(".timeindex")
        path.unlink()
    elif damage == "odd-size":
        path.write_bytes(original[victim] + b"\x00\x01\x02")
    elif damage == "past-end":
        path.write_bytes(original[victim] + struct.pack(">ii", entries[-1][0] + 1, 10**6))
    elif damage == "decreasing":
        entries[0], entries[1] = entries[1], entries[0]
        path.write_bytes(b"".join(struct.pack(">ii", *e) for e in entries))
    else:
        path.write_bytes(os.urandom(len(original[victim])))
    log = reopen(tmp_path, recovery_point=end_of(stored), had_clean_shutdown=True)
    assert contents(log) == stored
    for offset in range(0, log.log_end_offset, 7):  # lookups go through the rebuilt index
        r = log.read(offset, 1)
        h = parse_header(r.records)
        assert h.base_offset <= offset <= h.last_offset
    assert log.offset_for_timestamp(10_295).offset == parse_header(stored[30]).base_offset
    log.close()
    assert _index_files(tmp_path) == original


def test_unclean_recovery_rebuilds_indexes_identically(tmp_path):
    log, stored = build(tmp_path, 60)
    log.close()
    original = _index_files(tmp_path)
    for name in original:
        (tmp_path / name).unlink()
    log = reopen(tmp_path)  # no clean-shutdown marker, recovery point 0
    assert contents(log) == stored
    log.close()
    assert _index_files(tmp_path) == original


def test_crash_loses_unwritten_index_entries_harmlessly(tmp_path):
    log, stored = build(tmp_path, 60)
    log.abandon()  # the active segment's index entries were never written
    log = check_recovered(tmp_path, stored)
    assert log.offset_for_timestamp(10_585).offset == parse_header(stored[59]).base_offset


def test_stray_and_orphan_files_are_removed(tmp_path):
    log, stored = build(tmp_path)
    log.close()
    (tmp_path / f"{999:020d}.log.deleted").write_bytes(b"x")
    (tmp_path / f"{999:020d}.index").write_bytes(b"")  # an index without its log
    (tmp_path / f"{998:020d}.timeindex.swap").write_bytes(b"")
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n0\n")
    log = reopen(tmp_path, had_clean_shutdown=True)
    names = os.listdir(tmp_path)
    assert "leader-epoch-checkpoint" in names
    assert not [n for n in names if n.startswith(("00000000000000000999", "00000000000000000998"))]
    assert contents(log) == stored


def test_log_start_offset_beyond_the_recovered_end(tmp_path):
    log, _ = build(tmp_path, 10)
    log.abandon()
    log = reopen(tmp_path, log_start_offset=500)
    assert (log.log_start_offset, log.log_end_offset) == (500, 500)
    assert [s.base_offset for s in log.segments] == [500]


def test_empty_directory_starts_at_the_log_start_offset(tmp_path):
    log = reopen(tmp_path / "new", log_start_offset=42)
    assert (log.log_start_offset, log.log_end_offset) == (42, 42)
    assert log.append(make_batch(0, 1), assign_offsets=True).first_offset == 42
