"""Log compaction: ``cleanup.policy=compact`` (and ``compact,delete``).

Theory of operation
-------------------
A compacted log keeps, for every key, at least the last record written with that key.
``LogCleaner.clean(log, now_ms)`` does one pass over one log, in Kafka's manner:

1. **What is cleanable.**  The *clean* part of the log runs from the log start to the
   *first dirty offset*, where the previous pass stopped (kept per partition in the log
   directory's ``cleaner-offset-checkpoint``, Kafka's checkpoint format; reset to the log
   start when missing or out of range).  The *dirty* part runs from there to the
   *cleanable end*: whole batches only, never in the active segment, never at or past
   ``upper_bound_offset`` (the caller passes the high watermark or last stable offset, so
   nothing that could still be truncated shadows older data), and stopping at the first
   batch whose max timestamp is less than ``min.compaction.lag.ms`` old (Kafka does this by
   segment; here it is per batch).
2. **Whether to clean.**  A pass runs when the dirty ratio, dirty bytes / (clean + dirty
   bytes), reaches ``min.cleanable.dirty.ratio``; or when a dirty batch is older than
   ``max.compaction.lag.ms``; or when a tombstone's delete horizon has passed (so it can go
   even if nothing new arrives, as in Kafka 3.x); or when the caller forces it.
3. **The key map.**  Every keyed record of the dirty part goes into ``key -> last offset``
   (a dict; Kafka's fixed-size hash map bounds the dirty part instead, here memory grows
   with the number of distinct dirty keys).
4. **Recopy.**  Every inactive segment from the first one to the one holding the cleanable
   end is recopied, grouped so that consecutive segments whose sizes add up to at most
   ``segment.bytes`` become one cleaned segment named by the group's first base offset.
   Each batch below the cleanable end is filtered record by record; batches past it are
   copied untouched.  A record survives unless

   * a later record of the same key is in the map (it is superseded), or
   * it is a tombstone (a null value) whose batch's *delete horizon* has passed, or
   * it belongs to an aborted transaction (found from the ABORT markers in the log).

   Records without a key survive: Kafka drops them, but the broker refuses keyless records
   for compacted topics at produce time, so any found here predate the topic becoming
   compacted and deleting data the user wrote is not the cleaner's call.
   Control batches (transaction markers) are kept as they are, and so is the data of a
   transaction whose marker is not in the log yet (the broker passes the last stable
   offset as the upper bound, so an undecided transaction is not even in the dirty part).
   The ``.txnindex`` entries of the segments of a group are copied to the cleaned segment:
   a READ_COMMITTED reader still learns of an aborted transaction whose data is gone
   (harmless) or not yet cleaned.  Markers are never removed (Kafka removes them once
   ``delete.retention.ms`` has passed after the transaction's data is gone); kraft keeps
   them, which costs one small batch per transaction and partition.

   A batch keeps its original bytes when nothing in it changes.  A rewritten batch keeps
   its base offset, last offset delta, producer id/epoch, base sequence, partition leader
   epoch, codec, timestamp type and transactional flag; its records keep their offsets and
   timestamps (CreateTime batches get the max timestamp of the survivors, as in Kafka).
   A batch left with no record disappears, except the last batch of a producer id among
   the inactive segments, which stays as an empty batch (header only, 0 records) so the
   producer's sequence state can still be rebuilt from the log, as Kafka does.

   **Delete horizon** (Kafka 3.x, KIP-534): when a batch holding a surviving tombstone is
   recopied for the first time, it is rewritten with attribute bit 0x40 and its base
   timestamp set to ``now + delete.retention.ms``; record timestamps are deltas from it,
   so they are unchanged.  A later pass at or after that time drops the tombstones, so a
   consumer reading the log from the start within ``delete.retention.ms`` of the pass
   that first cleaned a tombstone sees it.  A horizon batch left without tombstones is
   rewritten without the flag.
5. **Swap.**  The cleaned segment is written as ``<base>.{log,index,timeindex}.cleaned``
   (indexes built as it is written), fsynced, and handed to ``Log.replace_segments``:
   ``.cleaned`` -> ``.swap``, old segments -> ``.deleted``, ``.swap`` -> final names.
   Loading a log after a crash deletes ``.cleaned`` files and completes any ``.swap``
   (``kraft.log.recovery``), so a crash at any point leaves the old or the cleaned
   segments, with the same last record per key either way.  (As in Kafka, completing a
   swap replaces the old segments whose base offsets fall within the cleaned segment's
   offsets; when a group's last segments lost every record, they may survive such a crash
   beside the cleaned segment, holding only records a later pass removes again.)
6. **Checkpoint.**  After the last group is swapped the cleanable end becomes the first
   dirty offset of the next pass.

``compact,delete``: ``Log.apply_retention`` deletes by ``retention.ms``/``retention.bytes``
only when the policy includes ``delete``; the broker calls both on such a log.

Threading: a pass has two halves.  ``prepare`` (the long one: measuring, the key map,
writing and fsyncing the ``.cleaned`` segments) reads the segments through descriptors of
its own and changes nothing in the ``Log``, so it can run in a worker thread while the
log's owner keeps appending.  ``commit`` (renames only) must run where nothing else touches
the log; it checks that every segment the plan replaces is still in the log, inactive and
of the same size, and otherwise discards the plan (retention or truncation got there
first).  ``clean`` is both in one call.  ``truncated`` and ``forget`` keep the checkpoint
right when the broker truncates or deletes a log.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kraft.log.checkpoint import OffsetCheckpointFile, TopicPartition
from kraft.log.config import INT32_MAX
from kraft.log.log import Log
from kraft.log.scan import TornBatch, scan_file
from kraft.log.segment import CLEANED_SUFFIX, LogSegment
from kraft.log.txn_index import read_entries
from kraft.records.batch import LOG_APPEND_TIME, RecordBatch
from kraft.records.compression import NONE
from kraft.records.control import ControlType, decode_control_key
from kraft.records.errors import InvalidRecordError
from kraft.records.header import DELETE_HORIZON_FLAG, BatchHeader, parse_header

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
_WRITE_CHUNK = 1024 * 1024  # cleaned data is written to the segment in pieces this big


@dataclass(frozen=True, slots=True)
class Cleanable:
    """What the cleaner found in a log (``LogCleaner.cleanable``).

    The key map would cover ``[first_dirty_offset, clean_end_offset)``.
    """

    first_dirty_offset: int
    clean_end_offset: int
    clean_bytes: int
    dirty_bytes: int
    horizon_expired: bool  # some tombstone batch below the end passed its delete horizon
    max_lag_exceeded: bool  # a dirty batch is older than max.compaction.lag.ms

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


@dataclass(slots=True)
class CleanResult:
    """What one pass did."""

    first_dirty_offset: int
    end_offset: int  # the next pass's first dirty offset
    segments_in: int = 0
    segments_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0
    horizons_set: int = 0
    empty_batches_kept: int = 0
    keys: int = 0  # distinct keys in the dirty part


@dataclass(slots=True)
class _Pass:
    """One pass's inputs to the batch filter."""

    now: int
    delete_retention_ms: int
    latest: dict[bytes, int]  # key -> last offset in the dirty part
    filter_end: int  # batches with last offset < filter_end are filtered
    aborted: set[int]  # base offsets of aborted transactional batches
    undecided: set[int]  # base offsets of transactional batches with no marker yet
    producer_last: set[int]  # base offset of each producer's last batch
    result: CleanResult
    scan: list[list[tuple[int, BatchHeader]]] = field(default_factory=list)


