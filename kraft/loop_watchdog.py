"""Keep a node's event loop turning: warn when it stalls, and keep the cyclic garbage
collector from stalling it.

Everything in a node (the Raft driver, the controller, every partition and connection)
shares one trio thread, so whatever holds that thread for two seconds silences the quorum
for two seconds: a follower's fetch timeout expires and the controller's leadership moves
(issue 15).  At 20,000 partitions x RF 3 the culprit was the garbage collector: a node
holds about a million container objects (images, partitions, logs), and every full
(generation 2) collection walked all of them, 0.3-1.0 s each, a dozen times while the
topics were being created.

Objects that survive a full collection are long-lived state (the metadata image, the
replicas), so the watchdog freezes them (``gc.freeze``): later collections skip them and
cost what changed since.  Frozen objects that become cyclic garbage are not reclaimed
until they are unfrozen, so the frozen set is released every ``UNFREEZE_INTERVAL_S`` and
whenever replicas are removed (``release_frozen``); the next full collection then walks
everything once, as Python's default would every time.
``kraft.gc.freeze.enable=false`` keeps Python's default behaviour.
"""

from __future__ import annotations

import gc
import logging
import sys
import threading
import time
import traceback

import trio

log = logging.getLogger(__name__)

TICK_S = 0.25  # well under the stall worth a warning; an idle node wakes for it 4 times a second
STALL_WARN_S = 0.5  # a quarter of controller.quorum.fetch.timeout.ms's default
GC_WARN_S = 0.2
UNFREEZE_INTERVAL_S = 600.0


def release_frozen() -> None:
    """Hand the frozen objects back to the collector (replicas were removed: their cycles,
    if any, are garbage now)."""
    if gc.get_freeze_count():
        gc.unfreeze()


class LoopWatchdog:
    def __init__(self, freeze: bool = True, stall_warn_s: float = STALL_WARN_S,
                 gc_warn_s: float = GC_WARN_S):
        self.freeze = freeze
        self.stall_warn_s = stall_warn_s
        self.gc_warn_s = gc_warn_s
        self.longest_stall_s = 0.0
        self.stalls = 0
        self.full_collections = 0
        self._gc_started: float | None = None
        self._full_collection_done = False
        self._last_tick = time.monotonic()

    async def run(self) -> None:
        gc.callbacks.append(self._on_gc)
        unfreeze_at = time.monotonic() + UNFREEZE_INTERVAL_S
        self._last_tick = time.monotonic()
        stopped = threading.Event()
        threading.Thread(target=self._watch, args=(threading.get_ident(), stopped),
                         name="loop-watchdog", daemon=True).start()
        try:
            while True:
                before = time.monotonic()
                await trio.sleep(TICK_S)
                now = self._last_tick = time.monotonic()
                late = now - before - TICK_S
                self.longest_stall_s = max(self.longest_stall_s, late)
                if late >= self.stall_warn_s:
                    self.stalls += 1
                    log.warning("event loop blocked for %.0f ms (the quorum's fetch timeout is "
                                "shared with everything else this node runs)", late * 1000)
                if not self.freeze:
                    continue
                if self._full_collection_done:  # its survivors are long-lived: skip them from now on
                    self._full_collection_done = False
                    gc.freeze()
                if now >= unfreeze_at:
                    unfreeze_at = now + UNFREEZE_INTERVAL_S
                    release_frozen()
        finally:
            stopped.set()
            gc.callbacks.remove(self._on_gc)

    def _watch(self, loop_thread: int, stopped: threading.Event) -> None:
        """From a thread of its own: while the loop is blocked, say where it is blocked (the
        loop's own warning comes only afterwards, and cannot tell)."""
        reported = None
        while not stopped.wait(self.stall_warn_s / 2):
            last = self._last_tick
            if time.monotonic() - last < TICK_S + self.stall_warn_s or reported == last:
                continue
            reported = last
            frame = sys._current_frames().get(loop_thread)
            if frame is not None:
                stack = "".join(traceback.format_stack(frame, limit=12))
                log.warning("event loop blocked for %.0f ms so far, in:\n%s",
                            (time.monotonic() - last) * 1000, stack.rstrip())

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_started = time.monotonic()
            return
        if self._gc_started is None:
            return
        took = time.monotonic() - self._gc_started
        self._gc_started = None
        if info.get("generation") == 2:
            self.full_collections += 1
            self._full_collection_done = True
        if took >= self.gc_warn_s:
            log.warning("garbage collection of generation %s took %.0f ms (%d objects frozen)",
                        info.get("generation"), took * 1000, gc.get_freeze_count())
