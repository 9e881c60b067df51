"""Raft batches as Kafka record batches: the on-disk and on-the-wire form of the metadata log.

A core :class:`~kraft.raft.messages.Batch` becomes one v2 record batch whose partition
leader epoch is the Raft epoch; each record's value is one entry (a metadata record), its
key null.  The LeaderChange batch a new leader writes is a control batch whose record key is
the LEADER_CHANGE control key and whose value is Kafka's LeaderChangeMessage.

Timestamps are written as ``NO_TIMESTAMP`` (-1): a follower re-encodes the batches it
fetches, and a fixed timestamp keeps every replica's metadata log byte-identical.

A voter change (KIP-853) is a control batch whose record key is KRAFT_VOTERS and whose value
is Kafka's VotersRecord: every voter's id, directory id and controller endpoint.

Snapshots (KIP-630) are files of record batches too: a SNAPSHOT_HEADER control batch, the
VotersRecord in force at the snapshot's end (when the voters ever changed), the state
machine's records in batches, and a SNAPSHOT_FOOTER control batch.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kraft.protocol import codec
from kraft.records import NO_TIMESTAMP, ControlType, Record, build_batch, decode_batches
from kraft.records.batch import RecordBatch, read_batch
from kraft.records.control import decode_control_key, encode_control_key
from kraft.raft.messages import LEADER_CHANGE, VOTERS, Batch

_MAX_RECORDS_PER_SNAPSHOT_BATCH = 1000


def encode_batch(batch: Batch) -> bytes:
    if batch.control:
        key = encode_control_key(ControlType.KRAFT_VOTERS if batch.control == VOTERS
                                 else ControlType.LEADER_CHANGE)
        records = [Record(offset_delta=i, timestamp=NO_TIMESTAMP, key=key, value=v)
                   for i, v in enumerate(batch.records)]
    else:
        records = [Record(offset_delta=i, timestamp=NO_TIMESTAMP, value=v)
                   for i, v in enumerate(batch.records)]
    return build_batch(records, base_offset=batch.base_offset, partition_leader_epoch=batch.epoch,
                       control=batch.control, timestamp=NO_TIMESTAMP)


def encode_batches(batches) -> bytes:
    return b"".join(encode_batch(b) for b in batches)


def batch_from_record_batch(rb: RecordBatch) -> Batch:
    control = 0
    if rb.is_control:
        kind = decode_control_key(rb.records[0].key).type
        control = VOTERS if kind == ControlType.KRAFT_VOTERS else LEADER_CHANGE
    return Batch(rb.base_offset, rb.partition_leader_epoch,
                 tuple(r.value or b"" for r in rb.records), control=control)


def decode_raft_batches(data) -> tuple[Batch, ...]:
    """Whole batches in ``data`` (a partial tail, as a fetch may end with, is dropped)."""
    return tuple(batch_from_record_batch(rb) for rb in decode_batches(data, allow_partial_tail=True))


def leader_change_record(leader_id: int, epoch: int, voters) -> bytes:
    """Kafka's LeaderChangeMessage (v0) for the control batch a new leader appends."""
    return codec.encode("LeaderChangeMessage", "data", 0, {
        "version": 0,
        "leader_id": leader_id,
        "voters": [{"voter_id": v} for v in sorted(voters)],
        "granting_voters": [],
    })


# ------------------------------------------------------------------------- voters


@dataclass(frozen=True, slots=True)
class Voter:
    """One VotersRecord entry: a controller and where it listens."""

    node_id: int
    directory_id: uuid.UUID
    host: str
    port: int
    listener: str = "CONTROLLER"


ZERO_UUID = uuid.UUID(int=0)  # a voter of the static set, whose directory kraft never learnt


def encode_voters_record(voters) -> bytes:
    return codec.encode("VotersRecord", "data", 0, {"version": 0, "voters": [
        {"voter_id": v.node_id, "voter_directory_id": v.directory_id,
         "endpoints": [{"name": v.listener, "host": v.host, "port": v.port}],
         "kraft_version_feature": {"min_supported_version": 0, "max_supported_version": 1}}
        for v in sorted(voters, key=lambda v: v.node_id)]})


