"""The leader-epoch history of one partition (KIP-101) and its checkpoint file.

Theory of operation
-------------------
Every batch a leader appends carries the leader's epoch in ``partitionLeaderEpoch``.  The
cache remembers, for each epoch that wrote anything (or that a leader started), the first
offset it wrote: ``[(epoch, start_offset), ...]`` with both columns strictly increasing.
Epoch ``e`` therefore owns ``[start(e), start(next epoch))``, and the latest epoch owns
everything up to the log end offset.

Replicas compare histories with ``end_offset_for``: "where does your copy of epoch ``e``
end?".  A follower whose log continues past that point holds a tail the leader never had
and truncates it; this is what replaced truncating to the high watermark (KIP-101, and
KIP-279 for the case where two leader changes happen in a row).

The answers follow Kafka's ``LeaderEpochFileCache.endOffsetFor`` exactly:

* requested epoch undefined (-1), or above every known epoch, or an empty cache:
  ``(-1, -1)`` (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
* requested epoch is the latest epoch: ``(epoch, log_end_offset)``;
* otherwise the largest known epoch ``<=`` the requested one, with the start offset of the
  first epoch after it;
* a requested epoch *below* the earliest known one (its history was deleted by retention):
  ``(requested_epoch, start offset of the earliest entry)``, not UNDEFINED, so that a
  follower truncates to where the leader's data begins and replicates from there.

The checkpoint file ``leader-epoch-checkpoint`` uses Kafka's text format::

    0          <- version
    2          <- number of entries
    0 0        <- epoch, start offset
    3 1200

This module only turns the cache into those bytes and back; the file itself is
``broker/leader_epoch_checkpoint.py``'s (the simulator keeps it in memory instead).  Bytes
that do not parse raise ``LeaderEpochCheckpointError`` naming the source and line (the
caller may then rebuild the cache by scanning the log's batch headers, which is what
Kafka's recovery does).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "EpochEntry",
    "LeaderEpochCache",
    "LeaderEpochCheckpointError",
]

CHECKPOINT_VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

_INT = re.compile(r"-?[0-9]+")


class LeaderEpochCheckpointError(ValueError):
    """The leader-epoch checkpoint file is malformed; the message names file and line."""


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int

    def __post_init__(self) -> None:
        if self.epoch < 0 or self.start_offset < 0:
            raise ValueError(f"invalid epoch entry {self.epoch} {self.start_offset}")


class LeaderEpochCache:
    """``(epoch, start_offset)`` history with epochs and start offsets strictly increasing."""

    def __init__(self, entries: Iterable[EpochEntry | tuple[int, int]] = ()):
        self._epochs: list[int] = []
        self._starts: list[int] = []
        for entry in entries:
            epoch, start = entry if isinstance(entry, tuple) else (entry.epoch, entry.start_offset)
            self.assign(epoch, start)

    # ---------------------------------------------------------------- queries

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(EpochEntry(e, s) for e, s in zip(self._epochs, self._starts))

    @property
    def pairs(self) -> tuple[tuple[int, int], ...]:
        """``(epoch, start_offset)`` pairs: ``entries`` without an object per entry, for
        comparing one state of the cache with another (once per follower append)."""
        return tuple(zip(self._epochs, self._starts))

    def __len__(self) -> int:
        return len(self._epochs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LeaderEpochCache) and self.entries == other.entries

    def __repr__(self) -> str:
        inner = ", ".join(f"({e}, {s})" for e, s in zip(self._epochs, self._starts))
        return f"LeaderEpochCache([{inner}])"

    @property
    def latest_epoch(self) -> int:
        """The latest epoch, or UNDEFINED_EPOCH (-1) for an empty cache."""
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    @property
    def latest_entry(self) -> EpochEntry | None:
        return EpochEntry(self._epochs[-1], self._starts[-1]) if self._epochs else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return EpochEntry(self._epochs[0], self._starts[0]) if self._epochs else None

    def start_offset_of(self, epoch: int) -> int | None:
        """The start offset recorded for exactly ``epoch``, or None."""
        i = bisect.bisect_left(self._epochs, epoch)
        if i < len(self._epochs) and self._epochs[i] == epoch:
            return self._starts[i]
        return None

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch that wrote ``offset`` (by the cache), or UNDEFINED_EPOCH."""
        i = bisect.bisect_right(self._starts, offset) - 1
        return self._epochs[i] if i >= 0 else UNDEFINED_EPOCH

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch, end_offset)``: where the largest epoch ``<= requested_epoch`` ends.

        See the module docstring for the cases; the result is Kafka's.
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]

    # -------------------------------------------------------------- mutations

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True when the cache changed.

        A no-op for the latest epoch at the same or a later offset.  Entries that would
        break monotonicity (an epoch ``>=`` the new one or a start offset ``>=`` the new
        one) are removed first, as Kafka does.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"cannot assign epoch {epoch} at offset {start_offset}")
        if self._epochs and epoch == self._epochs[-1] and start_offset >= self._starts[-1]:
            return False
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        return True

    def assign_from_batch(self, partition_leader_epoch: int, base_offset: int) -> bool:
        """``assign`` for an appended batch: only a newer epoch starts an entry."""
        if partition_leader_epoch < 0 or partition_leader_epoch <= self.latest_epoch:
            return False
        return self.assign(partition_leader_epoch, base_offset)

    def truncate_from_end(self, end_offset: int) -> bool:
        """Forget entries starting at or after ``end_offset`` (the log was truncated there)."""
        if end_offset < 0 or not self._starts or self._starts[-1] < end_offset:
            return False
        keep = bisect.bisect_left(self._starts, end_offset)
        del self._epochs[keep:], self._starts[keep:]
        return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """The log start moved to ``start_offset``: drop entries wholly before it and move
        the start of the epoch that contains it up to ``start_offset``."""
        n = bisect.bisect_right(self._starts, start_offset)
        if n == 0:
            return False
        kept_epoch = self._epochs[n - 1]
        if n == 1 and self._starts[0] == start_offset:
            return False
        del self._epochs[:n], self._starts[:n]
        self._epochs.insert(0, kept_epoch)
        self._starts.insert(0, start_offset)
        return True

    def clear(self) -> None:
        self._epochs.clear()
        self._starts.clear()

    def copy(self) -> LeaderEpochCache:
        clone = LeaderEpochCache()
        clone._epochs = list(self._epochs)
        clone._starts = list(self._starts)
        return clone

    # ------------------------------------------------------------- checkpoint

    def to_checkpoint_bytes(self) -> bytes:
        lines = [str(CHECKPOINT_VERSION), str(len(self._epochs))]
        lines += [f"{e} {s}" for e, s in zip(self._epochs, self._starts)]
        return ("\n".join(lines) + "\n").encode("ascii")

    @classmethod
    def from_checkpoint_bytes(cls, data: bytes,
                              source: str = "<leader-epoch-checkpoint>") -> LeaderEpochCache:
        """Parse Kafka's text format.

        Raises:
            LeaderEpochCheckpointError: bad version, count, line, or entries that are not
                strictly increasing in both epoch and start offset.
        """

        def fail(lineno: int, why: str):
            raise LeaderEpochCheckpointError(
                f"{source}:{lineno}: malformed leader-epoch checkpoint: {why}")

        try:
            text = data.decode("ascii")
        except UnicodeDecodeError:
            fail(1, "not ASCII text")
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if not lines:
            fail(1, "empty file (expected a version line)")
        if lines[0].strip() != str(CHECKPOINT_VERSION):
            fail(1, f"unsupported version {lines[0]!r} (expected {CHECKPOINT_VERSION})")
        if len(lines) < 2 or not _INT.fullmatch(lines[1].strip()):
            fail(2, f"expected the entry count, got {lines[1] if len(lines) > 1 else 'end of file'!r}")
        count = int(lines[1])
        if count != len(lines) - 2:
            fail(2, f"header says {count} entries, the file has {len(lines) - 2}")
        cache = cls()
        for lineno, line in enumerate(lines[2:], 3):
            parts = line.split()
            if len(parts) != 2 or not all(_INT.fullmatch(p) for p in parts):
                fail(lineno, f"expected 'epoch start_offset', got {line!r}")
            epoch, start = int(parts[0]), int(parts[1])
            if epoch < 0 or start < 0:
                fail(lineno, f"negative epoch or offset in {line!r}")
            if cache._epochs and (epoch <= cache._epochs[-1] or start <= cache._starts[-1]):
                fail(lineno, f"entry {line!r} does not follow ({cache._epochs[-1]}, {cache._starts[-1]})")
            cache._epochs.append(epoch)
            cache._starts.append(start)
        return cache