class LogCleaner:
    """Compacts logs whose ``cleanup.policy`` includes ``compact``.  See the module doc.

    The per-partition cleaner checkpoint lives in ``cleaner-offset-checkpoint`` of the log's
    parent directory (the ``log.dirs`` entry) under the partition named by the log's
    directory (``<topic>-<partition>``); a log in a directory not named so keeps its
    checkpoint in memory only.
    """

    def __init__(self) -> None:
        self._memory: dict[Path, int] = {}
        self._lock = threading.Lock()

    # -- checkpoint ----------------------------------------------------------------------
    @staticmethod
    def _where(log: Log) -> tuple[OffsetCheckpointFile, TopicPartition] | None:
        tp = TopicPartition.from_dir_name(log.dir.name)
        if tp is None:
            return None
        return OffsetCheckpointFile(log.dir.parent / CLEANER_OFFSET_CHECKPOINT), tp

    def checkpointed_offset(self, log: Log) -> int | None:
        """The stored first dirty offset of ``log``, if any (not range-checked)."""
        where = self._where(log)
        with self._lock:
            if where is None:
                return self._memory.get(log.dir)
            return where[0].get(where[1])

    def _store(self, log: Log, offset: int | None) -> None:
        where = self._where(log)
        with self._lock:
            if where is None:
                if offset is None:
                    self._memory.pop(log.dir, None)
                else:
                    self._memory[log.dir] = offset
                return
            file, tp = where
            offsets = file.read()
            if offset is None:
                if tp not in offsets:
                    return
                del offsets[tp]
            else:
                offsets[tp] = offset
            file.write(offsets)

    def first_dirty_offset(self, log: Log) -> int:
        """Where the next pass's dirty part starts: the checkpoint, or the log start when
        there is none or it lies outside the log."""
        offset = self.checkpointed_offset(log)
        if offset is None or not log.log_start_offset <= offset <= log.log_end_offset:
            return log.log_start_offset
        return offset

    def truncated(self, log: Log, offset: int) -> None:
        """The broker truncated ``log`` to ``offset``: data from there on is dirty again."""
        stored = self.checkpointed_offset(log)
        if stored is not None and stored > offset:
            self._store(log, offset)

    def forget(self, log: Log) -> None:
        """Drop ``log``'s checkpoint entry (the partition is being deleted)."""
        self._store(log, None)

    # -- deciding --------------------------------------------------------------------------
    def cleanable(self, log: Log, now_ms: int, *, upper_bound_offset: int | None = None) -> Cleanable | None:
        """Measure ``log``'s clean and dirty parts; None when it is not compacted or has
        no inactive segment."""
        snap = _Snapshot.take(log)
        if snap is None:
            return None
        try:
            return self._measure(snap, now_ms, upper_bound_offset)[0]
        finally:
            snap.close()

    def needs_cleaning(self, log: Log, now_ms: int, *, upper_bound_offset: int | None = None) -> bool:
        info = self.cleanable(log, now_ms, upper_bound_offset=upper_bound_offset)
        return info is not None and _should_clean(info, log.config.min_cleanable_dirty_ratio)

    def _measure(self, snap: _Snapshot, now: int, upper_bound: int | None):
        cfg = snap.config
        scan = [snap.headers(i) for i in range(len(snap.segments) - 1)]
        first_dirty = self.first_dirty_offset(snap.log)
        bound = snap.segments[-1].base_offset
        if upper_bound is not None:
            bound = min(bound, upper_bound)
        lag_limit = now - cfg.min_compaction_lag_ms
        clean_bytes = dirty_bytes = 0
        end = min(first_dirty, bound)
        stopped = False
        oldest_dirty = None
        for headers in scan:
            for _, h in headers:
                if h.last_offset < first_dirty:
                    if h.last_offset >= snap.log_start_offset:
                        clean_bytes += h.size
                    continue
                if stopped or h.base_offset < first_dirty:
                    continue
                if h.last_offset >= bound or (
                        cfg.min_compaction_lag_ms > 0 and h.max_timestamp > lag_limit):
                    stopped = True
                    continue
                dirty_bytes += h.size
                end = h.next_offset
                if h.max_timestamp >= 0 and (oldest_dirty is None or h.max_timestamp < oldest_dirty):
                    oldest_dirty = h.max_timestamp
        filter_end = max(end, min(first_dirty, bound))
        expired = any(
            h.attributes & DELETE_HORIZON_FLAG and h.base_timestamp <= now
            for headers in scan for _, h in headers if h.last_offset < filter_end)
        lagging = oldest_dirty is not None and now - oldest_dirty > cfg.max_compaction_lag_ms
        info = Cleanable(first_dirty, end, clean_bytes, dirty_bytes, expired, lagging)
        return info, scan, filter_end

    # -- cleaning --------------------------------------------------------------------------
    def clean(self, log: Log, now_ms: int, *, upper_bound_offset: int | None = None,
              force: bool = False, step: Callable[[str], None] | None = None) -> CleanResult | None:
        """Compact ``log`` once if it needs it (or ``force``): ``prepare`` then ``commit``.
        Returns what was done, or None when nothing was.

        Args:
            now_ms: the time (delete horizons, compaction lags).
            upper_bound_offset: nothing at or past it is cleaned (high watermark / LSO).
            force: clean even below ``min.cleanable.dirty.ratio``.
            step: passed to ``Log.replace_segments`` (tests simulate crashes with it).
        Raises:
            CorruptRecordError: a batch failed its CRC or did not decode; the log is left
                as it was (cleaned files are removed).
            OSError: from the file system, likewise.
        """
        plan = self.prepare(log, now_ms, upper_bound_offset=upper_bound_offset, force=force)
        return None if plan is None else self.commit(plan, step=step)

    def prepare(self, log: Log, now_ms: int, *, upper_bound_offset: int | None = None,
                force: bool = False) -> CleanPlan | None:
        """The long half of a pass: decide, build the key map and write the cleaned
        segments (``.cleaned`` files, fsynced).  It reads the segments through its own file
        descriptors and changes nothing in ``log``, so it may run in a worker thread while
        the log's owner keeps appending; hand the plan to ``commit`` (or ``discard``).
        Returns None when there is nothing to do.  Raises as ``clean``."""
        snap = _Snapshot.take(log)
        if snap is None:
            return None
        try:
            return self._prepare(snap, now_ms, upper_bound_offset, force)
        finally:
            snap.close()

    def _prepare(self, snap: _Snapshot, now: int, upper_bound: int | None,
                 force: bool) -> CleanPlan | None:
        info, scan, filter_end = self._measure(snap, now, upper_bound)
        if not (force or _should_clean(info, snap.config.min_cleanable_dirty_ratio)):
            return None
        count = sum(1 for seg in snap.segments[:-1] if seg.base_offset < filter_end)
        if count == 0:
            return None
        result = CleanResult(info.first_dirty_offset, max(info.clean_end_offset, info.first_dirty_offset))
        aborted, undecided = _transactions(snap, scan)
        ctx = _Pass(now, snap.config.delete_retention_ms, {}, filter_end, aborted, undecided,
                    _producer_last(scan), result, scan)
        self._build_map(snap, info, ctx)
        result.keys = len(ctx.latest)
        plan = CleanPlan(snap.log, now, result, [])
        try:
            for group in _groups(snap, count):
                cleaned = self._write_group(snap, group, ctx)
                plan.groups.append((cleaned, [snap.segments[i] for i in group],
                                    [snap.sizes[i] for i in group]))
        except BaseException:
            self.discard(plan)
            raise
        return plan

    def commit(self, plan: CleanPlan, *, step: Callable[[str], None] | None = None) -> CleanResult | None:
        """The short half of a pass, on the log's owner (no append or truncation at the
        same time): swap the cleaned segments in and advance the checkpoint.  If the log
        lost or changed any of the segments meanwhile (retention, truncation) the plan is
        discarded instead and None returned."""
        log = plan.log
        live = log.segments
        for _, originals, sizes in plan.groups:
            for seg, size in zip(originals, sizes):
                if seg not in live[:-1] or seg.size != size:
                    self.discard(plan)
                    return None
        for i, (cleaned, originals, _) in enumerate(plan.groups):
            try:
                log.replace_segments(cleaned, originals, now_ms=plan.now_ms, step=step)
            except _Interrupted:
                raise  # a simulated crash leaves the files as a real one would
            except BaseException:
                self.discard(CleanPlan(log, plan.now_ms, plan.result, plan.groups[i:]))
                raise
            plan.result.segments_out += 1
        if plan.result.end_offset != self.checkpointed_offset(log):
            self._store(log, plan.result.end_offset)
        return plan.result

    @staticmethod
    def discard(plan: CleanPlan) -> None:
        """Delete a plan's cleaned files (the log is left as it is)."""
        for cleaned, _, _ in plan.groups:
            _remove_cleaned(cleaned)

    @staticmethod
    def _build_map(snap: _Snapshot, info: Cleanable, ctx: _Pass) -> None:
        lo, hi = info.first_dirty_offset, info.clean_end_offset
        for i, headers in enumerate(ctx.scan):
            for pos, h in headers:
                if h.base_offset < lo or h.last_offset >= hi or h.is_control:
                    continue
                if h.base_offset in ctx.aborted or h.base_offset in ctx.undecided:
                    continue
                batch = RecordBatch.decode(snap.read(i, pos, h.size))
                for r in batch.records:
                    if r.key is not None:
                        ctx.latest[r.key] = h.base_offset + r.offset_delta

    @staticmethod
    def _write_group(snap: _Snapshot, group: list[int], ctx: _Pass) -> LogSegment:
        originals = [snap.segments[i] for i in group]
        # Uncached (files=None): written on the cleaner's worker thread, which must not
        # touch the trio thread's cache of open files.
        cleaned = LogSegment.create(snap.log.dir, originals[0].base_offset, snap.config, ctx.now,
                                    CLEANED_SUFFIX, files=None)
        try:
            buf = bytearray()
            placed: list[tuple[int, BatchHeader]] = []
            for i in group:
                ctx.result.segments_in += 1
                ctx.result.bytes_in += snap.sizes[i]
                for pos, h in ctx.scan[i]:
                    data = snap.read(i, pos, h.size)
                    out = _filter(data, h, ctx)
                    if out is None:
                        continue
                    placed.append((len(buf), h if out is data else parse_header(out)))
                    buf += out
                    if len(buf) >= _WRITE_CHUNK:
                        cleaned.append(buf, placed)
                        buf, placed = bytearray(), []
            if placed:
                cleaned.append(buf, placed)
            # As Kafka's cleaner: the aborted-transaction entries stay with the offsets they
            # cover (read from the files: the live segments belong to the trio thread).
            for i in group:
                cleaned.txn_index.extend(read_entries(snap.segments[i].txn_index.path))
            cleaned.on_become_inactive()
            cleaned.flush()
            # As in Kafka: the cleaned segment keeps the newest modification time of the
            # originals, which retention.ms uses for a segment with no timestamps.
            mtime = max(os.fstat(snap.fds[i]).st_mtime_ns for i in group)
            os.utime(cleaned.log_path, ns=(mtime, mtime))
            cleaned.close_fd()
            ctx.result.bytes_out += cleaned.size
        except BaseException:
            _remove_cleaned(cleaned)
            raise
        return cleaned


