"""Idempotent-producer state of one partition (KIP-98): epochs, sequences, deduplication.

Theory of operation
-------------------
An idempotent producer numbers its batches per partition: ``base_sequence`` counts records
from 0 and wraps to 0 after Int32 max.  For each producer id the partition keeps the
producer epoch and the metadata of its last five batches (Kafka keeps five because a
producer has at most five requests in flight per connection).  A produce request's batch
is then one of:

* NEW: in sequence (``first_seq == last_seq + 1``, or 0 after Int32 max) -> append;
* DUPLICATE: same epoch and exactly the ``(first_seq, last_seq)`` of a retained batch -> do
  not append, acknowledge with the *original* offsets (a retry after a lost response);
* INVALID_PRODUCER_EPOCH: an epoch older than the one recorded (a zombie producer);
* OUT_OF_ORDER_SEQUENCE_NUMBER: any other sequence, and a *newer* epoch that does not
  start at sequence 0 (after an epoch bump the producer restarts its sequences).

Choices, following modern Kafka (2.5+, KIP-360) where it matters:

* A producer id the partition has no state for is accepted at any sequence, not answered
  with UNKNOWN_PRODUCER_ID: its state may have been removed by retention or expiry, and
  the leader cannot tell that apart from a truly new producer.  So the first batch of an
  unknown producer is NEW whatever its sequence.
* The duplicate check comes before the epoch and sequence checks, as in Kafka.  Unlike
  Kafka, a transactional batch repeats only a batch of the producer's *ongoing*
  transaction: one that repeats a batch of an ended transaction is OUT_OF_ORDER_SEQUENCE
  (see ``_check_one``), so a producer that reused aborted sequences hears of it.
* Follower appends and recovery (``update`` / ``truncate_and_reload``) never validate:
  the leader already did, and a follower must copy the leader's log as it is.

Transactions (KIP-98), as Kafka's ProducerStateManager:

* A transactional data batch starts a transaction for its producer at its first offset,
  unless one is ongoing; a COMMIT or ABORT marker (a transactional control batch, its
  ``TxnMarker`` read by the caller) ends it and yields a ``CompletedTxn``.  A marker for a
  producer with no ongoing transaction here (its data was never written here, or was
  cleaned away) completes nothing: it only records the epochs.
* The *first unstable offset* is the smallest first offset of the transactions not yet
  decided for readers: ongoing ones, and completed ones whose marker is not below the high
  watermark yet (``last_stable_offset`` forgets those as the HW passes them).  The last
  stable offset (LSO) is ``min(first unstable offset, HW)``.  Leaders and followers track
  the same from the batches they append, so a new leader knows its LSO at once.
* Admission (``check_append``/``check_marker``): a non-transactional data batch from a
  producer with an ongoing transaction is INVALID_TXN_STATE; a marker with an epoch older
  than the producer's is INVALID_PRODUCER_EPOCH, one from an older coordinator epoch
  TRANSACTION_COORDINATOR_FENCED.  A producer with an ongoing transaction never expires.

The state is rebuilt from batch headers alone (``truncate_and_reload``), optionally
starting from a snapshot (``to_snapshot_bytes``/``from_snapshot_bytes``) so recovery does
not replay the whole log.  Kafka names snapshot files ``%020d.snapshot`` after the offset
the snapshot covers up to (exclusive); ``snapshot_file_name`` gives that name.

Snapshot format (kraft's own; big-endian; version 2, version 1 lacks the two transaction
fields and is still read)::

    0   magic             4 bytes  b"KPSS"
    4   version           int16    1
    6   crc               uint32   CRC-32C of bytes [10, end)
    10  map_end_offset    int64    the snapshot covers batches below this offset
    18  producer count    int32
    per producer:
        producer_id int64, producer_epoch int16, last_timestamp int64, batch count int8,
        current_txn_first_offset int64 (-1: none), coordinator_epoch int32
        per batch (oldest first):
            first_seq int32, last_seq int32, first_offset int64, last_offset_delta int32,
            timestamp int64

Unlike Kafka's snapshot (which keeps only each producer's last batch), all five retained
batches are stored, so duplicate detection survives a restart unchanged.  Ongoing
transactions are stored as each producer's ``current_txn_first_offset`` (as in Kafka).
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

import crc32c as _crc32c

from kraft.protocol.error_codes import ErrorCode
from kraft.records.control import TxnMarker

__all__ = [
    "BATCHES_TO_RETAIN",
    "BatchMetadata",
    "CheckResult",
    "CompletedTxn",
    "ProducerBatch",
    "ProducerSnapshotError",
    "ProducerStateEntry",
    "ProducerStateManager",
    "TxnMarker",
    "Verdict",
    "snapshot_file_name",
]

BATCHES_TO_RETAIN = 5
INT32_MAX = 0x7FFFFFFF
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1

SNAPSHOT_MAGIC = b"KPSS"
SNAPSHOT_VERSION = 2
_SNAP_HEADER = struct.Struct(">4shI")
_SNAP_BODY_HEADER = struct.Struct(">qi")
_SNAP_PRODUCER_V1 = struct.Struct(">qhqb")
_SNAP_PRODUCER = struct.Struct(">qhqbqi")
_SNAP_BATCH = struct.Struct(">iiqiq")


class ProducerBatch(Protocol):
    """What producer state reads from a batch: a subset of ``kraft.records.header.BatchHeader``."""

    base_offset: int
    last_offset_delta: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    max_timestamp: int

    @property
    def last_sequence(self) -> int: ...

    @property
    def is_control(self) -> bool: ...

    @property
    def is_transactional(self) -> bool: ...


class ProducerSnapshotError(ValueError):
    """A producer-state snapshot is corrupt; rebuild the state from the log instead."""


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}.snapshot"


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset_delta: int
    timestamp: int

    @property
    def last_offset(self) -> int:
        return self.first_offset + self.last_offset_delta


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker ended: ``first_offset`` .. ``last_offset`` (the marker)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_TO_RETAIN))
    last_timestamp: int = -1
    current_txn_first_offset: int = -1  # the ongoing transaction's first offset, -1: none
    coordinator_epoch: int = -1  # of the last marker

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for meta in self.batches:
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                return meta
        return None

    def _set_epoch(self, epoch: int) -> None:
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(self.producer_id, self.producer_epoch,
                                  deque(self.batches, maxlen=BATCHES_TO_RETAIN), self.last_timestamp,
                                  self.current_txn_first_offset, self.coordinator_epoch)


class Verdict(Enum):
    NEW = "NEW"
    DUPLICATE = "DUPLICATE"
    OUT_OF_ORDER_SEQUENCE_NUMBER = "OUT_OF_ORDER_SEQUENCE_NUMBER"
    INVALID_PRODUCER_EPOCH = "INVALID_PRODUCER_EPOCH"
    INVALID_TXN_STATE = "INVALID_TXN_STATE"
    TRANSACTION_COORDINATOR_FENCED = "TRANSACTION_COORDINATOR_FENCED"


_ERRORS = {
    Verdict.NEW: ErrorCode.NONE,
    Verdict.DUPLICATE: ErrorCode.NONE,
    Verdict.OUT_OF_ORDER_SEQUENCE_NUMBER: ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    Verdict.INVALID_PRODUCER_EPOCH: ErrorCode.INVALID_PRODUCER_EPOCH,
    Verdict.INVALID_TXN_STATE: ErrorCode.INVALID_TXN_STATE,
    Verdict.TRANSACTION_COORDINATOR_FENCED: ErrorCode.TRANSACTION_COORDINATOR_FENCED,
}


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The verdict on a produce request's batches.

    For DUPLICATE, ``first_offset``/``last_offset`` are the offsets the original append got:
    answer the producer with success and ``first_offset`` as the base offset.
    """

    verdict: Verdict
    first_offset: int = -1
    last_offset: int = -1
    message: str = ""
    timestamp: int = -1  # DUPLICATE: the original batch's max timestamp (Kafka answers it as the append time)

    @property
    def error_code(self) -> ErrorCode:
        return _ERRORS[self.verdict]


