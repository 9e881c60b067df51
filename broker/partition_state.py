"""Replication state of one partition on one broker, as a sans-IO state machine.

Theory of operation
-------------------
A broker holds each partition replica in one of three roles, set from the metadata image:
OFFLINE (not told yet, or no longer a replica), LEADER or FOLLOWER.  Leadership is
versioned by the *leader epoch* (bumped by the controller at every leader change) and the
partition's ISR and replica set by the *partition epoch* (bumped at every change).  The
object is driven by events and answers with decisions; the trio shell does the I/O
(appends, truncations, responses, AlterPartition requests) in the order it is told to.

Leader side (Kafka's ``Partition``):

* The high watermark (HW) is the smallest log end offset (LEO) over the *maximal ISR*:
  the committed ISR together with the replica of an in-flight expansion (KIP-497 keeps the
  old, larger set during a shrink because the shrink is not committed yet).  The leader's
  own LEO bounds it; it never decreases.  A new leader does not know its followers' LEOs
  (they read as -1), so its HW holds until every ISR member has fetched in the new epoch.
  Kafka has no Raft-style "only commit entries of the current term" rule, and needs none:
  a follower's fetch only moves its LEO after its last fetched epoch is checked against
  the leader's epoch cache (below), so an ISR member's LEO always names a prefix of the
  leader's log, and leaders are elected from the ISR only.
* Follower fetches carry ``(fetch_offset, last_fetched_epoch)``.  If the leader's copy of
  that epoch ends below ``fetch_offset`` (or the leader only knows an older epoch), the
  follower diverged: the answer is the diverging epoch ``(epoch, end_offset)`` and
  nothing about the follower is recorded (KIP-320's fetch-based truncation of KIP-101's
  and KIP-279's OffsetsForLeaderEpoch exchange).  Otherwise the fetch offset *is* the
  follower's LEO.
* ``last_caught_up_time_ms`` of a follower is, as in Kafka, the time of the latest fetch
  at which its fetch offset reached the leader's LEO of that moment, or the time of the
  previous fetch when it has since reached the leader's LEO of that previous fetch.
  A follower not caught up within ``replica.lag.time.max.ms`` is dropped from the ISR; a
  follower whose LEO reaches the HW (and the start offset of the current leader epoch)
  is added back.  Both are *proposals* (AlterPartition): they take effect when the change
  is committed in the metadata log (``on_partition_change_committed``); at most one is in
  flight.
* acks=all produce requests wait (``register_produce_waiter``) until the HW reaches the
  end of their append.  When it does, they succeed if the maximal ISR still has
  ``min.insync.replicas`` members, else NOT_ENOUGH_REPLICAS_AFTER_APPEND (Kafka's
  ``checkEnoughReplicasReachOffset``); they fail with REQUEST_TIMED_OUT at their deadline
  and NOT_LEADER_OR_FOLLOWER when leadership is lost.

Follower side (Kafka's ``AbstractFetcherThread``): the follower fetches from its LEO
with its latest epoch; a diverging-epoch answer makes it truncate to
``min(leader's end offset, its own end offset for that epoch)`` — or, when it does not
know the leader's epoch, to its own end of the largest epoch below it and fetch again
(KIP-279).  Its HW is ``min(leader HW, own LEO)``.

UNSAFE MODE.  ``unsafe_ack_before_replication=True`` acknowledges acks=all produce
requests as soon as the leader appended locally, *without waiting for the ISR*.  It loses
acknowledged writes when a leader fails; it exists only so the jepsen suite can prove it
detects such loss.  Never enable it for real data.

Nothing here does I/O, reads a clock or draws random numbers; time arrives as ``now_ms``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from broker.leader_epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, LeaderEpochCache
from broker.partition_state_types import (
    UNKNOWN_OFFSET,
    VALID_ACKS,
    EpochedBatch,
    EpochEndOffset,
    FetchPosition,
    FetchResponseDecision,
    FollowerFetchResult,
    IsrChange,
    IsrProposal,
    LeadershipChange,
    OutOfRangeDecision,
    ProduceCompletion,
    ReplicaState,
    Role,
    WaiterRegistration,
)
from kraft.protocol.error_codes import ErrorCode

__all__ = [
    "UNKNOWN_OFFSET",
    "EpochEndOffset",
    "FetchPosition",
    "FetchResponseDecision",
    "FollowerFetchResult",
    "IsrChange",
    "IsrProposal",
    "LeadershipChange",
    "OutOfRangeDecision",
    "PartitionState",
    "ProduceCompletion",
    "ReplicaState",
    "Role",
    "WaiterRegistration",
]

# ------------------------------------------------------------------- state


@dataclass(slots=True)
class _Waiter:
    required_offset: int
    deadline_ms: int
    min_insync_replicas: int


@dataclass(slots=True)
class _Assignment:
    replicas: tuple[int, ...] = ()
    isr: frozenset[int] = field(default_factory=frozenset)


class PartitionState:
    """One partition replica's replication state; see the module docstring.

    Args:
        local_id: this broker's id.
        epoch_cache: the partition's leader-epoch cache (shared with whoever checkpoints it).
        log_start_offset / log_end_offset / high_watermark: the local log as opened.
        unsafe_ack_before_replication: DELIBERATELY UNSAFE, for the fault suite only.
        unsafe_hw_from_non_isr_replica, unsafe_skip_truncation: DELIBERATELY UNSAFE, the
            data-plane simulator's mutation switches (``broker/sim``); no broker setting
            reaches them.  The first advances the HW to what any one follower has, ISR
            member or not; the second ignores a diverging epoch (no truncation).
    """

    def __init__(self, local_id: int, epoch_cache: LeaderEpochCache | None = None, *,
                 log_start_offset: int = 0, log_end_offset: int = 0, high_watermark: int = 0,
                 unsafe_ack_before_replication: bool = False,
                 unsafe_hw_from_non_isr_replica: bool = False, unsafe_skip_truncation: bool = False):
        self.local_id = local_id
        self.epoch_cache = epoch_cache if epoch_cache is not None else LeaderEpochCache()
        self.unsafe_ack_before_replication = unsafe_ack_before_replication
        self.unsafe_hw_from_non_isr_replica = unsafe_hw_from_non_isr_replica
        self.unsafe_skip_truncation = unsafe_skip_truncation
        self.role = Role.OFFLINE
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self._assignment = _Assignment()
        self.pending: IsrProposal | None = None
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset
        self.high_watermark = min(high_watermark, log_end_offset)
        self.leader_epoch_start_offset: int | None = None
        self.remote: dict[int, ReplicaState] = {}
        self._waiters: dict[int, _Waiter] = {}
        self._next_waiter_id = 0

    # ---------------------------------------------------------------- views

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def replicas(self) -> tuple[int, ...]:
        return self._assignment.replicas

    @property
    def isr(self) -> frozenset[int]:
        """The committed ISR."""
        return self._assignment.isr

    @property
    def maximal_isr(self) -> frozenset[int]:
        """The committed ISR plus the replica of an in-flight expansion."""
        if self.pending is not None and self.pending.kind is IsrChange.EXPAND:
            return self._assignment.isr | frozenset(self.pending.new_isr)
        return self._assignment.isr

    @property
    def pending_waiters(self) -> int:
        return len(self._waiters)

    def next_deadline_ms(self) -> int | None:
        """The earliest waiter deadline: call ``on_tick`` then."""
        return min((w.deadline_ms for w in self._waiters.values()), default=None)

    # ---------------------------------------------------------- role changes

    def _is_stale(self, leader_epoch: int, partition_epoch: int) -> bool:
        return leader_epoch < self.leader_epoch or (
            leader_epoch == self.leader_epoch and partition_epoch < self.partition_epoch)

    def become_leader(self, leader_epoch: int, partition_epoch: int, replicas: Iterable[int],
                      isr: Iterable[int], log_end_offset: int, high_watermark: int,
                      now_ms: int) -> LeadershipChange:
        """Apply a partition record naming this broker leader.

        A new leader epoch starts a new epoch in the cache at the log end offset and resets
        every follower's state (LEO unknown; ISR members count as caught up now).  The same
        epoch again (an ISR or replica change) keeps follower state and the tracked log
        offsets.  Stale epochs (or a stale partition epoch) are ignored.
        """
        if self._is_stale(leader_epoch, partition_epoch):
            return LeadershipChange(False)
        new_leadership = not self.is_leader or leader_epoch > self.leader_epoch
        self.role = Role.LEADER
        self.leader_id = self.local_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self._assignment = _Assignment(tuple(replicas), frozenset(isr))
        self.pending = None
        if new_leadership:
            self.log_end_offset = log_end_offset
            self.high_watermark = min(max(self.high_watermark, high_watermark), log_end_offset)
            self.epoch_cache.assign(leader_epoch, log_end_offset)
            self.leader_epoch_start_offset = log_end_offset
            self.remote = {}
        self._track_replicas(now_ms)
        return LeadershipChange(True, tuple(self._maybe_increment_hw()))

    def _track_replicas(self, now_ms: int) -> None:
        """Keep a follower state for each replica of the assignment, and only for them (a
        reassignment adds and removes replicas under the same leader)."""
        for rid in self.replicas:
            if rid != self.local_id and rid not in self.remote:
                caught_up = now_ms if rid in self.isr else 0
                self.remote[rid] = ReplicaState(rid, last_caught_up_time_ms=caught_up)
        for rid in [r for r in self.remote if r not in self.replicas]:
            del self.remote[rid]

    def become_follower(self, leader_id: int, leader_epoch: int, partition_epoch: int,
                        replicas: Iterable[int], isr: Iterable[int], log_end_offset: int,
                        high_watermark: int, now_ms: int) -> LeadershipChange:
        """Apply a partition record naming another broker leader.  Pending acks=all
        waiters fail with NOT_LEADER_OR_FOLLOWER.  The log is not truncated here: the
        first fetch finds any divergence (KIP-320)."""
        if self._is_stale(leader_epoch, partition_epoch):
            return LeadershipChange(False)
        self.role = Role.FOLLOWER
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self._assignment = _Assignment(tuple(replicas), frozenset(isr))
        self.pending = None
        self.remote = {}
        self.leader_epoch_start_offset = None
        self.log_end_offset = log_end_offset
        self.high_watermark = min(max(self.high_watermark, high_watermark), log_end_offset)
        return LeadershipChange(True, tuple(self._fail_all_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)))

    def become_offline(self) -> LeadershipChange:
        """The replica was removed or its log went offline."""
        self.role = Role.OFFLINE
        self.leader_id = -1
        self.pending = None
        self.remote = {}
        return LeadershipChange(True, tuple(self._fail_all_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)))

    # --------------------------------------------------------------- fencing

    def check_leader_epoch(self, current_leader_epoch: int | None, *,
                           require_leader: bool = True) -> ErrorCode:
        """Kafka's order: the request's epoch first (None or -1 = not given), then the role."""
        if current_leader_epoch is not None and current_leader_epoch >= 0:
            if current_leader_epoch < self.leader_epoch:
                return ErrorCode.FENCED_LEADER_EPOCH
            if current_leader_epoch > self.leader_epoch:
                return ErrorCode.UNKNOWN_LEADER_EPOCH
        if self.role is Role.OFFLINE or (require_leader and not self.is_leader):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.NONE

    def offset_for_leader_epoch(self, current_leader_epoch: int | None, leader_epoch: int, *,
                                require_leader: bool = True) -> tuple[ErrorCode, int, int]:
        """The OffsetForLeaderEpoch answer: ``(error, epoch, end_offset)``."""
        error = self.check_leader_epoch(current_leader_epoch, require_leader=require_leader)
        if error is not ErrorCode.NONE:
            return error, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        epoch, end = self.epoch_cache.end_offset_for(leader_epoch, self.log_end_offset)
        return ErrorCode.NONE, epoch, end

    def diverging_epoch(self, fetch_offset: int, last_fetched_epoch: int) -> EpochEndOffset | None:
        """Whether a fetcher at ``(fetch_offset, last_fetched_epoch)`` diverged from this log."""
        return self.fetch_epoch_check(fetch_offset, last_fetched_epoch, consumer=False)[1]

    def fetch_epoch_check(self, fetch_offset: int, last_fetched_epoch: int, *,
                          consumer: bool = True) -> tuple[ErrorCode, EpochEndOffset | None]:
        """A Fetch naming its last fetched epoch, as Kafka's ``readRecords``: for a consumer,
        an epoch this log cannot place (newer than any it has) or an offset below the log
        start is OFFSET_OUT_OF_RANGE before any divergence check (a follower's fetch is
        judged by divergence alone); else the diverging epoch, if any."""
        if last_fetched_epoch is None or last_fetched_epoch < 0:
            return ErrorCode.NONE, None
        epoch, end = self.epoch_cache.end_offset_for(last_fetched_epoch, self.log_end_offset)
        if consumer and (epoch == UNDEFINED_EPOCH or end == UNDEFINED_EPOCH_OFFSET
                             or fetch_offset < self.log_start_offset):
            return ErrorCode.OFFSET_OUT_OF_RANGE, None
        if epoch < last_fetched_epoch or end < fetch_offset:
            return ErrorCode.NONE, EpochEndOffset(epoch, end)
        return ErrorCode.NONE, None

    # ---------------------------------------------------------------- produce

    def check_produce(self, acks: int, min_insync_replicas: int,
                      leader_epoch: int | None = None) -> ErrorCode:
        """Admission of a produce request before the append (Produce carries no leader
        epoch on the wire; ``leader_epoch`` is for internal callers)."""
        error = self.check_leader_epoch(leader_epoch)
        if error is not ErrorCode.NONE:
            return error
        if acks not in VALID_ACKS:
            return ErrorCode.INVALID_REQUIRED_ACKS
        if acks == -1 and len(self.isr) < min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS
        return ErrorCode.NONE

    def on_local_append(self, log_end_offset: int,
                        batches: Iterable[EpochedBatch] = ()) -> list[ProduceCompletion]:
        """The local log now ends at ``log_end_offset``; ``batches`` are the appended batch
        headers (a follower's carry the epochs that start new cache entries)."""
        if log_end_offset < self.log_end_offset:
            raise ValueError(f"log end offset went back from {self.log_end_offset} to {log_end_offset}; "
                             "report truncation with on_truncated")
        for batch in batches:
            self.epoch_cache.assign_from_batch(batch.partition_leader_epoch, batch.base_offset)
        self.log_end_offset = log_end_offset
        return self._maybe_increment_hw() if self.is_leader else []

    def register_produce_waiter(self, required_offset: int, deadline_ms: int,
                                min_insync_replicas: int = 1) -> WaiterRegistration:
        """Wait for the HW to reach ``required_offset`` (the append's last offset + 1)."""
        wid = self._next_waiter_id
        self._next_waiter_id += 1
        if not self.is_leader:
            return WaiterRegistration(wid, ProduceCompletion(wid, ErrorCode.NOT_LEADER_OR_FOLLOWER))
        if self.unsafe_ack_before_replication and required_offset <= self.log_end_offset:
            return WaiterRegistration(wid, ProduceCompletion(wid, ErrorCode.NONE))  # UNSAFE
        waiter = _Waiter(required_offset, deadline_ms, min_insync_replicas)
        if self.high_watermark >= required_offset:
            return WaiterRegistration(wid, ProduceCompletion(wid, self._waiter_outcome(waiter)))
        self._waiters[wid] = waiter
        return WaiterRegistration(wid)

    def on_tick(self, now_ms: int) -> list[ProduceCompletion]:
        """Fail the waiters whose deadline passed with REQUEST_TIMED_OUT."""
        due = [wid for wid, w in self._waiters.items() if w.deadline_ms <= now_ms]
        for wid in due:
            del self._waiters[wid]
        return [ProduceCompletion(wid, ErrorCode.REQUEST_TIMED_OUT) for wid in due]

    def _waiter_outcome(self, waiter: _Waiter) -> ErrorCode:
        if len(self.maximal_isr) >= waiter.min_insync_replicas:
            return ErrorCode.NONE
        return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND

    def _complete_waiters(self) -> list[ProduceCompletion]:
        done = [wid for wid, w in self._waiters.items() if w.required_offset <= self.high_watermark]
        return [ProduceCompletion(wid, self._waiter_outcome(self._waiters.pop(wid))) for wid in done]

    def _fail_all_waiters(self, error: ErrorCode) -> list[ProduceCompletion]:
        done = [ProduceCompletion(wid, error) for wid in self._waiters]
        self._waiters.clear()
        return done

    # ------------------------------------------------------- high watermark

    def _maybe_increment_hw(self) -> list[ProduceCompletion]:
        new_hw = self.log_end_offset
        if self.unsafe_hw_from_non_isr_replica and self.remote:  # UNSAFE: one follower suffices
            new_hw = min(new_hw, max(s.log_end_offset for s in self.remote.values()))
            if new_hw > self.high_watermark:
                self.high_watermark = new_hw
                return self._complete_waiters()
            return []
        for rid in self.maximal_isr:
            if rid == self.local_id:
                continue
            state = self.remote.get(rid)
            new_hw = min(new_hw, state.log_end_offset if state else UNKNOWN_OFFSET)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            return self._complete_waiters()
        return []

    # -------------------------------------------------------- follower fetch

    def on_follower_fetch(self, replica_id: int, fetch_offset: int, last_fetched_epoch: int | None,
                          now_ms: int, *, current_leader_epoch: int | None = None,
                          log_start_offset: int = UNKNOWN_OFFSET,
                          broker_epoch: int = -1) -> FollowerFetchResult:
        """A fetch from follower ``replica_id`` (with its ``broker_epoch``, -1 when the
        fetch does not carry it) arrived at the leader."""
        error = self.check_leader_epoch(current_leader_epoch)
        if error is ErrorCode.NONE and (replica_id == self.local_id or replica_id not in self.remote):
            error = ErrorCode.NOT_LEADER_OR_FOLLOWER
        if error is not ErrorCode.NONE:
            return FollowerFetchResult(error)
        diverging = self.diverging_epoch(fetch_offset, last_fetched_epoch)
        if diverging is not None:
            return FollowerFetchResult(ErrorCode.NONE, self.high_watermark, self.log_start_offset,
                                       diverging)
        if not self.log_start_offset <= fetch_offset <= self.log_end_offset:
            return FollowerFetchResult(ErrorCode.OFFSET_OUT_OF_RANGE, self.high_watermark,
                                       self.log_start_offset)
        self.remote[replica_id].on_fetch(fetch_offset, log_start_offset, now_ms, self.log_end_offset,
                                         broker_epoch)
        proposal = self.maybe_expand_isr(replica_id)
        completed = self._maybe_increment_hw()
        return FollowerFetchResult(ErrorCode.NONE, self.high_watermark, self.log_start_offset,
                                   None, tuple(completed), proposal)

    def note_caught_up(self, replica_id: int, at_ms: int) -> None:
        """Follower ``replica_id`` was at the log end at ``at_ms``: a fetch then skipped
        the partition because nothing had changed (``broker/fetch_session.py``)."""
        state = self.remote.get(replica_id)
        if state is not None and replica_id != self.local_id:
            state.last_caught_up_time_ms = max(state.last_caught_up_time_ms, at_ms)

    # ---------------------------------------------------------- ISR changes

    def maybe_expand_isr(self, replica_id: int) -> IsrProposal | None:
        """Propose adding ``replica_id`` when its LEO reached the HW and the start of the
        current leader epoch, and no other change is in flight."""
        state = self.remote.get(replica_id)
        if (not self.is_leader or self.pending is not None or state is None
                or replica_id in self.isr or self.leader_epoch_start_offset is None):
            return None
        if state.log_end_offset < max(self.high_watermark, self.leader_epoch_start_offset):
            return None
        new_isr = tuple(sorted(self.isr | {replica_id}))
        return self._propose(IsrChange.EXPAND, new_isr, (replica_id,))

    def maybe_shrink_isr(self, now_ms: int, replica_lag_time_max_ms: int) -> IsrProposal | None:
        """Propose removing the ISR followers not caught up within the lag time."""
        if not self.is_leader or self.pending is not None:
            return None
        def out_of_sync(rid: int) -> bool:
            state = self.remote.get(rid)
            leo = self.log_end_offset
            return state is None or not state.is_caught_up(leo, now_ms, replica_lag_time_max_ms)

        out = sorted(rid for rid in self.isr if rid != self.local_id and out_of_sync(rid))
        if not out:
            return None
        return self._propose(IsrChange.SHRINK, tuple(sorted(self.isr - set(out))), tuple(out))

    def isr_settled(self) -> bool:
        """Whether no ISR shrink can come of this leadership until it changes: no proposal
        in flight and every ISR follower has fetched up to our log end (a follower at the
        log end is caught up however long ago it fetched, as in Kafka).  Anything that can
        unsettle it -- an append, a new leadership or ISR -- goes through the partition's
        ``notify``, so the replica manager checks only the partitions notified since."""
        if self.pending is not None:
            return False
        if not self.is_leader:
            return True
        leo = self.log_end_offset
        for rid in self.isr:
            if rid != self.local_id:
                state = self.remote.get(rid)
                if state is None or state.log_end_offset != leo:
                    return False
        return True

    def _propose(self, kind: IsrChange, new_isr: tuple[int, ...], changed: tuple[int, ...]) -> IsrProposal:
        epochs = tuple(self.remote[r].broker_epoch if r != self.local_id and r in self.remote else -1
                       for r in new_isr)
        self.pending = IsrProposal(kind, self.leader_epoch, self.partition_epoch, new_isr, changed, epochs)
        return self.pending

    def on_partition_change_committed(self, new_isr: Iterable[int], partition_epoch: int,
                                      replicas: Iterable[int] | None = None) -> list[ProduceCompletion]:
        """A partition change for the current leader epoch was committed in the metadata
        log (the answer to our proposal or the controller's own).  Stale ones are ignored."""
        if partition_epoch <= self.partition_epoch:
            return []
        self.partition_epoch = partition_epoch
        self._assignment = _Assignment(tuple(replicas) if replicas is not None else self.replicas,
                                       frozenset(new_isr))
        self.pending = None
        if not self.is_leader:
            return []
        self._track_replicas(0)  # a replica joining by reassignment is not caught up yet
        return self._maybe_increment_hw()

    def on_alter_partition_failed(self) -> list[ProduceCompletion]:
        """The proposal was not applied: forget it (a later check may propose again)."""
        self.pending = None
        return self._maybe_increment_hw() if self.is_leader else []

    def on_alter_partition_error(self, proposal: IsrProposal,
                                 error: ErrorCode | None) -> tuple[bool, list[ProduceCompletion]]:
        """AlterPartition of ``proposal`` did not succeed: ``error`` is the controller's
        answer, None when there was none (timeout, connection lost).  Returns (send it
        again, completions).

        Only an answer proving the change was not applied (INELIGIBLE_REPLICA,
        OPERATION_NOT_ATTEMPTED) lets the leader fall back to its committed ISR, as
        Kafka's ``handleAlterPartitionError``.  Without an answer the change may well be
        committed: dropping an in-flight expansion then lets the HW pass records the new
        member lacks, which the controller may elect (the data-plane simulator found it).
        So the proposal stays pending -- the HW keeps counting the maximal ISR -- and is
        sent again, or, when the answer says our epochs are stale, until the metadata
        brings the change that settles it (``on_partition_change_committed``,
        ``become_*``)."""
        if self.pending is not proposal:
            return False, []
        if error in (ErrorCode.INELIGIBLE_REPLICA, ErrorCode.OPERATION_NOT_ATTEMPTED):
            return False, self.on_alter_partition_failed()
        if error in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION,
                     ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
                     ErrorCode.STALE_BROKER_EPOCH):
            return False, []
        return True, []

    # ----------------------------------------------------- log start/truncate

    def on_log_start_offset(self, log_start_offset: int) -> None:
        """The local log start advanced (retention or DeleteRecords)."""
        if log_start_offset > self.log_start_offset:
            self.log_start_offset = log_start_offset
            self.epoch_cache.truncate_from_start(log_start_offset)

    def on_truncated(self, log_end_offset: int) -> None:
        """The local log was truncated to ``log_end_offset`` (a no-op for the log when it
        is at or past the end).  As Kafka's ``truncateTo``, the epoch cache is truncated
        either way: an epoch this replica started as leader without appending anything
        sits at the log end and must not be reported as its last fetched epoch."""
        self.epoch_cache.truncate_from_end(min(log_end_offset, self.log_end_offset))
        if log_end_offset < self.log_end_offset:
            self.log_end_offset = log_end_offset
            self.high_watermark = min(self.high_watermark, log_end_offset)

    # --------------------------------------------------------- follower side

    def fetch_position(self) -> FetchPosition:
        return FetchPosition(self.leader_id, self.leader_epoch, self.log_end_offset,
                             self.epoch_cache.latest_epoch, self.log_start_offset)

    def on_fetch_response(self, high_watermark: int, diverging_epoch: EpochEndOffset | None = None,
                          log_start_offset: int | None = None, *,
                          request_leader_epoch: int | None = None) -> FetchResponseDecision:
        """A follower got its leader's answer.  Call it after appending the response's
        records (``on_local_append``); a response with a diverging epoch has none.

        ``request_leader_epoch``: the epoch the fetch was sent in; a response to a fetch
        of an earlier leadership is ignored (as is any response when not a follower).
        """
        if self.role is not Role.FOLLOWER or (
                request_leader_epoch is not None and request_leader_epoch != self.leader_epoch):
            return FetchResponseDecision(ignored=True)
        truncate_to, complete = None, True
        if self.unsafe_skip_truncation:  # UNSAFE: the divergence is ignored
            diverging_epoch = None
        if diverging_epoch is not None:
            target, complete = self._truncation_point(diverging_epoch)
            if target < self.log_end_offset:
                truncate_to = target
            self.on_truncated(target)
        new_start = None
        # A diverging answer's log start is not taken (Kafka applies it with the records,
        # and that answer has none): the truncation point may lie inside a batch, so the
        # log ends lower than the state can tell here, and a start past it cannot be.
        if diverging_epoch is None and log_start_offset is not None and log_start_offset > self.log_start_offset:
            new_start = min(log_start_offset, self.log_end_offset)
            if new_start > self.log_start_offset:
                self.on_log_start_offset(new_start)
            else:
                new_start = None
        if diverging_epoch is None:
            self.high_watermark = max(min(high_watermark, self.log_end_offset), self.log_start_offset)
        else:
            # Never raised by a diverging answer (Kafka does not take the HW from it): below
            # the leader's HW this log may still differ from the leader's when the point is
            # not final (KIP-279), and taking it let the HW cover records the next round
            # truncates (the data-plane simulator's seed 28473).
            self.high_watermark = max(min(self.high_watermark, high_watermark), self.log_start_offset)
        return FetchResponseDecision(False, truncate_to, complete, self.high_watermark, new_start)

    def _truncation_point(self, leader: EpochEndOffset) -> tuple[int, bool]:
        leo = self.log_end_offset
        if leader.end_offset == UNDEFINED_EPOCH_OFFSET:
            return min(self.high_watermark, leo), True
        epoch, end = self.epoch_cache.end_offset_for(leader.epoch, leo)
        if end == UNDEFINED_EPOCH_OFFSET:
            return min(leader.end_offset, leo), True
        if epoch != leader.epoch:
            return min(end, leo), False
        return min(end, leader.end_offset, leo), True

    def on_offset_out_of_range(self, leader_log_start_offset: int,
                               leader_log_end_offset: int) -> OutOfRangeDecision:
        """A follower's fetch offset is outside the leader's log (Kafka's fetcher rule):
        a leader log shorter than ours (only after an unclean election) truncates ours; a
        leader log starting past our end restarts ours at its start; else fetch again."""
        if leader_log_end_offset < self.log_end_offset:
            self.on_truncated(leader_log_end_offset)
            return OutOfRangeDecision(truncate_to=leader_log_end_offset)
        if leader_log_start_offset > self.log_end_offset:
            self.on_started_at(leader_log_start_offset)
            return OutOfRangeDecision(start_at=leader_log_start_offset)
        return OutOfRangeDecision()

    def on_started_at(self, offset: int) -> None:
        """The local log was emptied to start at ``offset`` (``truncateFullyAndStartAt``)."""
        self.log_start_offset = self.log_end_offset = self.high_watermark = offset
        self.epoch_cache.clear()
