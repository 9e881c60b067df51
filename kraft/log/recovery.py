"""Loading a partition directory's segments, and recovering them after a crash.

What is trusted: data below the recovery point was fsynced together with its indexes, so
those segments get only a cheap sanity check of their index files (a missing or implausible
index is rebuilt from the log).  Everything from the segment holding the recovery point
onwards may have been torn by the crash (the kernel writes pages in any order, a
preallocated or sparse file reads back zeros), so each batch is validated: length, magic,
CRC-32C, offsets increasing and representable.  The log is cut just before the first bad
batch and every later segment is deleted: a gap in the middle of a log would be worse than
a shorter log, which replication refills.

The log cleaner's segment swaps (``Log.replace_segments``) leave ``.cleaned`` and ``.swap``
files when interrupted; loading deletes the first and completes the swap of the second
(``_complete_swaps``), so a crash leaves the old segments or the cleaned ones.

After a clean shutdown (the caller saw Kafka's ``.kafka_cleanshutdown`` marker) the
recovery point is the log end and nothing is rescanned, except that the active segment's
tail is walked from its last index entry to learn the log end offset; a tail that does not
parse there is recovered anyway rather than trusted.
"""

from __future__ import annotations

import os
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path

from kraft.log.atomic import fsync_dir
from kraft.log.config import LogConfig
from kraft.log.errors import CorruptIndexError
from kraft.log.file_cache import SEGMENT_FILES, OpenFileCache
from kraft.log.scan import TornBatch, scan_file
from kraft.log.segment import SWAP_SUFFIX, LogSegment, segment_name
from kraft.log.txn_index import TXN_INDEX_SUFFIX

# Files of ours that a crash can leave behind: segments mid-deletion, cleaner leftovers.
_STRAY = re.compile(r"[0-9]{20}\.(log|index|timeindex|txnindex)(\.deleted|\.cleaned|\.swap|\.tmp)")
_SEGMENT_FILE = re.compile(r"([0-9]{20})\.(log|index|timeindex|txnindex)")
_LOG_SWAP = re.compile(r"([0-9]{20})\.log\.swap")
_SUFFIXES = (".log", ".index", ".timeindex")

@dataclass
class LoadResult:
    segments: list[LogSegment]
    recovered: list[int] = field(default_factory=list)  # base offsets whose indexes were rebuilt
    truncated_bytes: int = 0  # garbage cut from the end of the log
    deleted: list[int] = field(default_factory=list)  # segments dropped after a torn one


def remove_segment_files(segment: LogSegment) -> None:
    segment.close_fd()
    for path in segment.files():
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _swap_end(path: Path, base: int) -> int:
    """The offset after the last whole batch of a ``.log.swap`` file (its base if none)."""
    end = base
    fd = os.open(path, os.O_RDONLY)
    try:
        for _, h in scan_file(fd, 0, os.fstat(fd).st_size, check_crc=False):
            end = h.next_offset
    except TornBatch:
        pass  # cannot happen for a file fsynced before its rename; recovery checks it anyway
    finally:
        os.close(fd)
    return end


