"""The in-memory replicated log and its leader-epoch history (kraft.raft.memlog)."""

import pytest

from kraft.raft.memlog import RaftLog
from kraft.raft.messages import Batch, OffsetAndEpoch, Snapshot


def sample():
    return RaftLog(batches=[Batch(0, 1, (b"a", b"b")), Batch(2, 1, (b"c",)),
                            Batch(3, 3, (b"d", b"e")), Batch(5, 4, (b"f",))])


def test_positions_and_epochs():
    log = sample()
    assert log.last == OffsetAndEpoch(6, 4)
    assert [log.epoch_at(o) for o in range(7)] == [1, 1, 1, 3, 3, 4, None]
    assert log.record_at(4) == b"e"
    assert log.epoch_history() == [(1, 0), (3, 3), (4, 5)]


def test_end_offset_for_epoch_is_the_largest_epoch_not_above():
    """KIP-595: the diverging epoch is the end offset of the largest epoch <= the asked one."""
    log = sample()
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(3, 1)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(3, 1)
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(5, 3)
    assert log.end_offset_for_epoch(9) == OffsetAndEpoch(6, 4)
    assert log.end_offset_for_epoch(0) == OffsetAndEpoch(0, 0)


def test_end_offset_for_epoch_below_the_snapshot_is_unknown():
    log = RaftLog(Snapshot(OffsetAndEpoch(3, 2), b""), [Batch(3, 3, (b"x",))])
    assert log.end_offset_for_epoch(1) is None
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(3, 2)
    assert log.epoch_at(2) == 2 and log.epoch_at(1) is None


def test_truncation_inside_a_batch_splits_it():
    log = sample()
    log.truncate_to(4)
    assert log.last == OffsetAndEpoch(4, 3)
    assert log.epoch_history() == [(1, 0), (3, 3)]
    log.truncate_to(3)
    assert log.last == OffsetAndEpoch(3, 1)
    with pytest.raises(ValueError):
        RaftLog(Snapshot(OffsetAndEpoch(2, 1), b"")).truncate_to(1)


def test_appends_must_be_contiguous_and_epochs_monotonic():
    log = sample()
    with pytest.raises(ValueError):
        log.append(Batch(7, 4, (b"x",)))
    with pytest.raises(ValueError):
        log.append(Batch(6, 3, (b"x",)))
    log.append(Batch(6, 4, (b"g",)))
    assert log.epoch_history()[-1] == (4, 5)


def test_read_and_batches_in():
    log = sample()
    assert [b.base_offset for b in log.read(1, 10 ** 6)] == [1, 2, 3, 5]
    assert log.read(1, 0)[0].records == (b"b",)  # at least one batch
    assert log.read(6, 100) == ()
    assert [b.base_offset for b in log.batches_in(0, 5)] == [0, 2, 3]
    assert [b.base_offset for b in log.batches_in(2, 4)] == [2]


def test_trim_prefix_and_install_snapshot():
    log = sample()
    snap = Snapshot(OffsetAndEpoch(4, 3), b"s")
    log.trim_prefix(snap)
    assert log.start_offset == 4 and log.batches[0] == Batch(4, 3, (b"e",))
    assert log.epoch_history() == [(3, 4), (4, 5)]
    with pytest.raises(ValueError):
        log.trim_prefix(Snapshot(OffsetAndEpoch(9, 4), b""))
    log.install_snapshot(Snapshot(OffsetAndEpoch(10, 5), b"t"))
    assert log.last == OffsetAndEpoch(10, 5) and log.batches == ()


def test_restore_skips_what_the_snapshot_covers():
    log = RaftLog(Snapshot(OffsetAndEpoch(1, 1), b""), [Batch(0, 1, (b"a", b"b"))])
    assert log.start_offset == 1 and log.batches == (Batch(1, 1, (b"b",)),)
