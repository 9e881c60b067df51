"""``controller.quorum.engine=pysyncobj``: the controller quorum replicated by PySyncObj.

The controllers elect a leader and replicate among themselves with PySyncObj (its own
thread, its own encrypted TCP transport, on a port of its own: by default the CONTROLLER
listener's port + 1000).  The replicated state machine is the metadata log itself: an
append-only list of batches ``Batch(base_offset, epoch, records)``, where the epoch is the
PySyncObj term in which the batch's leader was established.  Every committed batch is
written, in commit order and fsynced, to the same ``RaftStorage`` log
(``__cluster_metadata-0``) that kraft's own Raft uses, then handed to the listener on the
trio thread.  Towards brokers nothing changes: the leader serves Fetch and FetchSnapshot on
the CONTROLLER listener from that committed log in kraft's wire format, so an unmodified
``RaftDriver`` observer follows it.

Files, in ``<metadata.log.dir>/__cluster_metadata-0/`` next to the log: ``pysyncobj.journal``
(+ ``.meta``: term, vote, commit index) and ``pysyncobj.dump`` (PySyncObj's compaction dump).
Brokers (non-voters) keep running a ``RaftDriver`` observer: only controllers run this engine.

How offsets stay predictable.  Commands are *conditional*: a data command carries the term
and leader it was proposed under and the base offset it expects, and the state machine
applies it only if that term and leader are the current ones and the log ends exactly at
that offset; otherwise it is dropped, identically on every replica.  A node that PySyncObj
makes leader first proposes a LeaderChange command (a control batch with Kafka's
LeaderChangeMessage, as KRaft writes); only once that batch has been applied -- so every
entry of earlier terms is applied too -- does the engine report itself leader, and from
then on it is the only proposer and the next base offset is its own count.  If a proposal
fails (queue full, leadership lost) the leader stops proposing and re-anchors with a new
LeaderChange batch; offsets it handed out but that never committed are reused, exactly as
a KRaft leader's uncommitted tail is truncated, and the listener sees the leader change
first.

What this engine does NOT do -- read before choosing it:

* **No fsync before voting or acknowledging.**  PySyncObj 0.3.17's ``journalFile`` is an
  mmap'ed file: entries are copied into the mapping and acknowledged to the leader at once;
  the mapping is ``msync``'ed only when the journal is closed.  Term and vote go to
  ``<journal>.meta`` synchronously before a vote leaves, but as write + ``flush()`` (Python
  buffer to the kernel) + rename, with no ``os.fsync`` of the file or the directory; the
  commit index in that file is saved once a second.  The ``fullDumpFile`` (log compaction
  snapshot) is written to ``.tmp`` and renamed, also without fsync.  So the journal, votes
  and terms survive a process crash (the page cache survives) but **not** an OS crash or
  power loss: a majority losing power can lose committed entries or vote twice in a term.
  Kafka's and kraft's KIP-595 engine fsync before they vote or acknowledge; this one
  cannot.  (kraft's own copy of the committed log in ``RaftStorage`` *is* fsynced, but
  only after commit: it does not make the quorum's acknowledgements durable.)
* The whole metadata log since the cluster was formatted is PySyncObj's state: it is kept
  in memory and pickled into PySyncObj's compaction dumps.  ``create_snapshot`` writes a
  kraft snapshot (brokers fetch it; ``RaftStorage`` drops the log before it) but does not
  shrink PySyncObj's state.
* No pre-vote or check-quorum as KIP-996/KIP-595 define them, no observers inside
  PySyncObj (brokers follow through Fetch only), no ``observer_only`` handling for a
  voter whose disk was lost, no dynamic voters.  Vote, BeginQuorumEpoch and EndQuorumEpoch
  on the CONTROLLER listener are answered with INVALID_REQUEST.
* PySyncObj unpickles what peers send: its transport is encrypted and authenticated with
  the password (required here), but every controller holding it is trusted completely.
* Only the leader serves Fetch (followers answer NOT_LEADER_OR_FOLLOWER with the leader).
"""

from __future__ import annotations

import collections
import functools
import itertools
import logging
import threading
import time
from bisect import bisect_right
from random import Random

import trio
from pysyncobj import SyncObj, SyncObjConf, SyncObjConsumer, replicated
from pysyncobj.config import FAIL_REASON

