"""Which old segments may go: Kafka's three deletion rules, as predicates on a segment.

Deletion always takes a *prefix* of the segments (oldest first) and stops at the first
segment a rule spares, so the log never gets a hole.  A segment is also spared when it
ends past ``upper_bound`` (the high watermark: data not yet replicated everywhere stays)
or when it is the empty active segment.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from kraft.log.segment import DELETED_SUFFIX, LogSegment

# predicate(segment, next segment or None) -> may this segment be deleted?
Predicate = Callable[[LogSegment, "LogSegment | None"], bool]


def deletable_prefix(segments: Sequence[LogSegment], log_end_offset: int, upper_bound: int,
                     predicate: Predicate) -> int:
    """How many of the oldest segments ``predicate`` allows to delete."""
    count = 0
    for i, seg in enumerate(segments):
        nxt = segments[i + 1] if i + 1 < len(segments) else None
        end = nxt.base_offset if nxt is not None else log_end_offset
        if (nxt is None and seg.size == 0) or end > upper_bound or not predicate(seg, nxt):
            break
        count += 1
    return count


def below_log_start(log_start_offset: int) -> Predicate:
    """Segments wholly below the log start offset (after DeleteRecords)."""
    return lambda seg, nxt: nxt is not None and nxt.base_offset <= log_start_offset


def older_than(now_ms: int, retention_ms: int) -> Predicate:
    """``retention.ms``: the segment's newest timestamp is more than retention_ms old."""
    return lambda seg, nxt: now_ms - seg.largest_timestamp() > retention_ms


def over_size(total_bytes: int, retention_bytes: int) -> Predicate:
    """``retention.bytes``: delete while what remains is still at least retention_bytes."""
    excess = total_bytes - retention_bytes

    def predicate(seg: LogSegment, nxt: LogSegment | None) -> bool:
        nonlocal excess
        if excess - seg.size < 0:
            return False
        excess -= seg.size
        return True

    return predicate


class DeletedFiles:
    """Segments taken out of a log: their files are renamed ``*.deleted`` at once (so a
    crash cannot bring them back into the log) and unlinked after ``file.delete.delay.ms``,
    since a reader (a ``sendfile`` in flight) may still have them open."""

    def __init__(self) -> None:
        self._pending: list[tuple[int, list[Path]]] = []

    def discard(self, segment: LogSegment, now_ms: int, delay_ms: int) -> None:
        segment.close_fd()
        renamed = []
        for path in segment.files():
            target = path.with_name(path.name + DELETED_SUFFIX)
            try:
                os.replace(path, target)
            except FileNotFoundError:
                continue
            renamed.append(target)
        self._pending.append((now_ms + delay_ms, renamed))
        if delay_ms == 0:
            self.delete_expired(now_ms)

    def delete_expired(self, now_ms: int | None) -> None:
        """Unlink files whose delay has passed (all of them when ``now_ms`` is None)."""
        keep = []
        for due, paths in self._pending:
            if now_ms is not None and due > now_ms:
                keep.append((due, paths))
                continue
            for path in paths:
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
        self._pending = keep
