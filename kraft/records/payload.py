"""The broker's hot path over a produce payload: validate, count, assign offsets.

A produce request carries, per partition, a byte string of one or more v2 batches.  The
leader never decodes their records (DESIGN.md principle 4): it checks every header and CRC,
then writes the partition's next offsets and its leader epoch into the headers in place and
appends the bytes.  Both patched fields sit before the CRC-covered region, so the client's
CRC stays valid; only LogAppendTime topics touch covered bytes (attributes and
maxTimestamp) and therefore recompute the CRC, as Kafka does.

Legacy (magic 0/1) payloads from old clients are detected with
:func:`kraft.records.legacy.peek_magic` and converted with
:func:`kraft.records.legacy.legacy_to_batch` before they reach this module.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kraft.records.compression import NONE, ZSTD, compress, decompress
from kraft.records.errors import InvalidRecordError, TruncatedBatchError, UnsupportedCodecError
from kraft.records.header import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_FLAG,
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    compute_crc,
    iter_batches,
    parse_header,
    peek_size,
    set_base_offset,
    set_partition_leader_epoch,
    verify_crc,
)

_BATCH_LENGTH_OFFSET = 8
_MAX_TIMESTAMP_OFFSET = 35
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")


# Not frozen: a frozen dataclass's construction costs three times a plain one's, and one is
# built per produced partition.  Treat it as read-only all the same.
@dataclass(slots=True)
class PayloadSummary:
    """What validation learned about a payload, so the broker need not parse it twice."""

    positions: tuple[int, ...]
    headers: tuple[BatchHeader, ...]
    record_count: int
    size: int

    @property
    def offset_count(self) -> int:
        """Offsets the payload will consume (sum of lastOffsetDelta + 1 over batches)."""
        return sum(h.last_offset_delta + 1 for h in self.headers)


def validate_payload(buf, *, strict: bool = True, max_batches: int | None = None) -> PayloadSummary:
    """Validate a produce payload without decoding records.

    Checks, per batch: a possible length, magic 2, the CRC; and that the batches exactly
    fill ``buf`` (a produce payload has no excuse for a partial tail).  With ``strict``
    (a payload from a client, not a replica) also Kafka's produce rules: every batch holds
    at least one record, its record count equals lastOffsetDelta + 1, and it is not a
    control batch (only coordinators write those).

    Args:
        max_batches: refuse more batches than this (Kafka allows exactly 1 per partition
            in a produce request with v2 batches).
    Raises:
        TruncatedBatchError: the payload is empty or ends inside a batch.
        CorruptRecordError: a bad length, magic or CRC (CORRUPT_MESSAGE).
        InvalidRecordError: a strict-mode rule is broken (INVALID_RECORD).
        UnsupportedCodecError: (strict) a codec id no Kafka client knows
            (UNSUPPORTED_COMPRESSION_TYPE).
    """
    end = len(buf)
    if not end:
        raise TruncatedBatchError("empty produce payload")
    positions, headers = [], []
    count = 0
    pos = 0
    while pos < end:
        size = peek_size(buf, pos)
        if size is None or pos + size > end:
            raise TruncatedBatchError(f"produce payload ends inside a batch at position {pos}")
        header = parse_header(buf, pos)
        if compute_crc(buf, pos, size) != header.crc:
            verify_crc(buf, pos, header)  # raises, saying what the CRCs are
        records = header.records_count
        if strict:
            if records == 0:
                raise InvalidRecordError("batch holds no records")
            if records != header.last_offset_delta + 1:
                raise InvalidRecordError(
                    f"batch declares {records} records but lastOffsetDelta "
                    f"{header.last_offset_delta}"
                )
            if header.attributes & CONTROL_FLAG:
                raise InvalidRecordError("clients may not produce control batches")
            if header.compression > ZSTD:  # the last codec: stored, no consumer could read it
                raise UnsupportedCodecError(f"unknown compression type id {header.compression}")
        positions.append(pos)
        headers.append(header)
        count += records
        pos += size
        if max_batches is not None and len(headers) > max_batches:
            raise InvalidRecordError(f"payload holds more than {max_batches} batch(es)")
    return PayloadSummary(tuple(positions), tuple(headers), count, pos)


def count_records(buf, pos: int = 0) -> int:
    """Sum of the record counts of the whole v2 batches in ``buf`` (headers only; CRCs are
    not checked, a partial tail is ignored)."""
    return sum(h.records_count for _, h in iter_batches(buf, pos, check_crc=False))


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp: int) -> None:
    """Mark the batch at ``pos`` LogAppendTime with ``timestamp`` as its maxTimestamp and
    recompute its CRC (both fields are CRC-covered)."""
    header = parse_header(buf, pos)
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, header.attributes | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(buf, pos + _MAX_TIMESTAMP_OFFSET, timestamp)
    _UINT32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, header.size))


def recompress(buf, pos: int, header: BatchHeader, codec: int, level: int | None = None) -> bytearray:
    """The batch at ``pos`` with its records section in ``codec`` (at ``level``; None: the
    codec's default), as a topic's ``compression.type`` asks of a leader.  A v2 batch
    compresses the concatenation of its records, so their bytes are kept as they are; the
    codec bits of the attributes, the batch length and the CRC are written anew, every
    other header field (offsets, timestamps, the producer's id, epoch and sequence, the
    transactional flag) is the producer's.

    Raises:
        CorruptRecordError: (as its subclasses) the records section does not decompress.
    """
    section = memoryview(buf)[pos + HEADER_SIZE: pos + header.size]
    if header.compression != NONE:
        section = decompress(header.compression, section)
    out = bytearray(memoryview(buf)[pos: pos + HEADER_SIZE])
    out += compress(codec, section, level=level)
    _INT32.pack_into(out, _BATCH_LENGTH_OFFSET, len(out) - LOG_OVERHEAD)
    _INT16.pack_into(out, ATTRIBUTES_OFFSET, (header.attributes & ~COMPRESSION_MASK) | codec)
    _UINT32.pack_into(out, CRC_OFFSET, compute_crc(out, 0, len(out)))
    return out


def assign_offsets(
    buf: bytearray | memoryview,
    first_offset: int,
    leader_epoch: int,
    *,
    log_append_time: int | None = None,
    pos: int = 0,
) -> int:
    """Give each batch in ``buf`` (from ``pos``) consecutive offsets starting at
    ``first_offset`` and stamp the leader epoch, in place.  Returns the next free offset.

    Call after :func:`validate_payload`; headers are parsed again but CRCs are not
    recomputed (unless ``log_append_time`` is given, see :func:`set_log_append_time`).

    Raises:
        TruncatedBatchError: ``buf`` ends inside a batch.
        CorruptRecordError: an unparseable header.
    """
    next_offset = first_offset
    while pos < len(buf):
        size = peek_size(buf, pos)
        if size is None or pos + size > len(buf):
            raise TruncatedBatchError(f"payload ends inside a batch at position {pos}")
        header = parse_header(buf, pos)
        set_base_offset(buf, pos, next_offset)
        set_partition_leader_epoch(buf, pos, leader_epoch)
        if log_append_time is not None:
            set_log_append_time(buf, pos, log_append_time)
        next_offset += header.last_offset_delta + 1
        pos += size
    return next_offset

