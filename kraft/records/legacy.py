"""Legacy message sets (magic 0 and 1), read-only, and their conversion to v2 batches.

Before record batches, a log was a sequence of messages::

    offset      int64
    size        int32    bytes after this field
    crc         uint32   CRC-32 (zlib's, not Castagnoli) of magic..end
    magic       int8     0 or 1
    attributes  int8     codec in bits 0-2; magic 1: bit 3 = LogAppendTime
    timestamp   int64    magic 1 only
    key         int32 length (-1 = null) + bytes
    value       int32 length (-1 = null) + bytes

Compression wraps: a *wrapper* message whose value is a compressed message set of inner
messages.  With magic 0 the inner offsets are absolute.  With magic 1 they are relative
(0, 1, 2, ...) and the wrapper carries the absolute offset of the *last* inner message, so
``absolute = wrapper.offset - last_inner.offset + inner.offset``.  A LogAppendTime wrapper's
timestamp overrides its inner messages' timestamps.

Each top-level message decodes to a :class:`LegacyBatch` whose records use the same
:class:`Record` shape as v2 (offset deltas from the first inner offset), so readers treat
old data and new alike.  :func:`legacy_to_batch` turns a whole message set into one v2 batch,
for a broker that accepts produce requests from old clients.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from kraft.records import compression as _compression
from kraft.records.batch import CREATE_TIME, LOG_APPEND_TIME, RecordBatch, read_batch
from kraft.records.errors import InvalidRecordError, TruncatedBatchError, UnsupportedCodecError
from kraft.records.header import (
    MAGIC_OFFSET,
    NO_PARTITION_LEADER_EPOCH,
    CorruptRecordError,
    peek_size,
)
from kraft.records.record import NO_TIMESTAMP, Record
from kraft.records.varint import INT32_MAX

NO_TIMESTAMP_TYPE = -1  # magic 0 messages have no timestamp at all

_HEAD = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_TIMESTAMP_TYPE_BIT = 0x08


@dataclass(frozen=True, slots=True)
class LegacyBatch:
    """One top-level legacy message: a single record, or a compressed wrapper's records.

    ``base_offset`` is the absolute offset of the first record; record offset deltas are
    relative to it.  ``timestamp_type`` is -1 for magic 0.
    """

    magic: int
    base_offset: int
    records: tuple[Record, ...]
    compression: int = _compression.NONE
    timestamp_type: int = NO_TIMESTAMP_TYPE
    size: int = 0  # bytes of the top-level message on the wire

    @property
    def last_offset(self) -> int:
        return self.base_offset + (self.records[-1].offset_delta if self.records else 0)

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    def iter_resolved(self) -> Iterator[tuple[int, int, Record]]:
        """Yield ``(offset, timestamp, record)`` with absolute offsets."""
        for record in self.records:
            yield self.base_offset + record.offset_delta, record.timestamp, record


@dataclass(frozen=True, slots=True)
class _Message:
    offset: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None


def _read_sized(buf, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    if end - pos < 4:
        raise CorruptRecordError(f"legacy message truncated in its {what} length")
    (size,) = _INT32.unpack_from(buf, pos)
    pos += 4
    if size == -1:
        return None, pos
    if size < 0 or pos + size > end:
        raise CorruptRecordError(f"legacy message {what} length {size} is impossible")
    return bytes(buf[pos : pos + size]), pos + size


def _parse_message(buf, pos: int, size: int) -> _Message:
    """Parse and CRC-check the whole message at ``buf[pos:pos+size]``."""
    end = pos + size
    offset, _, crc, magic, attributes = _HEAD.unpack_from(buf, pos)
    if magic not in (0, 1):
        raise CorruptRecordError(f"legacy message with magic {magic}")
    body = pos + MAGIC_OFFSET + 2
    timestamp = NO_TIMESTAMP
    if magic == 1:
        if end - body < 8:
            raise CorruptRecordError("legacy message too short for its timestamp")
        (timestamp,) = _INT64.unpack_from(buf, body)
        body += 8
    actual = zlib.crc32(memoryview(buf)[pos + MAGIC_OFFSET : end])
    if actual != crc:
        raise CorruptRecordError(
            f"legacy message CRC mismatch at offset {offset}: "
            f"stored {crc:#010x}, computed {actual:#010x}"
        )
    key, body = _read_sized(buf, body, end, "key")
    value, body = _read_sized(buf, body, end, "value")
    if body != end:
        raise CorruptRecordError(f"legacy message has {end - body} bytes past its value")
    return _Message(offset, magic, attributes, timestamp, key, value)


def _inner_messages(data: bytes) -> list[_Message]:
    messages = []
    pos = 0
    while pos < len(data):
        size = peek_size(data, pos)
        if size is None or pos + size > len(data):
            raise CorruptRecordError("truncated message inside a compressed wrapper")
        messages.append(_parse_message(data, pos, size))
        pos += size
    return messages


def _decode(buf, pos: int, size: int, max_output_bytes: int) -> LegacyBatch:
    wrapper = _parse_message(buf, pos, size)
    codec = wrapper.attributes & 0x07
    timestamp_type = NO_TIMESTAMP_TYPE
    if wrapper.magic == 1:
        log_append = wrapper.attributes & _TIMESTAMP_TYPE_BIT
        timestamp_type = LOG_APPEND_TIME if log_append else CREATE_TIME
    if codec == _compression.NONE:
        record = Record(0, wrapper.timestamp, wrapper.key, wrapper.value)
        return LegacyBatch(wrapper.magic, wrapper.offset, (record,), codec, timestamp_type, size)
    if codec == _compression.ZSTD:
        # zstd arrived with magic 2 (KIP-110); Kafka refuses it in older formats.
        raise UnsupportedCodecError(f"zstd is not allowed with magic {wrapper.magic}")
    if wrapper.value is None:
        raise CorruptRecordError(f"compressed message at offset {wrapper.offset} has no value")
    data = _compression.decompress(
        codec, wrapper.value, max_output_bytes=max_output_bytes, legacy_lz4=wrapper.magic == 0
    )
    inner = _inner_messages(data)
    if not inner:
        raise CorruptRecordError(f"compressed legacy message at offset {wrapper.offset} is empty")
    if wrapper.magic == 0:
        shift = 0
    else:
        shift = wrapper.offset - inner[-1].offset
    base = inner[0].offset + shift
    records = []
    previous = None
    for message in inner:
        if message.attributes & 0x07:
            raise CorruptRecordError("compressed legacy message nested inside another")
        if previous is not None and message.offset <= previous:
            raise CorruptRecordError("inner legacy offsets are not increasing")
        previous = message.offset
        delta = message.offset + shift - base
        if delta > INT32_MAX:
            raise CorruptRecordError("inner legacy offsets span more than an int32")
        timestamp = message.timestamp if message.magic == 1 else NO_TIMESTAMP
        if timestamp_type == LOG_APPEND_TIME:
            timestamp = wrapper.timestamp
        records.append(Record(delta, timestamp, message.key, message.value))
    return LegacyBatch(wrapper.magic, base, tuple(records), codec, timestamp_type, size)


def read_legacy(
    buf, pos: int = 0, *, max_output_bytes: int = _compression.DEFAULT_MAX_OUTPUT_BYTES
) -> tuple[LegacyBatch, int] | None:
    """Incremental reader: ``None`` when ``buf[pos:]`` does not hold a whole message yet,
    else ``(batch, next_pos)``.

    Raises:
        CorruptRecordError: a whole message with a bad CRC, magic, length or contents.
        CompressionError: a wrapper whose compressed value cannot be decoded.
    """
    size = peek_size(buf, pos)
    if size is None or len(buf) - pos < size:
        return None
    return _decode(buf, pos, size, max_output_bytes), pos + size


def decode_message_set(
    buf,
    pos: int = 0,
    *,
    allow_partial_tail: bool = True,
    max_output_bytes: int = _compression.DEFAULT_MAX_OUTPUT_BYTES,
) -> list[LegacyBatch]:
    """Decode every whole top-level message of a legacy message set.

    Args:
        allow_partial_tail: ignore a partial last message (old brokers end fetch responses
            with one); when False raise TruncatedBatchError.
    """
    batches = []
    while pos < len(buf):
        result = read_legacy(buf, pos, max_output_bytes=max_output_bytes)
        if result is None:
            if allow_partial_tail:
                break
            raise TruncatedBatchError(f"partial legacy message at position {pos}")
        batch, pos = result
        batches.append(batch)
    return batches


def peek_magic(buf, pos: int = 0) -> int | None:
    """The magic byte of the batch or message at ``pos`` (both formats keep it at offset
    16), or None when fewer than 17 bytes are there."""
    if len(buf) - pos <= MAGIC_OFFSET:
        return None
    return buf[pos + MAGIC_OFFSET]


def decode_all(
    buf,
    pos: int = 0,
    *,
    allow_partial_tail: bool = True,
    max_output_bytes: int = _compression.DEFAULT_MAX_OUTPUT_BYTES,
) -> list[RecordBatch | LegacyBatch]:
    """Decode a record set that may mix v2 batches and legacy messages (a log written
    across a message-format upgrade).  Same tail rule as :func:`decode_batches`."""
    out: list[RecordBatch | LegacyBatch] = []
    while pos < len(buf):
        magic = peek_magic(buf, pos)
        if magic == 2:
            result = read_batch(buf, pos, max_output_bytes=max_output_bytes)
        elif magic in (0, 1):
            result = read_legacy(buf, pos, max_output_bytes=max_output_bytes)
        elif magic is None:
            result = None
        else:
            raise CorruptRecordError(f"unknown magic {magic} at position {pos}")
        if result is None:
            if allow_partial_tail:
                break
            raise TruncatedBatchError(f"partial batch at position {pos}")
        item, pos = result
        out.append(item)
    return out


def legacy_to_batch(
    message_set: bytes | Sequence[LegacyBatch],
    *,
    compression: int | None = None,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    max_output_bytes: int = _compression.DEFAULT_MAX_OUTPUT_BYTES,
) -> RecordBatch:
    """One v2 batch holding every record of a legacy message set, offsets preserved.

    Timestamps carry over (magic 0 records get -1).  The batch is LogAppendTime only when
    every message was a LogAppendTime message with one shared time; otherwise CreateTime
    with each record's resolved timestamp, so consumers see the same timestamps as before.

    Args:
        message_set: the raw bytes (must hold only whole messages) or decoded batches.
        compression: codec for the new batch; None keeps the first wrapper's codec.
    Raises:
        InvalidRecordError: an empty message set.
        CorruptRecordError: offsets that do not increase, or undecodable input.
    """
    if isinstance(message_set, (bytes, bytearray, memoryview)):
        message_set = decode_message_set(
            message_set, allow_partial_tail=False, max_output_bytes=max_output_bytes
        )
    resolved = [item for batch in message_set for item in batch.iter_resolved()]
    if not resolved:
        raise InvalidRecordError("legacy message set holds no records")
    base = resolved[0][0]
    records = []
    previous = base - 1
    for offset, timestamp, record in resolved:
        if offset <= previous or offset - base > INT32_MAX:
            raise CorruptRecordError(f"legacy offsets do not increase at offset {offset}")
        previous = offset
        records.append(Record(offset - base, timestamp, record.key, record.value))
    timestamps = {ts for _, ts, _ in resolved}
    append_time = len(timestamps) == 1 and all(
        b.timestamp_type == LOG_APPEND_TIME for b in message_set
    )
    if compression is None:
        compression = next((b.compression for b in message_set if b.compression), _compression.NONE)
    return RecordBatch(
        records=tuple(records),
        base_offset=base,
        partition_leader_epoch=partition_leader_epoch,
        compression=compression,
        timestamp_type=LOG_APPEND_TIME if append_time else CREATE_TIME,
        max_timestamp=timestamps.pop() if append_time else None,
    )
