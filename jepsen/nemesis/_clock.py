"""Clock skew through ``kraft.clock``'s offset file (``KRAFT_CLOCK_OFFSET_FILE``).

Each node reads its wall clock offset, in milliseconds, from its own file (re-read every
100 ms).  ``ClockFiles`` writes those files atomically (tmp + rename, so a reader never sees
half a number); ``ClockNemesis`` bumps offsets and strobes them, and resets every clock on
``stop-clock`` and at teardown.  Monotonic time is never skewed (kraft measures timeouts
with it), exactly as a real wall-clock jump would behave.
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Mapping
from pathlib import Path

from jepsen.hosts import Hosts
from jepsen.nemesis._core import Nemesis, completed
from jepsen.nemesis._targets import Oracle, select_targets


class ClockFiles:
    """The offset file of each node (``files``: node -> path)."""

    def __init__(self, files: Mapping[int, str | os.PathLike]):
        self.files = {n: Path(p) for n, p in files.items()}
        self._lock = threading.RLock()

    @classmethod
    def of(cls, hosts: Hosts) -> "ClockFiles":
        missing = [n for n in hosts.nodes if hosts.configs.get(n) is None
                   or hosts.configs[n].clock_file is None]
        if missing:
            raise ValueError(f"nodes {missing} have no clock file configured")
        return cls({n: hosts.configs[n].clock_file for n in hosts.nodes})

    def get(self, node: int) -> int:
        try:
            return int(self.files[node].read_text().strip() or 0)
        except (FileNotFoundError, ValueError):
            return 0

    def set(self, node: int, offset_ms: int) -> None:
        path = self.files[node]
        tmp = path.with_name(path.name + ".tmp")
        with self._lock:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(f"{int(offset_ms)}\n")
            os.replace(tmp, path)

    def bump(self, node: int, delta_ms: int) -> int:
        with self._lock:
            new = self.get(node) + int(delta_ms)
            self.set(node, new)
        return new

    def offsets(self) -> dict[int, int]:
        return {n: self.get(n) for n in self.files}

    def reset(self) -> None:
        for node in self.files:
            self.set(node, 0)


class ClockNemesis(Nemesis):
    """``start-clock`` value, one of::

        {"mode": "bump", "targets": spec, "max_ms": 120000}      each target += U(-max, max)
        {"mode": "bump", "targets": spec, "delta_ms": 5000}      each target += delta
        {"mode": "strobe", "targets": spec, "delta_ms": 200, "period_ms": 50, "duration_s": 5}
            flips the targets between +delta and their current offset every period, in a
            background thread, until the duration ends or ``stop-clock``

    ``stop-clock`` stops any strobe and resets every node's offset to 0.
    """

    fault = "clock"
    fs = frozenset({"start-clock", "stop-clock"})

    def __init__(self, hosts: Hosts, rng: random.Random | None = None, oracle: Oracle | None = None,
                 clocks: ClockFiles | None = None):
        super().__init__(rng)
        self.hosts = hosts
        self.oracle = oracle or Oracle()
        self.clocks = clocks or ClockFiles.of(hosts)
        self._strobe: threading.Thread | None = None
        self._stop_strobe = threading.Event()

    def setup(self) -> None:
        self.clocks.reset()

    def invoke(self, invocation: dict) -> dict:
        f = invocation.get("f")
        if f == "start-clock":
            return completed(invocation, self.start(invocation.get("value") or {}))
        if f == "stop-clock":
            return completed(invocation, self.stop())
        self._unknown(invocation)

    def start(self, value: dict) -> dict:
        nodes = select_targets(value.get("targets", "one"), self.hosts.nodes, self.rng, self.oracle)
        mode = value.get("mode", "bump")
        if mode == "bump":
            if "delta_ms" in value:
                deltas = {n: int(value["delta_ms"]) for n in nodes}
            else:
                max_ms = int(value.get("max_ms", 120_000))
                deltas = {n: self.rng.randint(-max_ms, max_ms) for n in nodes}
            offsets = {str(n): self.clocks.bump(n, d) for n, d in deltas.items()}
            return {"mode": "bump", "deltas": {str(n): d for n, d in deltas.items()},
                    "offsets": offsets}
        if mode == "strobe":
            delta = int(value.get("delta_ms", 200))
            period_s = int(value.get("period_ms", 50)) / 1000
            duration_s = float(value.get("duration_s", 5))
            self._end_strobe()
            self._stop_strobe.clear()
            self._strobe = threading.Thread(target=self._run_strobe,
                                            args=(nodes, delta, period_s, duration_s),
                                            name="clock-strobe", daemon=True)
            self._strobe.start()
            return {"mode": "strobe", "targets": nodes, "delta_ms": delta,
                    "period_ms": int(period_s * 1000), "duration_s": duration_s}
        raise ValueError(f"unknown clock mode {mode!r} (bump or strobe)")

    def _run_strobe(self, nodes, delta, period_s, duration_s) -> None:
        base = {n: self.clocks.get(n) for n in nodes}
        ticks = max(1, int(duration_s / period_s))
        try:
            for i in range(ticks):
                for n in nodes:
                    self.clocks.set(n, base[n] + (delta if i % 2 == 0 else 0))
                if self._stop_strobe.wait(period_s):
                    break
        finally:
            for n in nodes:
                self.clocks.set(n, base[n])

    def _end_strobe(self) -> None:
        if self._strobe is not None:
            self._stop_strobe.set()
            self._strobe.join()
            self._strobe = None

    def stop(self) -> dict:
        self._end_strobe()
        self.clocks.reset()
        return {"offsets": {str(n): 0 for n in self.hosts.nodes}}

    def teardown(self) -> None:
        self.stop()
