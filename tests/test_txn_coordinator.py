"""The transaction coordinator core (broker/txn/coordinator.py): Kafka's state machine for
one transactional id, fencing, timeouts, expiration, the delayed-EndTxn guard, and the
``__transaction_state`` records it writes (replayed they give the same state back)."""

import ast
import pathlib

import pytest

from broker.txn.coordinator import VALID_PREVIOUS, MarkerJob, TransactionCoordinator, TxnConfig
from broker.txn.log_records import (TxnLogValue, TxnState, decode_key, decode_value, encode_key, encode_value,
                                    partition_for, replay)
from kraft.protocol.error_codes import ErrorCode as E

S = TxnState
TID = "txn-a"
T0 = 1_000_000


def make(**config):
    ids = iter(range(5000, 6000))
    c = TransactionCoordinator(TxnConfig(num_partitions=4, **config), new_producer_id=lambda: next(ids))
    c.begin_loading(c.partition_of(TID), 7)
    assert c.load(c.partition_of(TID), 7, {}) == []
    return c


def commit(c, result, now=T0):
    """Apply ``result``'s write as committed; returns write_done's result."""
    assert result.write is not None, result
    return c.write_done(result.write, E.NONE, now)


def init(c, now=T0, timeout=60_000):
    r = c.init_producer_id(TID, timeout, now)
    assert r.error == E.NONE
    done = commit(c, r, now)
    assert done.error == E.NONE
    return done.producer_id, done.producer_epoch


def ongoing(c, pid, epoch, now=T0, parts=(("t", 0), ("t", 1))):
    done = commit(c, c.add_partitions(TID, pid, epoch, set(parts), now), now)
    assert done.error == E.NONE
    return done


def finish(c, pid, epoch, committed, now=T0):
    r = c.end_txn(TID, pid, epoch, committed, now)
    done = commit(c, r, now)
    assert done.error == E.NONE and len(done.markers) == 1
    job = done.markers[0]
    completed = commit(c, c.markers_done(job, now), now)
    assert completed.error == E.NONE and completed.markers == []
    return job


def state(c):
    return c.txns[TID].state


# ------------------------------------------------------------------ the happy path


def test_init_creates_the_id_with_epoch_zero_and_writes_empty():
    c = make()
    r = c.init_producer_id(TID, 60_000, T0)
    assert r.write.value.state == S.EMPTY and r.write.value.producer_epoch == 0
    assert r.write.coordinator_epoch == 7 and r.write.partition == c.partition_of(TID)
    done = commit(c, r)
    assert (done.producer_id, done.producer_epoch) == (5000, 0)
    assert state(c) == S.EMPTY


def test_commit_walks_ongoing_prepare_commit_complete_commit():
    c = make()
    pid, epoch = init(c)
    ongoing(c, pid, epoch)
    assert state(c) == S.ONGOING and c.txns[TID].value.start_ms == T0
    r = c.end_txn(TID, pid, epoch, True, T0 + 5)
    assert r.write.value.state == S.PREPARE_COMMIT
    done = commit(c, r)
    assert done.markers == [MarkerJob(TID, pid, epoch, True, 7, frozenset({("t", 0), ("t", 1)}))]
    assert state(c) == S.PREPARE_COMMIT
    complete = c.markers_done(done.markers[0], T0 + 9)
    assert complete.write.value.state == S.COMPLETE_COMMIT and complete.write.value.partitions == frozenset()
    assert not complete.write.reply
    commit(c, complete)
    assert state(c) == S.COMPLETE_COMMIT


def test_abort_walks_prepare_abort_complete_abort():
    c = make()
    pid, epoch = init(c)
    ongoing(c, pid, epoch)
    job = finish(c, pid, epoch, False)
    assert not job.committed and state(c) == S.COMPLETE_ABORT


def test_adding_known_partitions_needs_no_write_and_new_ones_accumulate():
    c = make()
    pid, epoch = init(c)
    ongoing(c, pid, epoch, parts=[("t", 0)])
    assert c.add_partitions(TID, pid, epoch, {("t", 0)}, T0).write is None
    r = c.add_partitions(TID, pid, epoch, {("u", 3)}, T0 + 1)
    assert r.write.value.partitions == {("t", 0), ("u", 3)} and r.write.value.start_ms == T0