@dataclass(slots=True)
class CleanPlan:
    """Cleaned segments written by ``LogCleaner.prepare``, waiting for ``commit``."""

    log: Log
    now_ms: int
    result: CleanResult
    # (cleaned segment, the segments it replaces, their sizes when it was written)
    groups: list[tuple[LogSegment, list[LogSegment], list[int]]]


class _Snapshot:
    """A log's segments as a pass started, read through the cleaner's own descriptors (a
    segment renamed away meanwhile stays readable; nothing of the ``Log`` is touched)."""

    def __init__(self, log: Log):
        self.log = log
        self.config = log.config
        self.log_start_offset = log.log_start_offset
        self.segments = log.segments
        self.sizes = [seg.size for seg in self.segments]
        self.fds: list[int] = []

    @classmethod
    def take(cls, log: Log) -> _Snapshot | None:
        """None when the log is not compacted, has no inactive segment, or changed while
        the snapshot was taken."""
        if not log.config.compact or len(log.segments) < 2:
            return None
        snap = cls(log)
        try:
            for seg in snap.segments:
                snap.fds.append(os.open(seg.log_path, os.O_RDONLY))
        except FileNotFoundError:  # deleted by retention just now
            snap.close()
            return None
        return snap

    def headers(self, i: int) -> list[tuple[int, BatchHeader]]:
        out = []
        try:
            for pos, h in scan_file(self.fds[i], 0, self.sizes[i], check_crc=False):
                out.append((pos, h))
        except TornBatch:
            if i < len(self.segments) - 1:
                raise  # an inactive segment is whole; the active one may be mid-append
        return out

    def read(self, i: int, pos: int, size: int) -> bytes:
        return os.pread(self.fds[i], size, pos)

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []


