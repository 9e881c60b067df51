"""What the hot paths count, with no dependency on the exporter.

Everything here is mutated on the trio thread only and read by the exporter's scrape
thread.  Readers copy (``list(d.items())``, ``list(counts)``) before they iterate, which is
atomic under CPython's GIL; a scrape may see one counter incremented and its neighbour not
yet, which a metric tolerates.

Costs, per request: a handful of integer increments and at most seven histogram
observations (a ``bisect`` over a tuple of ~70 bounds each).  Nothing is done per record:
message counts come from the offsets an append was given.
"""

from __future__ import annotations

import contextvars
import math
import time
from bisect import bisect_left
from collections import deque

from kraft.protocol.error_codes import ErrorCode

# Kafka's Yammer histograms report these percentiles (50thPercentile ... 999thPercentile).
QUANTILES = (0.5, 0.75, 0.95, 0.98, 0.99, 0.999)
WINDOW_S = 30.0  # quantiles cover the last one to two windows (Kafka: a decaying reservoir)


def _geometric(lo: float, hi: float, factor: float) -> tuple[float, ...]:
    out = []
    v = lo
    while v < hi:
        out.append(round(v, 6))
        v *= factor
    out.append(hi)
    return tuple(out)


TIME_BOUNDS_MS = _geometric(0.01, 300_000.0, 1.25)  # 10 us .. 5 min, +-12 % per bucket
BYTES_BOUNDS = tuple(float(1 << k) for k in range(4, 32))  # 16 B .. 2 GiB


class Histogram:
    """A fixed-bucket histogram: cumulative count and sum, and quantiles over the last
    ``WINDOW_S`` to ``2 * WINDOW_S`` seconds (two rotating bucket arrays), so a latency
    spike shows for about a minute and then leaves, as in Kafka's histograms."""

    __slots__ = ("bounds", "count", "sum", "_cur", "_prev", "_cur_start", "_window")

    def __init__(self, bounds: tuple[float, ...] = TIME_BOUNDS_MS, window_s: float = WINDOW_S):
        self.bounds = bounds
        self.count = 0
        self.sum = 0.0
        self._window = window_s
        self._cur = [0] * (len(bounds) + 1)
        self._prev = [0] * (len(bounds) + 1)
        self._cur_start = time.monotonic()

    def observe(self, value: float, now: float) -> None:
        """``now``: ``time.monotonic()`` (callers measuring a duration have it already)."""
        if now - self._cur_start >= self._window:
            self._rotate(now)
        self._cur[bisect_left(self.bounds, value)] += 1
        self.count += 1
        self.sum += value

    def rotate_if_due(self, now: float) -> None:
        """``observe``'s window check alone, for a caller that then ``add``s several values."""
        if now - self._cur_start >= self._window:
            self._rotate(now)

    def add(self, value: float) -> None:
        """``observe`` without the window check (``rotate_if_due`` was called just before)."""
        self._cur[bisect_left(self.bounds, value)] += 1
        self.count += 1
        self.sum += value

    def _rotate(self, now: float) -> None:
        if now - self._cur_start >= 2 * self._window:
            self._prev = [0] * len(self._cur)  # nothing in the last window either
        else:
            self._prev = self._cur
        self._cur = [0] * len(self._prev)
        self._cur_start = now

    def recent_counts(self, now: float) -> list[int]:
        """Bucket counts of the recent windows, as ``observe`` would rotate them at ``now``."""
        cur, prev = list(self._cur), list(self._prev)
        age = now - self._cur_start
        if age >= 2 * self._window:
            return [0] * len(cur)
        if age >= self._window:
            return cur
        return [a + b for a, b in zip(cur, prev)]

    def quantiles(self, now: float, qs=QUANTILES) -> list[float]:
        """Estimated quantiles of the recent observations (0 with none, as Kafka's)."""
        counts = self.recent_counts(now)
        total = sum(counts)
        if total == 0:
            return [0.0] * len(qs)
        out = []
        for q in qs:
            rank = q * total
            seen = 0
            for i, c in enumerate(counts):
                if c and seen + c >= rank:
                    lo = self.bounds[i - 1] if i > 0 else 0.0
                    hi = self.bounds[i] if i < len(self.bounds) else self.bounds[-1]
                    out.append(lo + (hi - lo) * max(rank - seen, 0) / c)
                    break
                seen += c
            else:
                out.append(self.bounds[-1])
        return out


