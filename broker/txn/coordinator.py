"""The transaction coordinator core (KIP-98), sans-IO.

Theory of operation
-------------------
Every transactional id is owned by the leader of ``__transaction_state-<partition_for(id)>``.
The core keeps one :class:`TxnMetadata` per id of the partitions it owns and moves it through
Kafka's states (:data:`VALID_PREVIOUS` is the transition table)::

    Empty ──AddPartitions──▶ Ongoing ──EndTxn──▶ PrepareCommit ──markers──▶ CompleteCommit
      ▲                        │    └─EndTxn/timeout─▶ PrepareAbort ──markers──▶ CompleteAbort
      └──InitProducerId────────┴─(Ongoing: abort first, with the epoch bumped: a fence)

A request or tick returns a :class:`Result`: an error (and producer id/epoch) for the
client, perhaps a :class:`Write` (the id's new state to append to ``__transaction_state``)
and :class:`MarkerJob` s (WriteTxnMarkers to send to the leaders of the transaction's
partitions).  While a write is in flight the id has a *pending* state and every other request
about it gets CONCURRENT_TRANSACTIONS, so the log holds one transition after another.  The
caller appends the write, waits until it is committed (acks=all), and hands it back with
:meth:`TransactionCoordinator.write_done`: only then does the new state become the id's
state, and the answer (``Write.reply``) or the next effects (markers after a Prepare state,
nothing after a Complete state) come out.  When every marker of a job is written the caller
calls :meth:`markers_done`, which returns the Complete write.

Fencing: the producer epoch is bumped by every InitProducerId, and by the coordinator when it
aborts an Ongoing transaction on its own (a new InitProducerId for the id, or the transaction
timeout).  Requests with an older epoch get PRODUCER_FENCED (INVALID_PRODUCER_EPOCH for old
request versions: the shell translates), and the markers carry the bumped epoch, so the
partitions fence the old producer's late writes too.

The delayed-EndTxn guard: an EndTxn is judged by the state it finds.  A retry of an EndTxn
whose transaction is completing or complete gets CONCURRENT_TRANSACTIONS (then NONE once
complete) for the same outcome and INVALID_TXN_STATE for the other one, never touching a
transaction; one from before a coordinator-side abort or a newer InitProducerId carries an
older epoch and is fenced.  The one case this cannot catch with the clients' protocol
(EndTxn v0-v4) is a duplicate EndTxn of the same epoch that arrives after the producer began
its next transaction: KIP-890's transaction version 2 closes it with an epoch bump per
transaction (EndTxn v5), which no Python client sends, so kraft advertises EndTxn v0-v4.

Ownership mirrors the group coordinator: :meth:`begin_loading` (requests get
COORDINATOR_LOAD_IN_PROGRESS), :meth:`load` with the replayed values (Prepare states resend
their markers), :meth:`unload` (NOT_COORDINATOR).  Producer ids come from an injected
``new_producer_id`` callable (the shell makes sure one is at hand).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from broker.txn.log_records import TxnLogValue, TxnState, partition_for
from broker.txn.state import (MAX_EPOCH, NO_EPOCH, VALID_PREVIOUS, MarkerJob, Result, TxnConfig, TxnMetadata,
                              Write)
from kraft.protocol.error_codes import ErrorCode

S = TxnState
__all__ = ["VALID_PREVIOUS", "MarkerJob", "Result", "TransactionCoordinator", "TxnConfig", "TxnMetadata", "Write"]


class TransactionCoordinator:
    """All transactional ids of the ``__transaction_state`` partitions this broker leads.

    Args:
        config: a :class:`TxnConfig`.
        new_producer_id: returns a fresh producer id (from the controller's allocation).
        is_leader: ``partition -> bool``, consulted on every request.
    """

    def __init__(self, config: TxnConfig | None = None, *, new_producer_id: Callable[[], int] | None = None,
                 is_leader: Callable[[int], bool] | None = None):
        self.config = config or TxnConfig()
        self.new_producer_id = new_producer_id or _counter()
        self.is_leader = is_leader or (lambda partition: True)
        self.txns: dict[str, TxnMetadata] = {}
        self.owned: dict[int, int] = {}  # partition -> coordinator epoch
        self.loading: dict[int, int] = {}  # partition -> coordinator epoch being loaded
        self._next_abort_check_ms: int | None = None
        self._next_expire_check_ms: int | None = None

    # ------------------------------------------------------------------ ownership

    def partition_of(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    def begin_loading(self, partition: int, coordinator_epoch: int) -> None:
        self.owned.pop(partition, None)
        self.loading[partition] = coordinator_epoch
        self._drop(partition)

    def load(self, partition: int, coordinator_epoch: int, values: dict[str, TxnLogValue]) -> list[MarkerJob]:
        """Install the replayed ids of ``partition``; returns the markers of the transactions
        that were completing (they are sent again).  Nothing if the load is stale."""
        if self.loading.get(partition) != coordinator_epoch:
            return []
        del self.loading[partition]
        self._drop(partition)
        self.owned[partition] = coordinator_epoch
        jobs = []
        for txn_id, value in values.items():
            if value.state == S.DEAD:
                continue
            self.txns[txn_id] = TxnMetadata(txn_id, partition, value)
            if value.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                jobs.append(self._marker_job(txn_id, value, coordinator_epoch))
        return jobs

    def unload(self, partition: int) -> None:
        self.loading.pop(partition, None)
        self.owned.pop(partition, None)
        self._drop(partition)

    def _drop(self, partition: int) -> None:
        for txn_id in [t for t, m in self.txns.items() if m.partition == partition]:
            del self.txns[txn_id]

    def coordinator_error(self, transactional_id: str) -> int:
        partition = self.partition_of(transactional_id)
        if partition in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self.owned or not self.is_leader(partition):
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    # ------------------------------------------------------------------ requests

    def init_producer_id(self, transactional_id: str, timeout_ms: int, now_ms: int,
                         expected: tuple[int, int] | None = None) -> Result:
        """InitProducerId with a transactional id.  ``expected``: the (producer id, epoch)
        a v3+ client sends to bump its epoch after an error (KIP-360), or None."""
        if not transactional_id:
            return Result(ErrorCode.INVALID_REQUEST)
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return Result(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        if (error := self.coordinator_error(transactional_id)) != ErrorCode.NONE:
            return Result(error)
        if expected is not None and expected[0] == -1:
            expected = None  # a v3+ client without a producer id yet
        meta = self.txns.get(transactional_id)
        if meta is None:
            partition = self.partition_of(transactional_id)
            meta = self.txns[transactional_id] = TxnMetadata(transactional_id, partition, TxnLogValue(
                self.new_producer_id(), NO_EPOCH, timeout_ms, S.EMPTY, last_update_ms=now_ms))
        v = meta.value
        if meta.pending is not None:
            return Result(ErrorCode.CONCURRENT_TRANSACTIONS)
        if expected is not None and not (
                v.producer_epoch == NO_EPOCH or expected[0] == v.producer_id
                or (expected[0] == v.previous_producer_id and expected[1] + 1 >= MAX_EPOCH)):
            return Result(ErrorCode.PRODUCER_FENCED)
        if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE, S.DEAD):
            return Result(ErrorCode.CONCURRENT_TRANSACTIONS)
        if meta.state == S.ONGOING:
            # Abort the transaction first, with the epoch bumped so the old producer is fenced;
            # the client retries and finds it complete (then its epoch is bumped once more).
            return Result(ErrorCode.CONCURRENT_TRANSACTIONS, write=self._fence_and_abort(meta, now_ms))
        fresh = dict(timeout_ms=timeout_ms, state=S.EMPTY, partitions=frozenset(), start_ms=-1,
                     last_update_ms=now_ms)
        if v.producer_epoch + 1 >= MAX_EPOCH and (expected is None or expected[1] == v.producer_epoch):
            # exhausted: a new producer id starts at epoch 0
            target = replace(v, producer_id=self.new_producer_id(), producer_epoch=0,
                             previous_producer_id=v.producer_id, **fresh)
            last_epoch = v.producer_epoch if expected is not None else NO_EPOCH
        elif expected is None:
            target, last_epoch = replace(v, producer_epoch=v.producer_epoch + 1, **fresh), NO_EPOCH
        elif v.producer_epoch == NO_EPOCH or expected[1] == v.producer_epoch:
            target, last_epoch = replace(v, producer_epoch=v.producer_epoch + 1, **fresh), v.producer_epoch
        elif expected[1] == meta.last_producer_epoch:
            # a retry of the bump that made the current epoch (its answer was lost): the same again
            return Result(producer_id=v.producer_id, producer_epoch=v.producer_epoch)
        else:
            return Result(ErrorCode.PRODUCER_FENCED)
        return Result(write=self._prepare(meta, target, last_epoch=last_epoch))

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: set[tuple[str, int]], now_ms: int) -> Result:
        """AddPartitionsToTxn (and AddOffsetsToTxn, with the group's offsets partition)."""
        meta, error = self._checked(transactional_id, producer_id, producer_epoch)
        if error != ErrorCode.NONE:
            return Result(error)
        if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE):
            return Result(ErrorCode.CONCURRENT_TRANSACTIONS)
        v = meta.value
        if meta.state == S.ONGOING and set(partitions) <= v.partitions:
            return Result()  # nothing new: answered without a write, as Kafka does
        fresh = meta.state != S.ONGOING
        target = replace(v, state=S.ONGOING, last_update_ms=now_ms,
                         partitions=frozenset(partitions) | (frozenset() if fresh else v.partitions),
                         start_ms=now_ms if fresh else v.start_ms)
        return Result(write=self._prepare(meta, target))

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool,
                now_ms: int) -> Result:
        """EndTxn: write PrepareCommit/PrepareAbort; the markers follow once it is durable."""
        meta, error = self._checked(transactional_id, producer_id, producer_epoch)
        if error != ErrorCode.NONE:
            return Result(error)
        state = meta.state
        if state == S.ONGOING:
            return Result(write=self._prepare_end(meta, committed, meta.value.producer_epoch, now_ms, reply=True))
        same = S.COMPLETE_COMMIT if committed else S.COMPLETE_ABORT
        completing = S.PREPARE_COMMIT if committed else S.PREPARE_ABORT
        if state == same:
            return Result()  # a retry of the EndTxn that completed it
        if state == completing:
            return Result(ErrorCode.CONCURRENT_TRANSACTIONS)
        if state == S.PREPARE_EPOCH_FENCE:
            return Result(ErrorCode.CONCURRENT_TRANSACTIONS)
        return Result(ErrorCode.INVALID_TXN_STATE)

    def _checked(self, transactional_id: str, producer_id: int, producer_epoch: int):
        if (error := self.coordinator_error(transactional_id)) != ErrorCode.NONE:
            return None, error
        meta = self.txns.get(transactional_id)
        if meta is None or meta.value.producer_id != producer_id:
            return None, ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if meta.value.producer_epoch != producer_epoch:
            return None, ErrorCode.PRODUCER_FENCED
        if meta.pending is not None:
            return None, ErrorCode.CONCURRENT_TRANSACTIONS
        return meta, ErrorCode.NONE

    # ------------------------------------------------------------------ transitions

    def _prepare(self, meta: TxnMetadata, target: TxnLogValue, reply: bool = True,
                 last_epoch: int | None = None) -> Write:
        """Make ``target`` the pending state; ``last_epoch``: the epoch a retried KIP-360
        InitProducerId may present once it is applied (None: unchanged)."""
        if meta.state not in VALID_PREVIOUS[target.state]:
            raise AssertionError(f"{meta.transactional_id}: {meta.state.kafka_name} -> {target.state.kafka_name}")
        meta.pending = target
        meta.pending_last_epoch = meta.last_producer_epoch if last_epoch is None else last_epoch
        value = None if target.state == S.DEAD else target
        return Write(meta.partition, self.owned.get(meta.partition, -1), meta.transactional_id, value, reply)

    def _prepare_end(self, meta: TxnMetadata, committed: bool, epoch: int, now_ms: int, reply: bool,
                     last_epoch: int | None = None) -> Write:
        target = replace(meta.value, state=S.PREPARE_COMMIT if committed else S.PREPARE_ABORT,
                         producer_epoch=epoch, last_update_ms=now_ms)
        return self._prepare(meta, target, reply, last_epoch)

    def _fence_and_abort(self, meta: TxnMetadata, now_ms: int) -> Write | None:
        """Abort an Ongoing transaction on the coordinator's initiative, bumping the epoch
        (Kafka's PrepareEpochFence, then PrepareAbort)."""
        epoch = meta.value.producer_epoch
        if epoch + 1 >= MAX_EPOCH:
            return None  # cannot bump: left to the producer (Kafka logs and skips too)
        return self._prepare_end(meta, False, epoch + 1, now_ms, reply=False, last_epoch=NO_EPOCH)

    def write_done(self, write: Write, error: int, now_ms: int) -> Result:
        """``write`` is committed (``error`` NONE) or failed.  Returns the answer for the
        request behind it (if ``write.reply``) and the effects that follow."""
        meta = self.txns.get(write.transactional_id)
        if meta is None or meta.pending is None:
            return Result(ErrorCode.NOT_COORDINATOR)
        target = meta.pending
        meta.pending = None
        if error != ErrorCode.NONE or self.owned.get(write.partition) != write.coordinator_epoch:
            if meta.state == S.EMPTY and meta.value.producer_epoch == NO_EPOCH:
                del self.txns[write.transactional_id]  # a new id whose first write failed
            elif (meta.state == S.ONGOING and target.state == S.PREPARE_ABORT
                  and target.producer_epoch > meta.value.producer_epoch):
                # A failed fence keeps its epoch bump in memory (Kafka does too): the old
                # producer stays fenced while the abort is tried again.
                meta.value = replace(meta.value, producer_epoch=target.producer_epoch)
                meta.last_producer_epoch = NO_EPOCH
            return Result(error or ErrorCode.NOT_COORDINATOR)
        if target.state == S.DEAD:
            del self.txns[write.transactional_id]
            return Result()
        meta.last_producer_epoch = meta.pending_last_epoch
        meta.value = target
        out = Result(producer_id=target.producer_id, producer_epoch=target.producer_epoch)
        if target.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            out.markers.append(self._marker_job(write.transactional_id, target, write.coordinator_epoch))
        return out

    def markers_done(self, job: MarkerJob, now_ms: int) -> Result:
        """Every marker of ``job`` is written: write CompleteCommit/CompleteAbort."""
        meta = self.txns.get(job.transactional_id)
        want = S.PREPARE_COMMIT if job.committed else S.PREPARE_ABORT
        if (meta is None or meta.pending is not None or meta.state != want
                or meta.value.producer_epoch != job.producer_epoch
                or self.owned.get(meta.partition) != job.coordinator_epoch):
            return Result(ErrorCode.NOT_COORDINATOR)  # moved on, or no longer ours
        target = replace(meta.value, state=S.COMPLETE_COMMIT if job.committed else S.COMPLETE_ABORT,
                         partitions=frozenset(), last_update_ms=now_ms)
        return Result(write=self._prepare(meta, target, reply=False))

    @staticmethod
    def _marker_job(txn_id: str, value: TxnLogValue, coordinator_epoch: int) -> MarkerJob:
        return MarkerJob(txn_id, value.producer_id, value.producer_epoch, value.state == S.PREPARE_COMMIT,
                         coordinator_epoch, value.partitions)

    # ------------------------------------------------------------------ time

    def next_tick_ms(self, now_ms: int) -> int:
        """When ``tick`` next has something to do (now, before its first call)."""
        if self._next_abort_check_ms is None:
            return now_ms
        return min(self._next_abort_check_ms, self._next_expire_check_ms)

    def tick(self, now_ms: int) -> list[Write]:
        """Abort timed-out transactions (every ``abort_timed_out_interval_ms``) and expire
        idle transactional ids (every ``remove_expired_interval_ms``)."""
        writes: list[Write] = []
        if self._next_abort_check_ms is None:
            self._next_abort_check_ms = now_ms + self.config.abort_timed_out_interval_ms
            self._next_expire_check_ms = now_ms + self.config.remove_expired_interval_ms
        if now_ms >= self._next_abort_check_ms:
            self._next_abort_check_ms = now_ms + self.config.abort_timed_out_interval_ms
            writes += self.abort_timed_out(now_ms)
        if now_ms >= self._next_expire_check_ms:
            self._next_expire_check_ms = now_ms + self.config.remove_expired_interval_ms
            writes += self.expire_ids(now_ms)
        return writes

    def abort_timed_out(self, now_ms: int) -> list[Write]:
        writes = []
        for meta in list(self.txns.values()):
            v = meta.value
            if (meta.partition in self.owned and meta.pending is None and meta.state == S.ONGOING
                    and v.start_ms + v.timeout_ms < now_ms):
                write = self._fence_and_abort(meta, now_ms)
                if write is not None:
                    writes.append(write)
        return writes

    def expire_ids(self, now_ms: int) -> list[Write]:
        writes = []
        for meta in list(self.txns.values()):
            if (meta.partition in self.owned and meta.pending is None
                    and meta.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
                    and meta.value.last_update_ms + self.config.id_expiration_ms <= now_ms):
                writes.append(self._prepare(meta, replace(meta.value, state=S.DEAD, last_update_ms=now_ms),
                                            reply=False))
        return writes

    # ------------------------------------------------------------------ admin

    def describe(self, transactional_id: str) -> dict:
        # Beside an error the schema's defaults, zeros, as Kafka answers (found by the differential test)
        out = {"error_code": 0, "transactional_id": transactional_id, "transaction_state": "",
               "transaction_timeout_ms": 0, "transaction_start_time_ms": 0, "producer_id": 0,
               "producer_epoch": 0, "topics": []}
        error = self.coordinator_error(transactional_id)
        meta = self.txns.get(transactional_id)
        if error == ErrorCode.NONE and meta is None:
            error = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        if error != ErrorCode.NONE:
            out["error_code"] = error
            return out
        v = meta.value
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(v.partitions):
            by_topic.setdefault(topic, []).append(index)
        out.update(transaction_state=v.state.kafka_name, transaction_timeout_ms=v.timeout_ms,
                   transaction_start_time_ms=v.start_ms, producer_id=v.producer_id,
                   producer_epoch=v.producer_epoch,
                   topics=[{"topic": t, "partitions": ps} for t, ps in by_topic.items()])
        return out

    def list_transactions(self, states: list[str], producer_ids: list[int], duration_ms: int, now_ms: int) -> dict:
        known = [TxnState.from_kafka_name(s) for s in states]
        unknown = [s for s, k in zip(states, known) if k is None]
        wanted = {k for k in known if k is not None}
        out = []
        for txn_id, meta in sorted(self.txns.items()):
            v = meta.value
            if meta.partition not in self.owned:
                continue
            if states and v.state not in wanted:
                continue
            if producer_ids and v.producer_id not in producer_ids:
                continue
            running = v.state in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT)
            if duration_ms >= 0 and (not running or now_ms - v.start_ms < duration_ms):
                continue
            out.append({"transactional_id": txn_id, "producer_id": v.producer_id,
                        "transaction_state": v.state.kafka_name})
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.loading else ErrorCode.NONE
        return {"error_code": error, "unknown_state_filters": unknown, "transaction_states": out}


def _counter() -> Callable[[], int]:
    ids = iter(range(1000, 1 << 62))
    return lambda: next(ids)
