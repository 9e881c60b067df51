"""broker.producer_state: idempotent-producer dedup, fencing, wraparound, rebuild, snapshots."""

from __future__ import annotations


import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.producer_state import (
    BATCHES_TO_RETAIN,
    INT32_MAX,
    ProducerSnapshotError,
    ProducerStateManager,
    Verdict,
    snapshot_file_name,
)
from kraft.protocol.error_codes import ErrorCode
from kraft.records.header import CONTROL_FLAG, HEADER_SIZE, LOG_OVERHEAD, BatchHeader


def batch(pid: int, epoch: int, seq: int, count: int = 1, *, offset: int = 0, ts: int = 1000,
          control: bool = False) -> BatchHeader:
    """A real v2 batch header (records are never looked at)."""
    return BatchHeader(
        base_offset=offset, batch_length=HEADER_SIZE - LOG_OVERHEAD + 10 * count,
        partition_leader_epoch=0, magic=2, crc=0, attributes=CONTROL_FLAG if control else 0,
        last_offset_delta=count - 1, base_timestamp=ts, max_timestamp=ts, producer_id=pid,
        producer_epoch=epoch, base_sequence=seq, records_count=count)


class Leader:
    """A leader's append path: check, assign offsets, update; remembers the log."""

    def __init__(self):
        self.state = ProducerStateManager()
        self.log: list[BatchHeader] = []
        self.next_offset = 0

    def produce(self, b: BatchHeader):
        result = self.state.check(b)
        if result.verdict is Verdict.NEW:
            stored = b._replace(base_offset=self.next_offset)
            self.state.update(stored, self.next_offset)
            self.log.append(stored)
            self.next_offset = stored.next_offset
        return result


def test_in_sequence_batches_are_new_and_retries_return_the_original_offsets():
    leader = Leader()
    assert leader.produce(batch(7, 0, 0, 3)).verdict is Verdict.NEW  # offsets 0..2
    assert leader.produce(batch(1, 0, 0, 10)).verdict is Verdict.NEW  # another producer, 3..12
    assert leader.produce(batch(7, 0, 3, 2)).verdict is Verdict.NEW  # 13..14
    dup = leader.produce(batch(7, 0, 0, 3))
    assert (dup.verdict, dup.first_offset, dup.last_offset) == (Verdict.DUPLICATE, 0, 2)
    assert dup.error_code is ErrorCode.NONE
    dup = leader.produce(batch(7, 0, 3, 2))
    assert (dup.first_offset, dup.last_offset) == (13, 14)
    assert leader.next_offset == 15  # nothing appended twice


def test_only_the_last_five_batches_are_deduplicated():
    leader = Leader()
    for seq in range(7):
        leader.produce(batch(7, 0, seq))
    assert len(leader.state.get(7).batches) == BATCHES_TO_RETAIN
    for seq in range(2, 7):
        assert leader.produce(batch(7, 0, seq)).verdict is Verdict.DUPLICATE
    for seq in (0, 1):  # fell out of the window: Kafka answers out of order
        assert leader.produce(batch(7, 0, seq)).verdict is Verdict.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_partial_overlap_is_not_a_duplicate():
    leader = Leader()
    leader.produce(batch(7, 0, 0, 3))
    result = leader.produce(batch(7, 0, 0, 2))
    assert result.verdict is Verdict.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert result.error_code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_gaps_are_out_of_order():
    leader = Leader()
    leader.produce(batch(7, 0, 0, 3))
    assert leader.produce(batch(7, 0, 4)).verdict is Verdict.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert leader.produce(batch(7, 0, 3)).verdict is Verdict.NEW


def test_producer_epochs_fence_and_reset_sequences():
    leader = Leader()
    leader.produce(batch(7, 3, 0, 2))
    old = leader.produce(batch(7, 2, 2))
    assert old.verdict is Verdict.INVALID_PRODUCER_EPOCH
    assert old.error_code is ErrorCode.INVALID_PRODUCER_EPOCH
    # A newer epoch must start again at sequence 0.
    assert leader.produce(batch(7, 4, 2)).verdict is Verdict.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert leader.produce(batch(7, 4, 0)).verdict is Verdict.NEW
    assert leader.state.get(7).producer_epoch == 4
    assert [b.first_seq for b in leader.state.get(7).batches] == [0]  # old epoch's batches gone
    # A retry from the fenced epoch is not recognised as a duplicate any more.
    assert leader.produce(batch(7, 3, 0, 2)).verdict is Verdict.INVALID_PRODUCER_EPOCH


