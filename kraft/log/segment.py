"""One segment: ``<base>.log`` (concatenated batches) plus its two sparse indexes and, once
it holds an ABORT marker, its aborted-transaction index (``.txnindex``, ``txn_index.py``).

A segment knows byte positions and relative offsets; the ``Log`` above it knows which
segment is active, the log start/end offsets and the recovery point.  Inactive segments
open their file and load their indexes lazily, so opening a log with many segments touches
only the last one.  The ``.log`` descriptor is held through a bounded cache
(``file_cache.py``): it may be closed when unused and is reopened on the next use, so a
node's open files do not grow with its partitions.
"""

from __future__ import annotations

import os
from array import array
from dataclasses import dataclass
from pathlib import Path

from kraft.log.atomic import write_fully
from kraft.log.config import INT32_MAX, LogConfig
from kraft.log.errors import CorruptIndexError
from kraft.log.file_cache import SEGMENT_FILES, OpenFileCache
from kraft.log.index import OffsetIndex, TimeIndex
from kraft.log.scan import TornBatch, iter_buffer, scan_file
from kraft.log.txn_index import TXN_INDEX_SUFFIX, TransactionIndex
from kraft.records.header import BatchHeader

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"  # a segment the log cleaner is writing
SWAP_SUFFIX = ".swap"  # a cleaned segment being swapped in (see Log.replace_segments)
# Batches whose (last offset, end position) a segment keeps from its appends: followers and
# consumers at the tail fetch from one of the last few batches, which the sparse offset
# index (an entry every index.interval.bytes) would find only by parsing every header since
# its last entry, dozens of small batches' worth on each fetch.
TAIL_BATCHES = 8