def test_next_transaction_starts_from_no_partitions():
    c = make()
    pid, epoch = init(c)
    ongoing(c, pid, epoch)
    finish(c, pid, epoch, True)
    r = c.add_partitions(TID, pid, epoch, {("x", 0)}, T0 + 100)
    assert r.write.value.partitions == {("x", 0)} and r.write.value.start_ms == T0 + 100


def test_every_write_respects_the_transition_table():
    c = make()
    pid, epoch = init(c)
    seen = []
    for committed in (True, False):
        w = c.add_partitions(TID, pid, epoch, {("t", 0)}, T0).write
        seen.append((state(c), w.value.state))
        commit(c, type("R", (), {"write": w})())
        r = c.end_txn(TID, pid, epoch, committed, T0)
        seen.append((state(c), r.write.value.state))
        job = commit(c, r).markers[0]
        w = c.markers_done(job, T0).write
        seen.append((state(c), w.value.state))
        commit(c, type("R", (), {"write": w})())
    for before, after in seen:
        assert before in VALID_PREVIOUS[after]


# ------------------------------------------------------------------ errors


def test_concurrent_requests_while_a_write_is_in_flight():
    c = make()
    pid, epoch = init(c)
    r = c.add_partitions(TID, pid, epoch, {("t", 0)}, T0)
    assert c.end_txn(TID, pid, epoch, True, T0).error == E.CONCURRENT_TRANSACTIONS
    assert c.init_producer_id(TID, 60_000, T0).error == E.CONCURRENT_TRANSACTIONS
    commit(c, r)
    assert c.end_txn(TID, pid, epoch, True, T0).write is not None


def test_failed_write_leaves_the_state_and_answers_the_error():
    c = make()
    pid, epoch = init(c)
    r = c.add_partitions(TID, pid, epoch, {("t", 0)}, T0)
    assert c.write_done(r.write, E.NOT_ENOUGH_REPLICAS, T0).error == E.NOT_ENOUGH_REPLICAS
    assert state(c) == S.EMPTY and c.txns[TID].pending is None


def test_unknown_id_wrong_producer_id_and_old_epoch():
    c = make()
    pid, epoch = init(c)
    assert c.add_partitions("nobody", pid, epoch, {("t", 0)}, T0).error in (
        E.INVALID_PRODUCER_ID_MAPPING, E.NOT_COORDINATOR)
    assert c.add_partitions(TID, pid + 1, epoch, {("t", 0)}, T0).error == E.INVALID_PRODUCER_ID_MAPPING
    assert c.end_txn(TID, pid, epoch - 1, True, T0).error == E.PRODUCER_FENCED


def test_end_txn_without_a_transaction_is_invalid_txn_state():
    c = make()
    pid, epoch = init(c)
    assert c.end_txn(TID, pid, epoch, True, T0).error == E.INVALID_TXN_STATE


def test_timeout_above_the_maximum_is_refused():
    c = make(max_timeout_ms=1000)
    assert c.init_producer_id(TID, 1001, T0).error == E.INVALID_TRANSACTION_TIMEOUT
    assert c.init_producer_id(TID, 0, T0).error == E.INVALID_TRANSACTION_TIMEOUT
    assert TID not in c.txns


def test_ownership_errors():
    c = TransactionCoordinator(TxnConfig(num_partitions=4))
    assert c.init_producer_id(TID, 1000, T0).error == E.NOT_COORDINATOR
    c.begin_loading(c.partition_of(TID), 1)
    assert c.init_producer_id(TID, 1000, T0).error == E.COORDINATOR_LOAD_IN_PROGRESS
    c.load(c.partition_of(TID), 1, {})
    assert c.init_producer_id(TID, 1000, T0).error == E.NONE