def test_an_unknown_producer_is_accepted_at_any_sequence():
    # Modern Kafka (KIP-360): no UNKNOWN_PRODUCER_ID; the state may have been expired.
    leader = Leader()
    assert leader.produce(batch(9, 5, 42, 3)).verdict is Verdict.NEW
    assert leader.produce(batch(9, 5, 45)).verdict is Verdict.NEW
    assert leader.produce(batch(9, 5, 47)).verdict is Verdict.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_sequences_wrap_after_int32_max():
    leader = Leader()
    leader.produce(batch(7, 0, INT32_MAX - 1, 2))  # ends exactly at Int32 max
    assert leader.state.get(7).last_seq == INT32_MAX
    assert leader.produce(batch(7, 0, 0)).verdict is Verdict.NEW
    assert leader.produce(batch(7, 0, INT32_MAX - 1, 4)).verdict is Verdict.OUT_OF_ORDER_SEQUENCE_NUMBER
    # A batch spanning the wrap: sequences INT32_MAX-1 .. 1.
    other = Leader()
    other.produce(batch(8, 0, INT32_MAX - 2))
    assert other.produce(batch(8, 0, INT32_MAX - 1, 4)).verdict is Verdict.NEW
    assert other.state.get(8).last_seq == 1
    assert other.produce(batch(8, 0, INT32_MAX - 1, 4)).verdict is Verdict.DUPLICATE
    assert other.produce(batch(8, 0, 2)).verdict is Verdict.NEW


def test_non_idempotent_batches_are_not_tracked():
    leader = Leader()
    assert leader.produce(batch(-1, -1, -1, 5)).verdict is Verdict.NEW
    assert leader.produce(batch(-1, -1, -1, 5)).verdict is Verdict.NEW
    assert len(leader.state) == 0
    assert leader.state.map_end_offset == 10


def test_check_append_validates_a_request_batch_by_batch_without_changing_state():
    state = ProducerStateManager()
    state.update(batch(7, 0, 0, 3, offset=0))
    assert state.check_append([batch(7, 0, 3, 2), batch(7, 0, 5, 1)]).verdict is Verdict.NEW
    assert state.check_append([batch(7, 0, 3, 2), batch(7, 0, 6)]).verdict is \
        Verdict.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert state.check_append([batch(7, 1, 0), batch(7, 0, 3)]).verdict is Verdict.INVALID_PRODUCER_EPOCH
    assert state.get(7).last_seq == 2 and state.get(7).producer_epoch == 0


def test_control_batches_bump_the_epoch_without_sequence_checks():
    state = ProducerStateManager()
    state.update(batch(7, 0, 0, 3, offset=0))
    marker = batch(7, 1, -1, 1, offset=3, control=True)
    assert state.check(marker).verdict is Verdict.NEW
    state.update(marker)
    assert state.get(7).producer_epoch == 1 and not state.get(7).batches
    assert state.check(batch(7, 0, 3)).verdict is Verdict.INVALID_PRODUCER_EPOCH


def test_expire_forgets_idle_producers():
    state = ProducerStateManager()
    state.update(batch(1, 0, 0, ts=1_000, offset=0))
    state.update(batch(2, 0, 0, ts=5_000, offset=1))
    assert state.expire(now_ms=10_000, producer_id_expiration_ms=6_000) == [1]
    assert 1 not in state and 2 in state
    assert state.expire(now_ms=10_999, producer_id_expiration_ms=6_000) == []
    assert state.expire(now_ms=11_000, producer_id_expiration_ms=6_000) == [2]


# ------------------------------------------------------ rebuild and snapshots


def producer_ops():
    """Client sends: fresh batches, retries of earlier ones, epoch bumps, stale epochs."""
    kinds = st.sampled_from(["next", "retry", "bump", "stale", "gap"])
    return st.lists(st.tuples(st.sampled_from([1, 2, 3]), kinds, st.integers(1, 4), st.integers(0, 6)),
                    max_size=40)


