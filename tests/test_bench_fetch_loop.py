"""bench/fetch_loop.py counts a fetch's records from batch headers: its rate row is only
worth reading if the count is right for whole batches, control batches (not data) and a
batch cut at the fetch's byte limit (left for the next fetch, as a consumer leaves it)."""

import sys
from pathlib import Path

from kraft.records.batch import build_batch
from kraft.records.compression import ZSTD

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import fetch_loop  # noqa: E402


def _three_batches() -> tuple[bytes, bytes, bytes]:
    first = build_batch([(b"k", b"v" * 100)] * 5, base_offset=10)
    marker = build_batch([(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00")], base_offset=15, control=True,
                         producer_id=7, producer_epoch=0, transactional=True)
    third = build_batch([(None, b"x" * 50)] * 3, base_offset=16, compression=ZSTD)
    return first, marker, third


def test_whole_batches_counted_and_control_batches_left_out():
    first, marker, third = _three_batches()
    assert fetch_loop.count_batches(first + marker + third) == (8, 19)


def test_a_batch_cut_at_the_byte_limit_waits_for_the_next_fetch():
    first, marker, third = _three_batches()
    whole = first + marker + third
    for cut in (len(first) + len(marker) + 1, len(whole) - 1, len(first) + len(marker) + 60):
        assert fetch_loop.count_batches(whole[:cut]) == (5, 16)
    assert fetch_loop.count_batches(first[:30]) == (0, None)
    assert fetch_loop.count_batches(b"") == (0, None)
