"""The trio shell of client quotas (``kraft.quotas``): what each request costs its client,
the throttle time in its response, and the connection muted for that time.

As Kafka since KIP-219: a Produce (v6+) or Fetch (v8+) over its quota is answered at once,
carrying ``throttle_time_ms``, and the connection then reads no request for that long (a
client that honours the field is silent anyway; one that does not is held back).  Older
versions have their response delayed by the throttle time instead, which their clients
read as the throttle.  A throttled Fetch answers no data, and its bytes are taken back from
the rate (Kafka's ``unrecordQuotaSensor``); a Fetch asks for no more than the quota allows in
its windows.  ``request_percentage`` bounds the time spent on a client's requests: the CPU
time of the connection's task while it handles one (a trio instrument, installed only while
some entity has that quota), in percent of one thread, so 100 is one whole core.

Never throttled: a follower's Fetch (replication), and what is answered before a client is
authenticated.  Quotas are the metadata image's; a change applies from the next request.
"""

from __future__ import annotations

import time
from typing import Callable, Mapping

import trio

from broker.deferred import Deferred
from kraft.protocol import rpc
from kraft.quotas.entities import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE
from kraft.quotas.manager import ClientQuotaManager
from kraft.server_config import ServerConfig

EXEMPT_APIS = frozenset({"ApiVersions", "SaslHandshake", "SaslAuthenticate"})
# The first versions whose clients throttle themselves (KIP-219); older ones get a delayed answer.
SELF_THROTTLING_VERSION = {"Produce": 6, "Fetch": 8}
FETCH_PARTITION_OVERHEAD_BYTES = 40  # a fetched partition's fields besides its records, about


class TaskTimeMeter(trio.abc.Instrument):
    """CPU time spent in the steps of the tasks being measured."""

    def __init__(self):
        self.spent: dict[trio.lowlevel.Task, float] = {}
        self._step_started = 0.0

    def before_task_step(self, task) -> None:
        self._step_started = time.perf_counter()

    def after_task_step(self, task) -> None:
        if task in self.spent:
            self.spent[task] += time.perf_counter() - self._step_started

    def task_exited(self, task) -> None:
        self.spent.pop(task, None)  # a connection closed in the middle of a request

    def start(self, task) -> None:
        self.spent[task] = 0.0

    def stop(self, task) -> float:
        """Seconds spent in ``task`` since ``start``, the step it is in included."""
        spent = self.spent.pop(task, 0.0)
        return spent + time.perf_counter() - self._step_started


class ClientQuotaEnforcer:
    """Client quotas for one broker's listeners."""

    def __init__(self, quotas: Callable[[], Mapping], samples: int = 11, window_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic):
        """``quotas``: the metadata image's client quotas, read on each request."""
        self.manager = ClientQuotaManager(samples, window_s * 1000)
        self._quotas = quotas
        self._clock = clock
        self._applied = None
        self._meter: TaskTimeMeter | None = None

    @classmethod
    def from_config(cls, config: ServerConfig, quotas: Callable[[], Mapping]) -> "ClientQuotaEnforcer":
        return cls(quotas, config["quota.window.num"], config["quota.window.size.seconds"])

    def begin(self, request: rpc.Request, principal: str) -> "RequestQuota | None":
        """The quota accounting of ``request`` (None: nothing to account), started before
        it is handled."""
        quotas = self._quotas()
        if quotas is not self._applied:
            self._apply(quotas)
        manager = self.manager
        if not manager.enabled_any or request.api in EXEMPT_APIS:
            return None
        if request.api == "Fetch" and _is_follower(request):
            return None
        user = principal.partition(":")[2] if principal.startswith("User:") else principal
        return RequestQuota(self, request, user, request.header.client_id or "")

    def _apply(self, quotas: Mapping) -> None:
        self._applied = quotas
        self.manager.update(quotas)
        wanted = self.manager.enabled(REQUEST_PERCENTAGE)
        if wanted and self._meter is None:
            self._meter = TaskTimeMeter()
            trio.lowlevel.add_instrument(self._meter)
        elif not wanted and self._meter is not None:
            trio.lowlevel.remove_instrument(self._meter)
            self._meter = None

    def now_ms(self) -> float:
        return self._clock() * 1000

    @property
    def meter(self) -> TaskTimeMeter | None:
        """The request-time meter, installed while some entity has a request_percentage."""
        return self._meter