class WindowedStat:
    """Average and maximum over the last one to two windows (Kafka's ``-avg`` / ``-max``)."""

    __slots__ = ("_cur", "_prev", "_cur_start", "_window")

    def __init__(self, window_s: float = WINDOW_S):
        self._window = window_s
        self._cur = [0, 0.0, -math.inf]  # count, sum, max
        self._prev = [0, 0.0, -math.inf]
        self._cur_start = time.monotonic()

    def record(self, value: float, now: float) -> None:
        if now - self._cur_start >= self._window:
            fresh = now - self._cur_start < 2 * self._window
            self._prev = self._cur if fresh else [0, 0.0, -math.inf]
            self._cur = [0, 0.0, -math.inf]
            self._cur_start = now
        cur = self._cur
        cur[0] += 1
        cur[1] += value
        if value > cur[2]:
            cur[2] = value

    def avg_max(self, now: float) -> tuple[float, float]:
        """(average, maximum); NaN when nothing was recorded lately (as Kafka's)."""
        age = now - self._cur_start
        parts = [] if age >= 2 * self._window else [list(self._cur)] if age >= self._window \
            else [list(self._cur), list(self._prev)]
        n = sum(p[0] for p in parts)
        if n == 0:
            return math.nan, math.nan
        return sum(p[1] for p in parts) / n, max(p[2] for p in parts)


# ------------------------------------------------------------------ request metrics

def _error_plan(api: str):
    """Where a response of ``api`` holds error codes: (has error_code here, [(key, is
    array, sub-plan)]), pruned to the branches that hold one (every version's fields)."""
    from kraft.protocol import codec

    def plan(fields):
        here = any(f.key == "error_code" and not f.is_struct for f in fields)
        children = []
        for f in fields:
            if f.is_struct and f.fields:
                sub = plan(f.fields)
                if sub is not None:
                    children.append((f.key, f.is_array, sub))
        return (here, tuple(children)) if here or children else None

    try:
        return plan(codec.spec_for(api, "response").fields)
    except KeyError:
        return None


def _count_errors(node, plan, out: dict) -> None:
    here, children = plan
    if not children:  # the common leaf: a partition's error_code
        code = node.get("error_code")
        if code is not None:
            out[code] = out.get(code, 0) + 1
        return
    if here:
        code = node.get("error_code")
        if code is not None:
            out[code] = out.get(code, 0) + 1
    for key, is_array, sub in children:
        value = node.get(key)
        if value is None:
            continue
        if is_array:
            for item in value:
                _count_errors(item, sub, out)
        else:
            _count_errors(value, sub, out)


class ApiMetrics:
    """Kafka's ``kafka.network:type=RequestMetrics,request=<name>`` of one request name."""

    __slots__ = ("name", "requests", "errors", "total", "request_queue", "local", "remote",
                 "response_queue", "response_send", "request_bytes", "_errors_plan", "_all")

    def __init__(self, name: str, api: str):
        self.name = name
        self.requests: dict[int, int] = {}  # version -> count (RequestsPerSec)
        self.errors: dict[int, int] = {}  # error code -> count (ErrorsPerSec)
        self.total = Histogram()
        self.request_queue = Histogram()
        self.local = Histogram()
        self.remote = Histogram()
        self.response_queue = Histogram()
        self.response_send = Histogram()
        self.request_bytes = Histogram(BYTES_BOUNDS)
        self._errors_plan = _error_plan(api)
        self._all = (self.total, self.request_queue, self.local, self.remote, self.response_queue,
                     self.response_send, self.request_bytes)

    def rotate_if_due(self, now: float) -> None:
        """Rotate the histograms' windows together (they were created together)."""
        if now - self.total._cur_start >= self.total._window:
            for h in self._all:
                h._rotate(now)

    def count_errors(self, body: dict | None) -> None:
        if body is not None and self._errors_plan is not None:
            try:
                _count_errors(body, self._errors_plan, self.errors)
            except (AttributeError, TypeError):  # a body the encoder filled in: never the request's cost
                pass

    @property
    def histograms(self) -> dict[str, Histogram]:
        """Kafka's metric name -> histogram."""
        return {"TotalTimeMs": self.total, "RequestQueueTimeMs": self.request_queue,
                "LocalTimeMs": self.local, "RemoteTimeMs": self.remote,
                "ResponseQueueTimeMs": self.response_queue, "ResponseSendTimeMs": self.response_send,
                "RequestBytes": self.request_bytes}