def segment_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Whole batches read from one segment.

    ``records`` holds the bytes (None when the read asked not to load them); ``path``,
    ``position`` and ``size`` locate the same bytes in the segment file for ``sendfile``.
    ``first_offset`` is the base offset of the first batch (None when empty) and
    ``next_offset`` the offset following the last batch returned.  ``fd``: the segment's
    descriptor when it was read (-1 for none), open until the next segment file opens
    through the same cache: ``os.dup`` it at once to keep the bytes (cheaper than opening
    ``path`` again, and the same file even if the path is replaced later).
    """

    records: bytes | None
    path: Path | None
    position: int
    size: int
    first_offset: int | None
    next_offset: int
    fd: int = -1

    @classmethod
    def empty(cls, next_offset: int) -> ReadResult:
        return cls(b"", None, 0, 0, None, next_offset)


class LogSegment:
    """A segment's files and in-memory state.  Not thread-safe; owned by one ``Log``."""

    def __init__(self, directory: Path, base_offset: int, config: LogConfig, created_ms: int, size: int,
                 suffix: str = "", files: OpenFileCache | None = SEGMENT_FILES):
        self.base_offset = base_offset
        self.log_path = directory / (segment_name(base_offset, LOG_SUFFIX) + suffix)
        self.offset_index = OffsetIndex(
            directory / (segment_name(base_offset, INDEX_SUFFIX) + suffix), base_offset,
            config.max_offset_index_entries
        )
        self.time_index = TimeIndex(
            directory / (segment_name(base_offset, TIME_INDEX_SUFFIX) + suffix), base_offset,
            config.max_time_index_entries
        )
        self.txn_index = TransactionIndex(directory / (segment_name(base_offset, TXN_INDEX_SUFFIX) + suffix))
        self.config = config
        self.size = size
        self.created_ms = created_ms
        self._fd: int | None = None
        self._files = files  # None: the descriptor is this segment's own, never evicted
        self.pins = 0  # > 0 while a generator reads through the descriptor: not evicted
        self._next_offset: int | None = base_offset if size == 0 else None
        self._max_ts: tuple[int, int] | None = (-1, -1) if size == 0 else None
        self._rolling_base_ts: int | None = None
        self._bytes_since_index = 0
        # the last TAIL_BATCHES appended batches, flat: last offset, end position, ...
        self._tail: array | None = None
        self.needs_fsync = False

    # -- construction ----------------------------------------------------------------
    @classmethod
    def create(cls, directory: Path, base_offset: int, config: LogConfig, now_ms: int,
               suffix: str = "", files: OpenFileCache | None = SEGMENT_FILES,
               fresh: bool = False) -> LogSegment:
        """A new, empty segment (any stale files of that name are emptied).  ``suffix``
        (e.g. ``.cleaned``) is appended to every file name: the log cleaner's scratch
        segments.  ``files`` is the cache holding its descriptor (None: uncached).
        ``fresh``: the directory was just created, so there is no stale file to remove."""
        seg = cls(directory, base_offset, config, now_ms, 0, suffix, files)
        seg._fd = os.open(seg.log_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        if files is not None:
            files.opened(seg)
        seg.offset_index.reset()
        seg.time_index.reset()
        if fresh:  # a transaction index file exists only once it has entries
            seg.txn_index.known_empty()
        else:
            seg.txn_index.reset()
        seg.needs_fsync = True
        return seg

    @classmethod
    def open_existing(cls, directory: Path, base_offset: int, config: LogConfig, now_ms: int,
                      files: OpenFileCache | None = SEGMENT_FILES) -> LogSegment:
        path = directory / segment_name(base_offset, LOG_SUFFIX)
        return cls(directory, base_offset, config, now_ms, path.stat().st_size, files=files)

    @property
    def fd(self) -> int:
        """The ``.log`` descriptor, opened (again) if needed.  Valid until the next file is
        opened through the same cache: use it at once, or pin the segment."""
        fd = self._fd
        if fd is None:
            fd = self._fd = os.open(self.log_path, os.O_RDWR)
            if self._files is not None:
                self._files.opened(self)
        elif self._files is not None:
            self._files.used(self)
        return fd

    @property
    def is_open(self) -> bool:
        return self._fd is not None

    def evict_fd(self) -> None:
        """Called by the cache: close the descriptor, to be reopened on next use."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        self.offset_index.max_entries = config.max_offset_index_entries
        self.time_index.max_entries = config.max_time_index_entries

    # -- indexes ---------------------------------------------------------------------
    def sanity_check(self) -> None:
        """Cheap check of both index files.  Raises CorruptIndexError (missing included)."""
        self.offset_index.sanity_check(self.size)
        self.time_index.sanity_check(self.size)
        self.txn_index.sanity_check()

    def ensure_indexes(self) -> int:
        """Load both indexes, rebuilding them from the log if either is corrupt.
        Returns the bytes recovery truncated (0 unless the log itself was bad)."""
        if self.offset_index.loaded and self.time_index.loaded:
            return 0
        try:
            self.offset_index.load(self.size)
            self.time_index.load(self.size)
        except CorruptIndexError:
            return self.recover()
        last_pos = self.offset_index.last_entry()[1] if len(self.offset_index) else 0
        self._bytes_since_index = self.size - last_pos
        return 0

    def recover(self, min_offset: int | None = None) -> int:
        """Validate every batch (length, magic, CRC, offsets increasing from ``min_offset``
        and representable relative to the base), truncate the log at the first bad one and
        rebuild both indexes.  The aborted-transaction index loses the entries of markers
        cut off (all of them if it is corrupt); the partition checks it against its
        producer state (``broker.partition``).  Returns the number of bytes truncated."""
        self.offset_index.reset()
        self.time_index.reset()
        self._max_ts = (-1, -1)
        self._rolling_base_ts = None
        self._tail = None
        expected = self.base_offset if min_offset is None else max(min_offset, self.base_offset)
        valid = 0
        last_indexed = 0
        next_offset = self.base_offset
        try:
            for pos, h in scan_file(self.fd, 0, self.size, check_crc=True):
                if h.base_offset < expected or h.last_offset - self.base_offset > INT32_MAX:
                    raise TornBatch(pos, f"offset {h.base_offset} out of order or range")
                self._track_timestamp(h)
                if pos - last_indexed > self.config.index_interval_bytes:
                    self._add_index_entries(h, pos)
                    last_indexed = pos
                valid = pos + h.size
                next_offset = expected = h.next_offset
        except TornBatch:
            pass
        truncated = self.size - valid
        if truncated:
            os.ftruncate(self.fd, valid)
            self.size = valid
            self.needs_fsync = True
        self._bytes_since_index = valid - last_indexed
        self._next_offset = next_offset
        try:
            self.txn_index.truncate_to(next_offset)
        except CorruptIndexError:
            self.txn_index.reset()
        # Like a closed segment, end the time index with the largest timestamp seen.
        if self._max_ts[0] >= 0:
            self.time_index.maybe_append(*self._max_ts, skip_full_check=True)
        self.offset_index.write_pending()
        self.time_index.write_pending()
        return truncated

    def _track_timestamp(self, h: BatchHeader) -> None:
        if self._max_ts is None:
            self._max_ts = self._load_max_timestamp()
        if h.max_timestamp > self._max_ts[0]:
            self._max_ts = (h.max_timestamp, h.last_offset)
        if self._rolling_base_ts is None:
            self._rolling_base_ts = h.max_timestamp

    def _add_index_entries(self, h: BatchHeader, position: int) -> None:
        self.offset_index.append(h.last_offset, position)
        self.time_index.maybe_append(*self._max_ts)

    # -- appending -------------------------------------------------------------------
    def append(self, data, batches: list[tuple[int, BatchHeader]]) -> None:
        """Write ``data`` (whole batches; ``batches`` are their positions within ``data``
        and headers with final offsets) at the end of the segment and index it."""
        start = self.size
        write_fully(self.fd, data, start)
        tail = self._tail
        if tail is None:
            tail = self._tail = array("q")
        for rel_pos, h in batches:
            self._track_timestamp(h)
            if self._bytes_since_index > self.config.index_interval_bytes:
                self._add_index_entries(h, start + rel_pos)
                self._bytes_since_index = 0
            self._bytes_since_index += h.size
            tail.append(h.last_offset)
            tail.append(start + rel_pos + h.size)
        if len(tail) > 2 * TAIL_BATCHES:
            del tail[:len(tail) - 2 * TAIL_BATCHES]
        self.size = start + len(data)
        self._next_offset = batches[-1][1].next_offset
        self.needs_fsync = True

    def can_hold_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    def rolling_base_timestamp(self) -> int:
        """The first batch's timestamp (Kafka rolls ``segment.ms`` after it)."""
        if self._rolling_base_ts is None and self.size:
            for _, h in scan_file(self.fd, 0, self.size, check_crc=False):
                self._rolling_base_ts = h.max_timestamp
                break
        return self._rolling_base_ts if self._rolling_base_ts is not None else -1

    def on_become_inactive(self) -> None:
        """Called when a newer segment takes over: record the final max timestamp."""
        self.ensure_indexes()
        ts, offset = self.max_timestamp_and_offset()
        if ts >= 0:
            self.time_index.maybe_append(ts, offset, skip_full_check=True)
        self.offset_index.write_pending()
        self.time_index.write_pending()

    # -- reading ---------------------------------------------------------------------
    def read_bytes(self, position: int, size: int) -> bytes:
        return os.pread(self.fd, size, position)

    def next_offset(self) -> int:
        """The offset after this segment's last batch (its base offset when empty)."""
        if self._next_offset is None:
            self.ensure_indexes()
            if self._next_offset is None:
                _, pos = self.offset_index.last_entry()
                nxt = self.base_offset
                for _, h in scan_file(self.fd, pos, self.size, check_crc=False):
                    nxt = h.next_offset
                self._next_offset = nxt
        return self._next_offset

    def max_timestamp_and_offset(self) -> tuple[int, int]:
        if self._max_ts is None:
            self._max_ts = self._load_max_timestamp()
        return self._max_ts

    def _load_max_timestamp(self) -> tuple[int, int]:
        self.ensure_indexes()
        if self._max_ts is not None:  # ensure_indexes had to recover and computed it
            return self._max_ts
        ts, offset = self.time_index.last_entry()
        # Batches after the last entry may hold a larger timestamp (a segment that was not
        # closed cleanly); scan them, as Kafka's loadLargestTimestamp does.
        pos = self.offset_index.lookup(offset)[1] if ts >= 0 else 0
        if ts < 0:
            offset = -1
        for _, h in scan_file(self.fd, pos, self.size, check_crc=False):
            if h.max_timestamp > ts:
                ts, offset = h.max_timestamp, h.last_offset
        return ts, offset

    def largest_timestamp(self) -> int:
        """For retention: the max batch timestamp, else the file's mtime (as Kafka)."""
        ts = self.max_timestamp_and_offset()[0]
        if ts >= 0:
            return ts
        return os.stat(self.log_path).st_mtime_ns // 1_000_000

    def translate_offset(self, offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is >= ``offset``, as ``(position, header)``."""
        self.ensure_indexes()
        tail = self._tail or ()
        # The newest remembered batch that ends before ``offset``: the wanted batch starts
        # where it ends (the batches after it in the tail all reach ``offset``), at or past
        # anything the index could give.  Else the index's entry at or before ``offset``.
        for i in range(len(tail) - 2, -1, -2):
            if tail[i] < offset:
                pos = tail[i + 1]
                break
        else:
            _, pos = self.offset_index.lookup(offset)
        for p, h in scan_file(self.fd, pos, self.size, check_crc=False):
            if h.last_offset >= offset:
                return p, h
        return None

    def read(self, start_offset: int, max_size: int, max_offset: int | None,
             min_one_batch: bool, load_bytes: bool) -> ReadResult | None:
        """Whole batches from the one holding ``start_offset``; None if the segment has no
        batch at or after it.  Batches reaching ``max_offset`` or beyond are left out."""
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        pos, first = found
        if max_offset is not None and first.last_offset >= max_offset:
            return ReadResult.empty(start_offset)
        if first.size > max_size and not min_one_batch:
            return ReadResult.empty(start_offset)
        limit = min(max(max_size, first.size), self.size - pos)
        end = 0
        next_offset = start_offset
        if load_bytes:
            buf = os.pread(self.fd, limit, pos)
            batches = iter_buffer(buf)
        else:
            buf = None
            batches = ((p - pos, h) for p, h in scan_file(self.fd, pos, pos + limit, check_crc=False))
        try:
            for p, h in batches:
                if p + h.size > limit or (max_offset is not None and h.last_offset >= max_offset):
                    break
                end = p + h.size
                next_offset = h.next_offset
        except TornBatch:
            pass  # the limit cut the last batch
        records = bytes(memoryview(buf)[:end]) if buf is not None else None
        return ReadResult(records, self.log_path, pos, end, first.base_offset, next_offset, self.fd)

    def find_timestamp(self, timestamp: int, min_offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch at or after ``min_offset`` whose max timestamp >= ``timestamp``."""
        self.ensure_indexes()
        _, indexed_offset = self.time_index.lookup(timestamp)
        _, pos = self.offset_index.lookup(max(indexed_offset, min_offset))
        for p, h in scan_file(self.fd, pos, self.size, check_crc=False):
            if h.last_offset >= min_offset and h.max_timestamp >= timestamp:
                return p, h
        return None

    def iter_headers(self, start_offset: int | None = None):
        """Yield ``(position, header)`` for the segment's batches from ``start_offset``."""
        pos = 0
        if start_offset is not None:
            self.ensure_indexes()
            _, pos = self.offset_index.lookup(start_offset)
        self.pins += 1  # the caller may open other files between two batches
        try:
            for p, h in scan_file(self.fd, pos, self.size, check_crc=False):
                if start_offset is None or h.last_offset >= start_offset:
                    yield p, h
        finally:
            self.pins -= 1

    # -- truncation, flush, close ------------------------------------------------------
    def truncate_to(self, offset: int) -> int | None:
        """Drop every batch holding an offset >= ``offset``.  Returns the base offset of
        the first dropped batch, or None when nothing was dropped."""
        found = self.translate_offset(offset)
        if found is None:
            return None
        pos, h = found
        self.offset_index.truncate_to(h.base_offset)
        self.time_index.truncate_to(h.base_offset)
        self.txn_index.truncate_to(h.base_offset)
        os.ftruncate(self.fd, pos)
        self.size = pos
        self._tail = None
        self.needs_fsync = True
        self._next_offset = None
        self._max_ts = None
        self._rolling_base_ts = None
        if pos == 0:
            self._next_offset = self.base_offset
            self._max_ts = (-1, -1)
        self._bytes_since_index = pos - (self.offset_index.last_entry()[1] if len(self.offset_index) else 0)
        return h.base_offset

    def flush(self) -> None:
        """fsync the log file and both indexes."""
        if self.needs_fsync:
            os.fsync(self.fd)
            self.needs_fsync = False
        self.offset_index.write_pending(fsync=True)
        self.time_index.write_pending(fsync=True)
        self.txn_index.flush()

    def finish(self) -> None:
        """Before a clean close: end the time index with the max timestamp (as Kafka's
        closed segments do) and write pending index entries (no fsync)."""
        if self.time_index.loaded:
            ts, offset = self.max_timestamp_and_offset()
            if ts >= 0:
                self.time_index.maybe_append(ts, offset, skip_full_check=True)
        self.offset_index.write_pending()
        self.time_index.write_pending()

    def close_fd(self) -> None:
        if self._fd is not None:
            if self._files is not None:
                self._files.closed(self)
            os.close(self._fd)
            self._fd = None

    def files(self) -> list[Path]:
        return [self.log_path, self.offset_index.path, self.time_index.path, self.txn_index.path]

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size})"


__all__ = ["LogSegment", "ReadResult", "TornBatch", "segment_name"]
