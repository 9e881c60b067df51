"""When to snapshot the metadata log (sans-IO: the caller passes the time).

A snapshot is due once ``metadata.log.max.record.bytes.between.snapshots`` bytes of
records have been committed since the last one, or once
``metadata.log.max.snapshot.interval.ms`` (0: never by time, as in Kafka) has passed since it
and at least one record has been committed.  Writing it is the caller's job
(``ControllerServer``): ``image.records()`` are its records.  Offsets here are snapshot ids'
end offsets: a snapshot ending at ``end`` holds the records before ``end``.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_BYTES_BETWEEN_SNAPSHOTS = 20 * 1024 * 1024
DEFAULT_MAX_SNAPSHOT_INTERVAL_MS = 60 * 60 * 1000


@dataclass(slots=True)
class SnapshotPolicy:
    max_bytes_between_snapshots: int = DEFAULT_MAX_BYTES_BETWEEN_SNAPSHOTS
    max_interval_ms: int = DEFAULT_MAX_SNAPSHOT_INTERVAL_MS  # 0 disables the time trigger
    bytes_since_snapshot: int = 0
    last_snapshot_ms: int | None = None
    snapshot_end: int = 0  # the end offset of the latest snapshot written or loaded

    def committed(self, record_bytes: int, now_ms: int) -> None:
        """Count a committed batch of ``record_bytes`` bytes."""
        if self.last_snapshot_ms is None:
            self.last_snapshot_ms = now_ms
        self.bytes_since_snapshot += record_bytes

    def due(self, now_ms: int) -> bool:
        if self.bytes_since_snapshot >= self.max_bytes_between_snapshots:
            return True
        return (
            self.max_interval_ms > 0
            and self.bytes_since_snapshot > 0
            and self.last_snapshot_ms is not None
            and now_ms - self.last_snapshot_ms >= self.max_interval_ms
        )

    def loaded(self, end: int) -> None:
        """A snapshot ending at ``end`` replaced the state (at start, or from the leader)."""
        self.snapshot_end = max(self.snapshot_end, end)

    def taken(self, end: int, now_ms: int) -> None:
        """A snapshot ending at ``end`` was written."""
        self.bytes_since_snapshot = 0
        self.last_snapshot_ms = now_ms
        self.snapshot_end = end