class RequestTimer:
    """One request's way through a connection (times are ``time.monotonic()`` seconds):
    received (its bytes arrived) -> dequeued (its handler starts) -> handled (the handler
    returned) -> ready (its answer is complete: a ``Deferred`` finished) -> sending ->
    sent.  ``remote`` is the part of the handler spent waiting for others (a fetch's long
    poll), which Kafka counts as remote time, not local."""

    __slots__ = ("api", "received", "dequeued", "handled", "ready", "remote", "size")

    def __init__(self, api: ApiMetrics, received: float, dequeued: float, size: int):
        self.api = api
        self.received = received
        self.dequeued = dequeued
        self.handled = dequeued
        self.ready = dequeued
        self.remote = 0.0
        self.size = size

    def done(self, sending: float, sent: float) -> None:
        api = self.api
        api.rotate_if_due(sent)
        api.total.add((sent - self.received) * 1000)
        api.request_queue.add((self.dequeued - self.received) * 1000)
        api.local.add(max(self.handled - self.dequeued - self.remote, 0.0) * 1000)
        api.remote.add((self.remote + self.ready - self.handled) * 1000)
        api.response_queue.add((sending - self.ready) * 1000)
        api.response_send.add((sent - sending) * 1000)
        api.request_bytes.add(self.size)


# The request a connection's reader task is handling: a slot per connection, set once,
# holding that task's current ``RequestTimer`` (``note_remote_wait`` reaches it).
_CURRENT: contextvars.ContextVar[list | None] = contextvars.ContextVar("kraft_request_timer", default=None)


def note_remote_wait(seconds: float) -> None:
    """The request being handled in this task spent ``seconds`` waiting on other replicas
    or producers (a long-polling fetch): Kafka's RemoteTimeMs, not LocalTimeMs."""
    slot = _CURRENT.get()
    if slot is not None and slot[0] is not None:
        slot[0].remote += seconds


class RequestMetrics:
    """Per request name (Fetch split into FetchConsumer / FetchFollower, as Kafka): counts
    by version, times, request sizes, errors.  One per node, shared by its listeners."""

    def __init__(self):
        self.apis: dict[str, ApiMetrics] = {}

    def connection_slot(self) -> list:
        """Called once by a connection's reader task: its slot for the current timer."""
        slot = [None]
        _CURRENT.set(slot)
        return slot

    def begin(self, api: str, version: int, body: dict, size: int, received: float,
              dequeued: float) -> RequestTimer:
        name = api
        if api == "Fetch":
            replica = (body.get("replica_state") or {}).get("replica_id", -1) if version >= 15 \
                else body.get("replica_id", -1)
            name = "FetchFollower" if replica is not None and replica >= 0 else "FetchConsumer"
        metrics = self.apis.get(name)
        if metrics is None:
            metrics = self.apis[name] = ApiMetrics(name, api)
        requests = metrics.requests
        requests[version] = requests.get(version, 0) + 1
        return RequestTimer(metrics, received, dequeued, size)


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


# ------------------------------------------------------------------ broker topic metrics

