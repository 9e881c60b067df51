"""Control records: transaction markers and KRaft's control messages.

A control batch (attribute bit 5) carries records whose *key* says what they are::

    version  int16   0
    type     int16   ControlType

and whose *value* depends on the type.  Transaction markers (ABORT, COMMIT) carry an
EndTxnMarker value, ``version int16, coordinatorEpoch int32``, encoded here.  The KRaft types
carry versioned messages described by the Kafka schemas (LeaderChangeMessage,
SnapshotHeaderRecord, SnapshotFooterRecord, KRaftVersionRecord, VotersRecord); those values
are encoded by the protocol layer's generic codec and stay opaque bytes here.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from kraft.records.batch import RecordBatch
from kraft.records.header import NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from kraft.records.errors import CorruptRecordError, InvalidRecordError
from kraft.records.record import Record


class ControlType(IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


CONTROL_KEY_VERSION = 0
_KEY = struct.Struct(">hh")
_END_TXN = struct.Struct(">hi")


@dataclass(frozen=True, slots=True)
class ControlKey:
    version: int
    type: int  # a ControlType, or a plain int for a type this code does not know

    @property
    def known(self) -> bool:
        return self.type in ControlType._value2member_map_


def encode_control_key(control_type: int, version: int = CONTROL_KEY_VERSION) -> bytes:
    """The key of a control record of ``control_type``."""
    return _KEY.pack(version, control_type)


def decode_control_key(key: bytes | None) -> ControlKey:
    """Parse a control record's key.  Unknown types are returned as plain ints (newer
    brokers may add types; readers skip what they do not know).

    Raises:
        InvalidRecordError: a null or short key, or a negative version.
    """
    if key is None or len(key) < _KEY.size:
        raise InvalidRecordError(f"control record key must have at least {_KEY.size} bytes")
    version, control_type = _KEY.unpack_from(key)
    if version < 0:
        raise InvalidRecordError(f"control record key has negative version {version}")
    if control_type in ControlType._value2member_map_:
        control_type = ControlType(control_type)
    return ControlKey(version, control_type)


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    """The value of an ABORT or COMMIT control record."""

    coordinator_epoch: int
    version: int = 0

    def encode(self) -> bytes:
        return _END_TXN.pack(self.version, self.coordinator_epoch)

    @classmethod
    def decode(cls, value: bytes | None) -> EndTxnMarker:
        """Raises InvalidRecordError for a null or short value.  Bytes after the known
        fields (a newer version's) are ignored."""
        if value is None or len(value) < _END_TXN.size:
            raise InvalidRecordError("end transaction marker value is too short")
        version, epoch = _END_TXN.unpack_from(value)
        if version < 0:
            raise InvalidRecordError(f"end transaction marker has negative version {version}")
        return cls(epoch, version)


def make_control_batch(
    control_type: int,
    value: bytes | None,
    *,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    transactional: bool = False,
) -> RecordBatch:
    """A control batch holding one control record (KRaft control messages use this with
    the value encoded by the protocol layer)."""
    record = Record(0, timestamp, encode_control_key(control_type), value)
    return RecordBatch(
        records=(record,),
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        is_control=True,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
    )


def make_end_txn_batch(
    commit: bool,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> RecordBatch:
    """The COMMIT or ABORT marker a transaction coordinator writes to each partition."""
    if producer_id < 0:
        raise ValueError("a transaction marker needs a producer id")
    return make_control_batch(
        ControlType.COMMIT if commit else ControlType.ABORT,
        EndTxnMarker(coordinator_epoch).encode(),
        timestamp=timestamp,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
    )


def control_records(batch: RecordBatch) -> list[tuple[ControlKey, Record]]:
    """The control records of a control batch, each with its parsed key.

    Raises:
        InvalidRecordError: the batch is not a control batch, or a key is malformed.
    """
    if not batch.is_control:
        raise InvalidRecordError("not a control batch")
    return [(decode_control_key(r.key), r) for r in batch.records]


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """What a transaction marker batch says: COMMIT or ABORT, by which coordinator epoch."""

    commit: bool
    coordinator_epoch: int


def read_txn_marker(data: bytes) -> TxnMarker | None:
    """The marker in a control batch's bytes; None when its first record is not a COMMIT or
    ABORT (a KRaft control record) or does not parse (a reader skips what it cannot read,
    as Kafka's consumers skip unknown control types)."""
    try:
        batch = RecordBatch.decode(data)
        if not batch.is_control or not batch.records:
            return None
        record = batch.records[0]
        key = decode_control_key(record.key)
        if key.type not in (ControlType.ABORT, ControlType.COMMIT):
            return None
        return TxnMarker(key.type == ControlType.COMMIT, EndTxnMarker.decode(record.value).coordinator_epoch)
    except (CorruptRecordError, ValueError):
        return None