class _Interrupted(Exception):
    """Raised (as ``SimulatedCrash``) by a test's ``step`` callback to stop a swap the way
    a crash would: the cleaner then leaves its files behind instead of cleaning up."""


SimulatedCrash = _Interrupted


def _remove_cleaned(cleaned: LogSegment) -> None:
    cleaned.close_fd()
    for path in cleaned.files():
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _should_clean(info: Cleanable, min_ratio: float) -> bool:
    if info.horizon_expired:
        return True
    if info.dirty_bytes == 0:
        return False
    return info.max_lag_exceeded or info.dirty_ratio >= min_ratio


def _groups(snap: _Snapshot, count: int) -> list[list[int]]:
    """The first ``count`` segments in runs whose sizes sum to at most ``segment.bytes``
    and whose offsets fit one segment's 32-bit relative offsets."""
    segments = snap.segments
    groups: list[list[int]] = []
    for i in range(count):
        end = segments[i + 1].base_offset  # the offset after this segment's data, at most
        if groups:
            group = groups[-1]
            size = sum(snap.sizes[j] for j in group)
            if (size + snap.sizes[i] <= snap.config.segment_bytes
                    and end - 1 - segments[group[0]].base_offset <= INT32_MAX):
                group.append(i)
                continue
        groups.append([i])
    return groups