def decode_voters_record(record: bytes) -> list[Voter]:
    value = codec.decode("VotersRecord", "data", 0, record)
    out = []
    for v in value["voters"]:
        endpoint = v["endpoints"][0] if v["endpoints"] else {"name": "", "host": "", "port": 0}
        out.append(Voter(v["voter_id"], v["voter_directory_id"], endpoint["host"],
                         endpoint["port"], endpoint["name"]))
    return out


class KafkaVotersCodec:
    """What the Raft core needs to read of VotersRecords (see ``kraft.raft.node``)."""

    @staticmethod
    def voters_of(record: bytes) -> dict[int, uuid.UUID | None]:
        return {v.node_id: None if v.directory_id == ZERO_UUID else v.directory_id
                for v in decode_voters_record(record)}

    @staticmethod
    def snapshot_voters(data: bytes) -> bytes | None:
        return snapshot_voters_record(data)


# ------------------------------------------------------------------------- snapshots


def encode_snapshot(records: list[bytes], last_contained_timestamp: int = NO_TIMESTAMP,
                    voters_record: bytes | None = None) -> bytes:
    """A snapshot file's bytes from the state machine's records (offsets start at 0)."""
    header = codec.encode("SnapshotHeaderRecord", "data", 0,
                          {"version": 0, "last_contained_log_timestamp": last_contained_timestamp})
    parts = [_control(ControlType.SNAPSHOT_HEADER, header, 0)]
    offset = 1
    if voters_record is not None:
        parts.append(_control(ControlType.KRAFT_VOTERS, voters_record, offset))
        offset += 1
    for i in range(0, len(records), _MAX_RECORDS_PER_SNAPSHOT_BATCH):
        chunk = records[i : i + _MAX_RECORDS_PER_SNAPSHOT_BATCH]
        parts.append(build_batch(
            [Record(offset_delta=j, timestamp=NO_TIMESTAMP, value=v) for j, v in enumerate(chunk)],
            base_offset=offset, timestamp=NO_TIMESTAMP))
        offset += len(chunk)
    footer = codec.encode("SnapshotFooterRecord", "data", 0, {"version": 0})
    parts.append(_control(ControlType.SNAPSHOT_FOOTER, footer, offset))
    return b"".join(parts)


def _control(control_type: int, value: bytes, base_offset: int) -> bytes:
    record = Record(offset_delta=0, timestamp=NO_TIMESTAMP, key=encode_control_key(control_type), value=value)
    return build_batch([record], base_offset=base_offset, control=True, timestamp=NO_TIMESTAMP)


class SnapshotFormatError(ValueError):
    pass


def decode_snapshot(data: bytes) -> list[bytes]:
    """The state machine's records from a snapshot file; checks header and footer."""
    batches = decode_batches(data, allow_partial_tail=False)
    if not batches or not batches[0].is_control or not batches[-1].is_control:
        raise SnapshotFormatError("snapshot lacks its header or footer control batch")
    first = decode_control_key(batches[0].records[0].key)
    last = decode_control_key(batches[-1].records[0].key)
    if first.type != ControlType.SNAPSHOT_HEADER or last.type != ControlType.SNAPSHOT_FOOTER:
        raise SnapshotFormatError("snapshot control batches are not header/footer")
    return [r.value or b"" for rb in batches[1:-1] if not rb.is_control for r in rb.records]


def snapshot_voters_record(data: bytes) -> bytes | None:
    """The VotersRecord a snapshot carries, if any (it follows the header): only the first
    batches are decoded, not a snapshot of a large cluster's whole metadata."""
    pos = 0
    for index in range(3):
        got = read_batch(data, pos)
        if got is None:
            return None
        rb, pos = got
        if index and rb.is_control and decode_control_key(rb.records[0].key).type == ControlType.KRAFT_VOTERS:
            return rb.records[0].value
    return None
