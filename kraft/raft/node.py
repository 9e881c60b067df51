"""The sans-IO Raft core of the controller quorum (KIP-595 with KIP-996 pre-vote, KIP-630).

Theory of operation
-------------------
A :class:`RaftNode` is a pure state machine in the style of etcd's RawNode.  It never
touches a socket, a clock or a file.  Inputs:

* ``tick(now_ms)``: the clock moved; timers that are due fire;
* ``step(envelope)``: a request or response arrived from another node;
* ``propose(records)``: the leader appends a batch;
* ``create_snapshot(end_offset, data)``: the state machine snapshotted committed state;
* ``resign()``: graceful shutdown of a leader (EndQuorumEpoch).

Outputs accumulate until the caller takes them with ``ready()``.  The caller then, in this
order: persists ``hard_state``, ``snapshot``, ``truncate_to`` and ``entries`` and fsyncs;
sends ``messages`` (these may also leave before the fsync) and ``messages_after_persist``
(vote grants and fetches, whose fetch offset reports the durable log end); loads
``load_snapshot`` and applies ``committed``; reports ``leader_change``; and finally calls
``advance(ready)``.  Only one Ready is outstanding at a time.

Replication is pull-based as in KRaft: followers and observers send Fetch with their log
end offset and last fetched epoch; the leader answers with records, with a diverging epoch
(the end offset of the largest epoch <= the follower's, from the leader-epoch history) so
the follower truncates, or with a snapshot id when the follower is below the log start.
The leader's high watermark is the offset a majority of voters reached, counting its own
durable (fsynced) log end, and only moves once it covers an entry of the current epoch.

The role is a field plus a swapped step function (``self._step``); timers are absolute
deadlines in ms compared with the injected clock.  Internal checks raise
:class:`RaftInvariantError`; the simulator relies on them as its oracle.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from random import Random

from kraft.raft.config import RaftConfig
from kraft.raft.memlog import RaftLog
from kraft.raft.messages import (
    NO_LEADER, VOTERS, Batch, BeginQuorumEpochRequest, BeginQuorumEpochResponse,
    EndQuorumEpochRequest, EndQuorumEpochResponse, Envelope, Errors, FetchRequest,
    FetchResponse, FetchSnapshotRequest, FetchSnapshotResponse, HardState, LeaderAndEpoch,
    OffsetAndEpoch, Snapshot, VoteRequest, VoteResponse,
)
from kraft.raft.voters import VoterChangeError, VoterHistory, VoterSet

NEVER = float("inf")


class Role(enum.Enum):
    UNATTACHED = "unattached"
    VOTED = "voted"
    PROSPECTIVE = "prospective"
    CANDIDATE = "candidate"
    LEADER = "leader"
    FOLLOWER = "follower"
    RESIGNED = "resigned"


class RaftError(Exception):
    """Base of the errors the core raises to its caller."""


class NotLeaderError(RaftError):
    """``propose`` on a node that is not the leader; carries the leader it knows of."""

    def __init__(self, leader: LeaderAndEpoch) -> None:
        super().__init__(f"not the leader; current leader {leader.leader_id} "
                         f"in epoch {leader.epoch}")
        self.leader = leader


class RaftInvariantError(AssertionError):
    """A Raft safety property the core checks on itself was violated."""


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise RaftInvariantError(message)


@dataclass(frozen=True, slots=True)
class Ready:
    """One batch of work for the caller; see the module docstring for the order."""

    hard_state: HardState | None
    snapshot: Snapshot | None  # persist, then drop log entries below its end offset
    truncate_to: int | None  # drop log entries at or above this offset
    entries: tuple[Batch, ...]  # append
    messages: tuple[Envelope, ...]
    messages_after_persist: tuple[Envelope, ...]
    load_snapshot: Snapshot | None  # load into the state machine before ``committed``
    committed: tuple[Batch, ...]
    leader_change: LeaderAndEpoch | None
    high_watermark: int
    log_end_offset: int  # the log end offset once this Ready is persisted

    @property
    def must_sync(self) -> bool:
        return (self.hard_state is not None or self.snapshot is not None
                or self.truncate_to is not None or bool(self.entries))


@dataclass(slots=True)
class _Replica:
    end_offset: int = 0
    last_fetch_ms: float = -NEVER


def default_leader_change_record(leader_id: int, epoch: int, voters: frozenset[int]) -> bytes:
    """Placeholder body of the LeaderChange control record (the shell encodes Kafka's)."""
    return f"LeaderChange leader={leader_id} epoch={epoch} voters={sorted(voters)}".encode()


class PlainVotersCodec:
    """Placeholder VotersRecord bodies (``voters=1,2,3``); the shell encodes Kafka's.

    ``voters_of`` reads the ids from a record; ``snapshot_voters`` finds the record a
    snapshot carries (None: the snapshot predates any change, the static set applies).
    """

    @staticmethod
    def encode(ids) -> bytes:
        return b"voters=" + ",".join(str(i) for i in sorted(ids)).encode()

    @staticmethod
    def voters_of(record: bytes) -> dict[int, None]:
        """Voter id -> directory id (None: not known; placeholder records name none)."""
        text = record.decode().partition("=")[2]
        return {int(i): None for i in text.split(",") if i}

    @staticmethod
    def snapshot_voters(data: bytes) -> bytes | None:
        return None


class RaftNode:
    """One quorum member; construct it from persisted state to restart it."""

    RETAINED_SNAPSHOTS = 3

    def __init__(self, config: RaftConfig, rng: Random, *, now_ms: int = 0,
                 hard_state: HardState | None = None, snapshot: Snapshot | None = None,
                 batches=(), leader_change_record=default_leader_change_record,
                 voters_codec=PlainVotersCodec) -> None:
        self.config = config
        self.id = config.node_id
        self._rng = rng
        self._now = now_ms
        self._leader_change_record = leader_change_record
        hs = hard_state or HardState(0)
        self.epoch, self.voted_id, self.leader_id = hs.epoch, hs.voted_id, hs.leader_id
        self.log = RaftLog(snapshot, batches)
        self._voters_codec = voters_codec
        self._voters = VoterHistory(VoterSet(config.voters))
        if snapshot is not None:
            self._adopt_snapshot_voters(snapshot)
        for batch in self.log.batches_in(self.log.start_offset, self.log.end_offset):
            if batch.control == VOTERS:
                self._voters.add(batch.base_offset, self._voter_set_of(batch))
        self.high_watermark = self.log.start_offset
        # Durability bookkeeping (see ready/advance).
        self._stable_end = self.log.end_offset  # durable prefix that matches memory
        self._written_end = self.log.end_offset  # log end as handed to the caller
        self._unstable_from = self.log.end_offset
        self._hard_dirty = False
        self._pending_snapshot: Snapshot | None = None
        self._applied = 0  # end offset of what was handed out for applying
        self._ready_outstanding = False
        self._msgs: list[Envelope] = []
        self._msgs_after: list[Envelope] = []
        self._notified = LeaderAndEpoch(NO_LEADER, -1)
        # Random start: responses meant for a previous incarnation must not match.
        self._next_cid = rng.randrange(1 << 30)
        self._inflight: dict[int, tuple[int, object, float]] = {}
        # Per-role state, reset by the _become_* functions.
        self.role = Role.UNATTACHED
        self._step = _STEP_UNATTACHED
        self._deadline = NEVER  # election / fetch / backoff timer of the role
        self._votes: dict[int, bool] = {}
        self._backing_off = False
        self._failed_elections = 0
        self._fetch_cid: int | None = None
        self._next_fetch_ms = 0.0
        self._leader_contact_ms = -NEVER
        self._observer_target: int | None = None
        self._snap_fetch: tuple[OffsetAndEpoch, bytearray] | None = None
        self._snap_cid: int | None = None
        self._replicas: dict[int, _Replica] = {}
        self._observers: dict[int, _Replica] = {}  # non-voters fetching from this leader
        self._fetch_directories: dict = {}  # replica id -> directory id its fetches carry
        self._epoch_start_offset = 0
        # The end of the last batch this leader appended that was not ``quiet`` (see
        # ``propose``): a high watermark that moves past quiet batches only wakes no one.
        self._loud_end = 0
        self._parked: dict[int, tuple[Envelope, float]] = {}
        # Replica id -> the high watermark this leader's last answer to it carried: what that
        # fetcher knows.  Fetch v17 has no field for it (KIP-1166 adds one in v18), so a
        # leader that guessed instead parked the second follower's ack of a batch the first
        # one's ack had just committed, and that follower learned the commit up to a fetch
        # wait (500 ms) late.
        self._told: dict[int, int] = {}
        self._check_quorum_ms = NEVER
        self._announce_ms = NEVER
        # Recent snapshots stay fetchable so a slow follower can finish its download.
        self._retained: dict[OffsetAndEpoch, Snapshot] = {}
        if snapshot is not None:
            self._retained[snapshot.snapshot_id] = snapshot
        self._restore_role()

    # ================================================================ public API

    @property
    def voters(self) -> frozenset[int]:
        """The voter set in force: the newest VotersRecord in the log, committed or not."""
        return self._voters.latest.ids

    @property
    def is_voter(self) -> bool:
        return self._is_me(self._voters.latest) and not self.config.observer_only

    def _is_me(self, voters: VoterSet) -> bool:
        return voters.is_key(self.id, self.config.directory_id)

    @property
    def _takes_part(self) -> bool:
        """Votes, runs elections and persists its votes: a voter of the newest set, or of
        the committed one while its removal is not committed yet.  Raft's dissertation
        (§4.2.2) needs the latter: a removed leader that stepped down before committing its
        removal may hold the only copy of it, and must be able to lead again to finish it."""
        if self.config.observer_only:
            return False
        return self._is_me(self._voters.latest) or self._is_me(self._voters.at(self.high_watermark))

    @property
    def majority(self) -> int:
        return self._voters.latest.majority

    @property
    def latest_voters(self) -> VoterSet:
        """The voter set in force, with the directory ids it names."""
        return self._voters.latest

    def voters_at(self, end_offset: int) -> VoterSet:
        """The voter set in force after the records below ``end_offset`` (for a snapshot)."""
        return self._voters.at(end_offset)

    def voter_sets_since(self, end_offset: int) -> list[VoterSet]:
        """Every voter set this log has in force from ``end_offset`` on (the sets a leader
        may have counted with to move its high watermark to ``end_offset``)."""
        return self._voters.since(end_offset)

    @property
    def voter_change_pending(self) -> bool:
        """A VotersRecord is in the log but not yet committed."""
        return self._voters.latest_offset >= self.high_watermark

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def leader(self) -> LeaderAndEpoch:
        leader_id = self.leader_id
        if leader_id == self.id and self.role is not Role.LEADER:
            leader_id = NO_LEADER  # resigned, or restarted after leading
        return LeaderAndEpoch(leader_id, self.epoch)

    @property
    def hard_state(self) -> HardState:
        return HardState(self.epoch, self.voted_id, self.leader_id)

    @property
    def now_ms(self) -> float:
        return self._now

    def tick(self, now_ms: float | None = None) -> None:
        """Advance the clock (by ``tick_ms`` without an argument) and fire due timers."""
        now = self._now + self.config.tick_ms if now_ms is None else now_ms
        _check(now >= self._now, f"clock went back from {self._now} to {now}")
        self._now = now
        for cid, (dst, msg, deadline) in list(self._inflight.items()):
            if deadline <= now:
                del self._inflight[cid]
                self._on_request_timeout(cid, dst, msg)
        if self.role is Role.LEADER:
            for replica_id, (env, deadline) in list(self._parked.items()):
                if deadline <= now:
                    del self._parked[replica_id]
                    self._answer_fetch(env, park=False, fresh=False)
            if now >= self._announce_ms:
                self._announce()
            if self.role is Role.LEADER and now >= self._check_quorum_ms:
                self._check_quorum()
            self._maybe_step_down_removed()
        if now >= self._deadline:
            self._on_timer()
        self._maybe_fetch()

    def next_deadline_ms(self) -> float:
        """The earliest time at which ``tick`` would do something (``inf`` if never)."""
        times = [self._deadline, self._check_quorum_ms, self._announce_ms]
        times.extend(deadline for _, _, deadline in self._inflight.values())
        times.extend(deadline for _, deadline in self._parked.values())
        if self._wants_fetch():
            times.append(self._next_fetch_ms)
        return min(times)

    def peer_gone(self, node_id: int) -> None:
        """The driver found nothing listening at ``node_id``'s address: it refused a
        connection, or closed one with a request outstanding (a killed process does both).
        A follower of that leader stops waiting out ``fetch_timeout_ms`` from its last
        contact, as on EndQuorumEpoch: it grants pre-votes as one that lost its leader, and
        the remaining voters run in node id order, half an election timeout apart (both
        followers learn it at the same moment; running at once, they split the vote).
        KIP-996's pre-vote keeps a mistake from disrupting a leader that is alive: a voter
        still hearing from it refuses, and this node follows it again.

        An observer looking for the leader that asked a voter that is gone asks another
        after ``fetch_retry_backoff_ms``, not after ``request_timeout_ms``: it picks among
        all voters, the dead one too, and two such picks in a row kept a broker from the
        new controller for 4 s, longer than its session (a CI run's failover test)."""
        if node_id == self._observer_target and self._fetch_cid is not None \
                and self.role is not Role.FOLLOWER:
            self._inflight.pop(self._fetch_cid, None)
            self._fetch_cid = None
            self._observer_target = None
            self._next_fetch_ms = self._now + self.config.fetch_retry_backoff_ms
            return
        if self.role is not Role.FOLLOWER or node_id != self.leader_id:
            return
        if not self._takes_part:
            self._on_timer()  # an observer looks for the leader again at once
            return
        self._leader_gone(sorted(v for v in self.voters if v != node_id))

    def _leader_gone(self, successors) -> None:
        """Grant pre-votes from now on; run first if first among ``successors``."""
        self._leader_contact_ms = -NEVER
        if self.id in successors:
            rank = list(successors).index(self.id)
            delay = rank * self.config.election_timeout_ms // 2 + self._rng.randrange(50)
        else:
            delay = self._election_timeout()
        self._deadline = min(self._deadline, self._now + delay)

    def step(self, env: Envelope) -> None:
        """Handle one message addressed to this node."""
        if env.dst != self.id:
            raise ValueError(f"message for {env.dst} stepped into node {self.id}")
        msg = env.message
        if not env.is_request:
            pending = self._inflight.get(env.correlation_id)
            if pending is None or pending[0] != env.src:
                return  # a duplicate or a response to a request that timed out
            del self._inflight[env.correlation_id]
        handler = self._step.get(type(msg))
        if handler is not None:
            handler(self, env, msg)
        elif env.is_request:
            raise RaftInvariantError(f"no handler for {type(msg).__name__}")
        self._maybe_fetch()

    def propose(self, records, quiet: bool = False) -> tuple[int, int]:
        """Append ``records`` as one batch; returns (offset of its last record, epoch).

        ``quiet``: nobody waits to learn that these records committed (the controller's
        NoOpRecords).  A high watermark that moves past them is not sent to the fetchers at
        once; they learn it with the next fetch the leader answers anyway, as Kafka's
        leader (before KIP-1166) tells every high watermark.  An idle 3-node quorum's
        leader answered 4.2 fetches a second so, 5.95 when every commit answered them.

        Raises:
            NotLeaderError: this node is not the leader of its epoch.
        """
        if self.role is not Role.LEADER:
            raise NotLeaderError(self.leader)
        records = tuple(records)
        batch = self._leader_append(records, control=False, quiet=quiet)
        return batch.last_offset, self.epoch

    def change_voters(self, ids: frozenset[int], record: bytes) -> int:
        """Append a VotersRecord that adds or removes exactly one voter (KIP-853); returns
        its offset, committed once the high watermark passes it.

        Raft's single-server changes are safe only one at a time, and only once the leader
        has committed an entry of its own epoch (so no change of a previous leader is still
        uncommitted behind it); both refusals are retriable.

        Raises:
            NotLeaderError: this node is not the leader.
            VoterChangeError: the change is refused; ``error`` says why.
        """
        if self.role is not Role.LEADER:
            raise NotLeaderError(self.leader)
        ids = frozenset(ids)
        current = self.voters
        added, removed = ids - current, current - ids
        if not added and not removed and self._fills_directories(record):
            pass  # the same voters with directories learnt from their fetches
        elif len(added) + len(removed) != 1:
            raise VoterChangeError(Errors.INVALID_REQUEST,
                                   f"a change adds or removes one voter: {sorted(current)} -> "
                                   f"{sorted(ids)}")
        if not ids:
            raise VoterChangeError(Errors.INVALID_REQUEST, "the last voter cannot be removed")
        if self.high_watermark <= self._epoch_start_offset:
            raise VoterChangeError(Errors.REQUEST_TIMED_OUT,
                                   "the leader has not committed an entry of its epoch yet")
        if self.voter_change_pending and not self.config.unsafe_concurrent_voter_changes:
            raise VoterChangeError(Errors.REQUEST_TIMED_OUT,
                                   "another voter change is not committed yet")
        if added:
            (new,) = added
            observer = self._observers.get(new)
            fresh = observer is not None and \
                self._now - observer.last_fetch_ms < self.config.fetch_timeout_ms
            # Caught up: within one fetch of the high watermark.  A voter that joins far
            # behind would stall commits for as long as it takes to catch up.
            if not fresh or observer.end_offset + self.CATCH_UP_LAG < self.high_watermark:
                raise VoterChangeError(Errors.REQUEST_TIMED_OUT,
                                       f"replica {new} is not fetching or not caught up")
        if set(self._voters_codec.voters_of(record)) != ids:
            raise ValueError(f"the VotersRecord does not name {sorted(ids)}")
        batch = self._leader_append((record,), control=VOTERS)
        return batch.base_offset

    CATCH_UP_LAG = 100  # records an observer may trail the high watermark by and still join

    def _fills_directories(self, record: bytes) -> bool:
        latest = self._voters.latest
        named = {i: d for i, d in self._voters_codec.voters_of(record).items() if d is not None}
        known = dict(latest.directories)
        return all(named.get(i) == d for i, d in known.items()) and len(named) > len(known)

    def replica_directory(self, replica_id: int):
        """The directory id ``replica_id`` fetches with (on a leader), else the one the
        voter set names; None when neither is known."""
        if replica_id == self.id:
            return self.config.directory_id
        return self._fetch_directories.get(replica_id) or self._voters.latest.directory(replica_id)

    def directories_to_record(self) -> dict | None:
        """On a leader: voter id -> directory id for a VotersRecord that names every voter's
        directory, when the current set lacks some that fetches have shown and no change is
        in flight (then a replica that comes back with a new disk is no longer its voter)."""
        latest = self._voters.latest
        if (self.role is not Role.LEADER or self.voter_change_pending
                or self.high_watermark <= self._epoch_start_offset
                or len(latest.directories) == len(latest.ids)):
            return None
        dirs = {i: self.replica_directory(i) if i != self.id else self.config.directory_id
                for i in latest.ids}
        if any(d is None for d in dirs.values()):
            return None
        return dirs

    def create_snapshot(self, end_offset: int, data: bytes) -> Snapshot:
        """Adopt the state machine's snapshot of every applied record below ``end_offset``.

        The log before ``end_offset`` is dropped; the snapshot goes out in the next Ready.
        """
        if not self.log.start_offset < end_offset <= min(self._applied, self.high_watermark):
            raise ValueError(f"snapshot end {end_offset} not in ({self.log.start_offset}, "
                             f"applied {self._applied}]")
        epoch = self.log.epoch_at(end_offset - 1)
        snapshot = Snapshot(OffsetAndEpoch(end_offset, epoch), bytes(data))
        self.log.trim_prefix(snapshot)
        self._voters.trim_prefix(end_offset)
        self._pending_snapshot = snapshot
        self._retain(snapshot)
        return snapshot

    def resign(self) -> None:
        """Graceful shutdown of a leader: EndQuorumEpoch to the voters, then resigned."""
        if self.role is Role.LEADER:
            self._resign()

    def has_ready(self) -> bool:
        if self._ready_outstanding:
            return False
        return bool(self._hard_dirty or self._pending_snapshot is not None
                    or self._unstable_from < self.log.end_offset
                    or self._unstable_from < self._written_end
                    or self._msgs or self._msgs_after or self._applied < self.log.start_offset
                    or self._committable() or self.leader != self._notified)

    def ready(self) -> Ready:
        """Take the accumulated work; call ``advance`` with it once it is done."""
        _check(not self._ready_outstanding, "ready() called twice without advance()")
        truncate_to = self._unstable_from if self._unstable_from < self._written_end else None
        entries = self.log.read(max(self._unstable_from, self.log.start_offset), NEVER)
        load = None
        if self._applied < self.log.start_offset:
            load = self.log.snapshot
            self._applied = self.log.start_offset
        committed = tuple(self._committable())
        if committed:
            self._applied = committed[-1].end_offset
        change = None
        if self.leader != self._notified:
            change = self._notified = self.leader
        rd = Ready(
            hard_state=self.hard_state if self._hard_dirty else None,
            snapshot=self._pending_snapshot, truncate_to=truncate_to, entries=entries,
            messages=tuple(self._msgs), messages_after_persist=tuple(self._msgs_after),
            load_snapshot=load, committed=committed, leader_change=change,
            high_watermark=self.high_watermark, log_end_offset=self.log.end_offset)
        self._hard_dirty = False
        self._pending_snapshot = None
        self._written_end = self._unstable_from = self.log.end_offset
        self._msgs, self._msgs_after = [], []
        self._ready_outstanding = True
        return rd

    def advance(self, rd: Ready) -> None:
        """The caller persisted, sent and applied ``rd``."""
        _check(self._ready_outstanding, "advance() without an outstanding Ready")
        self._ready_outstanding = False
        self._stable_end = min(rd.log_end_offset, self._unstable_from, self.log.end_offset)
        if (self.role is Role.CANDIDATE and self.id not in self._votes
                and rd.hard_state == HardState(self.epoch, self.id, NO_LEADER)):
            self._votes[self.id] = True
            self._tally()
        if self.role is Role.LEADER:
            self._maybe_advance_high_watermark()
            self._maybe_step_down_removed()

    def _retain(self, snapshot: Snapshot) -> None:
        self._retained[snapshot.snapshot_id] = snapshot
        while len(self._retained) > self.RETAINED_SNAPSHOTS:
            del self._retained[min(self._retained)]

    # ================================================================ roles

    def _restore_role(self) -> None:
        if self.leader_id == self.id and self.epoch > 0:
            # A leader that restarted may not lead its old epoch again.
            self._become_resigned(())
        elif self.leader_id != NO_LEADER:
            self._become_follower(self.epoch, self.leader_id)
        elif self.voted_id != NO_LEADER and self._takes_part:
            self._set_role(Role.VOTED, _STEP_UNATTACHED)
            self._deadline = self._now + self._election_timeout()
        else:
            self._become_unattached(self.epoch)

    def _set_role(self, role: Role, step: dict) -> None:
        if self.role is Role.LEADER and role is not Role.LEADER:
            for env, _ in self._parked.values():
                self._answer_fetch(env, park=False, fresh=False)
            self._parked.clear()
            self._check_quorum_ms = self._announce_ms = NEVER
        self.role, self._step = role, step
        self._votes = {}
        self._backing_off = False
        self._fetch_cid = None
        self._snap_fetch = self._snap_cid = None

    def _set_epoch_state(self, epoch: int, voted_id: int, leader_id: int) -> None:
        _check(epoch >= self.epoch, f"node {self.id}: epoch {self.epoch} -> {epoch}")
        if epoch == self.epoch:
            _check(self.voted_id in (NO_LEADER, voted_id) or voted_id == NO_LEADER,
                   f"node {self.id} voted twice in epoch {epoch}: {self.voted_id}, {voted_id}")
            _check(self.leader_id in (NO_LEADER, leader_id) or leader_id == NO_LEADER,
                   f"node {self.id} saw two leaders in epoch {epoch}: "
                   f"{self.leader_id}, {leader_id}")
            voted_id = voted_id if voted_id != NO_LEADER else self.voted_id
        new = (epoch, voted_id, leader_id)
        if new != (self.epoch, self.voted_id, self.leader_id):
            self.epoch, self.voted_id, self.leader_id = new
            if self._takes_part or self.voted_id != NO_LEADER:  # a vote must survive a crash
                self._hard_dirty = True

    def _become_unattached(self, epoch: int, timeout_ms: float | None = None) -> None:
        if epoch > self.epoch:
            self._set_epoch_state(epoch, NO_LEADER, NO_LEADER)
        elif not self._takes_part:
            self.leader_id = NO_LEADER  # an observer forgets a silent leader
        self._set_role(Role.VOTED if self.voted_id != NO_LEADER else Role.UNATTACHED,
                       _STEP_UNATTACHED)
        self._deadline = (self._now + (self._election_timeout() if timeout_ms is None
                                       else timeout_ms)) if self._takes_part else NEVER
        self._observer_target = None

    def _become_follower(self, epoch: int, leader_id: int, contact: bool = False) -> None:
        """Follow ``leader_id``; ``contact`` when the leader itself told us (not hearsay)."""
        self._set_epoch_state(epoch, NO_LEADER, leader_id)
        self._set_role(Role.FOLLOWER, _STEP_FOLLOWER)
        self._failed_elections = 0
        self._leader_contact_ms = self._now if contact else -NEVER
        self._deadline = self._now + self.config.fetch_timeout_ms
        self._next_fetch_ms = self._now

    def _become_prospective(self) -> None:
        """KIP-996: ask for pre-votes; the epoch does not move and nothing is persisted."""
        self._set_role(Role.PROSPECTIVE, _STEP_UNATTACHED)
        self._deadline = self._now + self._election_timeout()
        self._votes = {self.id: True}
        self._broadcast_vote(pre_vote=True)
        self._tally()

    def _become_candidate(self) -> None:
        self._set_epoch_state(self.epoch + 1, self.id, NO_LEADER)
        self._set_role(Role.CANDIDATE, _STEP_UNATTACHED)
        self._deadline = self._now + self._election_timeout()
        # Our own vote counts once it is durable (see advance): a node that is a majority
        # by itself must not lead, and announce itself, on a vote a crash can take back,
        # or another replica could win the same epoch with that vote (once voters change,
        # one that is not even in our set).
        self._votes = {}
        self._broadcast_vote(pre_vote=False)

    def _become_leader(self) -> None:
        self._set_epoch_state(self.epoch, self.id, self.id)
        self._set_role(Role.LEADER, _STEP_LEADER)
        self._failed_elections = 0
        self._deadline = NEVER
        self._replicas = {v: _Replica() for v in self.voters if v != self.id}
        self._observers, self._fetch_directories, self._told = {}, {}, {}
        self._epoch_start_offset = self.log.end_offset
        self._check_quorum_ms = self._now + self._check_quorum_window()
        self._announce_ms = self._now
        self._announce()
        record = self._leader_change_record(self.id, self.epoch, self.voters)
        self._leader_append((record,), control=True)

    def _become_resigned(self, successors) -> None:
        self._set_role(Role.RESIGNED, _STEP_UNATTACHED)
        self._deadline = self._now + self._election_timeout()
        for voter in sorted(self.voters - {self.id}):
            self._send_request(voter, EndQuorumEpochRequest(self.id, self.epoch,
                                                            tuple(successors)))

    def _resign(self) -> None:
        successors = sorted(self._replicas, key=lambda r: -self._replicas[r].end_offset)
        self._become_resigned(successors)

    def _observe(self, epoch: int, leader_id: int) -> bool:
        """Adopt a newer epoch (or a leader of ours) learnt from a message; True if it moved."""
        if epoch > self.epoch:
            if leader_id != NO_LEADER and leader_id != self.id:
                self._become_follower(epoch, leader_id)
            else:
                self._become_unattached(epoch)
            return True
        if (epoch == self.epoch and leader_id not in (NO_LEADER, self.id)
                and self.leader_id == NO_LEADER):
            self._become_follower(epoch, leader_id)
            return True
        return False

    # ================================================================ timers

    def _election_timeout(self) -> int:
        t = self.config.election_timeout_ms
        return t + self._rng.randrange(t)

    def _check_quorum_window(self) -> float:
        return 1.5 * self.config.fetch_timeout_ms

    def _on_timer(self) -> None:
        self._deadline = NEVER
        role = self.role
        if not self._takes_part:
            if role is Role.FOLLOWER:
                self._become_unattached(self.epoch)
            return
        if role is Role.CANDIDATE and not self._backing_off:
            # Lost the election: back off exponentially with jitter, then pre-vote again.
            self._failed_elections += 1
            cap = min(self.config.election_backoff_max_ms, 50 << min(self._failed_elections, 10))
            self._backing_off = True
            self._deadline = self._now + 1 + self._rng.randrange(cap)
        elif role is Role.PROSPECTIVE:
            self._prospective_failed()
        else:
            self._become_prospective()

    def _prospective_failed(self) -> None:
        if self.leader_id not in (NO_LEADER, self.id):
            self._become_follower(self.epoch, self.leader_id)
        else:
            self._become_unattached(self.epoch)

    def _announce(self) -> None:
        """BeginQuorumEpoch to every voter that does not fetch, again every fetch timeout.

        Repeating it matters: a voter stuck in a higher epoch after a failed candidacy
        answers FENCED_LEADER_EPOCH, and the election that follows brings it back.
        """
        busy = {dst for dst, msg, _ in self._inflight.values()
                if isinstance(msg, BeginQuorumEpochRequest)}
        timeout = self.config.fetch_timeout_ms
        for voter in sorted(self._replicas):
            replica = self._replicas[voter]
            if voter not in busy and self._now - replica.last_fetch_ms >= timeout:
                self._send_request(voter, BeginQuorumEpochRequest(self.id, self.epoch))
        self._announce_ms = self._now + timeout

    def _check_quorum(self) -> None:
        window = self._check_quorum_window()
        counts_self = 1 if self.id in self.voters else 0  # a leader being removed does not
        alive = counts_self + sum(1 for r in self._replicas.values()
                                  if r.last_fetch_ms + window > self._now)
        if alive < self.majority:
            self._resign()
            return
        oldest = sorted((r.last_fetch_ms for r in self._replicas.values()), reverse=True)
        need = self.majority - counts_self  # other voters that must stay fresh
        self._check_quorum_ms = max(oldest[need - 1] + window, self._now + 1) \
            if need > 0 else NEVER

    def _on_request_timeout(self, cid: int, dst: int, msg) -> None:
        if cid == self._fetch_cid:
            self._fetch_cid = None
            self._observer_target = None
        elif cid == self._snap_cid:
            self._snap_cid = None
            if self._snap_fetch is not None:
                self._send_snapshot_fetch()
        elif isinstance(msg, VoteRequest):
            wanted = Role.PROSPECTIVE if msg.pre_vote else Role.CANDIDATE
            epoch = self.epoch + 1 if msg.pre_vote else self.epoch
            if self.role is wanted and msg.candidate_epoch == epoch and dst not in self._votes:
                self._send_request(dst, self._vote_request(msg.pre_vote, dst))


    # ================================================================ messages out

    def _send_request(self, dst: int, msg, after_persist: bool = False) -> int:
        cid = self._next_cid
        self._next_cid += 1
        self._inflight[cid] = (dst, msg, self._now + self.config.request_timeout_ms)
        env = Envelope(self.id, dst, cid, msg)
        (self._msgs_after if after_persist else self._msgs).append(env)
        return cid

    def _reply(self, req: Envelope, msg, after_persist: bool = False) -> None:
        env = Envelope(self.id, req.src, req.correlation_id, msg)
        (self._msgs_after if after_persist else self._msgs).append(env)

    def _vote_request(self, pre_vote: bool, voter: int) -> VoteRequest:
        last = self.log.last
        epoch = self.epoch + 1 if pre_vote else self.epoch
        return VoteRequest(epoch, self.id, last.epoch, last.offset, pre_vote,
                           self._voters.latest.directory(voter))

    def _broadcast_vote(self, pre_vote: bool) -> None:
        for voter in sorted(self.voters - {self.id}):
            # A candidate's own vote is durable before anyone can elect it.
            self._send_request(voter, self._vote_request(pre_vote, voter),
                               after_persist=not pre_vote)

    # ================================================================ votes

    def _on_VoteRequest(self, env: Envelope, req: VoteRequest) -> None:
        # Answered on its merits whatever our voter set says: the candidate counts us because
        # its log adds us in a VotersRecord we may not have fetched yet (KIP-853 grants such
        # votes too), or it was added by one.  Only a replica that lost its disk abstains.
        if self.config.observer_only:
            self._reply(env, VoteResponse(Errors.INCONSISTENT_VOTER_SET, *self._leader_fields(),
                                          False, req.pre_vote))
            return
        mine = self.config.directory_id
        if req.voter_directory_id is not None and mine is not None and req.voter_directory_id != mine:
            self._reply(env, VoteResponse(Errors.INVALID_VOTER_KEY, *self._leader_fields(),
                                          False, req.pre_vote))
            return
        if req.pre_vote:
            granted = (req.candidate_epoch > self.epoch and not self._heard_from_leader()
                       and self._log_ok(req))
            self._reply(env, VoteResponse(Errors.NONE, *self._leader_fields(), granted, True))
            return
        if req.candidate_epoch < self.epoch:
            self._reply(env, VoteResponse(Errors.FENCED_LEADER_EPOCH, *self._leader_fields(),
                                          False))
            return
        if req.candidate_epoch > self.epoch:
            self._become_unattached(req.candidate_epoch)
        granted = (self.leader_id == NO_LEADER and self.voted_id in (NO_LEADER, req.candidate_id)
                   and self.role in (Role.UNATTACHED, Role.VOTED, Role.PROSPECTIVE)
                   and self._log_ok(req))
        if granted:
            self._set_epoch_state(self.epoch, req.candidate_id, NO_LEADER)
            self._set_role(Role.VOTED, _STEP_UNATTACHED)
            self._deadline = self._now + self._election_timeout()
        after = granted and not self.config.unsafe_skip_vote_fsync
        self._reply(env, VoteResponse(Errors.NONE, *self._leader_fields(), granted), after)

    def _heard_from_leader(self) -> bool:
        if self.role is Role.LEADER:
            return True
        return (self.role is Role.FOLLOWER
                and self._now - self._leader_contact_ms < self.config.fetch_timeout_ms)

    def _log_ok(self, req: VoteRequest) -> bool:
        """Raft §5.4.1: the candidate's log is at least as up to date as ours."""
        if self.config.unsafe_skip_vote_log_check:
            return True
        ours = self.log.last
        return (req.last_offset_epoch, req.last_offset) >= (ours.epoch, ours.offset)

    def _leader_fields(self) -> tuple[int, int]:
        leader = self.leader
        return leader.leader_id, leader.epoch

    def _on_VoteResponse(self, env: Envelope, resp: VoteResponse) -> None:
        if self._observe(resp.leader_epoch, resp.leader_id):
            return
        wanted = Role.PROSPECTIVE if resp.pre_vote else Role.CANDIDATE
        if self.role is not wanted or resp.leader_epoch != self.epoch and not resp.pre_vote:
            return
        if resp.error_code is not Errors.NONE and not resp.pre_vote:
            return
        self._votes[env.src] = resp.vote_granted
        self._tally()

    def _tally(self) -> None:
        # Only members of the newest set count, our own vote included: a removed voter
        # finishing its removal needs the remaining voters' majority.
        voters = self.voters
        granted = sum(1 for v, g in self._votes.items() if g and v in voters)
        rejected = sum(1 for v, g in self._votes.items() if not g and v in voters)
        majority = self.majority
        if granted >= majority:
            if self.role is Role.PROSPECTIVE:
                self._become_candidate()
            elif self.role is Role.CANDIDATE:
                self._become_leader()
        elif rejected > len(self.voters) - majority:
            if self.role is Role.PROSPECTIVE:
                self._prospective_failed()
            elif not self._backing_off:
                self._deadline = self._now
                self._on_timer()

    # ================================================================ quorum epoch

    def _on_BeginQuorumEpochRequest(self, env: Envelope, req: BeginQuorumEpochRequest) -> None:
        if req.leader_epoch < self.epoch:
            self._reply(env, BeginQuorumEpochResponse(Errors.FENCED_LEADER_EPOCH,
                                                      *self._leader_fields()))
            return
        if req.leader_epoch > self.epoch or self.role is not Role.FOLLOWER:
            self._become_follower(req.leader_epoch, req.leader_id, contact=True)
        self._reply(env, BeginQuorumEpochResponse(Errors.NONE, *self._leader_fields()))

    def _on_BeginQuorumEpochResponse(self, env, resp: BeginQuorumEpochResponse) -> None:
        self._observe(resp.leader_epoch, resp.leader_id)

    def _on_EndQuorumEpochRequest(self, env: Envelope, req: EndQuorumEpochRequest) -> None:
        if req.leader_epoch < self.epoch:
            self._reply(env, EndQuorumEpochResponse(Errors.FENCED_LEADER_EPOCH,
                                                    *self._leader_fields()))
            return
        self._observe(req.leader_epoch, req.leader_id)
        if self.role is Role.FOLLOWER and self.leader_id == req.leader_id and self._takes_part:
            # The leader is gone: grant pre-votes, and the preferred successors run first.
            self._leader_gone(req.preferred_successors)
        self._reply(env, EndQuorumEpochResponse(Errors.NONE, *self._leader_fields()))

    def _on_EndQuorumEpochResponse(self, env, resp: EndQuorumEpochResponse) -> None:
        self._observe(resp.leader_epoch, resp.leader_id)

    # ================================================================ fetch: leader side

    def _fetch_error(self, current_leader_epoch: int) -> Errors:
        if current_leader_epoch < self.epoch:
            return Errors.FENCED_LEADER_EPOCH
        if current_leader_epoch > self.epoch:
            return Errors.UNKNOWN_LEADER_EPOCH
        return Errors.NONE if self.role is Role.LEADER else Errors.NOT_LEADER_OR_FOLLOWER

    def _on_FetchRequest(self, env: Envelope, req: FetchRequest) -> None:
        self._answer_fetch(env, park=self.role is Role.LEADER)

    def _answer_fetch(self, env: Envelope, park: bool, fresh: bool = True) -> None:
        """Answer a Fetch; ``fresh`` when it just arrived (not a parked one completing)."""
        req: FetchRequest = env.message
        error = self._fetch_error(req.current_leader_epoch)
        if error is not Errors.NONE:
            self._reply(env, FetchResponse(error, self.leader, self.high_watermark,
                                           self.log.start_offset))
            return
        log = self.log
        response = None
        if req.fetch_offset < log.start_offset:
            response = dict(snapshot_id=log.snapshot.snapshot_id)
        else:
            end = log.end_offset_for_epoch(req.last_fetched_epoch)
            if end is None or end.offset < log.start_offset:
                response = dict(snapshot_id=log.snapshot.snapshot_id)
            elif end.epoch != req.last_fetched_epoch or end.offset < req.fetch_offset:
                response = dict(diverging_epoch=end)
        if fresh and req.directory_id is not None:
            self._fetch_directories[req.replica_id] = req.directory_id
        if fresh:
            seen = self._replicas.get(req.replica_id) or self._observers.get(req.replica_id)
            quiet_ms = self._now - seen.last_fetch_ms if seen is not None else NEVER
            if quiet_ms > 2 * max(req.max_wait_ms, self.config.fetch_max_wait_ms):
                # Unheard of for longer than a long poll: it may have restarted or missed our
                # answers, so it is not taken to know the high watermark we last told it.
                self._told.pop(req.replica_id, None)
        # A voter's fetch counts only from the directory its key names: the same id on a
        # new disk forgot what the voter acknowledged.
        counted = (fresh and req.replica_id in self._replicas and not req.observer
                   and self._voters.latest.is_key(req.replica_id, req.directory_id))
        if counted:
            replica = self._replicas[req.replica_id]
            replica.last_fetch_ms = self._now
        elif fresh and req.replica_id != self.id and self.role is Role.LEADER:
            observer = self._observers.setdefault(req.replica_id, _Replica())
            observer.last_fetch_ms = self._now
            if response is None:
                observer.end_offset = req.fetch_offset
        if response is None:
            if counted:
                self._replicas[req.replica_id].end_offset = req.fetch_offset
                self._maybe_advance_high_watermark()
            records = log.read(req.fetch_offset, self.config.fetch_max_bytes)
            # Park an empty fetch (long poll) unless the fetcher is behind on the high
            # watermark: it knows the one we last told it.
            # The fetcher learns nothing worth an answer now when only quiet batches have
            # committed since the high watermark it knows (see ``propose``).
            known = self._told.get(req.replica_id, -1)
            news = known < self.high_watermark and known < self._loud_end
            if park and not records and not news:
                old = self._parked.pop(req.replica_id, None)
                if old is not None:
                    self._answer_fetch(old[0], park=False, fresh=False)
                wait = req.max_wait_ms if req.max_wait_ms > 0 else self.config.fetch_max_wait_ms
                self._parked[req.replica_id] = (env, self._now + wait)
                return
            # (A diverging or snapshot answer teaches no high watermark: see _on_FetchResponse.)
            self._told[req.replica_id] = self.high_watermark
            response = dict(records=records)
        self._reply(env, FetchResponse(Errors.NONE, self.leader, self.high_watermark,
                                       log.start_offset, **response))

    def _release_parked(self) -> None:
        parked, self._parked = self._parked, {}
        for env, _ in parked.values():
            self._answer_fetch(env, park=False, fresh=False)

    def _leader_append(self, records: tuple[bytes, ...], control: int, quiet: bool = False) -> Batch:
        batch = Batch(self.log.end_offset, self.epoch, records, control)
        self._append(batch)
        if not quiet:
            self._loud_end = batch.last_offset + 1
        self._release_parked()
        self._maybe_advance_high_watermark()
        return batch

    def _append(self, batch: Batch) -> None:
        self.log.append(batch)
        if batch.control == VOTERS:
            before = (self.voters, self._takes_part)
            self._voters.add(batch.base_offset, self._voter_set_of(batch))
            self._voters_changed(*before)

    # ================================================================ voter set (KIP-853)

    def _voter_set_of(self, batch: Batch) -> VoterSet:
        record = batch.records[0]
        return VoterSet.of(self._voters_codec.voters_of(record), record)

    def _adopt_snapshot_voters(self, snapshot: Snapshot) -> None:
        record = self._voters_codec.snapshot_voters(snapshot.data)
        if record is not None:
            self._voters.reset(VoterSet.of(self._voters_codec.voters_of(record), record))
        else:
            self._voters.reset(VoterSet(self.config.voters))  # no change before the snapshot

    def _voters_changed(self, before: frozenset[int], was_voter: bool) -> None:
        """The newest voter set moved (appended, truncated away, or from a snapshot)."""
        if self.voters == before and self._takes_part == was_voter:
            return
        if self.role is Role.LEADER:
            for voter in self.voters - {self.id}:
                if voter not in self._replicas:
                    # A joining voter counts from its next fetch, not from its observer days.
                    self._replicas[voter] = _Replica()
            for voter in list(self._replicas):
                if voter not in self.voters:
                    del self._replicas[voter]
        if self._takes_part and not was_voter:
            self._hard_dirty = True  # from now on our votes and epochs must survive a crash
            if self.role in (Role.UNATTACHED, Role.VOTED):
                self._deadline = self._now + self._election_timeout()
        elif was_voter and not self._takes_part:
            if self.role in (Role.UNATTACHED, Role.VOTED, Role.PROSPECTIVE, Role.CANDIDATE):
                self._become_unattached(self.epoch)

    def _maybe_step_down_removed(self) -> None:
        """A leader that removed itself leads until the removal commits, then resigns."""
        if (self.role is Role.LEADER and self.id not in self.voters
                and self._voters.latest_offset < self.high_watermark):
            self._resign()

    def _maybe_advance_high_watermark(self) -> None:
        if self.role is not Role.LEADER:
            return
        own = self.log.end_offset if self.config.unsafe_count_unsynced_leo else \
            min(self._stable_end, self.log.end_offset)
        ends = [r.end_offset for r in self._replicas.values()]
        if self.id in self.voters:
            ends.append(own)
        ends.sort(reverse=True)
        candidate = ends[self.majority - 1]
        # Raft §5.4.2 / KIP-595: only an entry of the current epoch commits by counting.
        if candidate > self.high_watermark and candidate > self._epoch_start_offset:
            loud = self.high_watermark < self._loud_end
            self._set_high_watermark(candidate)
            if loud:
                self._release_parked()

    def _set_high_watermark(self, hw: int) -> None:
        _check(hw >= self.high_watermark,
               f"node {self.id}: high watermark went back {self.high_watermark} -> {hw}")
        before = self._takes_part
        self.high_watermark = hw
        if before and not self._takes_part:  # our removal committed
            self._voters_changed(self.voters, before)

    def _on_FetchSnapshotRequest(self, env: Envelope, req: FetchSnapshotRequest) -> None:
        error = self._fetch_error(req.current_leader_epoch)
        snapshot = self._retained.get(req.snapshot_id)
        if error is Errors.NONE and snapshot is None:
            error = Errors.SNAPSHOT_NOT_FOUND
        if error is not Errors.NONE:
            self._reply(env, FetchSnapshotResponse(error, self.leader, req.snapshot_id))
            return
        if not 0 <= req.position <= len(snapshot.data):
            self._reply(env, FetchSnapshotResponse(Errors.POSITION_OUT_OF_RANGE, self.leader,
                                                   req.snapshot_id))
            return
        if req.replica_id in self._replicas:
            self._replicas[req.replica_id].last_fetch_ms = self._now
        chunk = snapshot.data[req.position:req.position + self.config.fetch_snapshot_max_bytes]
        self._reply(env, FetchSnapshotResponse(Errors.NONE, self.leader, req.snapshot_id,
                                               len(snapshot.data), req.position, chunk))

    # ================================================================ fetch: follower side

    def _wants_fetch(self) -> bool:
        if self._fetch_cid is not None or self._snap_fetch is not None:
            return False
        if self.role is Role.FOLLOWER:
            return True
        # An observer without a leader looks for one; so does a voter that was removed while
        # it voted, ran or led (it keeps that role's state but no longer takes part).
        return not self._takes_part and self.role in (Role.UNATTACHED, Role.VOTED, Role.RESIGNED)

    def _maybe_fetch(self) -> None:
        if not self._wants_fetch() or self._now < self._next_fetch_ms:
            return
        if self.role is Role.FOLLOWER:
            target = self.leader_id
        else:
            if self._observer_target is None:
                others = sorted(self.voters - {self.id})
                if not others:
                    return
                self._observer_target = self._rng.choice(others)
            target = self._observer_target
        last = self.log.last
        request = FetchRequest(self.id, self.epoch, last.offset, last.epoch,
                               observer=not self._takes_part,
                               directory_id=self.config.directory_id,
                               max_wait_ms=self.config.fetch_max_wait_ms)
        self._fetch_cid = self._send_request(target, request, after_persist=True)

    def _on_FetchResponse(self, env: Envelope, resp: FetchResponse) -> None:
        if env.correlation_id != self._fetch_cid:
            return
        self._fetch_cid = None
        leader = resp.current_leader
        if self._observe(leader.epoch, leader.leader_id):
            return
        if resp.error_code is not Errors.NONE or self.role is not Role.FOLLOWER \
                or env.src != self.leader_id:
            self._next_fetch_ms = self._now + self.config.fetch_retry_backoff_ms
            if not self._takes_part:
                self._observer_target = leader.leader_id if leader.leader_id not in (
                    NO_LEADER, self.id) and leader.epoch >= self.epoch else None
            return
        self._leader_contact_ms = self._now
        self._deadline = self._now + self.config.fetch_timeout_ms  # the fetch timeout
        if resp.snapshot_id is not None:
            self._snap_fetch = (resp.snapshot_id, bytearray())
            self._send_snapshot_fetch()
            return
        if resp.diverging_epoch is not None:
            # Truncate, and learn nothing about the high watermark: the log is not known
            # to match the leader's until a fetch succeeds (it may take several rounds).
            div = resp.diverging_epoch
            local = self.log.end_offset_for_epoch(div.epoch)
            offset = min(div.offset, local.offset if local else self.log.start_offset)
            self._truncate(max(offset, self.log.start_offset))
            return
        for batch in resp.records:
            if batch.base_offset == self.log.end_offset:
                _check(batch.epoch <= self.epoch, "a batch from a future epoch")
                self._append(batch)
        # The leader validated our log up to the fetch offset and sent the rest.
        self._set_high_watermark(max(self.high_watermark,
                                     min(resp.high_watermark, self.log.end_offset)))

    def _truncate(self, offset: int) -> None:
        _check(self.role is not Role.LEADER, "a leader truncated its log")
        _check(offset >= self.high_watermark,
               f"node {self.id} truncates to {offset} below its high watermark "
               f"{self.high_watermark}")
        if offset < self.log.end_offset:
            self.log.truncate_to(offset)
            self._unstable_from = min(self._unstable_from, offset)
            self._stable_end = min(self._stable_end, offset)
            before = (self.voters, self._takes_part)
            self._voters.truncate(offset)
            self._voters_changed(*before)

    def _send_snapshot_fetch(self) -> None:
        snapshot_id, buf = self._snap_fetch
        self._snap_cid = self._send_request(
            self.leader_id, FetchSnapshotRequest(self.id, self.epoch, snapshot_id, len(buf)))

    def _on_FetchSnapshotResponse(self, env: Envelope, resp: FetchSnapshotResponse) -> None:
        if env.correlation_id != self._snap_cid:
            return
        self._snap_cid = None
        if self._observe(resp.current_leader.epoch, resp.current_leader.leader_id):
            return
        if self._snap_fetch is None or self.role is not Role.FOLLOWER:
            return
        snapshot_id, buf = self._snap_fetch
        if (resp.error_code is not Errors.NONE or resp.snapshot_id != snapshot_id
                or resp.position != len(buf)):
            self._snap_fetch = None  # start over from Fetch, which names the newest snapshot
            self._next_fetch_ms = self._now + self.config.fetch_retry_backoff_ms
            return
        self._leader_contact_ms = self._now
        self._deadline = self._now + self.config.fetch_timeout_ms
        buf += resp.unaligned_records
        if len(buf) < resp.size:
            self._send_snapshot_fetch()
            return
        self._snap_fetch = None
        snapshot = Snapshot(snapshot_id, bytes(buf))
        _check(snapshot.end_offset >= self.high_watermark, "snapshot below the high watermark")
        self.log.install_snapshot(snapshot)
        before = (self.voters, self._takes_part)
        self._adopt_snapshot_voters(snapshot)
        self._voters_changed(*before)
        self._pending_snapshot = snapshot
        self._retain(snapshot)
        self._unstable_from = min(self._unstable_from, snapshot.end_offset)
        self._stable_end = min(self._stable_end, snapshot.end_offset)
        self._set_high_watermark(snapshot.end_offset)

    # ================================================================ commit

    def _committable(self) -> list[Batch]:
        start = max(self._applied, self.log.start_offset)
        return self.log.batches_in(start, self.high_watermark)


# Role step functions: each role is a table from message type to handler, swapped by
# _set_role (etcd's stepLeader/stepFollower/stepCandidate).  Responses missing from a
# role's table are late answers to requests of a former role and are dropped.
_COMMON = {
    VoteRequest: RaftNode._on_VoteRequest,
    BeginQuorumEpochRequest: RaftNode._on_BeginQuorumEpochRequest,
    BeginQuorumEpochResponse: RaftNode._on_BeginQuorumEpochResponse,
    EndQuorumEpochRequest: RaftNode._on_EndQuorumEpochRequest,
    EndQuorumEpochResponse: RaftNode._on_EndQuorumEpochResponse,
    FetchRequest: RaftNode._on_FetchRequest,  # non-leaders answer with an error
    FetchSnapshotRequest: RaftNode._on_FetchSnapshotRequest,
}
_STEP_UNATTACHED = {**_COMMON, VoteResponse: RaftNode._on_VoteResponse,
                    FetchResponse: RaftNode._on_FetchResponse}  # observers look for a leader
_STEP_FOLLOWER = {**_COMMON, FetchResponse: RaftNode._on_FetchResponse,
                  FetchSnapshotResponse: RaftNode._on_FetchSnapshotResponse}
_STEP_LEADER = dict(_COMMON)