def test_write_made_under_an_older_coordinator_epoch_does_not_apply():
    c = make()
    pid, epoch = init(c)
    r = c.add_partitions(TID, pid, epoch, {("t", 0)}, T0)
    partition = c.partition_of(TID)
    c.unload(partition)
    c.begin_loading(partition, 8)
    c.load(partition, 8, {TID: TxnLogValue(pid, epoch, 60_000, S.EMPTY)})
    assert c.write_done(r.write, E.NONE, T0).error == E.NOT_COORDINATOR


# ------------------------------------------------------------------ fencing


def test_init_bumps_the_epoch_and_fences_the_old_producer():
    c = make()
    pid, epoch = init(c)
    pid2, epoch2 = init(c)
    assert (pid2, epoch2) == (pid, epoch + 1)
    assert c.add_partitions(TID, pid, epoch, {("t", 0)}, T0).error == E.PRODUCER_FENCED


def test_init_during_an_ongoing_transaction_aborts_it_with_a_bumped_epoch():
    c = make()
    pid, epoch = init(c)
    ongoing(c, pid, epoch)
    r = c.init_producer_id(TID, 60_000, T0 + 1)
    assert r.error == E.CONCURRENT_TRANSACTIONS
    assert r.write.value.state == S.PREPARE_ABORT and r.write.value.producer_epoch == epoch + 1
    assert not r.write.reply
    done = commit(c, r)
    job = done.markers[0]
    assert (job.committed, job.producer_epoch) == (False, epoch + 1)
    # the old producer is fenced at once, before the abort completes
    assert c.end_txn(TID, pid, epoch, True, T0).error == E.PRODUCER_FENCED
    assert c.init_producer_id(TID, 60_000, T0).error == E.CONCURRENT_TRANSACTIONS
    commit(c, c.markers_done(job, T0 + 2))
    assert state(c) == S.COMPLETE_ABORT
    assert init(c) == (pid, epoch + 2)


def test_exhausted_epoch_gets_a_new_producer_id():
    c = make()
    pid, _ = init(c)
    c.txns[TID].value = TxnLogValue(pid, 32766, 60_000, S.COMPLETE_COMMIT)
    new_pid, new_epoch = init(c)
    assert new_pid != pid and new_epoch == 0
    assert c.txns[TID].value.previous_producer_id == pid


def test_kip360_epoch_bump_with_the_expected_producer():
    c = make()
    pid, epoch = init(c)
    r = c.init_producer_id(TID, 60_000, T0, expected=(pid, epoch))
    done = commit(c, r)
    assert (done.producer_id, done.producer_epoch) == (pid, epoch + 1)
    # the same request retried (its answer was lost) gets the bumped epoch again, no write
    retry = c.init_producer_id(TID, 60_000, T0, expected=(pid, epoch))
    assert retry.write is None and (retry.producer_id, retry.producer_epoch) == (pid, epoch + 1)
    assert c.init_producer_id(TID, 60_000, T0, expected=(pid, epoch - 1)).error == E.PRODUCER_FENCED
    assert c.init_producer_id(TID, 60_000, T0, expected=(pid + 1, epoch + 1)).error == E.PRODUCER_FENCED


def test_a_zombie_cannot_reclaim_the_epoch_a_new_instance_took():
    c = make()
    pid, epoch = init(c)
    init(c)  # a new instance of the application: a plain InitProducerId
    # the old instance's KIP-360 bump with its old epoch is fenced, not taken for a retry
    assert c.init_producer_id(TID, 60_000, T0, expected=(pid, epoch)).error == E.PRODUCER_FENCED


def test_a_fence_whose_write_fails_still_fences_the_old_producer():
    c = make()
    pid, epoch = init(c)
    ongoing(c, pid, epoch)
    r = c.init_producer_id(TID, 60_000, T0)
    c.write_done(r.write, E.NOT_ENOUGH_REPLICAS, T0)
    assert state(c) == S.ONGOING and c.txns[TID].pending is None
    assert c.end_txn(TID, pid, epoch, True, T0).error == E.PRODUCER_FENCED
    # the abort is tried again (by the timeout or the next InitProducerId)
    again = c.init_producer_id(TID, 60_000, T0)
    assert again.write.value.state == S.PREPARE_ABORT and again.write.value.producer_epoch == epoch + 2