_NEW = CheckResult(Verdict.NEW)


class ProducerStateManager:
    """Per-producer epoch and last-five-batch metadata for one partition."""

    def __init__(self, *, unsafe_no_dedup: bool = False) -> None:
        # DELIBERATELY UNSAFE when set: a retried batch is appended again (the data-plane
        # simulator's mutation switch, ``broker/sim``; no broker setting reaches it).
        self.unsafe_no_dedup = unsafe_no_dedup
        self._producers: dict[int, ProducerStateEntry] = {}
        # The state reflects every batch below this offset.
        self.map_end_offset = 0
        self._ongoing: dict[int, int] = {}  # first offset -> producer id
        self._unreplicated: dict[int, CompletedTxn] = {}  # first offset -> txn, marker >= HW

    # ---------------------------------------------------------------- queries

    def __contains__(self, producer_id: int) -> bool:
        return producer_id in self._producers

    def __len__(self) -> int:
        return len(self._producers)

    def get(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    @property
    def producers(self) -> dict[int, ProducerStateEntry]:
        """A copy of the state, for inspection and comparison."""
        return {pid: e.copy() for pid, e in self._producers.items()}

    def same_state_as(self, other: ProducerStateManager) -> bool:
        return self.producers == other.producers

    @property
    def ongoing_txns(self) -> dict[int, int]:
        """Ongoing transactions: first offset -> producer id."""
        return dict(self._ongoing)

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest transaction not decided for readers (ongoing,
        or completed by a marker the HW has not passed yet); None when there is none."""
        firsts = [*self._ongoing, *self._unreplicated]
        return min(firsts) if firsts else None

    def on_high_watermark(self, high_watermark: int) -> None:
        """Forget the completed transactions whose markers the HW passed (the HW only moves
        forward, except by a truncation, which reloads the state)."""
        if self._unreplicated:
            for first in [f for f, t in self._unreplicated.items() if t.last_offset < high_watermark]:
                del self._unreplicated[first]

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO: ``min(first unstable offset, high_watermark)``."""
        self.on_high_watermark(high_watermark)
        fuo = self.first_unstable_offset
        return high_watermark if fuo is None else min(fuo, high_watermark)

    def stable_offset_after(self, completed: CompletedTxn) -> int:
        """The LSO recorded with an aborted transaction in the ``.txnindex`` (Kafka's
        ``lastStableOffset(completedTxn)``): the first offset of the earliest other
        ongoing transaction, else the offset after the marker."""
        others = [f for f, pid in self._ongoing.items() if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    # -------------------------------------------------------------- admission

    def check(self, batch: ProducerBatch) -> CheckResult:
        """Validate one client batch against the state (see ``check_append``)."""
        return self.check_append([batch])

    def check_append(self, batches: Iterable[ProducerBatch]) -> CheckResult:
        """Validate a produce request's batches for this partition, in order, each against
        the state as the earlier ones would leave it.  Nothing is changed.

        Returns the first non-NEW verdict, or NEW when every batch may be appended.
        """
        scratch: dict[int, ProducerStateEntry] = {}
        for batch in batches:
            pid = batch.producer_id
            if pid == NO_PRODUCER_ID:
                continue
            entry = scratch.get(pid)
            if entry is None:
                known = self._producers.get(pid)
                entry = known.copy() if known else ProducerStateEntry(pid)
                scratch[pid] = entry
            result = self._check_one(entry, batch)
            if self.unsafe_no_dedup and result.verdict is Verdict.DUPLICATE:
                result = _NEW  # UNSAFE: the retry is appended a second time
            if result is not _NEW:
                return result
            entry._set_epoch(batch.producer_epoch)
            if not batch.is_control:
                entry.batches.append(BatchMetadata(batch.base_sequence, batch.last_sequence, 0,
                                                   batch.last_offset_delta, batch.max_timestamp))
                if batch.is_transactional and entry.current_txn_first_offset < 0:
                    entry.current_txn_first_offset = 0  # any value >= 0: ongoing from here
        return _NEW

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> CheckResult:
        """Whether a COMMIT/ABORT marker may be appended (Kafka's ``appendEndTxnMarker``
        checks): not from an older producer epoch, nor an older coordinator epoch."""
        entry = self._producers.get(producer_id)
        if entry is None:
            return _NEW
        if producer_epoch < entry.producer_epoch:
            return CheckResult(Verdict.INVALID_PRODUCER_EPOCH,
                               message=f"marker of producer {producer_id} has epoch {producer_epoch}, "
                                       f"older than {entry.producer_epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            return CheckResult(Verdict.TRANSACTION_COORDINATOR_FENCED,
                               message=f"marker of producer {producer_id} has coordinator epoch "
                                       f"{coordinator_epoch}, older than {entry.coordinator_epoch}")
        return _NEW

    @staticmethod
    def _check_one(entry: ProducerStateEntry, batch: ProducerBatch) -> CheckResult:
        pid, epoch, first_seq = batch.producer_id, batch.producer_epoch, batch.base_sequence
        if not batch.is_control:
            dup = entry.find_duplicate(epoch, first_seq, batch.last_sequence)
            if dup is not None and batch.is_transactional and not (
                    0 <= entry.current_txn_first_offset <= dup.first_offset):
                # The batch it repeats belongs to a transaction that has ended since: no
                # retry of the producer's waits on it.  A producer that sends those
                # sequences again has rewound them (librdkafka does after purging a
                # possibly-written message in abort_transaction); "duplicate" would
                # acknowledge its new records at the aborted ones' offsets, and lose them.
                dup = None
            if dup is not None:
                return CheckResult(Verdict.DUPLICATE, dup.first_offset, dup.last_offset,
                                   f"producer {pid} epoch {epoch} sequences {first_seq}.."
                                   f"{batch.last_sequence} already at offsets "
                                   f"{dup.first_offset}..{dup.last_offset}", dup.timestamp)
        if epoch < entry.producer_epoch:
            return CheckResult(Verdict.INVALID_PRODUCER_EPOCH,
                               message=f"producer {pid} epoch {epoch} is older than "
                                       f"{entry.producer_epoch}")
        if batch.is_control:
            return _NEW
        if not batch.is_transactional and entry.current_txn_first_offset >= 0:
            return CheckResult(Verdict.INVALID_TXN_STATE,
                               message=f"producer {pid} has a transaction ongoing but sent a "
                                       "non-transactional batch")
        if epoch != entry.producer_epoch:
            if first_seq != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
                return CheckResult(Verdict.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                   message=f"producer {pid} new epoch {epoch} starts at sequence "
                                           f"{first_seq}, not 0")
            return _NEW
        if entry.batches and not _in_sequence(entry.last_seq, first_seq):
            return CheckResult(Verdict.OUT_OF_ORDER_SEQUENCE_NUMBER,
                               message=f"producer {pid} sequence {first_seq} does not follow "
                                       f"{entry.last_seq}")
        return _NEW

    # ---------------------------------------------------------------- updates

    def update(self, batch: ProducerBatch, first_offset: int | None = None,
               marker: TxnMarker | None = None) -> CompletedTxn | None:
        """Record an appended batch; ``first_offset`` is its assigned base offset (defaults
        to ``batch.base_offset``, right for follower appends and log replay), ``marker`` what
        a transactional control batch says.  No checks.  Returns the transaction a marker
        completed."""
        first = batch.base_offset if first_offset is None else first_offset
        end = first + batch.last_offset_delta + 1
        if end > self.map_end_offset:
            self.map_end_offset = end
        pid = batch.producer_id
        if pid == NO_PRODUCER_ID:
            return None
        entry = self._producers.get(pid)
        if entry is None:
            entry = self._producers[pid] = ProducerStateEntry(pid)
        entry._set_epoch(batch.producer_epoch)
        entry.last_timestamp = batch.max_timestamp
        if not batch.is_control:
            entry.batches.append(BatchMetadata(batch.base_sequence, batch.last_sequence, first,
                                               batch.last_offset_delta, batch.max_timestamp))
            if batch.is_transactional and entry.current_txn_first_offset < 0:
                entry.current_txn_first_offset = first
                self._ongoing[first] = pid
            return None
        if marker is None or not batch.is_transactional:
            return None
        entry.coordinator_epoch = marker.coordinator_epoch
        txn_first = entry.current_txn_first_offset
        if txn_first < 0:
            return None  # no data here: nothing to hold the LSO or index (as Kafka)
        del self._ongoing[txn_first]
        entry.current_txn_first_offset = -1
        completed = CompletedTxn(pid, txn_first, first + batch.last_offset_delta, not marker.commit)
        self._unreplicated[txn_first] = completed
        return completed

    def truncate_and_reload(self, batches: Iterable[ProducerBatch | tuple[ProducerBatch, TxnMarker | None]],
                            *, snapshot: bytes | None = None, end_offset: int | None = None,
                            on_completed=None) -> None:
        """Rebuild the state: from ``snapshot`` (or empty), then by replaying ``batches``
        (the log's batch headers in offset order, or ``(header, marker)`` pairs telling
        what transaction markers say) that lie at or beyond the snapshot's end and wholly
        below ``end_offset`` (when given).  Used on restart and after truncation.
        ``on_completed(txn, stable_offset_after)`` is called for each transaction a
        replayed marker completes (the partition rebuilds ``.txnindex`` files from it).

        Raises:
            ProducerSnapshotError: the snapshot is corrupt (call again without it).
        """
        if snapshot is not None:
            loaded = ProducerStateManager.from_snapshot_bytes(snapshot)
            if end_offset is not None and loaded.map_end_offset > end_offset:
                raise ProducerSnapshotError(
                    f"snapshot covers up to {loaded.map_end_offset}, beyond the log end {end_offset}")
        else:
            loaded = ProducerStateManager()
        start = loaded.map_end_offset
        for item in batches:
            # a pair, or a bare header (itself a named tuple)
            batch, marker = item if type(item) is tuple else (item, None)
            if batch.base_offset < start:
                continue
            if end_offset is not None and batch.base_offset + batch.last_offset_delta >= end_offset:
                break  # a batch not wholly below the end was truncated away
            completed = loaded.update(batch, marker=marker)
            if completed is not None and on_completed is not None:
                on_completed(completed, loaded.stable_offset_after(completed))
        if end_offset is not None:
            loaded.map_end_offset = max(loaded.map_end_offset, end_offset)
        self._producers = loaded._producers
        self.map_end_offset = loaded.map_end_offset
        self._ongoing = loaded._ongoing
        self._unreplicated = loaded._unreplicated

    def expire(self, now_ms: int, producer_id_expiration_ms: int) -> list[int]:
        """Forget producers idle for at least ``producer_id_expiration_ms`` (by their last
        batch timestamp, as Kafka's ``producer.id.expiration.ms``) and with no transaction
        ongoing; returns their ids."""
        expired = [pid for pid, e in self._producers.items()
                   if now_ms - e.last_timestamp >= producer_id_expiration_ms
                   and e.current_txn_first_offset < 0]
        for pid in expired:
            del self._producers[pid]
        return expired

    # --------------------------------------------------------------- snapshot

    def to_snapshot_bytes(self) -> bytes:
        body = bytearray(_SNAP_BODY_HEADER.pack(self.map_end_offset, len(self._producers)))
        for pid in sorted(self._producers):
            e = self._producers[pid]
            body += _SNAP_PRODUCER.pack(pid, e.producer_epoch, e.last_timestamp, len(e.batches),
                                        e.current_txn_first_offset, e.coordinator_epoch)
            for b in e.batches:
                body += _SNAP_BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset_delta,
                                         b.timestamp)
        body = bytes(body)
        return _SNAP_HEADER.pack(SNAPSHOT_MAGIC, SNAPSHOT_VERSION, _crc32c.crc32c(body)) + body

    @classmethod
    def from_snapshot_bytes(cls, data: bytes) -> ProducerStateManager:
        """Raises ProducerSnapshotError for a wrong magic, version, CRC or length."""
        if len(data) < _SNAP_HEADER.size + _SNAP_BODY_HEADER.size:
            raise ProducerSnapshotError(f"producer snapshot too short ({len(data)} bytes)")
        magic, version, crc = _SNAP_HEADER.unpack_from(data, 0)
        if magic != SNAPSHOT_MAGIC:
            raise ProducerSnapshotError(f"not a producer snapshot (magic {magic!r})")
        if version not in (1, SNAPSHOT_VERSION):
            raise ProducerSnapshotError(f"unsupported producer snapshot version {version}")
        body = memoryview(data)[_SNAP_HEADER.size:]
        actual = _crc32c.crc32c(body)
        if actual != crc:
            raise ProducerSnapshotError(
                f"producer snapshot CRC mismatch: stored {crc:#010x}, computed {actual:#010x}")
        try:
            map_end, count = _SNAP_BODY_HEADER.unpack_from(body, 0)
            pos = _SNAP_BODY_HEADER.size
            state = cls()
            state.map_end_offset = map_end
            layout = _SNAP_PRODUCER if version == SNAPSHOT_VERSION else _SNAP_PRODUCER_V1
            for _ in range(count):
                pid, epoch, last_ts, n, *txn = layout.unpack_from(body, pos)
                pos += layout.size
                if not 0 <= n <= BATCHES_TO_RETAIN or pid in state._producers:
                    raise ProducerSnapshotError(f"bad entry for producer {pid} in snapshot")
                entry = ProducerStateEntry(pid, epoch, last_timestamp=last_ts)
                if txn:
                    entry.current_txn_first_offset, entry.coordinator_epoch = txn
                    if entry.current_txn_first_offset >= 0:
                        if entry.current_txn_first_offset in state._ongoing:
                            raise ProducerSnapshotError(f"two transactions start at "
                                                        f"{entry.current_txn_first_offset} in snapshot")
                        state._ongoing[entry.current_txn_first_offset] = pid
                for _ in range(n):
                    entry.batches.append(BatchMetadata(*_SNAP_BATCH.unpack_from(body, pos)))
                    pos += _SNAP_BATCH.size
                state._producers[pid] = entry
        except struct.error as exc:
            raise ProducerSnapshotError(f"truncated producer snapshot ({exc})") from None
        if pos != len(body):
            raise ProducerSnapshotError(f"{len(body) - pos} trailing bytes in producer snapshot")
        return state
