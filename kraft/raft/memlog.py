"""The replicated log as the Raft core sees it: batches in memory above a snapshot.

The metadata log is small and bounded by snapshots, so the core keeps it whole in memory;
durability is the caller's job (every change leaves through ``Ready``).  Alongside the
batches the log keeps the leader-epoch history, a list of ``(epoch, start_offset)``, which
answers KIP-595's "end offset of the largest epoch <= e" in ``end_offset_for_epoch``.
"""

from __future__ import annotations

from bisect import bisect_right

from kraft.raft.messages import Batch, OffsetAndEpoch, Snapshot


class RaftLog:
    """Batches ``[start_offset, end_offset)`` and the snapshot that covers ``[0, start_offset)``."""

    def __init__(self, snapshot: Snapshot | None = None, batches=()) -> None:
        self.snapshot = snapshot
        self.start_offset = snapshot.end_offset if snapshot else 0
        self._batches: list[Batch] = []
        self._bases: list[int] = []
        self._epochs: list[tuple[int, int]] = []  # (epoch, start offset), increasing
        for batch in batches:
            if batch.end_offset <= self.start_offset:
                continue
            if batch.base_offset < self.start_offset:
                batch = _suffix(batch, self.start_offset)
            self.append(batch)

    # ------------------------------------------------------------------ queries

    @property
    def end_offset(self) -> int:
        return self._batches[-1].end_offset if self._batches else self.start_offset

    @property
    def last_epoch(self) -> int:
        if self._batches:
            return self._batches[-1].epoch
        return self.snapshot.snapshot_id.epoch if self.snapshot else 0

    @property
    def last(self) -> OffsetAndEpoch:
        return OffsetAndEpoch(self.end_offset, self.last_epoch)

    @property
    def batches(self) -> tuple[Batch, ...]:
        return tuple(self._batches)

    def epoch_history(self) -> list[tuple[int, int]]:
        return list(self._epochs)

    def epoch_at(self, offset: int) -> int | None:
        """The epoch of the entry at ``offset``; the snapshot's epoch for ``start_offset - 1``."""
        if self.start_offset <= offset < self.end_offset:
            return self._batches[bisect_right(self._bases, offset) - 1].epoch
        if offset == self.start_offset - 1 and self.snapshot is not None:
            return self.snapshot.snapshot_id.epoch
        return None

    def record_at(self, offset: int) -> bytes | None:
        if self.start_offset <= offset < self.end_offset:
            batch = self._batches[bisect_right(self._bases, offset) - 1]
            return batch.records[offset - batch.base_offset]
        return None

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch | None:
        """End offset of the largest epoch ``<= epoch`` held here (KIP-595 divergence check).

        Returns None when every epoch held (snapshot included) is larger: the caller must
        then send the snapshot.
        """
        index = bisect_right(self._epochs, (epoch, float("inf"))) - 1
        if index >= 0:
            found, _ = self._epochs[index]
            end = self._epochs[index + 1][1] if index + 1 < len(self._epochs) else self.end_offset
            return OffsetAndEpoch(end, found)
        base = self.snapshot.snapshot_id if self.snapshot else OffsetAndEpoch(0, 0)
        return base if base.epoch <= epoch else None

    def read(self, from_offset: int, max_bytes: int) -> tuple[Batch, ...]:
        """Whole batches from ``from_offset`` (at least one when there is one)."""
        if not self.start_offset <= from_offset < self.end_offset:
            return ()
        index = bisect_right(self._bases, from_offset) - 1
        out, size = [], 0
        for i in range(index, len(self._batches)):
            batch = self._batches[i]
            if batch.base_offset < from_offset:
                batch = _suffix(batch, from_offset)
            size += sum(len(r) for r in batch.records)
            if out and size > max_bytes:
                break
            out.append(batch)
        return tuple(out)

    def batches_in(self, start: int, end: int) -> list[Batch]:
        """Whole batches lying inside ``[start, end)`` from ``start`` on (``start`` is a boundary)."""
        if start >= end or start >= self.end_offset:
            return []
        index = max(bisect_right(self._bases, start) - 1, 0)
        out = []
        batches = self._batches
        for i in range(index, len(batches)):
            batch = batches[i]
            if batch.end_offset > end:
                break
            if batch.base_offset >= start:
                out.append(batch)
        return out

    # ------------------------------------------------------------------ changes

    def append(self, batch: Batch) -> None:
        if batch.base_offset != self.end_offset:
            raise ValueError(f"append at {batch.base_offset}, log ends at {self.end_offset}")
        if batch.epoch < self.last_epoch:
            raise ValueError(f"epoch {batch.epoch} below the log's last epoch {self.last_epoch}")
        if not self._epochs or self._epochs[-1][0] != batch.epoch:
            self._epochs.append((batch.epoch, batch.base_offset))
        self._batches.append(batch)
        self._bases.append(batch.base_offset)

    def truncate_to(self, offset: int) -> None:
        """Drop every entry at or above ``offset``."""
        if offset < self.start_offset:
            raise ValueError(f"truncate to {offset} below log start {self.start_offset}")
        while self._batches and self._batches[-1].base_offset >= offset:
            self._batches.pop()
            self._bases.pop()
        if self._batches and self._batches[-1].end_offset > offset:
            last = self._batches[-1]
            self._batches[-1] = Batch(last.base_offset, last.epoch,
                                      last.records[: offset - last.base_offset], last.control)
        while self._epochs and self._epochs[-1][1] >= offset:
            self._epochs.pop()

    def install_snapshot(self, snapshot: Snapshot) -> None:
        """Replace everything with ``snapshot`` (a follower catching up through KIP-630)."""
        self.snapshot = snapshot
        self.start_offset = snapshot.end_offset
        self._batches.clear()
        self._bases.clear()
        self._epochs.clear()

    def trim_prefix(self, snapshot: Snapshot) -> None:
        """Adopt ``snapshot`` of this log's own prefix and drop the entries it covers."""
        end = snapshot.end_offset
        if not self.start_offset <= end <= self.end_offset:
            raise ValueError(f"snapshot end {end} outside the log [{self.start_offset}, "
                             f"{self.end_offset}]")
        if self.epoch_at(end - 1) not in (None, snapshot.snapshot_id.epoch) and end > 0:
            raise ValueError("snapshot epoch does not match the log")
        keep = [b if b.base_offset >= end else _suffix(b, end)
                for b in self._batches if b.end_offset > end]
        self.snapshot = snapshot
        self.start_offset = end
        self._batches, self._bases, self._epochs = [], [], []
        for batch in keep:
            self.append(batch)


def _suffix(batch: Batch, offset: int) -> Batch:
    return Batch(offset, batch.epoch, batch.records[offset - batch.base_offset:], batch.control)