from kraft import clock
from kraft.raft import wire
from kraft.raft.config import RaftConfig
from kraft.raft.disk import RaftStorage
from kraft.raft.driver import PeerAddress, RaftListener
from kraft.raft.messages import (
    NO_LEADER,
    Batch,
    Errors,
    FetchResponse,
    FetchSnapshotResponse,
    LeaderAndEpoch,
    OffsetAndEpoch,
    Snapshot,
)
from kraft.raft.node import NotLeaderError
from kraft.raft.record_codec import (
    decode_raft_batches,
    decode_snapshot,
    encode_snapshot,
    leader_change_record,
)

log = logging.getLogger(__name__)

DEFAULT_PORT_OFFSET = 1000
JOURNAL_FILE = "pysyncobj.journal"
DUMP_FILE = "pysyncobj.dump"

_LEADER = "leader"  # command kinds
_DATA = "data"


class PasswordRequiredError(ValueError):
    """The pysyncobj engine refuses to run its transport unauthenticated."""


class _MetadataLogState(SyncObjConsumer):
    """PySyncObj's replicated state: the metadata log as a list of batches.

    Runs on PySyncObj's thread.  ``_sink`` (not replicated) receives every applied batch.
    """

    def __init__(self, sink):
        self._sink = sink  # set before SyncObjConsumer.__init__: excluded from dumps
        super().__init__()
        self.end = 0  # end offset of the log
        self.epoch = 0  # term of the last LeaderChange batch
        self.leader = NO_LEADER  # its leader
        self.batches: list[tuple[int, int, tuple[bytes, ...], bool, int]] = []  # + leader id

    @replicated
    def append(self, kind, term, leader, base, nonce, records):
        """Apply one command; the last offset written, or None if it was dropped."""
        if kind == _LEADER:
            if term < self.epoch or (term == self.epoch and leader != self.leader):
                return None
        elif kind == _DATA:
            if term != self.epoch or leader != self.leader or base != self.end:
                return None
        else:
            return None
        records = tuple(records)
        if not records:
            return None
        entry = (self.end, term, records, kind == _LEADER, leader)
        self.batches.append(entry)
        self.end += len(records)
        self.epoch, self.leader = term, leader
        self._sink(("batch", entry, nonce))
        return self.end - 1

    def _deserialize(self, data):
        super()._deserialize(data)
        self._sink(("reset", list(self.batches), self.epoch, self.leader))


class _LogView:
    def __init__(self, engine: PySyncObjEngine):
        self._engine = engine

    @property
    def end_offset(self) -> int:
        """The offset the next append gets (on the leader), else the committed end."""
        e = self._engine
        return e._next_offset if e.is_leader else e.committed_offset


class _NodeView:
    """``engine.node.log.end_offset``, as ``RaftDriver.node.log.end_offset``."""

    def __init__(self, engine: PySyncObjEngine):
        self.log = _LogView(engine)


def syncobj_conf(config: RaftConfig, password: str | None, directory, **overrides) -> SyncObjConf:
    """PySyncObj settings derived from kraft's ``controller.quorum.*`` timeouts."""
    if not password:
        raise PasswordRequiredError(
            "controller.quorum.engine=pysyncobj requires controller.quorum.pysyncobj.password: "
            "PySyncObj's transport unpickles what it receives and must be authenticated")
    min_timeout = config.election_timeout_ms / 1000
    max_timeout = 2 * min_timeout
    options = {
        "password": password, "autoTick": True, "autoTickPeriod": 0.02,
        "raftMinTimeout": min_timeout, "raftMaxTimeout": max_timeout,
        "appendEntriesPeriod": min(0.1, min_timeout / 4),
        "connectionTimeout": max(max_timeout, config.request_timeout_ms / 1000),
        "connectionRetryTime": min(1.0, min_timeout),
        # A leader that hears from no majority for the fetch timeout steps down (check quorum).
        "leaderFallbackTimeout": max(config.fetch_timeout_ms / 1000, 2 * min(0.1, min_timeout / 4)),
        "journalFile": str(directory / JOURNAL_FILE), "fullDumpFile": str(directory / DUMP_FILE),
        # Send each command at once rather than every appendEntriesPeriod: measured in one
        # process, 3 engines: commit latency p50 ~20 ms instead of ~110 ms.
        "appendEntriesUseBatch": False,
        "useFork": False,  # never fork a process that runs trio and threads
        "commandsWaitLeader": True, "dynamicMembershipChange": False}
    options.update(overrides)
    return SyncObjConf(**options)


