"""A bounded cache of open segment files, closed least recently used first.

Why: a broker hosting N partitions would otherwise hold at least N descriptors (every
active segment's ``.log``), so the number of partitions a node can host would be bounded by
``RLIMIT_NOFILE`` (Kafka's answer is a ulimit in the 100k range).  Here a segment opens its
``.log`` lazily, through this cache; when more than ``max_open`` are open, the least
recently used is closed, and reopened on its next use.  The indexes hold no descriptor at
all: their entries live in memory and their files are opened only to write (``index.py``).

The hot path stays cheap: a hit is one dict move.  A busy partition's active segment is
used on every append and fetch, so it stays near the recently used end and is never
reopened in steady state; only cold segments pay an ``open`` after eviction.

Closing evicted descriptors does not lose data: ``write`` has put the bytes in the page
cache, and a later ``fsync`` through a reopened descriptor flushes the file (fsync is per
file, not per descriptor).

Not thread-safe, on purpose: one thread (the broker's trio thread) uses the cached
segments.  A descriptor returned by ``LogSegment.fd`` stays valid until the next file is
opened through the same cache, so a segment method that yields between reads (a generator)
pins its segment, and pinned segments are never evicted (the cache then holds more than
``max_open`` for a while).  The log cleaner's worker thread reads through descriptors of
its own and writes scratch segments that are not cached.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol

DEFAULT_MAX_OPEN_FILES = 1024


class CachedFile(Protocol):
    """What the cache needs of an owner of one open descriptor (a ``LogSegment``)."""

    pins: int

    def evict_fd(self) -> None:
        """Close the descriptor; the owner reopens it on next use."""


class OpenFileCache:
    """At most ``max_open`` (unpinned) descriptors open at once, least recently used closed
    first.  Owners call ``opened`` after opening, ``used`` on every use, ``closed`` after
    closing their descriptor themselves."""

    def __init__(self, max_open: int = DEFAULT_MAX_OPEN_FILES):
        if max_open < 1:
            raise ValueError(f"max_open must be at least 1, not {max_open}")
        self.max_open = max_open
        self._open: OrderedDict[CachedFile, None] = OrderedDict()  # least recently used first
        self.opens = 0  # every open, first ones and reopens after eviction (for tests and stats)
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._open)

    def __contains__(self, owner: CachedFile) -> bool:
        return owner in self._open

    def set_max_open(self, max_open: int) -> None:
        if max_open < 1:
            raise ValueError(f"max_open must be at least 1, not {max_open}")
        self.max_open = max_open
        self._evict()

    def opened(self, owner: CachedFile) -> None:
        """``owner`` just opened its descriptor: make room (closing others) and track it."""
        self.opens += 1
        self._open[owner] = None
        self._evict(keep=owner)

    def used(self, owner: CachedFile) -> None:
        self._open.move_to_end(owner)

    def closed(self, owner: CachedFile) -> None:
        self._open.pop(owner, None)

    def _evict(self, keep: CachedFile | None = None) -> None:
        excess = len(self._open) - self.max_open
        if excess <= 0:
            return
        victims = []
        for owner in self._open:  # least recently used first
            if owner.pins or owner is keep:
                continue
            victims.append(owner)
            if len(victims) == excess:
                break
        for owner in victims:
            del self._open[owner]
            self.evictions += 1
            owner.evict_fd()


# The process's cache: descriptors are a per-process resource, so every log in a process
# shares one bound (a broker sets it from ``kraft.log.open.files.max``).
SEGMENT_FILES = OpenFileCache()

__all__ = ["DEFAULT_MAX_OPEN_FILES", "SEGMENT_FILES", "CachedFile", "OpenFileCache"]
