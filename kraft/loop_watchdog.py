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
until they are unfrozen (``release_frozen``), and the next full collection then walks
everything once, as Python's default would every time.  At 100,000 replicas that is about
5 million objects and several seconds (issue 19: a release every 10 minutes, on all three
nodes at once, stalled each for 6-8 s under load and moved the quorum's leadership), so a
release comes only when garbage may have piled up: once the replicas removed since the
last release reach a tenth of those hosted (``replicas_removed``), or once the frozen set
has grown to ``RELEASE_GROWTH`` times its size after the last release and beyond what the
hosted replicas account for (memory stays within that factor of what is live), at most
every ``RELEASE_MIN_INTERVAL_S`` for the latter.  A node whose state is steady never stalls
for it.  The frozen set is counted every five minutes, or less often when it is large, at a
time moved at random: ``gc.get_freeze_count`` walks it (once a minute, the walk was 3-8% of
an idle node's CPU at 20,000 replicas).
The youngest generation is collected less often than Python's default
(``YOUNG_THRESHOLD``).  ``kraft.gc.freeze.enable=false`` keeps Python's default behaviour.
"""

from __future__ import annotations

import gc
import logging
import random
import sys
import threading
import time
import traceback

import trio

log = logging.getLogger(__name__)

# How often the loop-side task and the thread wake.  A stall is measured to the millisecond
# whatever the tick (the task's sleep comes back late by the stall), so the tick only bounds
# how soon a stall still going on is reported from the thread (after ``TICK_S +
# stall_warn_s``).  Every wake-up costs an idle node CPU (issue 19: at 0.25 s the task and
# the thread were 8 of an idle follower's 14 wake-ups a second).
TICK_S = 1.0
STALL_WARN_S = 0.5  # a quarter of controller.quorum.fetch.timeout.ms's default
GC_WARN_S = 0.2
RELEASE_GROWTH = 2.0
RELEASE_FLOOR = 200_000  # frozen objects below which growth alone never releases
# What a node legitimately holds grows with its replicas (about 50 tracked objects each,
# measured at 100,000): growth up to this many per hosted replica is not taken for garbage.
OBJECTS_PER_REPLICA = 60
RELEASE_MIN_INTERVAL_S = 600.0
GROWTH_CHECK_S = 300.0  # gc.get_freeze_count() walks the frozen set: not on every tick
# ... and not more often than this many frozen objects per second between checks: the walk
# took a node 1.1-1.6 s at 5 million (100,000 replicas), and three nodes started together
# walked at the same moment, so each check is also moved by up to a quarter either way.
CHECK_OBJECTS_PER_S = 10_000
REMOVED_SHARE = 0.1
# The youngest generation is collected after this many allocations (Python's default: 700).
# A young collection walks what is alive, not what was allocated, and a pipelining
# producer's burst keeps about a thousand objects alive: at 700 a node took one every 66
# one-record Produce requests, 135 us each, 4.5% of its CPU.
YOUNG_THRESHOLD = 10_000

_removed_since_release = 0
_releases = 0  # how many releases so far (the watchdog notices one made elsewhere)
_hosted_replicas = 0


def release_frozen() -> None:
    """Hand the frozen objects back to the collector: their cycles, if any, are reclaimed
    by the next full collection."""
    global _removed_since_release, _releases
    _removed_since_release = 0
    _releases += 1
    gc.unfreeze()


def replicas_removed(count: int, hosted: int) -> None:
    """``count`` replicas were removed and ``hosted`` remain: their cycles, if any, are
    garbage now; release the frozen set once the removed ones since the last release reach
    a tenth of those hosted."""
    global _removed_since_release
    _removed_since_release += count
    replicas_hosted(hosted)
    if _removed_since_release >= max(1.0, REMOVED_SHARE * hosted):
        release_frozen()


def replicas_hosted(count: int) -> None:
    """The node now hosts ``count`` replicas (see ``OBJECTS_PER_REPLICA``)."""
    global _hosted_replicas
    _hosted_replicas = count


class LoopWatchdog:
    def __init__(self, freeze: bool = True, stall_warn_s: float = STALL_WARN_S,
                 gc_warn_s: float = GC_WARN_S, tick_s: float = TICK_S):
        self.freeze = freeze
        self.stall_warn_s = stall_warn_s
        self.tick_s = tick_s
        self.gc_warn_s = gc_warn_s
        self.longest_stall_s = 0.0
        self.stalls = 0
        self.full_collections = 0
        self._gc_started: float | None = None
        self._full_collection_done = False
        self._last_tick = time.monotonic()

    async def run(self) -> None:
        gc.callbacks.append(self._on_gc)
        if self.freeze:
            gc.set_threshold(YOUNG_THRESHOLD, *gc.get_threshold()[1:])
        release_not_before = time.monotonic() + RELEASE_MIN_INTERVAL_S
        frozen_after_release = None  # the frozen set's size at the first check after a release
        seen_releases = _releases
        check_at = time.monotonic() + GROWTH_CHECK_S
        self._last_tick = time.monotonic()
        stopped = threading.Event()
        threading.Thread(target=self._watch, args=(threading.get_ident(), stopped),
                         name="loop-watchdog", daemon=True).start()
        try:
            while True:
                before = time.monotonic()
                await trio.sleep(self.tick_s)
                now = self._last_tick = time.monotonic()
                late = now - before - self.tick_s
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
                if now < check_at:
                    continue
                if seen_releases != _releases:  # released by replicas_removed meanwhile
                    seen_releases, frozen_after_release = _releases, None
                frozen = gc.get_freeze_count()
                check_at = now + max(GROWTH_CHECK_S, frozen / CHECK_OBJECTS_PER_S) * random.uniform(0.75, 1.25)
                if frozen_after_release is None:
                    frozen_after_release = frozen
                elif now >= release_not_before and frozen >= RELEASE_GROWTH * max(
                        frozen_after_release, RELEASE_FLOOR, OBJECTS_PER_REPLICA * _hosted_replicas):
                    release_not_before = now + RELEASE_MIN_INTERVAL_S
                    release_frozen()
                    seen_releases, frozen_after_release = _releases, None
        finally:
            stopped.set()
            gc.callbacks.remove(self._on_gc)

    def _watch(self, loop_thread: int, stopped: threading.Event) -> None:
        """From a thread of its own: while the loop is blocked, say where it is blocked (the
        loop's own warning comes only afterwards, and cannot tell)."""
        reported = None
        while not stopped.wait(self.tick_s):
            last = self._last_tick
            if time.monotonic() - last < self.tick_s + self.stall_warn_s or reported == last:
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