def run(ops) -> Leader:
    """Play client sends against a leader, asserting each verdict; returns the leader."""
    leader = Leader()
    clients = {}  # pid -> [epoch, next seq, batches sent in this epoch]
    for step, (pid, kind, count, back) in enumerate(ops):
        epoch, seq, sent = clients.setdefault(pid, [0, 0, []])
        if not sent and kind != "bump":
            kind = "next"  # retries, gaps and stale epochs need an earlier send
        if kind == "retry":
            index = max(0, len(sent) - 1 - back)
            b = sent[index]
            result = leader.produce(b)
            if len(sent) - 1 - index < BATCHES_TO_RETAIN:
                assert result.verdict is Verdict.DUPLICATE
                original = next(x for x in leader.log if (x.producer_id, x.producer_epoch, x.base_sequence)
                                == (pid, b.producer_epoch, b.base_sequence))
                assert result.first_offset == original.base_offset
                assert result.last_offset == original.last_offset
            else:
                assert result.verdict is Verdict.OUT_OF_ORDER_SEQUENCE_NUMBER
        elif kind == "stale" and epoch > 0:
            assert leader.produce(batch(pid, epoch - 1, seq, count, ts=step)).verdict is \
                Verdict.INVALID_PRODUCER_EPOCH
        elif kind == "gap":
            result = leader.produce(batch(pid, epoch, (seq + 1) % 2 ** 31, count, ts=step))
            assert result.verdict is Verdict.OUT_OF_ORDER_SEQUENCE_NUMBER
        else:
            if kind == "bump":
                epoch, seq, sent = epoch + 1, 0, []
            b = batch(pid, epoch, seq, count, ts=step)
            assert leader.produce(b).verdict is Verdict.NEW
            clients[pid] = [epoch, (seq + count) % 2 ** 31, sent + [b]]
    return leader


@settings(max_examples=150, deadline=None)
@given(producer_ops())
def test_rebuilding_from_the_logs_headers_equals_the_live_state(ops):
    leader = run(ops)
    rebuilt = ProducerStateManager()
    rebuilt.truncate_and_reload(leader.log)
    assert rebuilt.same_state_as(leader.state)
    assert rebuilt.map_end_offset == leader.state.map_end_offset == leader.next_offset


@settings(max_examples=150, deadline=None)
@given(producer_ops(), st.data())
def test_snapshot_plus_replay_equals_the_live_state(ops, data):
    leader = run(ops)
    cut = data.draw(st.integers(0, len(leader.log)))
    partial = ProducerStateManager()
    partial.truncate_and_reload(leader.log[:cut])
    snap = partial.to_snapshot_bytes()
    assert ProducerStateManager.from_snapshot_bytes(snap).same_state_as(partial)
    restored = ProducerStateManager()
    restored.truncate_and_reload(leader.log, snapshot=snap)
    assert restored.same_state_as(leader.state)
    assert restored.map_end_offset == leader.state.map_end_offset


@settings(max_examples=100, deadline=None)
@given(producer_ops(), st.data())
def test_truncate_and_reload_to_an_offset_forgets_the_tail(ops, data):
    leader = run(ops)
    end = data.draw(st.integers(0, leader.next_offset))
    kept = [b for b in leader.log if b.next_offset <= end]
    expected = ProducerStateManager()
    for b in kept:
        expected.update(b)
    leader.state.truncate_and_reload(leader.log, end_offset=end)
    assert leader.state.same_state_as(expected)
    assert leader.state.map_end_offset == end


def test_a_snapshot_beyond_the_log_end_is_refused():
    state = ProducerStateManager()
    state.update(batch(7, 0, 0, 5, offset=0))
    with pytest.raises(ProducerSnapshotError):
        ProducerStateManager().truncate_and_reload([], snapshot=state.to_snapshot_bytes(), end_offset=3)


def test_corrupt_snapshots_are_typed_errors():
    state = ProducerStateManager()
    for seq in range(0, 12, 2):
        state.update(batch(7, 0, seq, 2, offset=seq))
    good = state.to_snapshot_bytes()
    assert ProducerStateManager.from_snapshot_bytes(good).same_state_as(state)
    for i in range(len(good)):
        flipped = bytearray(good)
        flipped[i] ^= 0x40
        with pytest.raises(ProducerSnapshotError):
            ProducerStateManager.from_snapshot_bytes(bytes(flipped))
    for n in (0, 5, 17, len(good) - 1):
        with pytest.raises(ProducerSnapshotError):
            ProducerStateManager.from_snapshot_bytes(good[:n])
    with pytest.raises(ProducerSnapshotError):
        ProducerStateManager.from_snapshot_bytes(good + b"\x00")


def test_snapshot_file_name_is_kafkas():
    assert snapshot_file_name(1234) == "00000000000000001234.snapshot"
