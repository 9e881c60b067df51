"""A simulated broker disk: an in-memory partition log and checkpoint stores.

``MemLog`` has the methods of ``kraft.log.Log`` that ``broker.partition.Partition`` calls,
over whole record batches kept as bytes (offsets assigned and checked by the real
``kraft.log.batches`` helpers).  What a power loss keeps is modelled on the page cache:
everything up to the last flush survives, then some whole batches of what followed (the
kernel may have written some back), never a torn one (log recovery would cut it).  A
truncation is durable at once, as ``Log.truncate_to`` fsyncs it.  A process crash (kill
-9) loses nothing: the page cache survives it.
"""

from __future__ import annotations

from random import Random

from broker.leader_epoch_cache import LeaderEpochCache
from kraft.log.batches import AppendInfo, parse_append, stamp_batches
from kraft.log.config import LogConfig
from kraft.log.errors import OffsetOutOfRangeError
from kraft.records.header import BatchHeader

CONFIG = LogConfig()


class MemLog:
    """One replica's log: ``batches`` is ``[(header, bytes)]`` in offset order."""

    def __init__(self) -> None:
        self.batches: list[tuple[BatchHeader, bytes]] = []
        self.synced = 0  # how many of ``batches`` are flushed
        # The log start offset: DeleteRecords moves it into the first batch, whose records
        # below it are then unreadable (``Log``'s log start, which is kept apart from the
        # segments as well).
        self.start = 0
        self.config = CONFIG
        self.dir = None
        self.load_result = None

    # -- what Partition reads -----------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self.start

    @property
    def log_end_offset(self) -> int:
        return self.batches[-1][0].next_offset if self.batches else self.start

    def iter_batches(self, start_offset: int | None = None, *, with_data=False):
        wanted = with_data if callable(with_data) else (lambda h: with_data)
        for h, data in self.batches:
            if start_offset is None or h.next_offset > start_offset:
                yield h, (data if wanted(h) else None)

    # -- what Partition writes ----------------------------------------------------------
    def append(self, records, *, assign_offsets: bool, leader_epoch: int | None = None,
               batches=None) -> AppendInfo:
        buf = records if isinstance(records, bytearray) else bytearray(records)  # as Log: patched in place
        parsed = batches if batches is not None else parse_append(buf, self.config, check_crc=False,
                                                                  leader=assign_offsets)
        stamped = stamp_batches(buf, parsed, self.log_end_offset, assign_offsets=assign_offsets,
                                leader_epoch=leader_epoch if assign_offsets else None)
        for pos, h in stamped:
            self.batches.append((h, bytes(buf[pos:pos + h.size])))
        return AppendInfo.of(stamped, len(buf))

    def truncate_to(self, offset: int) -> bool:
        if offset >= self.log_end_offset:
            return False
        keep = [b for b in self.batches if b[0].next_offset <= offset]
        self.start = min(offset, self.start)
        self.batches = keep
        self.synced = min(self.synced, len(keep))
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.batches, self.synced, self.start = [], 0, offset

    def delete_records_before(self, offset: int) -> int:
        """``Log.delete_records_before``: the log start moves up to ``offset``; the batches
        wholly below it are deleted (durably: a power loss does not bring them back)."""
        if not 0 <= offset <= self.log_end_offset:
            raise OffsetOutOfRangeError(offset, self.start, self.log_end_offset, "delete records before")
        self.start = max(self.start, offset)
        gone = next((i for i, (h, _) in enumerate(self.batches) if h.next_offset > self.start),
                    len(self.batches))
        del self.batches[:gone]
        self.synced = max(self.synced - gone, 0)
        return self.start

    def append_aborted_txn(self, entry) -> None:
        raise NotImplementedError("the simulator writes no transactions")

    # -- what the simulator reads -------------------------------------------------------
    def read(self, start_offset: int, max_offset: int | None = None, max_batches: int = 4) -> list[bytes]:
        """Whole batches from the one holding ``start_offset``, none holding ``max_offset``
        or later (``Log.read``'s rule)."""
        if not self.log_start_offset <= start_offset <= self.log_end_offset:
            raise OffsetOutOfRangeError(start_offset, self.log_start_offset, self.log_end_offset)
        out = []
        for h, data in self.batches:
            if h.next_offset <= start_offset:
                continue
            if (max_offset is not None and h.next_offset > max_offset) or len(out) == max_batches:
                break
            out.append(data)
        return out

    def flush(self) -> None:
        self.synced = len(self.batches)

    def power_loss(self, rng: Random) -> None:
        """The machine lost power: keep the flushed batches and some of the rest."""
        kept = rng.randint(self.synced, len(self.batches))
        del self.batches[kept:]
        self.synced = len(self.batches)


class MemEpochCheckpoint:
    """The leader-epoch checkpoint, in memory; unsynced writes are lost by a power loss."""

    def __init__(self) -> None:
        self.written: bytes | None = None
        self.synced: bytes | None = None

    def read(self) -> LeaderEpochCache:
        if self.written is None:
            return LeaderEpochCache()
        return LeaderEpochCache.from_checkpoint_bytes(self.written, "<simulated checkpoint>")

    def write(self, cache: LeaderEpochCache, *, sync: bool, grown: bool = False) -> None:
        self.written = cache.to_checkpoint_bytes()
        if sync:
            self.synced = self.written

    def power_loss(self, rng: Random) -> None:
        if rng.random() < 0.5:  # the kernel may or may not have written it back
            self.written = self.synced
        self.synced = self.written


class Disk:
    """One broker's disk: the partition's log, its epoch checkpoint, its HW checkpoint."""

    def __init__(self) -> None:
        self.log = MemLog()
        self.epochs = MemEpochCheckpoint()
        self.hw_checkpoint = 0  # replication-offset-checkpoint, written with fsync

    def power_loss(self, rng: Random) -> None:
        self.log.power_loss(rng)
        self.epochs.power_loss(rng)
