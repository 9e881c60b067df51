"""The segmented commit log of one partition.

Theory of operation
-------------------
A log is a directory of segments named by their base offset (``%020d.log``, ``.index``,
``.timeindex``), exactly Kafka's layout.  The ``.log`` file is the record batches back to
back, as received; the log never decodes a record.  Only the newest segment, the *active*
one, is written; it is *rolled* (a new empty segment starts at the next offset) when it
would exceed ``segment.bytes``, when its first batch is older than ``segment.ms``, when an
index is full, or when an offset would not fit the indexes' 32-bit relative offsets.

Three offsets describe the log::

    recovery_point <= log_end_offset,   log_start_offset <= log_end_offset

* ``log_end_offset`` (LEO) is the offset the next appended record gets.  A leader append
  rewrites each batch's base offset to it (the base offset sits outside the CRC-covered
  bytes, so the CRC stays valid); a follower append keeps the leader's offsets and only
  checks that they increase.
* ``recovery_point`` is the offset below which everything is fsynced, segment data and
  indexes alike.  Data above it lives in the page cache only; a crash may tear it, so the
  next open validates every batch from the segment holding the recovery point on and cuts
  the log at the first bad one (``recovery.py``).  Flushing is explicit (``flush``) or by
  policy (``flush.messages`` appended messages, ``flush.ms`` since the last flush); Kafka's
  default is never, leaving durability to replication.
* ``log_start_offset`` is the first offset a reader may see.  It moves forward when
  retention deletes old segments or when ``delete_records_before`` is called (then it can
  point into the middle of a segment; whole segments below it are deleted).

Where the caller keeps state: the recovery point, the log start offset and whether the
last shutdown was clean belong to the log *directory* (Kafka's checkpoint files and
``.kafka_cleanshutdown`` marker, see ``logdir.py``); ``Log.open`` takes them as arguments.
Opened without them, a log recovers everything from offset 0, which is always safe.

Compaction (``cleanup.policy=compact``) lives in ``cleaner.py``: it rewrites inactive
segments and swaps them in with ``replace_segments``; offsets never change, so the three
offsets above are unaffected.  Retention by time and size applies only when the policy
includes ``delete``.

Time never comes from the system clock inside the log: methods that need it take ``now_ms``
or fall back to the ``clock`` function given to ``open``, so tests drive time by hand.  (The
one exception is Kafka's: a segment whose batches carry no timestamp ages by its file's
mtime for ``retention.ms``.)  Rolling does not flush the old segment; Kafka flushes it in
the background, so a caller wanting bounded recovery calls ``flush(active base offset)``
after a roll, from a worker thread if it leaves the log alone meanwhile.
Nothing here is thread-safe or async: a trio shell calls these methods (blocking file I/O,
which for a page-cache write is short) or hands ``flush`` to a worker thread while it does
not otherwise touch the log.
"""

from __future__ import annotations

import os
import time
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from kraft.log import retention
from kraft.log.atomic import fsync_dir
from kraft.log.batches import AppendInfo, check_fits_segment, parse_append, stamp_batches
from kraft.log.config import LogConfig
from kraft.log.errors import LogClosedError, LogError, OffsetOutOfRangeError
from kraft.log.file_cache import SEGMENT_FILES, OpenFileCache
from kraft.log.recovery import LoadResult, load_segments, remove_segment_files
from kraft.log.segment import CLEANED_SUFFIX, SWAP_SUFFIX, LogSegment, ReadResult
from kraft.log.txn_index import AbortedTxn
from kraft.metrics.stats import LOG_FLUSH_MS
from kraft.records.header import BatchHeader