def _complete_swaps(directory: Path, swaps: list[int], logs: set[int]) -> None:
    """Finish segment swaps a crash interrupted (see ``Log.replace_segments``).

    A ``<base>.log.swap`` file is a cleaned segment that was complete and fsynced before it
    got that name, so the swap goes forward, as in Kafka: the segments it replaces (those
    whose base offset lies in ``[base, end of the swap file)``, ``base`` included) are
    deleted, the swap file takes the segment's name, and its indexes, whatever state they
    are in, are deleted so that loading rebuilds them from the log.
    """
    for base in sorted(swaps):
        swap = directory / (segment_name(base, ".log") + SWAP_SUFFIX)
        end = max(_swap_end(swap, base), base + 1)
        txn_swap = directory / (segment_name(base, TXN_INDEX_SUFFIX) + SWAP_SUFFIX)
        for old in [b for b in logs if base <= b < end]:
            for suffix in _SUFFIXES:
                _unlink(directory / segment_name(old, suffix))
            if old != base or txn_swap.exists():  # else ``base``'s is already the cleaned one
                _unlink(directory / segment_name(old, TXN_INDEX_SUFFIX))
            logs.discard(old)
        if txn_swap.exists():
            os.replace(txn_swap, directory / segment_name(base, TXN_INDEX_SUFFIX))
        for suffix in _SUFFIXES[1:]:
            _unlink(directory / (segment_name(base, suffix) + SWAP_SUFFIX))
            _unlink(directory / segment_name(base, suffix))  # the replaced segment's, if left
        os.replace(swap, directory / segment_name(base, ".log"))
        logs.add(base)
    if swaps:
        fsync_dir(directory)


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _scan_directory(directory: Path) -> list[int]:
    """Remove stray and orphaned segment files, complete interrupted segment swaps; return
    the segments' base offsets.

    Strays are ``.deleted`` files (segments already taken out of the log), ``.cleaned``
    files (a cleaner's output not yet being swapped in: the originals are intact) and the
    index ``.swap`` files (indexes are rebuilt for a swapped-in segment).
    """
    logs: set[int] = set()
    swaps: list[int] = []
    indexes: list[tuple[int, Path]] = []
    strays: list[os.DirEntry] = []
    for entry in os.scandir(directory):
        if not entry.is_file():
            continue
        m = _LOG_SWAP.fullmatch(entry.name)
        if m is not None:
            swaps.append(int(m.group(1)))
            continue
        if _STRAY.fullmatch(entry.name):
            strays.append(entry)
            continue
        m = _SEGMENT_FILE.fullmatch(entry.name)
        if m is None:
            continue  # not ours: leader-epoch-checkpoint, producer snapshots, ...
        base = int(m.group(1))
        if m.group(2) == "log":
            logs.add(base)
        else:
            indexes.append((base, Path(entry.path)))
    # A cleaned .txnindex.swap belongs to its .log.swap (``_complete_swaps`` moves it).
    kept = {segment_name(b, TXN_INDEX_SUFFIX) + SWAP_SUFFIX for b in swaps}
    for entry in strays:
        if entry.name not in kept:
            os.unlink(entry.path)
    _complete_swaps(directory, swaps, logs)
    for base, path in indexes:
        if base not in logs:  # an index without its log: a half-deleted segment
            _unlink(path)
    return sorted(logs)


def _next_offset(segment: LogSegment, result: LoadResult) -> int:
    """The segment's next offset, recovering the segment if its tail does not parse."""
    try:
        return segment.next_offset()
    except TornBatch:
        result.truncated_bytes += segment.recover()
        result.recovered.append(segment.base_offset)
        return segment.next_offset()


def load_segments(directory: Path, config: LogConfig, now_ms: int, *, recovery_point: int,
                  had_clean_shutdown: bool, files: OpenFileCache | None = SEGMENT_FILES) -> LoadResult:
    """Open every segment in ``directory``, recovering those that may hold unflushed data.

    Returns the segments in offset order (possibly none) with what recovery did.  The last
    segment has its indexes loaded and its next offset known, ready to be appended to.
    """
    bases = _scan_directory(directory)
    segments = [LogSegment.open_existing(directory, b, config, now_ms, files) for b in bases]
    result = LoadResult(segments)
    if not segments:
        return result
    if had_clean_shutdown:
        first_unflushed = len(segments)
    else:
        first_unflushed = max(bisect_right(bases, recovery_point) - 1, 0)

    for seg in segments[:first_unflushed]:
        try:
            seg.sanity_check()
        except CorruptIndexError:
            result.truncated_bytes += seg.recover()
            result.recovered.append(seg.base_offset)

    previous_next = None
    if 0 < first_unflushed < len(segments):
        previous_next = _next_offset(segments[first_unflushed - 1], result)
    for k in range(first_unflushed, len(segments)):
        seg = segments[k]
        truncated = seg.recover(min_offset=previous_next)
        result.recovered.append(seg.base_offset)
        if truncated:
            result.truncated_bytes += truncated
            for dropped in segments[k + 1:]:
                result.truncated_bytes += dropped.size
                result.deleted.append(dropped.base_offset)
                remove_segment_files(dropped)
            del segments[k + 1:]
            break
        previous_next = seg.next_offset()

    # An empty segment after the data (a roll just before the crash, or one whose batches
    # were all torn) would put the log end at its base offset, past a possible gap.
    while len(segments) > 1 and segments[-1].size == 0:
        dropped = segments.pop()
        result.deleted.append(dropped.base_offset)
        remove_segment_files(dropped)
    active = segments[-1]
    result.truncated_bytes += active.ensure_indexes()
    _next_offset(active, result)
    return result


__all__ = ["LoadResult", "load_segments", "remove_segment_files"]
