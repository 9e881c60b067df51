"""``kraftctl dump-log``: print segment files the way Kafka's kafka-dump-log.sh does.

``--files`` takes comma-separated ``.log`` and ``.txnindex`` files (the options and the
line format follow Kafka's DumpLogSegments, so scripts that read one read the other):

* a ``.log``: one line per batch (base/last offset, count, sequences, producer id and
  epoch, leader epoch, isTransactional, isControl, position, timestamp, size, codec, crc
  and whether it checks out).  With ``--print-data-log`` (implied by ``--deep-iteration``
  and by the decoders) one ``| offset: ...`` line per record follows, with the payload, or
  for a transaction marker ``endTxnMarker: COMMIT|ABORT coordinatorEpoch: N``.
  ``--transaction-log-decoder`` shows ``__transaction_state`` records decoded,
  ``--offsets-decoder`` ``__consumer_offsets`` ones.
* a ``.txnindex``: one line per aborted transaction.

A batch that does not parse ends the dump of its file with a line saying where, as Kafka's
tool stops at a corrupt batch.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from kraft.log.scan import TornBatch, scan_file
from kraft.log.txn_index import decode_entries
from kraft.records import CorruptRecordError, RecordBatch
from kraft.records.compression import Codec
from kraft.records.control import ControlType, EndTxnMarker, decode_control_key
from kraft.records.header import DELETE_HORIZON_FLAG, compute_crc


@click.command("dump-log")
@click.option("--files", required=True, help="Comma-separated .log and .txnindex files to dump.")
@click.option("--print-data-log", is_flag=True, help="Print every record, not only the batches.")
@click.option("--deep-iteration", is_flag=True, help="Iterate the records of each batch (implies --print-data-log).")
@click.option("--transaction-log-decoder", is_flag=True,
              help="Decode records as __transaction_state records (implies --print-data-log).")
@click.option("--offsets-decoder", is_flag=True,
              help="Decode records as __consumer_offsets records (implies --print-data-log).")
def dump_log_command(files, print_data_log, deep_iteration, transaction_log_decoder, offsets_decoder) -> None:
    """Print the batches, records and aborted transactions of segment files."""
    decoder = _transaction_log if transaction_log_decoder else _offsets if offsets_decoder else _payload
    records = print_data_log or deep_iteration or transaction_log_decoder or offsets_decoder
    failed = False
    for name in (f.strip() for f in files.split(",") if f.strip()):
        path = Path(name)
        click.echo(f"Dumping {path}")
        try:
            if path.name.endswith(".log"):
                lines = dump_segment(path, records, decoder)
            elif path.name.endswith(".txnindex"):
                lines = dump_txn_index(path)
            else:
                click.echo(f"Ignoring unknown file {path}", err=True)
                continue
            for line in lines:
                click.echo(line)
        except (OSError, CorruptRecordError) as exc:
            click.echo(f"Error: {path}: {exc}", err=True)
            failed = True
    if failed:
        raise SystemExit(1)


def dump_txn_index(path: Path):
    for e in decode_entries(path.read_bytes(), path):
        yield (f"version: {e.version} producerId: {e.producer_id} firstOffset: {e.first_offset} "
               f"lastOffset: {e.last_offset} lastStableOffset: {e.last_stable_offset}")


def dump_segment(path: Path, records: bool, decoder):
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        yield f"Log starting offset: {int(path.name.split('.')[0])}"
        try:
            for pos, h in scan_file(fd, 0, size, check_crc=False):
                data = os.pread(fd, h.size, pos)
                valid = compute_crc(data, 0, h.size) == h.crc
                horizon = f"OptionalLong[{h.base_timestamp}]" if h.attributes & DELETE_HORIZON_FLAG \
                    else "OptionalLong.empty"
                yield (f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
                       f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} "
                       f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
                       f"partitionLeaderEpoch: {h.partition_leader_epoch} "
                       f"isTransactional: {_bool(h.is_transactional)} isControl: {_bool(h.is_control)} "
                       f"deleteHorizonMs: {horizon} position: {pos} "
                       f"{'LogAppendTime' if h.timestamp_type else 'CreateTime'}: {h.max_timestamp} "
                       f"size: {h.size} magic: {h.magic} compresscodec: {_codec(h.compression)} "
                       f"crc: {h.crc} isvalid: {_bool(valid)}")
                if records:
                    yield from _records(data, h, decoder)
        except TornBatch as exc:
            yield f"Found an incomplete or invalid batch {exc}; the dump of {path.name} stops here."
    finally:
        os.close(fd)


def _records(data: bytes, h, decoder):
    try:
        batch = RecordBatch.decode(data, check_crc=False)
    except CorruptRecordError as exc:
        yield f"| cannot decode the records: {exc}"
        return
    for offset, ts, r in batch.iter_resolved():
        sequence = h.base_sequence + r.offset_delta if h.base_sequence >= 0 else -1
        line = (f"| offset: {offset} {'LogAppendTime' if h.timestamp_type else 'CreateTime'}: {ts} "
                f"keySize: {_size(r.key)} valueSize: {_size(r.value)} sequence: {sequence} "
                f"headerKeys: [{','.join(k for k, _ in r.headers)}]")
        yield f"{line} {_control(r) if h.is_control else decoder(r.key, r.value)}"


def _control(r) -> str:
    try:
        key = decode_control_key(r.key)
        if key.type in (ControlType.COMMIT, ControlType.ABORT):
            marker = EndTxnMarker.decode(r.value)
            return f"endTxnMarker: {key.type.name} coordinatorEpoch: {marker.coordinator_epoch}"
        name = key.type.name if isinstance(key.type, ControlType) else f"UNKNOWN({key.type})"
        return f"controlType: {name}({int(key.type)})"
    except CorruptRecordError as exc:
        return f"invalid control record: {exc}"


def _payload(key: bytes | None, value: bytes | None) -> str:
    out = f"key: {_text(key)} " if key is not None else ""
    return out + f"payload: {_text(value)}"


def _transaction_log(key: bytes | None, value: bytes | None) -> str:
    """A ``__transaction_state`` record: Kafka's TransactionLog key and value, decoded by
    the transaction coordinator's own record code."""
    try:
        from broker.txn import log_records
    except ImportError:  # a build without the transaction coordinator
        return _payload(key, value)
    try:
        txn_id = log_records.decode_key(key) if key is not None else None
        out = {"key": {"type": "0", "data": {"transactionalId": txn_id}}}
        if value is None:
            out["payload"] = None
        else:
            v = log_records.decode_value(value)
            out["payload"] = {"producerId": v.producer_id, "producerEpoch": v.producer_epoch,
                              "transactionTimeoutMs": v.timeout_ms, "transactionStatus": v.state.kafka_name,
                              "transactionPartitions": [{"topic": t, "partitionId": p}
                                                        for t, p in sorted(v.partitions)],
                              "transactionLastUpdateTimestampMs": v.last_update_ms,
                              "transactionStartTimestampMs": v.start_ms}
    except (ValueError, KeyError) as exc:
        return f"unreadable transaction log record ({exc}): {_payload(key, value)}"
    return f"key: {json.dumps(out['key'])} payload: {json.dumps(out['payload'])}"