class RequestQuota:
    """One request's accounting: ``finish`` records what it cost and sets its throttle time;
    ``mute`` then holds the connection for that time."""

    __slots__ = ("enforcer", "request", "user", "client_id", "throttle_ms", "_task", "_meter")

    def __init__(self, enforcer: ClientQuotaEnforcer, request: rpc.Request, user: str, client_id: str):
        self.enforcer = enforcer
        self.request = request
        self.user = user
        self.client_id = client_id
        self.throttle_ms = 0
        self._meter = enforcer.meter
        self._task = None
        if self._meter is not None:
            self._task = trio.lowlevel.current_task()
            self._meter.start(self._task)
        if request.api == "Fetch" and request.version >= 3:
            cap = enforcer.manager.max_value_in_window(CONSUMER_BYTE_RATE, user, client_id)
            if cap is not None and request.body["max_bytes"] > cap:
                request.body["max_bytes"] = max(int(cap), 1)

    async def finish(self, body, request_bytes: int):
        """``body`` (a response, a Deferred one, or None) with its throttle time; for
        versions older than KIP-219 this waits out the throttle before returning."""
        manager, api = self.enforcer.manager, self.request.api
        now_ms = self.enforcer.now_ms()
        throttle = 0
        if self._meter is not None:
            seconds = self._meter.stop(self._task)
            throttle = manager.record(REQUEST_PERCENTAGE, self.user, self.client_id, seconds * 100, now_ms)
        if api == "Produce":
            throttle = max(throttle, manager.record(PRODUCER_BYTE_RATE, self.user, self.client_id,
                                                    request_bytes, now_ms))
        elif api == "Fetch" and isinstance(body, dict):
            size = _fetch_response_bytes(body)
            fetch_throttle = manager.record(CONSUMER_BYTE_RATE, self.user, self.client_id, size, now_ms)
            if fetch_throttle or throttle:  # answered empty: its bytes were not taken
                manager.unrecord(CONSUMER_BYTE_RATE, self.user, self.client_id, size, now_ms)
                body = {"throttle_time_ms": 0, "error_code": 0, "session_id": body.get("session_id", 0),
                        "responses": []}
            throttle = max(throttle, fetch_throttle)
        self.throttle_ms = throttle
        if not throttle:
            return body
        if isinstance(body, dict):
            body["throttle_time_ms"] = max(body.get("throttle_time_ms") or 0, throttle)
        elif isinstance(body, Deferred):
            body = Deferred(_with_throttle(body, throttle))
        if self.request.version < SELF_THROTTLING_VERSION.get(api, 0):
            await trio.sleep(throttle / 1000)
            self.throttle_ms = 0  # served by the delay
        return body

    async def mute(self) -> None:
        """Read nothing more from the connection for the throttle time."""
        if self.throttle_ms:
            await trio.sleep(self.throttle_ms / 1000)


def _with_throttle(deferred: Deferred, throttle_ms: int):
    async def finish() -> dict:
        body = await deferred.finish()
        body["throttle_time_ms"] = max(body.get("throttle_time_ms") or 0, throttle_ms)
        return body
    return finish


def _is_follower(request: rpc.Request) -> bool:
    body = request.body
    if request.version >= 15:
        return body["replica_state"]["replica_id"] >= 0
    return body["replica_id"] >= 0


def _fetch_response_bytes(body: dict) -> int:
    """About the size of a Fetch response (Kafka records the exact size): its records and a
    little for each partition's other fields."""
    size = 16
    for topic in body.get("responses") or ():
        size += 40
        for p in topic["partitions"]:
            records = p.get("records")
            size += FETCH_PARTITION_OVERHEAD_BYTES + (len(records) if records else 0)
    return size