class TopicStats:
    """Kafka's BrokerTopicMetrics of one topic (or of all topics: ``parent`` None)."""

    __slots__ = ("messages_in", "bytes_in", "bytes_out", "total_produce", "total_fetch",
                 "failed_produce", "failed_fetch", "parent")

    def __init__(self, parent: "TopicStats | None" = None):
        self.messages_in = self.bytes_in = self.bytes_out = 0
        self.total_produce = self.total_fetch = self.failed_produce = self.failed_fetch = 0
        self.parent = parent

    def appended(self, messages: int, size: int) -> None:
        self.messages_in += messages
        self.bytes_in += size
        p = self.parent
        if p is not None:
            p.messages_in += messages
            p.bytes_in += size

    def produce_request(self, failed: bool) -> None:
        """One partition of a Produce (Total/FailedProduceRequestsPerSec), here and in all topics'."""
        for s in (self, self.parent) if self.parent is not None else (self,):
            s.total_produce += 1
            s.failed_produce += failed

    def fetch_request(self, failed: bool) -> None:
        """One partition of a Fetch (Total/FailedFetchRequestsPerSec), here and in all topics'."""
        for s in (self, self.parent) if self.parent is not None else (self,):
            s.total_fetch += 1
            s.failed_fetch += failed


class BrokerTopicStats:
    """Per-topic stats of the topics this broker hosts, and the all-topics ones."""

    def __init__(self):
        self.all = TopicStats()
        self.topics: dict[str, TopicStats] = {}
        self._replicas: dict[str, int] = {}  # topic -> replicas hosted that hold its stats
        self.replication_bytes_in = 0  # followers' appends (all topics only, as Kafka)
        self.replication_bytes_out = 0  # what followers fetched from this leader

    def attach(self, name: str) -> TopicStats:
        """The stats of ``name`` for one more replica of it hosted here."""
        stats = self.topics.get(name)
        if stats is None:
            stats = self.topics[name] = TopicStats(self.all)
        self._replicas[name] = self._replicas.get(name, 0) + 1
        return stats

    def detach(self, name: str) -> None:
        """One replica of ``name`` left; with the last one its per-topic series go (Kafka
        removes a topic's metrics when it deletes its partitions)."""
        left = self._replicas.get(name, 0) - 1
        if left > 0:
            self._replicas[name] = left
        else:
            self._replicas.pop(name, None)
            self.topics.pop(name, None)


class ReplicaManagerStats:
    """Kafka's ReplicaManager meters: ISR changes this broker's leaders made."""

    __slots__ = ("isr_shrinks", "isr_expands", "failed_isr_updates")

    def __init__(self):
        self.isr_shrinks = self.isr_expands = self.failed_isr_updates = 0

    def isr_update(self, kind: str, ok: bool) -> None:
        """``kind``: "shrink" or "expand" (``IsrChange.value``)."""
        if not ok:
            self.failed_isr_updates += 1
        elif kind == "shrink":
            self.isr_shrinks += 1
        else:
            self.isr_expands += 1


# ------------------------------------------------------------------ raft

class RaftMetrics:
    """Counters behind Kafka's ``kafka.server:type=raft-metrics``."""

    __slots__ = ("append_records", "fetch_records", "commit_latency", "_proposed")

    def __init__(self):
        self.append_records = 0  # records this node appended as leader
        self.fetch_records = 0  # records this node appended from its leader
        self.commit_latency = WindowedStat()  # ms from a leader's append to its commit
        self._proposed: deque[tuple[int, float]] = deque()  # (last offset, when) on the leader

    def proposed(self, last_offset: int, now: float) -> None:
        self._proposed.append((last_offset, now))

    def committed(self, committed_end: int, now: float, is_leader: bool) -> None:
        pending = self._proposed
        if not is_leader:
            pending.clear()  # never committed by us: another leader decides
            return
        while pending and pending[0][0] < committed_end:
            _, at = pending.popleft()
            self.commit_latency.record((now - at) * 1000, now)


# ------------------------------------------------------------------ log flushes

# Kafka's LogFlushStats is one per broker process (a Yammer singleton); so is this: every
# ``Log.flush`` of the process (partition logs and the metadata log) lands here.
LOG_FLUSH_MS = Histogram()
