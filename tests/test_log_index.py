"""kraft.log.index: the sparse offset and time indexes on their own."""

from __future__ import annotations

import struct

import pytest

from kraft.log.errors import CorruptIndexError
from kraft.log.index import OffsetIndex, TimeIndex


def test_offset_index_lookup_truncate_and_file_format(tmp_path):
    idx = OffsetIndex(tmp_path / "x.index", 100, max_entries=4)
    idx.reset()
    assert idx.lookup(500) == (100, 0)  # no entry: the segment start
    for offset, pos in [(110, 4000), (120, 8100), (130, 12300)]:
        idx.append(offset, pos)
    assert idx.lookup(109) == (100, 0)
    assert idx.lookup(110) == (110, 4000)
    assert idx.lookup(129) == (120, 8100)
    assert idx.lookup(10**6) == (130, 12300)
    with pytest.raises(ValueError):
        idx.append(130, 20000)  # offsets must increase
    idx.append(140, 16000)
    assert idx.is_full
    idx.write_pending(fsync=True)
    assert (tmp_path / "x.index").read_bytes() == b"".join(
        struct.pack(">ii", r, p) for r, p in [(10, 4000), (20, 8100), (30, 12300), (40, 16000)])
    idx.truncate_to(121)
    assert idx.entries() == [(110, 4000), (120, 8100)]
    assert (tmp_path / "x.index").stat().st_size == 16

    again = OffsetIndex(tmp_path / "x.index", 100, max_entries=4)
    again.load(log_size=9000)
    assert again.entries() == [(110, 4000), (120, 8100)]
    with pytest.raises(CorruptIndexError):
        OffsetIndex(tmp_path / "x.index", 100, 4).load(log_size=8100)  # points past the end


def test_time_index_lookup_keeps_only_increasing_timestamps(tmp_path):
    idx = TimeIndex(tmp_path / "x.timeindex", 100, max_entries=3)
    idx.reset()
    assert idx.lookup(5) == (-1, 100)
    idx.maybe_append(1000, 105)
    idx.maybe_append(1000, 107)  # not larger: ignored
    idx.maybe_append(900, 108)  # smaller: ignored
    idx.maybe_append(2000, 110)
    assert idx.entries() == [(1000, 105), (2000, 110)]
    assert idx.lookup(999) == (-1, 100)
    assert idx.lookup(1000) == (1000, 105)
    assert idx.lookup(1999) == (1000, 105)
    assert idx.lookup(2000) == (2000, 110)
    idx.maybe_append(3000, 120)
    idx.maybe_append(4000, 130)  # full
    assert len(idx) == 3
    idx.maybe_append(4000, 130, skip_full_check=True)  # a closing entry may exceed
    assert idx.last_entry() == (4000, 130)
    idx.write_pending()
    assert (tmp_path / "x.timeindex").read_bytes()[:12] == struct.pack(">qi", 1000, 5)
    idx.truncate_to(110)
    assert idx.entries() == [(1000, 105)]


@pytest.mark.parametrize("data", [b"\x00" * 13, struct.pack(">qiqi", 5, 1, 4, 2),
                                  struct.pack(">qi", 5, -1)])
def test_time_index_load_rejects_damage(tmp_path, data):
    (tmp_path / "x.timeindex").write_bytes(data)
    with pytest.raises(CorruptIndexError):
        TimeIndex(tmp_path / "x.timeindex", 0, 10).load(log_size=100)
