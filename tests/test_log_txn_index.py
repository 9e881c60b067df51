"""The aborted-transaction index (``.txnindex``, kraft.log.txn_index) on real files: Kafka's
34-byte entries, searches across segments, truncation, deletion with the segment, the
cleaner carrying entries through a swap (crashes included), and the partition rebuilding
the index on log recovery."""

from __future__ import annotations

import os
import shutil
import struct
import uuid

import pytest
from test_log_helpers import clean_until_crash

from broker.partition import Partition
from kraft.log import CorruptIndexError, Log, LogConfig
from kraft.log.cleaner import LogCleaner
from kraft.log.txn_index import AbortedTxn, TransactionIndex
from kraft.records import build_batch, make_end_txn_batch

T0 = 1_700_000_000_000
DAY = 24 * 3600 * 1000
CONFIG = LogConfig(segment_bytes=400, index_interval_bytes=64, file_delete_delay_ms=0, retention_ms=-1)
INDEX0 = "00000000000000000000.txnindex"


def test_entries_are_kafkas_34_byte_records(tmp_path):
    index = TransactionIndex(tmp_path / INDEX0)
    assert index.entries == [] and not index.path.exists()
    index.append(AbortedTxn(producer_id=7, first_offset=3, last_offset=9, last_stable_offset=10))
    index.append(AbortedTxn(8, 5, 12, 13))
    raw = index.path.read_bytes()
    assert len(raw) == 68
    assert struct.unpack(">hqqqq", raw[:34]) == (0, 7, 3, 9, 10)
    assert TransactionIndex(index.path).entries == index.entries  # read back from the file
    with pytest.raises(ValueError):
        index.append(AbortedTxn(9, 0, 12, 13))  # entries follow their markers' order
    index.truncate_to(12)
    assert TransactionIndex(index.path).entries == [AbortedTxn(7, 3, 9, 10)]
    index.truncate_to(9)
    assert not index.path.exists()


def test_a_torn_index_fails_its_sanity_check(tmp_path):
    index = TransactionIndex(tmp_path / INDEX0)
    index.append(AbortedTxn(7, 3, 9, 10))
    with open(index.path, "ab") as f:
        f.write(b"\x00\x00\x00")
    with pytest.raises(CorruptIndexError):
        TransactionIndex(index.path).sanity_check()
    with pytest.raises(CorruptIndexError):
        TransactionIndex(index.path).entries


def test_a_search_stops_at_an_entry_whose_lso_covers_the_fetch(tmp_path):
    index = TransactionIndex(tmp_path / INDEX0)
    for e in [AbortedTxn(1, 0, 4, 2), AbortedTxn(2, 2, 6, 7), AbortedTxn(3, 8, 9, 10)]:
        index.append(e)
    found = index.collect(fetch_offset=5, upper_bound_offset=7)
    assert [e.producer_id for e in found.aborted] == [2] and found.complete
    found = index.collect(fetch_offset=0, upper_bound_offset=20)
    assert [e.producer_id for e in found.aborted] == [1, 2, 3] and not found.complete


# ---------------------------------------------------------------- through a partition

def txn_data(pid: int, seq: int, n: int = 3, key: bytes = b"k") -> bytearray:
    return bytearray(build_batch([(key + b"%d" % i, b"v" * 40) for i in range(n)], timestamp=T0,
                                 producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True))


def end_txn(pid: int, commit: bool) -> bytearray:
    return bytearray(make_end_txn_batch(commit, producer_id=pid, producer_epoch=0, coordinator_epoch=1,
                                        timestamp=T0).encode())


def open_partition(path, **kwargs) -> Partition:
    plog = Log.open(path, CONFIG, clock=lambda: T0, **kwargs)
    return Partition("t", 0, uuid.UUID(int=1), plog, broker_id=1)


def write_transactions(p: Partition) -> list[AbortedTxn]:
    """Two aborted and one committed transaction over several segments; one left open."""
    p.append_as_leader(txn_data(1, 0))          # 0-2
    p.append_as_leader(txn_data(2, 0))          # 3-5
    p.append_as_leader(end_txn(1, False))       # 6: abort 1 (2 still open)
    p.append_as_leader(txn_data(3, 0))          # 7-9
    p.append_as_leader(end_txn(2, True))        # 10
    p.append_as_leader(txn_data(3, 3))          # 11-13
    p.append_as_leader(end_txn(3, False))       # 14: abort 3
    p.append_as_leader(txn_data(4, 0))          # 15-17: open
    return [AbortedTxn(1, 0, 6, 3), AbortedTxn(3, 7, 14, 15)]