def _offsets(key: bytes | None, value: bytes | None) -> str:
    """A ``__consumer_offsets`` record: an offset commit or a group's metadata."""
    from broker.group import records as gr

    try:
        k = gr.decode_key(key) if key is not None else None
        if isinstance(k, gr.OffsetKey):
            v = None if value is None else gr.decode_offset_value(value)
            return (f"key: offset_commit::group={k.group},partition={k.topic}-{k.partition} "
                    f"payload: {_offset_value(v)}")
        if isinstance(k, gr.GroupKey):
            v = None if value is None else gr.decode_group_value(value)
            return f"key: group_metadata::group={k.group} payload: {_dataclass(v)}"
    except (ValueError, KeyError) as exc:
        return f"unreadable offsets record ({exc}): {_payload(key, value)}"
    return _payload(key, value)


def _offset_value(v) -> str:
    return "<DELETE>" if v is None else _dataclass(v)


def _dataclass(v) -> str:
    if v is None:
        return "<DELETE>"
    fields = getattr(v, "__dataclass_fields__", {})
    return ",".join(f"{name}:{getattr(v, name)}" for name in fields) if fields else str(v)


def _text(data: bytes | None) -> str:
    if data is None:
        return "null"
    return data.decode("utf-8", errors="backslashreplace")


def _size(data: bytes | None) -> int:
    return -1 if data is None else len(data)


def _bool(flag: bool) -> str:
    return "true" if flag else "false"


def _codec(codec: int) -> str:
    try:
        return Codec(codec).name.lower()
    except ValueError:
        return f"unknown({codec})"


__all__ = ["dump_log_command", "dump_segment", "dump_txn_index"]