def wall_clock_ms() -> int:
    """The default clock: milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class TimestampLookup:
    """The first batch whose max timestamp reaches a target timestamp.

    ``offset`` is the batch's base offset (raised to the log start offset when that points
    into the batch); a caller wanting the exact record decodes ``batch``.
    """

    offset: int
    max_timestamp: int
    header: BatchHeader
    batch: bytes


class Log:
    """One partition's log.  Build with ``Log.open``; see the module docstring."""

    def __init__(self, directory: Path, config: LogConfig, clock: Callable[[], int],
                 segments: list[LogSegment], log_start_offset: int, recovery_point: int,
                 files: OpenFileCache | None = SEGMENT_FILES):
        self.dir = directory
        self._files = files
        self.config = config
        self._clock = clock
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._leo = segments[-1].next_offset()
        self._lso = log_start_offset
        self._recovery_point = recovery_point
        self._last_flush_ms = clock()
        self._dir_dirty = False
        self._deleted = retention.DeletedFiles()
        self._closed = False
        self.load_result: LoadResult | None = None

    # -- opening -----------------------------------------------------------------------
    @classmethod
    def open(cls, directory: str | os.PathLike, config: LogConfig | None = None, *,
             clock: Callable[[], int] | None = None, recovery_point: int = 0,
             log_start_offset: int | None = None, had_clean_shutdown: bool = False,
             files: OpenFileCache | None = SEGMENT_FILES) -> Log:
        """Open (creating if needed) the log in ``directory``, recovering it if necessary.

        Args:
            config: the log's configuration (Kafka defaults when None).
            clock: returns "now" in ms; the default reads the wall clock.
            recovery_point: offset below which data is known fsynced (from the checkpoint);
                segments from the one holding it are validated batch by batch.
            log_start_offset: the checkpointed log start offset, if any.
            had_clean_shutdown: the last close was clean, so nothing needs recovery.
            files: the cache of open segment files (default: the process's; see
                ``file_cache.py``).
        Raises:
            OSError: the directory or its files cannot be read or written.
        """
        directory = Path(directory)
        try:
            directory.mkdir(parents=True)
            fresh = True  # nothing to load or recover: a broker creating 20,000 replicas skips it
        except FileExistsError:
            fresh = False
        config = config or LogConfig()
        clock = clock or wall_clock_ms
        now = clock()
        if fresh:
            result = LoadResult([])
        else:
            result = load_segments(directory, config, now, recovery_point=recovery_point,
                                   had_clean_shutdown=had_clean_shutdown, files=files)
        created = not result.segments
        if created:
            result.segments.append(LogSegment.create(directory, log_start_offset or 0, config, now,
                                                     files=files, fresh=fresh))
        segments = result.segments
        leo = segments[-1].next_offset()
        lso = max(log_start_offset or 0, segments[0].base_offset)
        rp = leo if had_clean_shutdown else min(recovery_point, leo)
        log = cls(directory, config, clock, segments, lso, rp, files)
        log.load_result = result
        log._dir_dirty = created or bool(result.deleted)
        if lso > leo:  # everything below the start offset is gone: start over there
            log.truncate_fully_and_start_at(lso)
        return log

    # -- state ---------------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self._lso

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def unflushed_messages(self) -> int:
        return self._leo - self._recovery_point

    @property
    def last_flush_ms(self) -> int:
        return self._last_flush_ms

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def closed(self) -> bool:
        """``close`` or ``abandon`` was called: the log may no longer be used."""
        return self._closed

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        for seg in self._segments:
            seg.update_config(config)

    def _now(self, now_ms: int | None) -> int:
        return self._clock() if now_ms is None else now_ms

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"log {self.dir} is closed")

    # -- appending -----------------------------------------------------------------------
    def append(self, records: bytes | bytearray | memoryview, *, assign_offsets: bool,
               leader_epoch: int | None = None, now_ms: int | None = None,
               check_crc: bool | None = None,
               batches: Sequence[tuple[int, BatchHeader]] | None = None) -> AppendInfo:
        """Append one or more whole v2 batches.

        Args:
            records: the batches.  ``bytes`` are copied; a ``bytearray`` is patched in place
                (base offsets, leader epoch), so the caller sees the assigned offsets.
            assign_offsets: True on the leader: batches get consecutive offsets from the log
                end.  False on a follower: offsets are kept and must increase from the end.
            leader_epoch: written into each batch's partitionLeaderEpoch when given.
            now_ms: the time used for ``segment.ms`` rolls and ``flush.ms``.
            check_crc: verify CRCs (default: on follower appends only, since a leader's
                caller has already validated the batches).
            batches: each batch's ``(position, header)`` in ``records``, from a caller that
                has already parsed and checked them (``validate_payload`` and
                ``max.message.bytes``): the log does not parse them again.
        Raises:
            CorruptRecordError: the bytes are not whole, valid batches.
            RecordTooLargeError: a leader batch exceeds ``max.message.bytes``.
            RecordBatchTooLargeError: the append exceeds ``segment.bytes``.
            UnexpectedAppendOffsetError: follower offsets do not increase past the end.
        """
        self._check_open()
        now = self._now(now_ms)
        buf = records if isinstance(records, bytearray) else bytearray(records)
        if check_crc is None:
            check_crc = not assign_offsets
        if batches is None:
            batches = parse_append(buf, self.config, check_crc=check_crc, leader=assign_offsets)
        else:
            check_fits_segment(len(buf), self.config)
        batches = stamp_batches(buf, batches, self._leo, assign_offsets=assign_offsets,
                                leader_epoch=leader_epoch)
        info = AppendInfo.of(batches, len(buf))
        seg = self._segment_for_append(len(buf), info.first_offset, info.last_offset, now,
                                       info.max_timestamp)
        seg.append(buf, batches)
        self._leo = info.last_offset + 1
        if self.unflushed_messages >= self.config.flush_messages:
            self.flush(now_ms=now)
        else:
            self.maybe_flush(now)
        return info

    def _segment_for_append(self, size: int, first: int, last: int, now: int,
                            max_timestamp: int) -> LogSegment:
        seg = self._segments[-1]
        if seg.size == 0:
            if not (seg.can_hold_offset(first) and seg.can_hold_offset(last)):
                self._roll(first, now)  # an empty segment whose base cannot index these
        elif self._should_roll(seg, size, last, now, max_timestamp):
            self._roll(first, now)
        seg = self._segments[-1]
        if not seg.can_hold_offset(last):
            raise LogError(f"append spans offsets {first}..{last}, too many for one segment")
        return seg

    def _should_roll(self, seg: LogSegment, size: int, last: int, now: int, max_timestamp: int) -> bool:
        cfg = self.config
        rolling_ts = seg.rolling_base_timestamp()
        # As Kafka's LogSegment.timeWaitedForRoll: the appended records' own timestamps
        # against the segment's first one, not the clock, so records carrying old
        # timestamps (a migration, a replay) still fill a segment instead of rolling one
        # segment per batch; the clock only when the segment has no timestamp.
        waited = (max_timestamp - rolling_ts) if rolling_ts >= 0 else now - seg.created_ms
        return (seg.size > cfg.segment_bytes - size or waited > cfg.segment_ms
                or seg.offset_index.is_full or seg.time_index.is_full
                or not seg.can_hold_offset(last))

    def roll(self, now_ms: int | None = None) -> int:
        """Start a new segment at the log end (no-op if the active one is empty).
        Returns the active segment's base offset."""
        self._check_open()
        if self._segments[-1].size:
            self._roll(self._leo, self._now(now_ms))
        return self._segments[-1].base_offset

    def _roll(self, base_offset: int, now: int) -> None:
        old = self._segments[-1]
        if old.size == 0:  # an empty active segment is replaced, not kept
            self._segments.pop()
            self._bases.pop()
            remove_segment_files(old)
        else:
            old.on_become_inactive()
        self._segments.append(LogSegment.create(self.dir, base_offset, self.config, now,
                                                files=self._files))
        self._bases.append(base_offset)
        self._dir_dirty = True

    # -- reading -------------------------------------------------------------------------
    def read(self, start_offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True, load_bytes: bool = True) -> ReadResult:
        """Read whole batches starting with the one that holds ``start_offset``.

        Returns up to ``max_bytes`` of whole batches from one segment; with
        ``min_one_batch`` (Kafka's behaviour, so a consumer always makes progress) the
        first batch comes whole even when larger.  Batches holding ``max_offset`` (e.g. the
        high watermark) or later are left out.  The first batch may begin before
        ``start_offset``; the reader skips the records it did not ask for, as in Kafka.
        With ``load_bytes=False`` only the file location is returned (for ``sendfile``).

        Raises:
            OffsetOutOfRangeError: ``start_offset`` is outside [log start, log end].
        """
        self._check_open()
        if not self._lso <= start_offset <= self._leo:
            raise OffsetOutOfRangeError(start_offset, self._lso, self._leo)
        if start_offset == self._leo or (max_offset is not None and start_offset >= max_offset):
            return ReadResult.empty(start_offset)
        i = max(bisect_right(self._bases, start_offset) - 1, 0)
        for seg in self._segments[i:]:
            result = seg.read(start_offset, max_bytes, max_offset, min_one_batch, load_bytes)
            if result is not None:
                return result
        return ReadResult.empty(start_offset)

    def offset_for_timestamp(self, timestamp: int) -> TimestampLookup | None:
        """The first batch (at or after the log start) whose max timestamp >= ``timestamp``;
        None when every batch is older.  ListOffsets' special values (-1 latest, -2
        earliest) are the caller's business."""
        self._check_open()
        if timestamp < 0:
            raise ValueError(f"timestamp {timestamp} is negative")
        for seg in self._segments:
            if seg.size == 0 or seg.max_timestamp_and_offset()[0] < timestamp:
                continue
            found = seg.find_timestamp(timestamp, self._lso)
            if found is not None:
                pos, h = found
                return TimestampLookup(max(h.base_offset, self._lso), h.max_timestamp, h,
                                       seg.read_bytes(pos, h.size))
        return None

    def iter_batches(self, start_offset: int | None = None, *,
                     with_data: bool | Callable[[BatchHeader], bool] = False,
                     ) -> Iterator[tuple[BatchHeader, bytes | None]]:
        """Yield ``(header, bytes or None)`` for each batch holding ``start_offset`` (default:
        the log start) or later; the hook for rebuilding leader-epoch and producer state.
        ``with_data`` may be a predicate on the header: only those batches are read (the
        producer state reads transaction markers only).  The log must not be modified
        while the iterator is in use."""
        self._check_open()
        start = self._lso if start_offset is None else start_offset
        i = max(bisect_right(self._bases, start) - 1, 0)
        wanted = with_data if callable(with_data) else (lambda h: with_data)
        for seg in self._segments[i:]:
            for pos, h in seg.iter_headers(start):
                yield h, (seg.read_bytes(pos, h.size) if wanted(h) else None)

    # -- aborted transactions ------------------------------------------------------------
    def segment_holding(self, offset: int) -> LogSegment:
        """The segment whose offsets include ``offset`` (the first one below its start)."""
        return self._segments[max(bisect_right(self._bases, offset) - 1, 0)]

    def append_aborted_txn(self, entry: AbortedTxn) -> None:
        """Index an aborted transaction in the segment holding its ABORT marker (the caller,
        who knows producer state, appended the marker at ``entry.last_offset``)."""
        self._check_open()
        self.segment_holding(entry.last_offset).txn_index.append(entry)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions a READ_COMMITTED fetch of ``[fetch_offset,
        upper_bound_offset)`` must report: those ending at or after ``fetch_offset`` and
        starting below the bound, from the segment holding ``fetch_offset`` on (entries
        live with their markers, which may be in later segments; see ``txn_index.py``)."""
        self._check_open()
        found: list[AbortedTxn] = []
        i = max(bisect_right(self._bases, fetch_offset) - 1, 0)
        for seg in self._segments[i:]:
            search = seg.txn_index.collect(fetch_offset, upper_bound_offset)
            found.extend(search.aborted)
            if search.complete:
                break
        return found

    # -- truncation and deletion ---------------------------------------------------------
    def truncate_to(self, offset: int) -> bool:
        """Drop every offset >= ``offset`` (a follower removing a divergent suffix).

        A batch holding ``offset`` goes whole, so the new log end is the offset after the
        last batch kept (the first segment's base offset if none is): ``offset`` itself
        unless it fell inside a batch or a gap.  The truncation is fsynced.  Returns whether
        anything changed.
        """
        self._check_open()
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        if offset >= self._leo:
            return False
        if offset < self._segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        now = self._clock()
        while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
            self._bases.pop()
            self._discard(self._segments.pop(), now)  # newest first: a crash leaves a prefix
        active = self._segments[-1]
        active.truncate_to(offset)
        while active.size == 0 and len(self._segments) > 1:  # no empty segment past the data
            self._bases.pop()
            self._discard(self._segments.pop(), now)
            active = self._segments[-1]
        active.ensure_indexes()
        self._leo = active.next_offset()
        self._lso = min(self._lso, self._leo)
        self._recovery_point = min(self._recovery_point, self._leo)
        active.flush()
        self._sync_dir()
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log, empty, at ``offset``."""
        self._check_open()
        if offset < 0:
            raise ValueError(f"cannot start the log at negative offset {offset}")
        now = self._clock()
        for seg in reversed(self._segments):
            self._discard(seg, now)
        self._segments = [LogSegment.create(self.dir, offset, self.config, now, files=self._files)]
        self._bases = [offset]
        self._leo = self._lso = self._recovery_point = offset
        self._dir_dirty = True
        self._sync_dir()

    def delete_records_before(self, offset: int, now_ms: int | None = None) -> int:
        """Advance the log start offset to ``offset`` (Kafka's DeleteRecords) and delete the
        segments wholly below it.  Returns the new log start offset.

        Raises:
            OffsetOutOfRangeError: ``offset`` is beyond the log end.
        """
        self._check_open()
        if not 0 <= offset <= self._leo:
            raise OffsetOutOfRangeError(offset, self._lso, self._leo, "delete records before")
        self._lso = max(self._lso, offset)
        self._delete_old_segments(retention.below_log_start(self._lso), self._now(now_ms), None)
        return self._lso

    def apply_retention(self, now_ms: int | None = None, *, upper_bound_offset: int | None = None) -> int:
        """Delete old segments by log start offset, ``retention.ms`` and ``retention.bytes``
        (the last two only when ``cleanup.policy`` includes ``delete``, as in Kafka).

        Only a prefix of whole segments is deleted, each ending at or below
        ``upper_bound_offset`` (the high watermark; default the log end).  If every segment
        qualifies the log rolls first, so an empty active segment remains, as in Kafka.
        Also removes files whose ``file.delete.delay.ms`` expired.  Returns the number of
        segments deleted.
        """
        self._check_open()
        now = self._now(now_ms)
        cfg = self.config
        deleted = self._delete_old_segments(retention.below_log_start(self._lso), now, upper_bound_offset)
        if cfg.delete and cfg.retention_ms >= 0:
            deleted += self._delete_old_segments(
                retention.older_than(now, cfg.retention_ms), now, upper_bound_offset)
        if cfg.delete and cfg.retention_bytes >= 0:
            deleted += self._delete_old_segments(
                retention.over_size(self.size_in_bytes, cfg.retention_bytes), now, upper_bound_offset)
        self.delete_expired_files(now)
        return deleted

    def _delete_old_segments(self, predicate: retention.Predicate, now: int, upper_bound: int | None) -> int:
        bound = self._leo if upper_bound is None else min(upper_bound, self._leo)
        count = retention.deletable_prefix(self._segments, self._leo, bound, predicate)
        if not count:
            return 0
        if count == len(self._segments):
            self._roll(self._leo, now)
        for seg in self._segments[:count]:
            self._discard(seg, now)  # oldest first: a crash leaves a suffix
        del self._segments[:count]
        del self._bases[:count]
        self._lso = max(self._lso, self._segments[0].base_offset)
        return count

    def _discard(self, seg: LogSegment, now: int) -> None:
        self._deleted.discard(seg, now, self.config.file_delete_delay_ms)
        self._dir_dirty = True

    def delete_expired_files(self, now_ms: int | None = None) -> None:
        """Unlink deleted segments' files once ``file.delete.delay.ms`` has passed."""
        self._deleted.delete_expired(self._now(now_ms))

    # -- compaction ----------------------------------------------------------------------
    def replace_segments(self, cleaned: LogSegment, old: list[LogSegment], *,
                         now_ms: int | None = None,
                         step: Callable[[str], None] | None = None) -> LogSegment:
        """Swap ``cleaned`` in for ``old``, crash-safely, as Kafka's log cleaner does.

        ``cleaned`` is a finished segment written with the ``.cleaned`` file suffix and
        fsynced (see ``kraft.log.cleaner``); it holds a subset of the batches of ``old``, a
        run of consecutive non-active segments whose first has ``cleaned``'s base offset.
        The files are renamed ``.cleaned`` -> ``.swap``, the old segments are renamed
        ``.deleted`` (unlinked after ``file.delete.delay.ms``), then ``.swap`` -> the
        segment's name, with a directory fsync between the stages.  A crash at any point
        leaves either the old segments (only ``.cleaned`` files exist: recovery deletes
        them) or the cleaned one (a ``.log.swap`` exists: recovery completes the swap).
        ``step``, if given, is called with a label after every file operation (tests stop
        the swap there to simulate a crash).  Returns the segment now in the log.

        Raises:
            LogError: ``old`` is not such a run of this log's segments.
        """
        self._check_open()
        now = self._now(now_ms)
        step = step or (lambda label: None)
        try:
            first = self._segments.index(old[0]) if old else -1
        except ValueError:
            first = -1
        if (first < 0 or self._segments[first:first + len(old)] != list(old)
                or first + len(old) >= len(self._segments)
                or cleaned.base_offset != old[0].base_offset):
            raise LogError(f"cannot replace {old} with {cleaned}: not a run of inactive segments "
                           "starting at its base offset")
        cleaned.close_fd()
        # The .txnindex goes first in both stages: the .log.swap marks the swap, and once it
        # exists recovery keeps the cleaned .txnindex it finds (it cannot rebuild one).
        files = [cleaned.txn_index.path, *(p for p in cleaned.files() if p != cleaned.txn_index.path)]
        final = [self.dir / p.name[: -len(CLEANED_SUFFIX)] for p in files]
        swaps = [p.with_name(p.name + SWAP_SUFFIX) for p in final]
        for src, dst in zip(files, swaps):  # the .log before the indexes: it marks the swap
            if not src.exists():
                continue  # a .txnindex exists only for segments with aborted transactions
            os.replace(src, dst)
            step(f"swap {dst.name}")
        fsync_dir(self.dir)
        for seg in old:
            self._discard(seg, now)
            step(f"delete {seg.base_offset}")
        self._sync_dir()
        for src, dst in zip(swaps, final):
            if not src.exists():
                continue
            os.replace(src, dst)
            step(f"rename {dst.name}")
        fsync_dir(self.dir)
        seg = LogSegment.open_existing(self.dir, cleaned.base_offset, self.config, now, self._files)
        self._segments[first:first + len(old)] = [seg]
        self._bases[first:first + len(old)] = [seg.base_offset]
        return seg

    # -- durability ----------------------------------------------------------------------
    def flush(self, upto_offset: int | None = None, *, now_ms: int | None = None) -> None:
        """fsync segment data and indexes below ``upto_offset`` (default: everything) and the
        directory, then advance the recovery point to that offset."""
        self._check_open()
        started = time.monotonic()
        target = self._leo if upto_offset is None else min(upto_offset, self._leo)
        for seg in self._segments:
            if seg.base_offset >= target and seg.size:
                break
            seg.flush()
        self._sync_dir()
        self._recovery_point = max(self._recovery_point, target)
        self._last_flush_ms = self._now(now_ms)
        done = time.monotonic()
        LOG_FLUSH_MS.observe((done - started) * 1000, done)  # Kafka's LogFlushRateAndTimeMs

    def maybe_flush(self, now_ms: int | None = None) -> bool:
        """Apply the ``flush.ms`` policy; returns whether it flushed."""
        now = self._now(now_ms)
        if self.unflushed_messages > 0 and now - self._last_flush_ms >= self.config.flush_ms:
            self.flush(now_ms=now)
            return True
        return False

    def _sync_dir(self) -> None:
        if self._dir_dirty:
            fsync_dir(self.dir)
            self._dir_dirty = False

    def close(self, *, flush: bool = True) -> None:
        """Write out indexes, fsync everything (unless ``flush=False``) and close files.
        The caller records a clean shutdown (see ``LogDir``) only after this returns."""
        if self._closed:
            return
        for seg in self._segments:
            seg.finish()
        if flush:
            self.flush()
        for seg in self._segments:
            seg.close_fd()
        self._deleted.delete_expired(None)
        self._closed = True

    def abandon(self) -> None:
        """Drop the log as a crash would: close file descriptors, write nothing more.
        For tests and fault injection."""
        for seg in self._segments:
            seg.close_fd()
        self._closed = True

    def __repr__(self) -> str:
        return (f"Log({str(self.dir)!r}, start={self._lso}, end={self._leo}, "
                f"recovery_point={self._recovery_point}, segments={len(self._segments)})")