def all_entries(plog: Log) -> list[AbortedTxn]:
    return [e for seg in plog.segments for e in seg.txn_index.entries]


def test_abort_markers_fill_the_index_of_their_segment_and_fetches_find_them(tmp_path):
    p = open_partition(tmp_path / "t-0")
    expected = write_transactions(p)
    plog = p.log
    assert len(plog.segments) > 2
    assert all_entries(plog) == expected
    for e in expected:
        seg = plog.segment_holding(e.last_offset)
        assert e in seg.txn_index.entries and seg.txn_index.path.exists()
    # A fetch of offsets 0..4 must learn of transaction 1 although its marker is further on.
    assert [e.producer_id for e in plog.collect_aborted_txns(0, 5)] == [1]
    assert [e.producer_id for e in plog.collect_aborted_txns(7, 12)] == [3]
    assert p.producers.first_unstable_offset == 0  # no marker is replicated yet (HW 0)
    assert p.producers.last_stable_offset(high_watermark=18) == 15


def test_truncation_and_deletion_take_the_entries_with_them(tmp_path):
    p = open_partition(tmp_path / "t-0")
    write_transactions(p)
    p.truncate_to(14)
    assert all_entries(p.log) == [AbortedTxn(1, 0, 6, 3)]
    assert p.producers.ongoing_txns == {7: 3}
    p.truncate_to(3)
    assert all_entries(p.log) == []
    assert not [n for n in os.listdir(tmp_path / "t-0") if n.endswith(".txnindex")]
    assert p.producers.ongoing_txns == {0: 1}


@pytest.mark.parametrize("damage", ["delete", "tear", "clean"])
def test_log_recovery_rebuilds_the_index(tmp_path, damage):
    path = tmp_path / "t-0"
    p = open_partition(path)
    expected = write_transactions(p)
    p.log.abandon()  # a crash: no clean shutdown, recovery point 0
    for name in os.listdir(path):
        if name.endswith(".txnindex"):
            if damage == "delete":
                os.unlink(path / name)
            elif damage == "tear":
                with open(path / name, "ab") as f:
                    f.write(b"\x01\x02")
    reopened = open_partition(path, had_clean_shutdown=damage == "clean",
                              recovery_point=10**9 if damage == "clean" else 0)
    assert all_entries(reopened.log) == expected
    assert reopened.producers.ongoing_txns == {15: 4}
    assert reopened.last_stable_offset == 0  # nothing is replicated: the HW is 0


def test_the_cleaner_keeps_the_entries_through_its_swap(tmp_path):
    config = LogConfig(segment_bytes=400, index_interval_bytes=64, file_delete_delay_ms=0, retention_ms=-1,
                       cleanup_policy="compact", min_cleanable_dirty_ratio=0.01)
    base = tmp_path / "base"
    plog = Log.open(base, config, clock=lambda: T0)
    p = Partition("t", 0, uuid.UUID(int=1), plog, broker_id=1)
    expected = write_transactions(p)
    p.append_as_leader(end_txn(4, True))
    plog.roll(T0)
    plog.close()
    ref = tmp_path / "ref"
    shutil.copytree(base, ref)
    plog = Log.open(ref, config, clock=lambda: T0, had_clean_shutdown=True)
    steps = []
    assert LogCleaner().clean(plog, T0 + DAY, force=True, step=steps.append) is not None
    assert all_entries(plog) == expected
    assert any("txnindex" in s for s in steps)
    plog.close()
    for k in range(len(steps)):  # a crash after every file operation of the swap
        work = tmp_path / f"crash{k}"
        shutil.copytree(base, work)
        plog = Log.open(work, config, clock=lambda: T0, had_clean_shutdown=True)
        clean_until_crash(plog, T0 + DAY, crash_after=k, force=True)
        reopened = Partition("t", 0, uuid.UUID(int=1), Log.open(work, config, clock=lambda: T0), broker_id=1)
        got = all_entries(reopened.log)
        # Recovery rebuilds the index from the log: a transaction whose aborted data the
        # cleaner removed has nothing left to filter and no entry (as in Kafka).
        # A transaction partly cleaned starts at its first batch left.
        left = {}
        for h, _ in reopened.log.iter_batches():
            if not h.is_control:
                left.setdefault(h.producer_id, []).append(h.base_offset)
        want = []
        for e in expected:
            firsts = [o for o in left.get(e.producer_id, ()) if e.first_offset <= o < e.last_offset]
            if firsts:
                want.append(AbortedTxn(e.producer_id, min(firsts), e.last_offset, e.last_stable_offset))
        assert got == want, (k, steps[k], got)
        reopened.log.close()