class PySyncObjEngine:
    """A controller's quorum engine on PySyncObj; same interface as ``RaftDriver``."""

    def __init__(self, config: RaftConfig, storage: RaftStorage, voters: dict[int, PeerAddress],
                 listener: RaftListener, *, password: str | None,
                 raft_addresses: dict[int, PeerAddress] | None = None,
                 port_offset: int = DEFAULT_PORT_OFFSET, bind_host: str | None = None,
                 cluster_id: str | None = None, rng: Random | None = None, **syncobj_options):
        if config.node_id not in config.voters:
            raise ValueError(f"node {config.node_id} is not a voter: the pysyncobj engine runs on "
                             "controllers only (brokers follow with a RaftDriver observer)")
        self.config = config
        self.storage = storage
        self.voters = voters
        self.listener = listener
        self.cluster_id = cluster_id
        self.conf = syncobj_conf(config, password, storage.directory, **syncobj_options)
        if raft_addresses is None:
            raft_addresses = {i: PeerAddress(a.host, a.port + port_offset) for i, a in voters.items()}
        missing = set(config.voters) - set(raft_addresses)
        if missing:
            raise ValueError(f"no pysyncobj address for voters {sorted(missing)}")
        self.raft_addresses = raft_addresses
        self._addr_to_id = {f"{a.host}:{a.port}": i for i, a in raft_addresses.items()}
        own = raft_addresses[config.node_id]
        if bind_host is not None:
            self.conf.bindAddress = f"{bind_host}:{own.port}"
        self.node = _NodeView(self)
        self.closed = False
        self.committed_offset = 0  # end offset of everything applied
        self.observers: dict[int, tuple[int, float]] = {}  # id -> (fetch offset, when)
        self._rng = rng or Random()
        self._so: SyncObj | None = None
        self._state: _MetadataLogState | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._inbox: collections.deque = collections.deque()  # from PySyncObj's thread
        self._actions: collections.deque = collections.deque()  # to run on PySyncObj's thread
        self._wakeup = trio.Event()
        self._data = trio.Event()  # set (and replaced) whenever the committed log grows
        self._commit_waiters: list[tuple[int, trio.Event]] = []
        self._unsynced: list[Batch] = []  # stored, awaiting fsync and the listener
        self._last_view = None  # PySyncObj thread's copy
        self._transfer_until = self._transfer_next = 0.0  # PySyncObj thread: resign() retries
        self._view = (False, NO_LEADER, 0)  # (is leader, leader id, term) as last seen
        self._lc = (NO_LEADER, 0)  # (leader, epoch) of the last LeaderChange batch applied
        self._ready_term: int | None = None  # term in which we lead and may propose
        self._anchor: tuple[int, int] | None = None  # (term, nonce) of our pending LeaderChange
        self._anchor_retry_at = 0.0
        self._nonces = itertools.count(1)
        self._next_offset = 0
        self._notified: LeaderAndEpoch | None = None
        self._epochs: list[tuple[int, int]] = []  # (epoch, start offset) of the log after the snapshot
        self._snapshot: Snapshot | None = None
        self._log_start = 0
        self._t0 = clock.monotonic_ms()

    # ------------------------------------------------------------------ public API

    @property
    def leader(self) -> LeaderAndEpoch:
        is_leader, so_leader, term = self._view
        lc_leader, lc_epoch = self._lc
        if self._ready_term is not None and is_leader and term == self._ready_term:
            return LeaderAndEpoch(self.config.node_id, term)
        if lc_epoch == term and lc_leader not in (NO_LEADER, self.config.node_id) and so_leader == lc_leader:
            return LeaderAndEpoch(lc_leader, term)
        return LeaderAndEpoch(NO_LEADER, max(term, lc_epoch))

    @property
    def is_leader(self) -> bool:
        is_leader, _, term = self._view
        return (not self.closed and self._ready_term is not None and is_leader
                and term == self._ready_term)

    @property
    def high_watermark(self) -> int:
        return self.committed_offset

    def propose(self, records, quiet: bool = False) -> tuple[int, int]:
        """Append records on the leader: (offset of the last one, epoch).

        The batch lands exactly at ``node.log.end_offset`` or not at all.  Raises
        NotLeaderError on any other node.  ``quiet`` changes nothing here: pysyncobj
        tells its followers every commit.
        """
        if not self.is_leader:
            raise NotLeaderError(self.leader)
        records = tuple(bytes(r) for r in records)
        if not records:
            raise ValueError("a batch holds at least one record")
        term, base = self._ready_term, self._next_offset
        self._next_offset += len(records)
        self._state.append(_DATA, term, self.config.node_id, base, 0, records,
                           callback=functools.partial(self._proposal_done, term, base))
        return base + len(records) - 1, term

    async def wait_committed(self, offset: int) -> None:
        """Wait until the record at ``offset`` has been applied (committed)."""
        if self.committed_offset > offset:
            return
        event = trio.Event()
        self._commit_waiters.append((offset, event))
        await event.wait()

    def create_snapshot(self, end_offset: int, records: list[bytes]) -> None:
        """Write a kraft snapshot of the applied records below ``end_offset``."""
        if not self._log_start < end_offset <= self.committed_offset:
            raise ValueError(f"snapshot end {end_offset} not in ({self._log_start}, "
                             f"applied {self.committed_offset}]")
        snapshot = Snapshot(OffsetAndEpoch(end_offset, self._epoch_at(end_offset - 1)),
                            encode_snapshot(records))
        self.storage.save_snapshot(snapshot)
        self._snapshot = snapshot
        self._log_start = end_offset
        epoch_at_end = self._epoch_at(end_offset) if end_offset < self.committed_offset else None
        kept = [(e, s) for e, s in self._epochs if s > end_offset]
        if epoch_at_end is not None:
            kept.insert(0, (epoch_at_end, end_offset))
        self._epochs = kept

    def resign(self) -> None:
        """Give up leadership: ask PySyncObj to hand it to the most caught-up follower."""
        if not self.is_leader:
            return
        self._ready_term = None
        self._anchor = None
        # PySyncObj refuses a transfer to a follower that is not fully caught up: its thread
        # retries until leadership moves or this window ends; then, still leader, this node
        # re-anchors (a new LeaderChange batch) and leads again.
        window = 2 * self.conf.raftMaxTimeout
        self._anchor_retry_at = trio.current_time() + window
        until = time.monotonic() + window
        self._actions.append(lambda: setattr(self, "_transfer_until", until))
        self._notify_leader()

    async def shutdown(self, timeout_s: float = 2.0) -> None:
        """Graceful stop: a leader hands leadership over, then PySyncObj's thread stops."""
        if self.is_leader:
            self.resign()
            with trio.move_on_after(min(timeout_s, 0.2)):
                await trio.sleep(0.2)  # let the TimeoutNow leave
        self._close()
        so = self._so
        if so is not None:
            with trio.move_on_after(timeout_s):
                await trio.to_thread.run_sync(so.destroy_synchronous, abandon_on_cancel=True)

    def describe_quorum(self) -> dict:
        now = clock.wall_ms()
        mono = self._now()

        def state(replica_id, end_offset, last_fetch_ms):
            fetched = now - int(mono - last_fetch_ms) if last_fetch_ms is not None else -1
            return {"replica_id": replica_id, "log_end_offset": end_offset,
                    "last_fetch_timestamp": fetched, "last_caught_up_timestamp": fetched}

        # PySyncObj counts its own log indexes, not record offsets: other voters' ends are unknown.
        voters = [state(v, self.committed_offset, mono) if v == self.config.node_id else state(v, -1, None)
                  for v in sorted(self.config.voters)]
        observers = [state(rid, end, last) for rid, (end, last) in sorted(self.observers.items())]
        leader = self.leader
        return {"error_code": 0, "topics": [{"topic_name": wire.METADATA_TOPIC, "partitions": [{
            "partition_index": 0, "error_code": 0, "leader_id": leader.leader_id,
            "leader_epoch": leader.epoch, "high_watermark": self.high_watermark,
            "current_voters": voters, "observers": observers}]}]}

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._load_storage()
        self._start_syncobj()
        self._notify_leader()
        task_status.started()
        try:
            while not self.closed:
                with trio.move_on_after(0.1):
                    await self._wakeup.wait()
                self._wakeup = trio.Event()
                self._process()
        finally:
            self._close()
            if self._so is not None:
                # Its thread stops at its next tick; wait (briefly) so that its port and
                # journal are released before anyone reopens them.
                self._so.destroy()
                thread = getattr(self._so, "_SyncObj__thread", None)
                if thread is not None and thread is not threading.current_thread():
                    thread.join(timeout=1.0)

    async def handle(self, api: str, body: dict) -> dict:
        """Serve Fetch / FetchSnapshot to observers from the committed log."""
        if api not in ("Fetch", "FetchSnapshot"):
            return _error_response(api, Errors.INVALID_REQUEST)
        try:
            src, request = wire.request_from_wire(api, body, self.config.voters)
        except (wire.NotRaftMessage, KeyError, ValueError):
            return _error_response(api, Errors.INVALID_REQUEST)
        if self.closed:
            return _error_response(api, Errors.NOT_LEADER_OR_FOLLOWER)
        if api == "FetchSnapshot":
            return wire.response_to_wire(self._answer_fetch_snapshot(request))[2]
        self.observers[src] = (request.fetch_offset, self._now())
        with trio.move_on_after(self.config.fetch_max_wait_ms / 1000):
            while True:
                data = self._data
                response = self._answer_fetch(request, park=True)
                if response is not None:
                    return wire.response_to_wire(response)[2]
                await data.wait()
        return wire.response_to_wire(self._answer_fetch(request, park=False))[2]

    # ------------------------------------------------------------------ PySyncObj side

    def _start_syncobj(self) -> None:
        own = self.raft_addresses[self.config.node_id]
        others = [f"{a.host}:{a.port}" for i, a in sorted(self.raft_addresses.items())
                  if i != self.config.node_id and i in self.config.voters]
        self._state = _MetadataLogState(self._post)
        self._so = SyncObj(f"{own.host}:{own.port}", others, self.conf, consumers=[self._state])
        self._so.addOnTickCallback(self._on_tick)

    def _on_tick(self) -> None:
        """PySyncObj's thread, every tick: publish (is leader, leader, term); run actions."""
        so = self._so
        leader = so._getLeader()
        view = (so._isLeader(), self._addr_to_id.get(getattr(leader, "id", None), NO_LEADER),
                so._getTerm())
        if view != self._last_view:
            self._last_view = view
            self._post(("view", view))
        now = time.monotonic()
        if now < self._transfer_until and now >= self._transfer_next:
            if so._isLeader():
                self._transfer_next = now + 0.1
                so.transferLeadership()
            else:
                self._transfer_until = 0.0
        while self._actions:
            try:
                self._actions.popleft()()
            except Exception:
                log.exception("pysyncobj action failed")

    def _post(self, item) -> None:
        """Any thread: queue an event for the trio thread and wake it."""
        self._inbox.append(item)
        token = self._token
        if token is None:
            return
        try:
            token.run_sync_soon(self._wake, idempotent=True)
        except trio.RunFinishedError:
            pass

    def _wake(self) -> None:
        self._wakeup.set()

    def _proposal_done(self, term: int, base: int, result, error) -> None:
        if error != FAIL_REASON.SUCCESS or result is None:
            self._post(("failed", term, base, error))

    # ------------------------------------------------------------------ trio side

    def _now(self) -> int:
        return clock.monotonic_ms() - self._t0

    def _close(self) -> None:
        if not self.closed:
            self.closed = True
            self._ready_term = None
            self.storage.close()
        self._data.set()

    def _load_storage(self) -> None:
        snapshot = self.storage.latest_snapshot()
        if snapshot is not None:
            self._snapshot = snapshot
            self._log_start = self.committed_offset = snapshot.end_offset
            self.listener.handle_load_snapshot(snapshot.snapshot_id, decode_snapshot(snapshot.data))
        for batch in self.storage.load_batches(self.committed_offset):
            if batch.base_offset != self.committed_offset:
                raise RuntimeError(f"metadata log has a gap at {self.committed_offset}")
            self._note_epoch(batch)
            self.committed_offset = batch.end_offset
            self.listener.handle_commit(batch)
        self._next_offset = self.committed_offset
        if self._epochs or self._snapshot:
            self._lc = (NO_LEADER, self._epochs[-1][0] if self._epochs else self._snapshot.snapshot_id.epoch)

    def _process(self) -> None:
        if self.closed:
            return
        grew = False
        for _ in range(min(len(self._inbox), 10_000)):  # the rest on the next pass
            item = self._inbox.popleft()
            kind = item[0]
            if kind == "view":
                self._view = item[1]
            elif kind == "batch":
                grew |= self._on_batch(item[1], item[2])
            elif kind == "reset":
                _, entries, epoch, leader = item
                log.info("node %d: pysyncobj installed a state dump of %d batches", self.config.node_id,
                         len(entries))
                for entry in entries:
                    grew |= self._on_batch(entry, 0)
                self._lc = (leader, epoch)
            elif kind == "failed":
                _, term, base, error = item
                if self._ready_term == term:
                    log.warning("node %d: proposal at %d in epoch %d failed (%s); re-anchoring",
                                self.config.node_id, base, term, error)
                    self._ready_term = None
                    self._anchor = None
            elif kind == "anchor_failed" and self._anchor == item[1]:
                self._anchor = None
                self._anchor_retry_at = trio.current_time() + 0.1
        if self._inbox:
            self._wakeup.set()
        if self._unsynced:
            # One fsync for everything stored in this pass, then the listener (no await in
            # between: no task sees committed_offset ahead of what the listener applied).
            self.storage.flush()
            batches, self._unsynced = self._unsynced, []
            for batch in batches:
                self.listener.handle_commit(batch)
        self._refresh()
        self._notify_leader()
        if grew:
            self._release_commit_waiters()
            self._data.set()
            self._data = trio.Event()

    def _on_batch(self, entry, nonce: int) -> bool:
        base, epoch, records, control, leader = entry
        batch = Batch(base, epoch, tuple(records), control=control)
        grew = False
        if batch.end_offset > self.committed_offset:
            if batch.base_offset > self.committed_offset:
                self._fill_gap(batch.base_offset)
            if batch.base_offset != self.committed_offset:
                log.error("node %d: pysyncobj batch at %d does not fit the metadata log ending at %d",
                          self.config.node_id, batch.base_offset, self.committed_offset)
                return False
            self.storage.append([batch])
            self._note_epoch(batch)
            self.committed_offset = batch.end_offset
            self._unsynced.append(batch)
            grew = True
        elif batch.base_offset >= self._log_start and self._epoch_at(batch.base_offset) != epoch:
            log.error("node %d: pysyncobj's state diverges from the stored metadata log at %d "
                      "(epoch %d, stored %d)", self.config.node_id, batch.base_offset, epoch,
                      self._epoch_at(batch.base_offset))
        if control:
            self._lc = (leader, epoch)
            if self._anchor == (epoch, nonce) and leader == self.config.node_id:
                self._anchor = None
                is_leader, _, term = self._view
                if is_leader and term == epoch:
                    self._ready_term = epoch
                    self._next_offset = self.committed_offset
                    log.info("node %d: leader in epoch %d from offset %d", self.config.node_id,
                             epoch, self._next_offset)
        return grew

    def _fill_gap(self, until: int) -> None:
        """PySyncObj's state is ahead of the stored log (e.g. a dump was installed)."""
        for entry in list(self._state.batches):
            if entry[0] >= until:
                break
            if entry[0] + len(entry[2]) > self.committed_offset:
                self._on_batch(entry, 0)

    def _refresh(self) -> None:
        is_leader, _, term = self._view
        if self._ready_term is not None and not (is_leader and term == self._ready_term):
            self._ready_term = None
        if not is_leader:
            self._anchor = None
            return
        if self._ready_term is not None or (self._anchor is not None and self._anchor[0] == term):
            return
        if trio.current_time() < self._anchor_retry_at:
            return
        nonce = next(self._nonces)
        self._anchor = (term, nonce)
        record = leader_change_record(self.config.node_id, term, self.config.voters)
        self._state.append(_LEADER, term, self.config.node_id, -1, nonce, (record,),
                           callback=functools.partial(self._anchor_done, (term, nonce)))

    def _anchor_done(self, anchor, result, error) -> None:
        if error != FAIL_REASON.SUCCESS or result is None:
            self._post(("anchor_failed", anchor))

    def _notify_leader(self) -> None:
        leader = self.leader
        if leader != self._notified:
            self._notified = leader
            log.info("node %d: leader is now %s in epoch %d", self.config.node_id,
                     leader.leader_id, leader.epoch)
            self.listener.handle_leader_change(leader)

    def _release_commit_waiters(self) -> None:
        keep = []
        for offset, event in self._commit_waiters:
            if self.committed_offset > offset:
                event.set()
            else:
                keep.append((offset, event))
        self._commit_waiters = keep

    # ------------------------------------------------------------------ epochs and fetch

    def _note_epoch(self, batch: Batch) -> None:
        if not self._epochs or self._epochs[-1][0] != batch.epoch:
            self._epochs.append((batch.epoch, batch.base_offset))

    def _epoch_at(self, offset: int) -> int:
        index = bisect_right([s for _, s in self._epochs], offset) - 1
        if index >= 0:
            return self._epochs[index][0]
        return self._snapshot.snapshot_id.epoch if self._snapshot else 0

    def _end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch | None:
        """End offset of the largest epoch <= ``epoch`` held (KIP-595 divergence check)."""
        index = bisect_right(self._epochs, (epoch, float("inf"))) - 1
        if index >= 0:
            found = self._epochs[index][0]
            end = self._epochs[index + 1][1] if index + 1 < len(self._epochs) else self.committed_offset
            return OffsetAndEpoch(end, found)
        base = self._snapshot.snapshot_id if self._snapshot else OffsetAndEpoch(0, 0)
        return base if base.epoch <= epoch else None

    def _fetch_error(self, current_leader_epoch: int) -> Errors:
        epoch = self.leader.epoch
        if current_leader_epoch < epoch:
            return Errors.FENCED_LEADER_EPOCH
        if current_leader_epoch > epoch:
            return Errors.UNKNOWN_LEADER_EPOCH
        return Errors.NONE if self.is_leader else Errors.NOT_LEADER_OR_FOLLOWER

    def _answer_fetch(self, req, park: bool) -> FetchResponse | None:
        leader, hw = self.leader, self.high_watermark
        error = Errors.NOT_LEADER_OR_FOLLOWER if self.closed else self._fetch_error(req.current_leader_epoch)
        if error is not Errors.NONE:
            return FetchResponse(error, leader, hw, self._log_start)
        extra = None
        if req.fetch_offset < self._log_start and self._snapshot is not None:
            extra = {"snapshot_id": self._snapshot.snapshot_id}
        else:
            end = self._end_offset_for_epoch(req.last_fetched_epoch)
            if end is None or end.offset < self._log_start:
                if self._snapshot is not None:
                    extra = {"snapshot_id": self._snapshot.snapshot_id}
            elif end.epoch != req.last_fetched_epoch or end.offset < req.fetch_offset:
                extra = {"diverging_epoch": end}
        if extra is not None:
            return FetchResponse(Errors.NONE, leader, hw, self._log_start, **extra)
        records = self._read(req.fetch_offset)
        if not records and park:
            return None
        return FetchResponse(Errors.NONE, leader, hw, self._log_start, records=records)

    def _read(self, offset: int) -> tuple[Batch, ...]:
        if not self._log_start <= offset < self.committed_offset:
            return ()
        result = self.storage.log.read(offset, self.config.fetch_max_bytes)
        return decode_raft_batches(result.records or b"")

    def _answer_fetch_snapshot(self, req) -> FetchSnapshotResponse:
        leader = self.leader
        error = self._fetch_error(req.current_leader_epoch)
        snapshot = self._snapshot
        if error is Errors.NONE and (snapshot is None or snapshot.snapshot_id != req.snapshot_id):
            error = Errors.SNAPSHOT_NOT_FOUND
        if error is not Errors.NONE:
            return FetchSnapshotResponse(error, leader, req.snapshot_id)
        if not 0 <= req.position <= len(snapshot.data):
            return FetchSnapshotResponse(Errors.POSITION_OUT_OF_RANGE, leader, req.snapshot_id)
        chunk = snapshot.data[req.position:req.position + self.config.fetch_snapshot_max_bytes]
        return FetchSnapshotResponse(Errors.NONE, leader, req.snapshot_id, len(snapshot.data),
                                     req.position, chunk)


def _error_response(api: str, error: Errors) -> dict:
    if api == "Fetch":
        return {"error_code": int(error), "responses": []}
    return {"error_code": int(error), "topics": []}


__all__ = ["DEFAULT_PORT_OFFSET", "PasswordRequiredError", "PySyncObjEngine", "syncobj_conf"]