# ------------------------------------------------------------------ the delayed-EndTxn guard


def test_retried_end_txn_of_a_completing_or_complete_transaction():
    c = make()
    pid, epoch = init(c)
    ongoing(c, pid, epoch)
    done = commit(c, c.end_txn(TID, pid, epoch, True, T0))
    assert c.end_txn(TID, pid, epoch, True, T0).error == E.CONCURRENT_TRANSACTIONS
    assert c.end_txn(TID, pid, epoch, False, T0).error == E.INVALID_TXN_STATE
    commit(c, c.markers_done(done.markers[0], T0))
    same = c.end_txn(TID, pid, epoch, True, T0)
    assert same.error == E.NONE and same.write is None
    assert c.end_txn(TID, pid, epoch, False, T0).error == E.INVALID_TXN_STATE


def test_delayed_end_txn_from_before_a_fence_cannot_end_the_next_transaction():
    c = make()
    pid, epoch = init(c)
    ongoing(c, pid, epoch)
    # the producer's transaction times out and is aborted by the coordinator ...
    for w in c.abort_timed_out(T0 + 60_001):
        commit(c, c.markers_done(commit(c, type("R", (), {"write": w})()).markers[0], T0 + 60_002),
               T0 + 60_002)
    # ... a new producer instance starts the next transaction
    pid2, epoch2 = init(c, now=T0 + 70_000)
    ongoing(c, pid2, epoch2, now=T0 + 70_001)
    # the old instance's delayed EndTxn(commit) arrives: fenced, the new transaction untouched
    assert c.end_txn(TID, pid, epoch, True, T0 + 70_002).error == E.PRODUCER_FENCED
    assert state(c) == S.ONGOING and c.txns[TID].pending is None


# ------------------------------------------------------------------ time


def test_timed_out_transaction_is_aborted_with_an_epoch_bump_on_tick():
    c = make(abort_timed_out_interval_ms=1000)
    pid, epoch = init(c)
    ongoing(c, pid, epoch, now=T0)
    assert c.tick(T0) == []
    assert c.tick(T0 + 30_000) == []  # checked, not yet timed out
    writes = c.tick(T0 + 60_001 + 1000)
    assert [w.value.state for w in writes] == [S.PREPARE_ABORT]
    assert writes[0].value.producer_epoch == epoch + 1
    done = commit(c, type("R", (), {"write": writes[0]})())
    assert done.markers[0].producer_epoch == epoch + 1 and not done.markers[0].committed
    assert c.add_partitions(TID, pid, epoch, {("t", 0)}, T0).error == E.PRODUCER_FENCED


def test_idle_ids_expire_with_a_tombstone():
    c = make(id_expiration_ms=5000, remove_expired_interval_ms=1000)
    pid, epoch = init(c)
    c.tick(T0)
    assert c.tick(T0 + 3000) == []
    writes = c.tick(T0 + 6000)
    assert len(writes) == 1 and writes[0].value is None and writes[0].transactional_id == TID
    c.write_done(writes[0], E.NONE, T0 + 6000)
    assert TID not in c.txns
    # an ongoing transaction never expires
    init(c, now=T0 + 7000)
    ongoing(c, *init(c, now=T0 + 7000), now=T0 + 7000)
    assert c.expire_ids(T0 + 100_000) == []


# ------------------------------------------------------------------ loading


def test_reload_from_the_written_records_resends_pending_markers():
    c = make()
    records = []

    def persist(result, now=T0):
        w = result.write
        records.append((encode_key(w.transactional_id), None if w.value is None else encode_value(w.value)))
        return c.write_done(w, E.NONE, now)

    done = persist(c.init_producer_id(TID, 60_000, T0))
    pid, epoch = done.producer_id, done.producer_epoch
    persist(c.add_partitions(TID, pid, epoch, {("t", 0), ("u", 2)}, T0))
    persist(c.end_txn(TID, pid, epoch, True, T0))
    values = replay(records)
    assert values[TID].state == S.PREPARE_COMMIT
    other = TransactionCoordinator(TxnConfig(num_partitions=4))
    partition = other.partition_of(TID)
    other.begin_loading(partition, 9)
    jobs = other.load(partition, 9, values)
    assert jobs == [MarkerJob(TID, pid, epoch, True, 9, frozenset({("t", 0), ("u", 2)}))]
    assert other.describe(TID)["transaction_state"] == "PrepareCommit"


