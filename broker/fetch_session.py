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
  (``forgotten_topics_data``).  The leader reads every partition of the session, as
  before, but answers only those with something to say: records, an error, a diverging
  epoch, or a high watermark or log start offset it has not told yet.
* An unknown id answers FETCH_SESSION_ID_NOT_FOUND, a wrong epoch
  INVALID_FETCH_SESSION_EPOCH; the follower then starts over with a full fetch.

``FetchSessionCache`` is the leader's side (Kafka's FetchSessionCache and FetchContext),
``FetchSessionHandler`` the follower's (Kafka's FetchSessionHandler).
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from dataclasses import dataclass, field

from kraft.protocol.error_codes import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_SESSIONS = 1000  # Kafka's max.incremental.fetch.session.cache.slots


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= 0x7FFFFFFF else epoch + 1


# ------------------------------------------------------------------------- leader side


@dataclass(slots=True)
class _CachedPartition:
    request: tuple  # (topic entry of the request, topic name or None, partition entry)
    high_watermark: int | None = None  # as last answered
    log_start_offset: int | None = None
    last_stable_offset: int | None = None
    quiet: tuple | None = None  # (partition, its version) when a read found nothing to tell


@dataclass(slots=True)
class FetchSession:
    session_id: int
    epoch: int  # the epoch the next request must carry
    partitions: dict = field(default_factory=dict)  # (topic key, index) -> _CachedPartition

    def wanted(self) -> list[tuple]:
        return [c.request for c in self.partitions.values()]

    def is_quiet(self, key, partition) -> bool:
        """Whether reading the partition again would tell nothing: the last read of it,
        with the same fetch parameters, found nothing to answer, the partition has not
        changed since (its ``version``, which its log end, high watermark, log start,
        epoch and role move), and its high watermark and log start were answered.  A
        follower that was at the log end then still is, so skipping its fetch state
        update changes no ISR decision, and the leader's cost per round is in proportion
        to the partitions that changed, not to the partitions followed.  (A follower
        outside the ISR, or with an ISR change in flight, is never quiet: its fetches
        drive the expansion.)"""
        cached = self.partitions.get(key)
        if cached is None or cached.quiet is None:
            return False
        seen, version = cached.quiet
        st = partition.state
        return (seen is partition and version == partition.version
                and cached.high_watermark == st.high_watermark
                and cached.log_start_offset == st.log_start_offset)

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

    def note_read(self, key, partition, quiet: bool) -> None:
        """After a read of the partition: whether it found nothing to tell."""
        cached = self.partitions.get(key)
        if cached is not None:
            cached.quiet = (partition, partition.version) if quiet else None


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
        self._ids = itertools.count(first_id)

    def __len__(self) -> int:
        return len(self._sessions)

    def context(self, body: dict, version: int, wanted: list[tuple],
                forgotten: list[tuple]) -> FetchContext:
        """``wanted``: the request's (topic, name, partition) entries; ``forgotten``: the
        (topic key, index) pairs it drops."""
        if version < 7:
            return FetchContext(wanted)
        session_id, epoch = body.get("session_id", 0), body.get("session_epoch", FINAL_EPOCH)
        if epoch == FINAL_EPOCH:
            self._sessions.pop(session_id, None)
            return FetchContext(wanted)
        if session_id == 0:
            if epoch != INITIAL_EPOCH:
                return FetchContext([], error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
            session = self._open()
            for entry in wanted:
                session.partitions[partition_key(*entry, version)] = _CachedPartition(entry)
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
            session.partitions.pop(key, None)
        for entry in wanted:
            key = partition_key(*entry, version)
            cached = session.partitions.get(key)
            if cached is None:
                session.partitions[key] = _CachedPartition(entry)
            else:
                cached.request = entry
                cached.quiet = None  # new fetch parameters: read it
        return FetchContext(session.wanted(), session, incremental=True, response_session_id=session_id)

    def _open(self) -> FetchSession:
        while len(self._sessions) >= self.max_sessions:
            self._sessions.popitem(last=False)
        session_id = next(self._ids) & 0x7FFFFFFF or next(self._ids)
        session = FetchSession(session_id, next_epoch(INITIAL_EPOCH))
        self._sessions[session_id] = session
        return session


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
        ``changed``: when given, the only keys whose position may have changed since the
        last call, which had the same keys (so the cost is in proportion to it)."""
        if self.session_id == 0:
            self._pending = (True, dict(positions), [])
            return 0, INITIAL_EPOCH, positions, []
        sent = self._sent
        send = {}
        for k in (positions if changed is None else changed):
            pos = positions.get(k)
            if pos is None:
                continue
            was = sent.get(k)
            if was is not pos and was != pos:
                send[k] = pos
        forget = [] if changed is not None else [k for k in self._sent if k not in positions]
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
