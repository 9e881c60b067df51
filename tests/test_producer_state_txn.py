"""broker.producer_state, transactions (KIP-98): ongoing transactions, the first unstable
offset and LSO, markers, admission checks, and rebuild/snapshot/truncation keeping them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.producer_state import CompletedTxn, ProducerStateManager, TxnMarker, Verdict
from kraft.records.header import CONTROL_FLAG, HEADER_SIZE, LOG_OVERHEAD, TRANSACTIONAL_FLAG, BatchHeader

COMMIT, ABORT = TxnMarker(True, 0), TxnMarker(False, 0)


def data(pid: int, offset: int, count: int = 1, *, epoch: int = 0, seq: int = 0, txn: bool = True) -> BatchHeader:
    return BatchHeader(
        base_offset=offset, batch_length=HEADER_SIZE - LOG_OVERHEAD + 10 * count, partition_leader_epoch=0,
        magic=2, crc=0, attributes=TRANSACTIONAL_FLAG if txn else 0, last_offset_delta=count - 1,
        base_timestamp=1000, max_timestamp=1000, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
        records_count=count)


def marker(pid: int, offset: int, *, epoch: int = 0) -> BatchHeader:
    return BatchHeader(
        base_offset=offset, batch_length=HEADER_SIZE - LOG_OVERHEAD + 10, partition_leader_epoch=0, magic=2,
        crc=0, attributes=TRANSACTIONAL_FLAG | CONTROL_FLAG, last_offset_delta=0, base_timestamp=1000,
        max_timestamp=1000, producer_id=pid, producer_epoch=epoch, base_sequence=-1, records_count=1)


def test_a_transaction_holds_the_lso_at_its_first_offset_until_its_marker_is_replicated():
    state = ProducerStateManager()
    state.update(data(1, 0, 3))
    state.update(data(2, 3, 2, txn=False))  # an idempotent producer's data does not hold it
    assert state.first_unstable_offset == 0
    assert state.last_stable_offset(high_watermark=5) == 0
    state.update(data(1, 5, 1, seq=3))  # the same transaction goes on
    assert state.ongoing_txns == {0: 1}
    completed = state.update(marker(1, 6), marker=COMMIT)
    assert completed == CompletedTxn(1, 0, 6, is_aborted=False)
    assert state.ongoing_txns == {}
    assert state.last_stable_offset(high_watermark=6) == 0  # the marker is not replicated yet
    assert state.last_stable_offset(high_watermark=7) == 7
    assert state.first_unstable_offset is None


def test_the_lso_is_the_earliest_of_several_transactions_and_never_past_the_hw():
    state = ProducerStateManager()
    state.update(data(1, 10))
    state.update(data(2, 11))
    state.update(data(3, 12))
    assert state.last_stable_offset(high_watermark=5) == 5
    assert state.last_stable_offset(high_watermark=13) == 10
    aborted = state.update(marker(1, 13), marker=ABORT)
    assert aborted == CompletedTxn(1, 10, 13, is_aborted=True)
    assert state.stable_offset_after(aborted) == 11  # what the .txnindex entry records
    assert state.last_stable_offset(high_watermark=14) == 11
    state.update(marker(2, 14), marker=COMMIT)
    state.update(marker(3, 15), marker=COMMIT)
    assert state.last_stable_offset(high_watermark=16) == 16


def test_a_marker_without_a_transaction_completes_nothing_but_records_the_coordinator_epoch():
    state = ProducerStateManager()
    assert state.update(marker(9, 4), marker=TxnMarker(False, 3)) is None
    assert state.first_unstable_offset is None
    assert state.get(9).coordinator_epoch == 3


def test_admission_of_transactional_batches_and_markers():
    state = ProducerStateManager()
    state.update(data(1, 0, epoch=2))
    result = state.check(data(1, 1, txn=False, epoch=2, seq=1))
    assert result.verdict is Verdict.INVALID_TXN_STATE
    assert state.check(data(1, 1, epoch=2, seq=1)).verdict is Verdict.NEW
    assert state.check(data(1, 1, epoch=1, seq=1)).verdict is Verdict.INVALID_PRODUCER_EPOCH
    assert state.check_marker(1, 1, 0).verdict is Verdict.INVALID_PRODUCER_EPOCH
    assert state.check_marker(1, 3, 0).verdict is Verdict.NEW  # the coordinator bumped the epoch
    state.update(marker(1, 1, epoch=2), marker=TxnMarker(True, 7))
    assert state.check_marker(1, 2, 6).verdict is Verdict.TRANSACTION_COORDINATOR_FENCED
    assert state.check_marker(1, 2, 7).verdict is Verdict.NEW
    assert state.check_marker(42, 0, 0).verdict is Verdict.NEW  # unknown producer
    # Once the transaction ended, plain idempotent data is fine again.
    assert state.check(data(1, 2, txn=False, epoch=2, seq=1)).verdict is Verdict.NEW
    # Within one request: a transactional batch then a plain one.
    assert state.check_append([data(1, 2, epoch=2, seq=1), data(1, 3, txn=False, epoch=2, seq=2)]).verdict \
        is Verdict.INVALID_TXN_STATE


def test_a_producer_with_an_ongoing_transaction_does_not_expire():
    state = ProducerStateManager()
    state.update(data(1, 0))
    state.update(data(2, 1, txn=False))
    assert state.expire(now_ms=10**9, producer_id_expiration_ms=1) == [2]
    state.update(marker(1, 2), marker=COMMIT)
    assert state.expire(now_ms=10**9, producer_id_expiration_ms=1) == [1]


# --------------------------------------------------------------- a model


def transaction_logs():
    """A log of three transactional producers and one idempotent producer: data batches
    and COMMIT/ABORT markers in random order, as ``(header, marker)`` pairs."""
    return st.lists(st.tuples(st.sampled_from([1, 2, 3, 4]), st.sampled_from(["data", "commit", "abort"]),
                              st.integers(1, 3)), max_size=40)


def build(ops):
    log, offset, seqs = [], 0, {}
    for pid, kind, count in ops:
        if kind == "data" or pid == 4:
            seq = seqs.get(pid, 0)
            log.append((data(pid, offset, count, seq=seq, txn=pid != 4), None))
            seqs[pid] = seq + count
            offset += count
        else:
            log.append((marker(pid, offset), COMMIT if kind == "commit" else ABORT))
            offset += 1
    return log


def model(log, end=None):
    """Ongoing transactions (first offset -> pid) and aborted ones (pid, first, last)."""
    ongoing, aborted = {}, []
    for h, m in log:
        if end is not None and h.next_offset > end:
            break
        if not h.is_control:
            if h.is_transactional and h.producer_id not in ongoing.values():
                ongoing[h.base_offset] = h.producer_id
            continue
        first = next((f for f, p in ongoing.items() if p == h.producer_id), None)
        if first is None:
            continue
        del ongoing[first]
        if not m.commit:
            aborted.append((h.producer_id, first, h.base_offset))
    return ongoing, aborted


def replay(log, **kwargs) -> tuple[ProducerStateManager, list]:
    state, aborted = ProducerStateManager(), []
    state.truncate_and_reload(log, on_completed=lambda t, lso: aborted.append(t) if t.is_aborted else None,
                              **kwargs)
    return state, [(t.producer_id, t.first_offset, t.last_offset) for t in aborted]


@settings(max_examples=150, deadline=None)
@given(transaction_logs())
def test_live_updates_match_the_model_and_the_lso_is_the_earliest_open_transaction(ops):
    log = build(ops)
    state = ProducerStateManager()
    aborted = []
    for i, (h, m) in enumerate(log):
        done = state.update(h, marker=m)
        if done is not None and done.is_aborted:
            aborted.append((done.producer_id, done.first_offset, done.last_offset))
        ongoing, expected_aborted = model(log[:i + 1])
        end = h.next_offset
        assert state.ongoing_txns == ongoing
        assert state.last_stable_offset(high_watermark=end) == min([*ongoing, end])
        assert aborted == expected_aborted


@settings(max_examples=150, deadline=None)
@given(transaction_logs(), st.data())
def test_rebuild_snapshot_and_truncation_keep_the_transactions(ops, draw):
    log = build(ops)
    live = ProducerStateManager()
    for h, m in log:
        live.update(h, marker=m)
    rebuilt, _ = replay(log)
    assert rebuilt.same_state_as(live) and rebuilt.ongoing_txns == live.ongoing_txns
    cut = draw.draw(st.integers(0, len(log)))
    partial, _ = replay(log[:cut])
    snap = partial.to_snapshot_bytes()
    loaded = ProducerStateManager.from_snapshot_bytes(snap)
    assert loaded.same_state_as(partial) and loaded.ongoing_txns == partial.ongoing_txns
    restored, _ = replay(log, snapshot=snap)
    assert restored.same_state_as(live) and restored.ongoing_txns == live.ongoing_txns
    end_offset = log[-1][0].next_offset if log else 0
    end = draw.draw(st.integers(0, end_offset))
    live.truncate_and_reload(log, end_offset=end)
    ongoing, _ = model(log, end)
    assert live.ongoing_txns == ongoing
    assert live.last_stable_offset(high_watermark=end) == min([*ongoing, end])


@pytest.mark.parametrize("cut", [0, 1, 2, 3])
def test_replay_reports_the_aborted_transactions_for_the_txnindex(cut):
    log = [(data(1, 0, 2), None), (data(2, 2), None), (marker(1, 3), ABORT), (marker(2, 4), ABORT)]
    _, aborted = replay(log)
    assert aborted == [(1, 0, 3), (2, 2, 4)]
    _, aborted = replay(log, end_offset=[0, 3, 4, 5][cut])
    assert aborted == [(1, 0, 3), (2, 2, 4)][:max(cut - 1, 0)]


def test_sequences_of_an_ended_transaction_sent_again_are_out_of_order_not_duplicates():
    """Seen in a txn fault run: librdkafka purged a message it had sent (the leader was
    killed), aborted, and gave the next transaction's first message the purged one's
    sequence.  Acknowledging it as a duplicate put the new record at the aborted one's
    offset: acknowledged, committed, never readable."""
    state = ProducerStateManager()
    state.update(data(1, 0, seq=0))
    state.update(marker(1, 1), marker=COMMIT)
    state.update(data(1, 2, seq=1))  # the sequence the producer will reuse
    assert state.check(data(1, 9, seq=1)).verdict is Verdict.DUPLICATE  # a retry while it is ongoing
    state.update(marker(1, 3), marker=ABORT)
    result = state.check(data(1, 9, seq=1))
    assert result.verdict is Verdict.OUT_OF_ORDER_SEQUENCE_NUMBER, result
    assert state.check(data(1, 9, seq=2)).verdict is Verdict.NEW  # sequences that go on are fine
    # an idempotent (non-transactional) producer's retries are unchanged
    state.update(data(5, 10, seq=0, txn=False))
    assert state.check(data(5, 11, seq=0, txn=False)).verdict is Verdict.DUPLICATE