def test_stale_load_is_ignored():
    c = TransactionCoordinator(TxnConfig(num_partitions=4))
    c.begin_loading(1, 3)
    c.begin_loading(1, 4)
    assert c.load(1, 3, {}) == [] and 1 not in c.owned
    c.load(1, 4, {})
    assert c.owned == {1: 4}


# ------------------------------------------------------------------ admin


def test_describe_and_list_with_filters():
    c = make()
    pid, epoch = init(c)
    ongoing(c, pid, epoch, now=T0, parts=[("t", 1), ("t", 0)])
    d = c.describe(TID)
    assert d["transaction_state"] == "Ongoing" and d["topics"] == [{"topic": "t", "partitions": [0, 1]}]
    assert c.describe("unknown")["error_code"] in (E.TRANSACTIONAL_ID_NOT_FOUND, E.NOT_COORDINATOR)
    listed = c.list_transactions(["Ongoing", "Bogus"], [], -1, T0)
    assert listed["transaction_states"] == [{"transactional_id": TID, "producer_id": pid,
                                             "transaction_state": "Ongoing"}]
    assert listed["unknown_state_filters"] == ["Bogus"]
    assert c.list_transactions(["Empty"], [], -1, T0)["transaction_states"] == []
    assert c.list_transactions([], [pid + 1], -1, T0)["transaction_states"] == []
    assert len(c.list_transactions([], [], 5000, T0 + 6000)["transaction_states"]) == 1
    assert c.list_transactions([], [], 5000, T0 + 4000)["transaction_states"] == []


# ------------------------------------------------------------------ records and partitioning


def test_value_round_trips_in_both_versions():
    v = TxnLogValue(42, 3, 60_000, S.ONGOING, frozenset({("a", 0), ("a", 2), ("b", 1)}), 123, 100,
                    previous_producer_id=41)
    assert decode_value(encode_value(v, 1)) == v
    v0 = decode_value(encode_value(v, 0))
    assert v0 == TxnLogValue(42, 3, 60_000, S.ONGOING, v.partitions, 123, 100)
    assert decode_key(encode_key("abc")) == "abc"


def test_value_version_0_layout_is_kafkas():
    v = TxnLogValue(1, 2, 3, S.PREPARE_ABORT, frozenset({("t", 5)}), 6, 7)
    assert encode_value(v) == bytes.fromhex(
        "0000" "0000000000000001" "0002" "00000003" "03"
        "00000001" "0001" "74" "00000001" "00000005"
        "0000000000000006" "0000000000000007")
    assert encode_key("t") == bytes.fromhex("0000" "0001" "74")


# The values were printed by Java 17 (String.hashCode, and Utils.abs(h) % 50 for partition_for).
@pytest.mark.parametrize("text, hashcode", [
    ("", 0), ("a", 97), ("hello", 99162322), ("my-transactional-id", -959806496),
    ("polygenelubricants", -2147483648), ("Aa", 2112), ("BB", 2112), ("héllo", 103094734),
    ("𝄞", 1772394),  # a surrogate pair: hashed as two UTF-16 code units, as Java does
])
def test_java_string_hashcode(text, hashcode):
    from broker.group_records import java_string_hashcode

    assert java_string_hashcode(text) == hashcode


def test_partition_for_is_utils_abs_of_hashcode_mod_n():
    assert partition_for("polygenelubricants", 50) == 0  # Integer.MIN_VALUE: Utils.abs gives 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("my-transactional-id", 50) == 46


def test_core_imports_no_io():
    for name in ("coordinator.py", "log_records.py"):
        tree = ast.parse((pathlib.Path(__file__).parent.parent / "broker" / "txn" / name).read_text())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert not imported & {"trio", "socket", "time", "random"}
