"""Throttle decisions for client quotas (Kafka's ClientQuotaManager, sans I/O).

The broker records what a connection did (bytes produced, bytes fetched, request time) with
the connection's user and client id and the time; ``record`` answers how long the client
must be throttled, in milliseconds, 0 when it is within its quota.  As in Kafka, the value
is recorded first and the rate then compared with the quota; when it is over, the throttle
time is how long the client must stay silent for its rate to fall back to the quota::

    throttle_ms = (rate - quota) / quota * window_size_ms

with ``window_size_ms`` the time the rate is measured over (``SampledRate.window_size_ms``).
Request-time throttles are capped at one window, as Kafka's ClientRequestQuotaManager does.

Connections that resolve to the same configured entity share one rate (``entities.shared_by``).
A rate idle for longer than all its windows has nothing left to measure and is dropped.
"""

from __future__ import annotations

from typing import Mapping

from kraft.quotas.entities import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    Entity,
    resolve,
    shared_by,
)
from kraft.quotas.rate import SampledRate

ENFORCED_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)
_SWEEP_EVERY = 4096  # records between sweeps of idle rates


class ClientQuotaManager:
    """Rates per (quota key, user, client id) and the throttle times they call for."""

    def __init__(self, samples: int = 11, window_ms: float = 1000.0):
        self.samples = samples
        self.window_ms = window_ms
        self._quotas: Mapping[Entity, Mapping[str, float]] = {}
        self._enabled: frozenset[str] = frozenset()
        self._rates: dict[tuple[str, str, str], SampledRate] = {}
        self._since_sweep = 0

    def update(self, quotas: Mapping[Entity, Mapping[str, float]]) -> None:
        """The configured quotas changed (a new metadata image): they apply from the next
        record on, and rates measured so far are kept (as Kafka changes a sensor's bound)."""
        self._quotas = quotas
        self._enabled = frozenset(k for values in quotas.values() for k in values if k in ENFORCED_KEYS)

    @property
    def enabled_any(self) -> bool:
        return bool(self._enabled)

    def enabled(self, key: str) -> bool:
        """Whether any entity sets ``key`` (else nothing needs recording)."""
        return key in self._enabled

    def quota(self, key: str, user: str, client_id: str) -> float | None:
        found = resolve(self._quotas, key, user, client_id) if key in self._enabled else None
        return None if found is None else found[1]

    def record(self, key: str, user: str, client_id: str, value: float, now_ms: float) -> int:
        """Record ``value`` (bytes, or request time in percent-seconds) and return the
        throttle time in ms."""
        if key not in self._enabled:
            return 0
        found = resolve(self._quotas, key, user, client_id)
        if found is None:
            return 0
        matched, bound = found
        rate = self._rate(key, matched, user, client_id, now_ms)
        rate.record(value, now_ms)
        measured = rate.rate(now_ms)
        if measured <= bound:
            return 0
        throttle_ms = (measured - bound) / bound * rate.window_size_ms(now_ms)
        if key == REQUEST_PERCENTAGE:
            throttle_ms = min(throttle_ms, self.window_ms)
        return round(throttle_ms)

    def unrecord(self, key: str, user: str, client_id: str, value: float, now_ms: float) -> None:
        """Take back a recorded value (a throttled fetch answers no data: Kafka's
        ``unrecordQuotaSensor``)."""
        found = resolve(self._quotas, key, user, client_id) if key in self._enabled else None
        if found is not None:
            self._rate(key, found[0], user, client_id, now_ms).record(-value, now_ms)

    def max_value_in_window(self, key: str, user: str, client_id: str) -> float | None:
        """The most a client may take at once without being throttled for certain (Kafka
        caps a fetch's size with it); None without a quota."""
        bound = self.quota(key, user, client_id)
        return None if bound is None else bound * (self.samples - 1) * self.window_ms / 1000

    def _rate(self, key: str, matched: Entity, user: str, client_id: str, now_ms: float) -> SampledRate:
        tag = (key, *shared_by(matched, user, client_id))
        rate = self._rates.get(tag)
        if rate is None:
            rate = self._rates[tag] = SampledRate(self.samples, self.window_ms)
        self._since_sweep += 1
        if self._since_sweep >= _SWEEP_EVERY:
            self._since_sweep = 0
            self._sweep(rate, now_ms)
        return rate

    def _sweep(self, keep: SampledRate, now_ms: float) -> None:
        idle_ms = self.samples * self.window_ms
        for tag, rate in list(self._rates.items()):
            if rate is not keep and now_ms - rate.last_record_ms() >= idle_ms:
                del self._rates[tag]
