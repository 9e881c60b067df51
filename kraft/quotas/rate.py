"""Kafka's windowed rate (its ``Rate`` over a ``WindowedSum``, ``SampledStat``), the measure a
quota bounds.

``samples`` windows of ``window_ms`` each (``quota.window.num``, ``quota.window.size.seconds``),
kept in a ring of ``samples + 1``.  A value goes into the current window, which closes
``window_ms`` after it opened; a window whose last value is older than ``samples *
window_ms`` is reset.  The rate is the sum of the windows over the time from the oldest
window's start to now, that time being at least ``samples - 1`` whole windows: a client that
has just started is measured as if it had been idle before, so one burst is not a high rate
(and, as in Kafka, a first burst of up to ``(samples - 1) * window * quota`` goes through).
"""

from __future__ import annotations


class _Sample:
    __slots__ = ("start_ms", "last_ms", "value")

    def __init__(self, now_ms: float):
        self.reset(now_ms)

    def reset(self, now_ms: float) -> None:
        self.start_ms = now_ms
        self.last_ms = now_ms
        self.value = 0.0


class SampledRate:
    """A per-second rate of recorded values over sampled windows."""

    __slots__ = ("samples", "window_ms", "_ring", "_current")

    def __init__(self, samples: int = 11, window_ms: float = 1000.0):
        if samples < 1 or window_ms <= 0:
            raise ValueError("a rate needs at least one window of positive length")
        self.samples = samples
        self.window_ms = window_ms
        self._ring: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: float) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.last_ms = now_ms

    def rate(self, now_ms: float) -> float:
        """Recorded values per second."""
        self._purge(now_ms)
        total = sum(s.value for s in self._ring)
        return total / (self.window_size_ms(now_ms) / 1000.0)

    def last_record_ms(self) -> float:
        return max((s.last_ms for s in self._ring), default=float("-inf"))

    def window_size_ms(self, now_ms: float) -> float:
        """The time the rate is measured over (Kafka's ``Rate.windowSize``)."""
        self._purge(now_ms)
        return self._span_ms(now_ms - self._oldest(now_ms).start_ms)

    def _span_ms(self, elapsed: float) -> float:
        full = int(elapsed // self.window_ms)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1.0)

    def peek(self, now_ms: float) -> float:
        """``rate`` without changing anything: for a metrics scrape from another thread,
        which must not reset windows under the event loop's ``record``."""
        expire_ms = self.samples * self.window_ms
        live = [s for s in list(self._ring) if now_ms - s.last_ms < expire_ms]
        oldest = min((s.start_ms for s in live), default=now_ms)
        return sum(s.value for s in live) / (self._span_ms(now_ms - oldest) / 1000.0)

    def _current_sample(self, now_ms: float) -> _Sample:
        if not self._ring:
            self._ring.append(_Sample(now_ms))
        return self._ring[self._current]

    def _advance(self, now_ms: float) -> _Sample:
        self._current = (self._current + 1) % (self.samples + 1)
        if self._current >= len(self._ring):
            sample = _Sample(now_ms)
            self._ring.append(sample)
            return sample
        sample = self._ring[self._current]
        sample.reset(now_ms)
        return sample

    def _oldest(self, now_ms: float) -> _Sample:
        if not self._ring:
            self._ring.append(_Sample(now_ms))
        return min(self._ring, key=lambda s: s.start_ms)

    def _purge(self, now_ms: float) -> None:
        expire_ms = self.samples * self.window_ms
        for sample in self._ring:
            if now_ms - sample.last_ms >= expire_ms:
                sample.reset(now_ms)


class SimpleRate(SampledRate):
    """Kafka's ``SimpleRate``, the measure of replication quotas: the sum over the time since
    the oldest window opened, at least one window.  Unlike ``SampledRate`` it does not
    pretend a new rate was idle for ``samples - 1`` windows before, so the first bytes of a
    reassignment count at once and a throttled catch-up starts at the bound, not with a
    burst ten windows long."""

    __slots__ = ()

    def _span_ms(self, elapsed: float) -> float:
        return max(elapsed, self.window_ms)
