"""The records the transaction coordinator keeps in ``__transaction_state``: Kafka's
TransactionLog key and value, and which partition of that topic owns a transactional id.

``__transaction_state`` is a compacted log with one key per transactional id::

    key    version int16 (0), transactional_id string
    value  version int16 (0, or 1 = flexible with tagged fields), producer_id int64,
           producer_epoch int16, transaction_timeout_ms int32, transaction_status int8,
           transaction_partitions [topic string, partition_ids [int32]] (nullable),
           transaction_last_update_timestamp_ms int64, transaction_start_timestamp_ms int64
           (v1 tags: 0 previous_producer_id, 1 next_producer_id, 2 client_transaction_version)

A null value (tombstone) deletes the id (the Dead state).  Replaying a partition front to
back, last value per key wins, rebuilds every transaction the partition owns.  We write value
version 0, as Kafka does for clients without transaction version 2, and read both.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import IntEnum

from broker.group.record_codec import RecordFormatError, _Reader, _Writer
from broker.group.records import partition_for

TXN_KEY_VERSION = 0
TXN_VALUE_VERSION = 0

__all__ = ["RecordFormatError", "TxnLogValue", "TxnState", "decode_key", "decode_value", "encode_key",
           "encode_value", "partition_for", "replay"]


class TxnState(IntEnum):
    """Kafka's TransactionState, with its ids in the log and its names in the admin APIs."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_"))

    @classmethod
    def from_kafka_name(cls, name: str) -> "TxnState | None":
        return {s.kafka_name: s for s in cls}.get(name)


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    """One transactional id's persisted state (what a TransactionLog value holds)."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]] = field(default_factory=frozenset)
    last_update_ms: int = -1
    start_ms: int = -1
    previous_producer_id: int = -1  # v1 tag 0
    next_producer_id: int = -1  # v1 tag 1


def encode_key(transactional_id: str) -> bytes:
    w = _Writer()
    w.fixed("h", TXN_KEY_VERSION)
    w.string(transactional_id)
    return bytes(w.out)


def decode_key(data: bytes) -> str | None:
    """The transactional id of a key, or None for a key version this code does not know."""
    r = _Reader(data)
    if r.fixed("h") != TXN_KEY_VERSION:
        return None
    return r.string()


def encode_value(v: TxnLogValue, version: int = TXN_VALUE_VERSION) -> bytes:
    w = _Writer()
    w.fixed("h", version)
    w.flexible = version >= 1
    w.fixed("q", v.producer_id)
    w.fixed("h", v.producer_epoch)
    w.fixed("i", v.timeout_ms)
    w.fixed("b", int(v.state))
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(v.partitions):
        by_topic.setdefault(topic, []).append(index)
    w.array_len(len(by_topic))
    for topic, indexes in by_topic.items():
        w.string(topic)
        w.array_len(len(indexes))
        for index in indexes:
            w.fixed("i", index)
        w.tags()
    w.fixed("q", v.last_update_ms)
    w.fixed("q", v.start_ms)
    if w.flexible:
        tags = [(0, v.previous_producer_id), (1, v.next_producer_id)]
        tags = [(t, x) for t, x in tags if x != -1]
        w._uvarint(len(tags))
        for tag, x in tags:
            w._uvarint(tag)
            w._uvarint(8)
            w.fixed("q", x)
    return bytes(w.out)


def decode_value(data: bytes) -> TxnLogValue:
    r = _Reader(data)
    version = r.fixed("h")
    if version not in (0, 1):
        raise RecordFormatError(f"unknown TransactionLog value version {version}")
    r.flexible = version >= 1
    pid, epoch, timeout, status = r.fixed("q"), r.fixed("h"), r.fixed("i"), r.fixed("b")
    partitions = set()
    for _ in range(r.array_len()):
        topic = r.string()
        for _ in range(r.array_len()):
            partitions.add((topic, r.fixed("i")))
        r.tags()
    last_update, start = r.fixed("q"), r.fixed("q")
    tagged = {}
    if r.flexible:
        for _ in range(r._uvarint()):
            tag, size = r._uvarint(), r._uvarint()
            raw = r._take(size)
            if tag in (0, 1) and size == 8:
                tagged[tag] = int.from_bytes(raw, "big", signed=True)
    try:
        state = TxnState(status)
    except ValueError:
        raise RecordFormatError(f"unknown transaction status {status}") from None
    return TxnLogValue(pid, epoch, timeout, state, frozenset(partitions), last_update, start,
                       tagged.get(0, -1), tagged.get(1, -1))


def replay(records: Iterable[tuple[bytes | None, bytes | None]]) -> dict[str, TxnLogValue]:
    """The transactions one ``__transaction_state`` partition holds: last value per id wins,
    a tombstone removes it; keys of versions we do not know are skipped."""
    out: dict[str, TxnLogValue] = {}
    for key, value in records:
        if key is None:
            continue
        txn_id = decode_key(key)
        if txn_id is None:
            continue
        if value is None:
            out.pop(txn_id, None)
        else:
            out[txn_id] = decode_value(value)
    return out
