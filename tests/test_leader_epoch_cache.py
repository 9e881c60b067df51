"""broker.leader_epoch_cache: KIP-101 epoch history, end-offset queries, checkpoint file.

The property tests describe a log as one epoch per offset (non-decreasing) and check the
cache against answers computed from that offset-level log directly.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.leader_epoch_cache import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochCache,
    LeaderEpochCheckpointError,
)
from broker.leader_epoch_checkpoint import LeaderEpochCheckpointFile

REPO = Path(__file__).resolve().parents[1]
UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def cache_of(*pairs) -> LeaderEpochCache:
    return LeaderEpochCache(pairs)


# ------------------------------------------------------------------ assign


def test_assign_appends_new_epochs_and_ignores_repeats():
    c = LeaderEpochCache()
    assert c.latest_epoch == UNDEFINED_EPOCH
    assert c.assign(0, 0)
    assert not c.assign(0, 5)  # same epoch, later offset: nothing new
    assert c.assign(2, 10)
    assert c.entries == (EpochEntry(0, 0), EpochEntry(2, 10))
    assert c.latest_epoch == 2
    assert c.earliest_entry == EpochEntry(0, 0)


def test_assign_below_previous_start_truncates_those_entries():
    c = cache_of((0, 0), (1, 10), (2, 20))
    assert c.assign(3, 15)
    assert c.entries == (EpochEntry(0, 0), EpochEntry(1, 10), EpochEntry(3, 15))
    # The same epoch at an earlier offset moves its start back.
    assert c.assign(3, 12)
    assert c.entries[-1] == EpochEntry(3, 12)
    # An older epoch removes every entry with an epoch at least as large.
    assert c.assign(1, 11)
    assert c.entries == (EpochEntry(0, 0), EpochEntry(1, 11))


def test_assign_rejects_negative_values_and_assign_from_batch_skips_old_epochs():
    c = cache_of((3, 5))
    with pytest.raises(ValueError):
        c.assign(-1, 0)
    assert not c.assign_from_batch(-1, 9)  # a batch without a leader epoch
    assert not c.assign_from_batch(2, 9)
    assert not c.assign_from_batch(3, 9)
    assert c.assign_from_batch(4, 9)
    assert c.entries == (EpochEntry(3, 5), EpochEntry(4, 9))


# ---------------------------------------------------------- end_offset_for


def test_end_offset_for_follows_kafka():
    c = cache_of((1, 0), (3, 10), (6, 25))
    leo = 40
    assert c.end_offset_for(6, leo) == (6, 40)  # the latest epoch ends at the LEO
    assert c.end_offset_for(3, leo) == (3, 25)
    assert c.end_offset_for(4, leo) == (3, 25)  # unknown epoch: the largest one below it
    assert c.end_offset_for(5, leo) == (3, 25)
    assert c.end_offset_for(1, leo) == (1, 10)
    assert c.end_offset_for(2, leo) == (1, 10)
    assert c.end_offset_for(7, leo) == UNDEFINED  # newer than anything known
    assert c.end_offset_for(UNDEFINED_EPOCH, leo) == UNDEFINED
    # Below the earliest epoch (its data deleted): Kafka answers with the requested epoch
    # and the earliest start, so a follower truncates to where the leader's data begins.
    assert c.end_offset_for(0, leo) == (0, 0)
    assert cache_of((2, 7)).end_offset_for(1, 9) == (1, 7)
    assert LeaderEpochCache().end_offset_for(0, 10) == UNDEFINED


def epochs_log():
    """A log as a list of epochs, one per offset, non-decreasing."""
    return st.lists(st.tuples(st.integers(0, 3), st.integers(1, 4)), max_size=8).map(
        lambda runs: _expand(runs))


def _expand(runs):
    log, epoch = [], 0
    for gap, length in runs:
        epoch += gap
        log += [epoch] * length
    return log


def build(log) -> LeaderEpochCache:
    c = LeaderEpochCache()
    for offset, epoch in enumerate(log):
        c.assign_from_batch(epoch, offset)
    return c


@settings(max_examples=200, deadline=None)
@given(epochs_log(), st.integers(-1, 30))
def test_end_offset_for_matches_the_offset_level_log(log, requested):
    c = build(log)
    got = c.end_offset_for(requested, len(log))
    older = [e for e in log if e <= requested]
    if requested < 0 or not log or requested > log[-1]:
        assert got == UNDEFINED
    elif requested == log[-1]:
        assert got == (requested, len(log))
    elif not older:
        assert got == (requested, 0)
    else:
        # The largest epoch <= requested, ending after its last offset.
        assert got == (older[-1], len(older))


@settings(max_examples=200, deadline=None)
@given(epochs_log(), st.data())
def test_truncate_from_end_equals_a_cache_of_the_prefix(log, data):
    end = data.draw(st.integers(0, len(log)))
    c = build(log)
    c.truncate_from_end(end)
    assert c == build(log[:end])


@settings(max_examples=200, deadline=None)
@given(epochs_log(), st.data())
def test_truncate_from_start_keeps_epochs_of_remaining_offsets(log, data):
    start = data.draw(st.integers(0, len(log)))
    c = build(log)
    c.truncate_from_start(start)
    for offset in range(start, len(log)):
        assert c.epoch_for_offset(offset) == log[offset]
    if start < len(log):
        assert c.earliest_entry.start_offset == start
    for a, b in zip(c.entries, c.entries[1:]):
        assert a.epoch < b.epoch and a.start_offset < b.start_offset


def test_truncations_on_examples():
    c = cache_of((0, 0), (2, 10), (5, 20))
    assert not c.truncate_from_end(21)
    assert c.truncate_from_end(20)
    assert c.entries == (EpochEntry(0, 0), EpochEntry(2, 10))
    c = cache_of((0, 0), (2, 10), (5, 20))
    assert c.truncate_from_start(15)
    assert c.entries == (EpochEntry(2, 15), EpochEntry(5, 20))
    assert not c.truncate_from_start(15)
    assert c.truncate_from_start(20)
    assert c.entries == (EpochEntry(5, 20),)


# -------------------------------------------------------------- checkpoint


def test_checkpoint_text_is_kafkas_format(tmp_path):
    c = cache_of((0, 0), (4, 120))
    path = tmp_path / "leader-epoch-checkpoint"
    LeaderEpochCheckpointFile(path).write(c)
    assert path.read_text() == "0\n2\n0 0\n4 120\n"
    assert LeaderEpochCheckpointFile(path).read() == c
    assert [p.name for p in tmp_path.iterdir()] == ["leader-epoch-checkpoint"]  # no temp file left
    LeaderEpochCheckpointFile(path).write(LeaderEpochCache())
    assert path.read_text() == "0\n0\n"
    assert len(LeaderEpochCheckpointFile(path).read()) == 0


def test_missing_checkpoint_is_an_empty_cache(tmp_path):
    assert len(LeaderEpochCheckpointFile(tmp_path / "nope").read()) == 0


@settings(max_examples=100, deadline=None)
@given(epochs_log())
def test_checkpoint_round_trip(log):
    c = build(log)
    assert LeaderEpochCache.from_checkpoint_bytes(c.to_checkpoint_bytes()) == c


@pytest.mark.parametrize("text, where", [
    ("", ":1:"),
    ("1\n0\n", ":1:"),
    ("0\n", ":2:"),
    ("0\nx\n", ":2:"),
    ("0\n2\n0 0\n", ":2:"),
    ("0\n1\n0 0\n3 9\n", ":2:"),
    ("0\n1\n0\n", ":3:"),
    ("0\n1\n0 zero\n", ":3:"),
    ("0\n1\n-1 0\n", ":3:"),
    ("0\n2\n3 10\n2 20\n", ":4:"),  # epochs must increase
    ("0\n2\n2 10\n3 10\n", ":4:"),  # start offsets must increase
    ("0\n1\n0 0 0\n", ":3:"),
])
def test_corrupt_checkpoint_is_a_typed_error_naming_the_line(tmp_path, text, where):
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text(text)
    with pytest.raises(LeaderEpochCheckpointError) as info:
        LeaderEpochCheckpointFile(path).read()
    assert str(path) + where in str(info.value)


def test_binary_garbage_is_a_typed_error():
    with pytest.raises(LeaderEpochCheckpointError):
        LeaderEpochCache.from_checkpoint_bytes(b"\xff\xfe\x00")


# ---------------------------------------------------------------- sans-IO

SANS_IO_MODULES = ["broker/leader_epoch_cache.py", "broker/producer_state.py",
                   "broker/partition_state.py", "broker/partition_state_types.py"]
FORBIDDEN = {"socket", "trio", "time", "asyncio", "threading", "select", "selectors", "random", "os",
             "pathlib", "io"}


@pytest.mark.parametrize("module", SANS_IO_MODULES)
def test_replication_cores_are_sans_io(module):
    tree = ast.parse((REPO / module).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & FORBIDDEN
