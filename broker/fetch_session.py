"""Incremental fetch sessions (KIP-227), both ends, sans-IO.

A follower fetching thousands of partitions from one leader sent all of them in every
Fetch and got all of them back, so each round cost both nodes time in proportion to the
partitions followed even when nothing changed (issue 15: a node following 13,000 replicas
spent its CPU encoding and decoding idle fetches, and acks=all produces waited behind
them).  With a session the leader remembers the partitions and their fetch parameters:

* A request with ``session_id`` 0 and ``session_epoch`` 0 is a full fetch that opens a
  session; the answer carries its id.  Epoch -1 asks for no session (librdkafka's
  consumers fetch that way); epoch -1 with an id closes that session.
* The next requests carry the id and the epoch, one more each time, and only the
  partitions whose fetch parameters changed (added or updated) plus those to drop
  (``forgotten_topics_data``).  The leader answers only the partitions with something to
  say: records, an error, a diverging epoch, or a high watermark or log start offset it
  has not told yet.
* A follower's session does not even look at the partitions that have nothing to say:
  once a read of one found its follower at the log end with everything told
  (``note_read``), the partition leaves ``to_read`` and comes back only when it changes
  (``Partition.notify`` reaches ``FetchSessionCache.changes``).  Each round then costs the
  leader what changed, not the thousands of partitions followed: at 5,000 partitions x RF 3
  on 3 nodes, walking every session partition per follower fetch took half of each node's
  CPU while producing one record to each partition (issue 15).
* An unknown id answers FETCH_SESSION_ID_NOT_FOUND, a wrong epoch
  INVALID_FETCH_SESSION_EPOCH; the follower then starts over with a full fetch.

``FetchSessionCache`` is the leader's side (Kafka's FetchSessionCache and FetchContext),
``FetchSessionHandler`` the follower's (Kafka's FetchSessionHandler).
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from kraft.protocol.error_codes import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_SESSIONS = 1000  # the default of Kafka's max.incremental.fetch.session.cache.slots


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= 0x7FFFFFFF else epoch + 1


# ------------------------------------------------------------------------- leader side


@dataclass(slots=True)
class _CachedPartition:
    request: tuple  # (topic entry of the request, topic name or None, partition entry)
    high_watermark: int | None = None  # as last answered
    log_start_offset: int | None = None
    last_stable_offset: int | None = None


@dataclass(slots=True)
class FetchSession:
    session_id: int
    epoch: int  # the epoch the next request must carry
    partitions: dict = field(default_factory=dict)  # (topic key, index) -> _CachedPartition
    # A follower's session reads only ``to_read``: the partitions not known to be quiet.
    follower: bool = False
    by_topic_id: bool = False  # keys name topics by id (Fetch v13+), else by name
    to_read: dict = field(default_factory=dict)  # key -> _CachedPartition
    # Set while a fetch of this session long-polls: called with a partition that left the
    # quiet ones (it is in ``to_read`` again), so that the fetch reads it.
    wake: Callable | None = None
    replica_id: int = -1  # the follower's, and when it last fetched in this session
    last_fetch_ms: int = 0

    def wanted(self) -> list[tuple]:
        chosen = self.to_read if self.follower else self.partitions
        return [c.request for c in chosen.values()]

    def add(self, key, entry: tuple) -> None:
        """A partition added, or its fetch parameters changed: read it."""
        cached = self.partitions.get(key)
        if cached is None:
            cached = self.partitions[key] = _CachedPartition(entry)
        else:
            cached.request = entry
        self.to_read[key] = cached

    def forget(self, key) -> None:
        self.partitions.pop(key, None)
        self.to_read.pop(key, None)

    def changed(self, partition) -> None:
        """``partition`` changed (``Partition.notify``): a quiet one is read again."""
        key = (partition.topic_id if self.by_topic_id else partition.topic, partition.index)
        cached = self.partitions.get(key)
        if cached is None or key in self.to_read:
            return
        self.to_read[key] = cached
        # Quiet means the follower was at the log end, and nothing changed until now: so it
        # was caught up at its last fetch, which skipped the partition and so did not say so
        # (the ISR would otherwise drop a follower whose partition had no writes for a while).
        partition.state.note_caught_up(self.replica_id, self.last_fetch_ms)
        if self.wake is not None:
            self.wake(partition, cached.request)

    def must_answer(self, key, resp: dict) -> bool:
        """Whether an incremental answer includes this partition (KIP-227's rule); notes
        what it tells."""
        cached = self.partitions.get(key)
        if cached is None:
            return True
        changed = (resp["error_code"] != 0 or bool(resp.get("records"))
                   or resp.get("diverging_epoch") is not None
                   or resp["high_watermark"] != cached.high_watermark
                   or resp["log_start_offset"] != cached.log_start_offset
                   or resp.get("last_stable_offset") != cached.last_stable_offset)
        cached.high_watermark = resp["high_watermark"]
        cached.log_start_offset = resp["log_start_offset"]
        cached.last_stable_offset = resp.get("last_stable_offset")
        return changed

    def note_read(self, key, quiet: bool) -> None:
        """After a follower's read of the partition: whether reading it again would tell
        nothing until it changes: its follower is in the ISR with no ISR change in flight,
        at the log end, and was told the high watermark and log start (``must_answer``).
        (A follower outside the ISR is never quiet: its fetches drive the expansion.)"""
        if quiet and self.follower:
            self.to_read.pop(key, None)


@dataclass(frozen=True, slots=True)
class FetchContext:
    """What to read for one Fetch request and how to answer it."""

    wanted: list[tuple]
    session: FetchSession | None = None  # answer only what changed (incremental) ...
    incremental: bool = False
    response_session_id: int = 0
    error: ErrorCode = ErrorCode.NONE  # ... or answer only this top-level error


def partition_key(topic: dict, name: str | None, p: dict, version: int):
    return (topic["topic_id"] if version >= 13 else name, p["partition"])


class FetchSessionCache:
    """The leader's sessions, at most ``max_sessions`` (the least recently used goes)."""

    def __init__(self, max_sessions: int = MAX_SESSIONS, first_id: int = 1):
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._followers: dict[int, FetchSession] = {}  # the followers' sessions, by id
        self._ids = itertools.count(first_id)
        # Registered with the partitions' owner (``ReplicaManager.change_sinks``): every
        # ``Partition.notify`` lands here, costing one lookup per follower session.
        self.changes = _ChangeSink(self._followers)
        self.evictions = 0  # sessions closed to make room (IncrementalFetchSessionEvictionsPerSec)

    def __len__(self) -> int:
        return len(self._sessions)

    def context(self, body: dict, version: int, wanted: list[tuple],
                forgotten: list[tuple], *, follower: bool = False) -> FetchContext:
        """``wanted``: the request's (topic, name, partition) entries; ``forgotten``: the
        (topic key, index) pairs it drops; ``follower``: a replica fetches (its session
        reads only what changed)."""
        if version < 7:
            return FetchContext(wanted)
        session_id, epoch = body.get("session_id", 0), body.get("session_epoch", FINAL_EPOCH)
        if epoch == FINAL_EPOCH:
            self._close(session_id)
            return FetchContext(wanted)
        if session_id == 0:
            if epoch != INITIAL_EPOCH:
                return FetchContext([], error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
            if self.max_sessions == 0:  # as Kafka with no slot: a full answer, session id 0
                return FetchContext(wanted)
            session = self._open(follower, by_topic_id=version >= 13)
            for entry in wanted:
                session.add(partition_key(*entry, version), entry)
            return FetchContext(wanted, session, incremental=False, response_session_id=session.session_id)
        session = self._sessions.get(session_id)
        if session is None:
            return FetchContext([], error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if epoch != session.epoch:
            return FetchContext([], error=ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                                response_session_id=session_id)
        self._sessions.move_to_end(session_id)
        session.epoch = next_epoch(epoch)
        for key in forgotten:
            session.forget(key)
        for entry in wanted:
            session.add(partition_key(*entry, version), entry)  # new fetch parameters: read it
        return FetchContext(session.wanted(), session, incremental=True, response_session_id=session_id)

    def _open(self, follower: bool, by_topic_id: bool) -> FetchSession:
        while len(self._sessions) >= self.max_sessions:
            self._close(next(iter(self._sessions)))
            self.evictions += 1
        session_id = next(self._ids) & 0x7FFFFFFF or next(self._ids)
        session = FetchSession(session_id, next_epoch(INITIAL_EPOCH), follower=follower,
                               by_topic_id=by_topic_id)
        self._sessions[session_id] = session
        if follower:
            self._followers[session_id] = session
        return session

    def cached(self) -> tuple[int, int]:
        """(sessions, partitions they hold): Kafka's NumIncrementalFetchSessions and
        NumIncrementalFetchPartitionsCached.  Safe from another thread (a copy first)."""
        sessions = list(self._sessions.values())
        return len(sessions), sum(len(s.partitions) for s in sessions)

    def _close(self, session_id: int) -> None:
        self._sessions.pop(session_id, None)
        self._followers.pop(session_id, None)


class _ChangeSink:
    """``add(partition)``, as the replica fetchers' sets of changed partitions: tells every
    follower session that the partition changed."""

    __slots__ = ("_followers",)

    def __init__(self, followers: dict[int, FetchSession]):
        self._followers = followers

    def add(self, partition) -> None:
        for session in self._followers.values():
            session.changed(partition)


# ----------------------------------------------------------------------- follower side


class FetchSessionHandler:
    """A follower's session with one leader: which partitions to send in the next Fetch.

    ``build(positions)`` takes every partition followed from the leader, ``key ->
    position`` (positions compare equal when the fetch parameters are the same), and
    returns the session fields and the partitions to send and to forget.  Call
    ``on_response`` with the answer's top-level error and session id, or ``reset`` when
    the request failed: the next request is then a full one."""

    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self._sent: dict = {}  # key -> position, as the leader's session holds them
        self._pending: tuple | None = None  # (full, sent, forgotten) of the request in flight

    def build(self, positions: dict, changed=None) -> tuple[int, int, dict, list]:
        """(session_id, session_epoch, key -> position to send, keys to forget).
        ``changed``: when given, the only keys whose position may have changed, or that
        were added or removed, since the last call (so the cost is in proportion to it)."""
        if self.session_id == 0:
            self._pending = (True, dict(positions), [])
            return 0, INITIAL_EPOCH, positions, []
        sent = self._sent
        send = {}
        forget = [] if changed is not None else [k for k in sent if k not in positions]
        for k in (positions if changed is None else changed):
            pos = positions.get(k)
            if pos is None:
                if changed is not None and k in sent:
                    forget.append(k)
                continue
            was = sent.get(k)
            if was is not pos and was != pos:
                send[k] = pos
        self._pending = (False, send, forget)
        return self.session_id, self.epoch, send, forget

    def on_response(self, error_code: int, session_id: int) -> bool:
        """Whether the answer is usable; a session error resets the session."""
        full, send, forget = self._pending or (True, {}, [])
        self._pending = None
        if error_code in (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH):
            self.reset()
            return False
        if error_code != 0:
            self.reset()
            return False
        if full:
            self._sent = send
            self.session_id = session_id  # 0: the leader keeps no session, fetch in full
            self.epoch = next_epoch(INITIAL_EPOCH)
        else:
            for k in forget:
                self._sent.pop(k, None)
            self._sent.update(send)
            self.epoch = next_epoch(self.epoch)
        return True

    def reset(self) -> None:
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self._sent = {}
        self._pending = None