def _producer_last(scan) -> set[int]:
    last: dict[int, int] = {}
    for headers in scan:
        for _, h in headers:
            if h.producer_id >= 0 and not h.is_control:
                last[h.producer_id] = h.base_offset
    return set(last.values())


def _transactions(snap: _Snapshot, scan) -> tuple[set[int], set[int]]:
    """Base offsets of aborted transactional batches, and of those whose transaction has
    no marker yet, from the inactive segments' headers and then the active segment's."""
    if not any(h.is_transactional for headers in scan for _, h in headers):
        return set(), set()
    pending: dict[int, list[int]] = {}
    aborted: set[int] = set()
    last = len(snap.segments) - 1
    for i, headers in enumerate([*scan, snap.headers(last)]):
        for pos, h in headers:
            if not h.is_transactional:
                continue
            if not h.is_control:
                pending.setdefault(h.producer_id, []).append(h.base_offset)
                continue
            for record in RecordBatch.decode(snap.read(i, pos, h.size)).records:
                try:
                    kind = decode_control_key(record.key).type
                except InvalidRecordError:
                    continue
                if kind == ControlType.ABORT:
                    aborted.update(pending.pop(h.producer_id, ()))
                elif kind == ControlType.COMMIT:
                    pending.pop(h.producer_id, None)
    return aborted, {b for offsets in pending.values() for b in offsets}


