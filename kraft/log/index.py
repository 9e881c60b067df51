"""The sparse per-segment indexes, ``.index`` and ``.timeindex``, in Kafka's format.

``.index``: 8-byte entries ``(relative offset int32, file position int32)``, big-endian.
An entry ``(r, p)`` says the batch whose last offset is ``base + r`` starts at byte ``p``
of the segment's ``.log``; a lookup returns the greatest entry at or below the target and
the caller scans forward from there.

``.timeindex``: 12-byte entries ``(timestamp int64, relative offset int32)``: by offset
``base + r`` the segment's largest timestamp so far is ``timestamp``.  Timestamps strictly
increase between entries, so a lookup is a binary search.

One entry is added every ``index.interval.bytes`` of appended data.  Entries live in memory
(arrays, so ``bisect`` works on them) and reach the file on ``write_pending`` (flush, roll,
close).  Losing unwritten entries in a crash is harmless: any segment holding unflushed data
is past the recovery point, and recovery rebuilds its indexes from the log.  Files are never
preallocated, so on disk an index is exactly its valid entries (Kafka's trimmed form).
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

from kraft.log.atomic import write_fully
from kraft.log.errors import CorruptIndexError

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_SWAP = sys.byteorder == "little"


class _IndexFile:
    """State shared by both indexes: the file, the in-memory entries and what is persisted."""

    entry_size = 0

    def __init__(self, path: Path, base_offset: int, max_entries: int):
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_entries
        self.loaded = False
        self._persisted = 0  # entries already in the file (meaningful once loaded)
        self._unsynced = False

    # -- file-level -------------------------------------------------------------------
    def exists(self) -> bool:
        return self.path.exists()

    def reset(self) -> None:
        """Empty the index (file and memory), before a rebuild."""
        os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
        self._clear()
        self.loaded = True
        self._persisted = 0
        self._unsynced = True

    def _read_file(self) -> bytes:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            raise CorruptIndexError(f"{self.path} is missing") from None
        if len(data) % self.entry_size:
            raise CorruptIndexError(
                f"{self.path} has size {len(data)}, not a multiple of {self.entry_size}"
            )
        return data

    def _read_last_raw(self) -> bytes | None:
        """The last entry's bytes straight from the file (None if empty)."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            raise CorruptIndexError(f"{self.path} is missing") from None
        if size % self.entry_size:
            raise CorruptIndexError(f"{self.path} has size {size}, not a multiple of {self.entry_size}")
        if size == 0:
            return None
        with open(self.path, "rb") as f:
            f.seek(size - self.entry_size)
            return f.read(self.entry_size)

    def write_pending(self, fsync: bool = False) -> None:
        """Write entries not yet in the file; optionally fsync the file."""
        n = len(self)
        if not self.loaded or (n == self._persisted and not (fsync and self._unsynced)):
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            if n > self._persisted:
                write_fully(fd, self._encode(self._persisted, n), self._persisted * self.entry_size)
                self._persisted = n
                self._unsynced = True
            if fsync and self._unsynced:
                os.fsync(fd)
                self._unsynced = False
        finally:
            os.close(fd)

    def _truncate_entries(self, n: int) -> None:
        self._del_from(n)
        if n < self._persisted:
            os.truncate(self.path, n * self.entry_size)
            self._persisted = n
            self._unsynced = True

    @property
    def is_full(self) -> bool:
        return len(self) >= self.max_entries

    # -- per-format hooks ---------------------------------------------------------------
    def __len__(self) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    def _clear(self) -> None:  # pragma: no cover
        raise NotImplementedError

    def _del_from(self, n: int) -> None:  # pragma: no cover
        raise NotImplementedError

    def _encode(self, start: int, end: int) -> bytes:  # pragma: no cover
        raise NotImplementedError


class OffsetIndex(_IndexFile):
    """``.index``: last offset of a batch -> file position of that batch."""

    entry_size = 8

    def __init__(self, path: Path, base_offset: int, max_entries: int):
        super().__init__(path, base_offset, max_entries)
        self._rel = array("i")
        self._pos = array("i")

    def __len__(self) -> int:
        return len(self._rel)

    def _clear(self) -> None:
        self._rel = array("i")
        self._pos = array("i")

    def _del_from(self, n: int) -> None:
        del self._rel[n:]
        del self._pos[n:]

    def _encode(self, start: int, end: int) -> bytes:
        out = array("i", bytes(8 * (end - start)))
        out[0::2] = self._rel[start:end]
        out[1::2] = self._pos[start:end]
        if _SWAP:
            out.byteswap()
        return out.tobytes()

    def load(self, log_size: int) -> None:
        """Read and validate the whole file.  Raises CorruptIndexError."""
        raw = array("i")
        raw.frombytes(self._read_file())
        if _SWAP:
            raw.byteswap()
        rel, pos = raw[0::2], raw[1::2]
        if rel and (rel[0] < 0 or pos[0] < 0 or pos[-1] >= log_size):
            raise CorruptIndexError(f"{self.path}: entries outside the segment")
        for i in range(1, len(rel)):
            if rel[i] <= rel[i - 1] or pos[i] <= pos[i - 1]:
                raise CorruptIndexError(f"{self.path}: entry {i} does not increase")
        self._rel, self._pos = rel, pos
        self._persisted = len(rel)
        self.loaded = True

    def sanity_check(self, log_size: int) -> None:
        """Cheap check of size and last entry, without loading.  Raises CorruptIndexError."""
        raw = self._read_last_raw()
        if raw is not None:
            rel, pos = _OFFSET_ENTRY.unpack(raw)
            if rel < 0 or not 0 <= pos < log_size:
                raise CorruptIndexError(f"{self.path}: last entry ({rel}, {pos}) outside the segment")

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self._rel and (rel <= self._rel[-1] or position <= self._pos[-1]):
            raise ValueError(f"index entry ({offset}, {position}) does not increase")
        self._rel.append(rel)
        self._pos.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """``(offset, position)`` of the greatest entry with offset <= ``offset``, or
        ``(base_offset, 0)`` when there is none."""
        i = bisect_right(self._rel, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._rel[i], self._pos[i]

    def last_entry(self) -> tuple[int, int]:
        if not self._rel:
            return self.base_offset, 0
        return self.base_offset + self._rel[-1], self._pos[-1]

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets >= ``offset``."""
        self._truncate_entries(bisect_left(self._rel, offset - self.base_offset))

    def entries(self) -> list[tuple[int, int]]:
        return [(self.base_offset + r, p) for r, p in zip(self._rel, self._pos)]


class TimeIndex(_IndexFile):
    """``.timeindex``: largest timestamp so far -> offset of the batch holding it."""

    entry_size = 12

    def __init__(self, path: Path, base_offset: int, max_entries: int):
        super().__init__(path, base_offset, max_entries)
        self._ts = array("q")
        self._rel = array("i")

    def __len__(self) -> int:
        return len(self._rel)

    def _clear(self) -> None:
        self._ts = array("q")
        self._rel = array("i")

    def _del_from(self, n: int) -> None:
        del self._ts[n:]
        del self._rel[n:]

    def _encode(self, start: int, end: int) -> bytes:
        return b"".join(
            _TIME_ENTRY.pack(self._ts[i], self._rel[i]) for i in range(start, end)
        )

    def load(self, log_size: int) -> None:
        entries = list(_TIME_ENTRY.iter_unpack(self._read_file()))
        for i, (ts, rel) in enumerate(entries):
            if rel < 0 or (i and (ts <= entries[i - 1][0] or rel < entries[i - 1][1])):
                raise CorruptIndexError(f"{self.path}: entry {i} ({ts}, {rel}) out of order")
        if entries and log_size == 0:
            raise CorruptIndexError(f"{self.path}: entries for an empty segment")
        self._ts = array("q", (e[0] for e in entries))
        self._rel = array("i", (e[1] for e in entries))
        self._persisted = len(entries)
        self.loaded = True

    def sanity_check(self, log_size: int) -> None:
        raw = self._read_last_raw()
        if raw is not None:
            _, rel = _TIME_ENTRY.unpack(raw)
            if rel < 0 or log_size == 0:
                raise CorruptIndexError(f"{self.path}: last entry outside the segment")

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Add ``(timestamp, offset)`` if it raises the largest timestamp indexed so far."""
        if self._ts and timestamp <= self._ts[-1]:
            return
        if not skip_full_check and self.is_full:
            return
        rel = offset - self.base_offset
        if self._rel and rel < self._rel[-1]:
            raise ValueError(f"time index offset {offset} goes backwards")
        self._ts.append(timestamp)
        self._rel.append(rel)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """``(timestamp, offset)`` of the greatest entry with timestamp <= ``timestamp``,
        or ``(-1, base_offset)`` when there is none."""
        i = bisect_right(self._ts, timestamp) - 1
        if i < 0:
            return -1, self.base_offset
        return self._ts[i], self.base_offset + self._rel[i]

    def last_entry(self) -> tuple[int, int]:
        if not self._ts:
            return -1, self.base_offset
        return self._ts[-1], self.base_offset + self._rel[-1]

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets >= ``offset``."""
        self._truncate_entries(bisect_left(self._rel, offset - self.base_offset))

    def entries(self) -> list[tuple[int, int]]:
        return [(t, self.base_offset + r) for t, r in zip(self._ts, self._rel)]