def _filter(data: bytes, h: BatchHeader, ctx: _Pass) -> bytes | None:
    """The batch as it is to be written to the cleaned segment, or None to drop it."""
    if h.last_offset >= ctx.filter_end or h.is_control or h.base_offset in ctx.undecided:
        return data
    batch = RecordBatch.decode(data)
    horizon = h.base_timestamp if h.attributes & DELETE_HORIZON_FLAG else None
    aborted = h.base_offset in ctx.aborted
    kept = []
    for r in batch.records:
        offset = h.base_offset + r.offset_delta
        if aborted:
            continue
        if r.key is not None:
            if offset < ctx.latest.get(r.key, -1):
                continue
            if r.value is None and horizon is not None and ctx.now >= horizon:
                ctx.result.tombstones_removed += 1
                continue
        kept.append(r)
    ctx.result.records_removed += len(batch.records) - len(kept)
    if not kept:
        if h.producer_id >= 0 and h.base_offset in ctx.producer_last:
            ctx.result.empty_batches_kept += 1
            if h.records_count == 0:
                return data
            return RecordBatch(
                records=(), base_offset=h.base_offset,
                partition_leader_epoch=h.partition_leader_epoch, compression=NONE,
                timestamp_type=h.timestamp_type, is_transactional=h.is_transactional,
                producer_id=h.producer_id, producer_epoch=h.producer_epoch,
                base_sequence=h.base_sequence, last_offset_delta=h.last_offset_delta,
                base_timestamp=h.max_timestamp, max_timestamp=h.max_timestamp,
            ).encode()
        return None
    tombstones = any(r.key is not None and r.value is None for r in kept)
    if len(kept) == len(batch.records) and (horizon is not None) == tombstones:
        return data
    if tombstones and horizon is None:
        horizon = ctx.now + ctx.delete_retention_ms
        ctx.result.horizons_set += 1
    elif not tombstones:
        horizon = None
    return RecordBatch(
        records=tuple(kept), base_offset=h.base_offset,
        partition_leader_epoch=h.partition_leader_epoch, compression=batch.compression,
        timestamp_type=batch.timestamp_type, is_transactional=h.is_transactional,
        has_delete_horizon=horizon is not None, producer_id=h.producer_id,
        producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
        last_offset_delta=h.last_offset_delta, base_timestamp=horizon,
        max_timestamp=h.max_timestamp if batch.timestamp_type == LOG_APPEND_TIME else None,
    ).encode()


__all__ = ["CLEANER_OFFSET_CHECKPOINT", "CleanPlan", "CleanResult", "Cleanable", "LogCleaner",
           "SimulatedCrash"]
