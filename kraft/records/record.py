"""One record, and the records section of a v2 batch.

Inside a batch each record is::

    length          varint   bytes of the rest of this record
    attributes      int8     unused, always 0
    timestampDelta  varlong  relative to the batch's baseTimestamp
    offsetDelta     varint   relative to the batch's baseOffset
    keyLength       varint   -1 = null key
    key             bytes
    valueLength     varint   -1 = null value
    value           bytes
    headerCount     varint
    headers         [keyLength varint, key UTF-8, valueLength varint (-1 = null), value]

A :class:`Record` keeps its offset *relative* to the batch (the leader rewrites the base
offset in place, so a record never knows its absolute offset until it is read back) and its
timestamp *absolute* (deltas are an encoding detail).
"""

from __future__ import annotations

from dataclasses import dataclass

from kraft.records.header import CorruptRecordError
from kraft.records.varint import INT32_MAX, read_varint, read_varlong, write_varint, write_varlong

NO_TIMESTAMP = -1

Header = tuple[str, "bytes | None"]
_BYTES_LIKE = (bytes, bytearray, memoryview)


def _as_bytes(value, what: str) -> bytes | None:
    if value is None or type(value) is bytes:
        return value
    if isinstance(value, _BYTES_LIKE):
        return bytes(value)
    raise TypeError(f"record {what} must be bytes or None, not {type(value).__name__}")


@dataclass(frozen=True, slots=True)
class Record:
    """A record as a producer sends it and a consumer reads it.

    Attributes:
        offset_delta: offset relative to its batch's base offset (0 for the first record).
        timestamp: milliseconds since the epoch, or -1 (NO_TIMESTAMP, legacy magic 0 data).
        key, value: bytes or None.
        headers: ``(name, value)`` pairs; names are str, values bytes or None.
    """

    offset_delta: int = 0
    timestamp: int = NO_TIMESTAMP
    key: bytes | None = None
    value: bytes | None = None
    headers: tuple[Header, ...] = ()

    def __post_init__(self):
        if not 0 <= self.offset_delta <= INT32_MAX:
            raise ValueError(f"offset delta {self.offset_delta} is not a non-negative int32")
        object.__setattr__(self, "key", _as_bytes(self.key, "key"))
        object.__setattr__(self, "value", _as_bytes(self.value, "value"))
        headers = tuple(self.headers)
        for item in headers:
            if len(item) != 2 or not isinstance(item[0], str):
                raise TypeError(f"record header must be a (str, bytes | None) pair, not {item!r}")
        if any(type(v) is not bytes and v is not None for _, v in headers):
            headers = tuple((k, _as_bytes(v, "header value")) for k, v in headers)
        object.__setattr__(self, "headers", headers)


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        write_varint(out, -1)
    else:
        write_varint(out, len(data))
        out += data


def encode_records(records, base_timestamp: int) -> bytearray:
    """The uncompressed records section for ``records``.

    Raises:
        ValueError: when a timestamp delta does not fit a varlong.
    """
    out = bytearray()
    body = bytearray()
    for record in records:
        body.clear()
        body.append(0)  # attributes
        write_varlong(body, record.timestamp - base_timestamp)
        write_varint(body, record.offset_delta)
        _write_bytes(body, record.key)
        _write_bytes(body, record.value)
        write_varint(body, len(record.headers))
        for name, value in record.headers:
            encoded = name.encode("utf-8")
            write_varint(body, len(encoded))
            body += encoded
            _write_bytes(body, value)
        write_varint(out, len(body))
        out += body
    return out


def _read_bytes(buf, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    size, pos = read_varint(buf, pos, end)
    if size == -1:
        return None, pos
    if size < 0:
        raise CorruptRecordError(f"negative {what} length {size}")
    if pos + size > end:
        raise CorruptRecordError(f"{what} of {size} bytes overruns its record")
    return bytes(buf[pos : pos + size]), pos + size


def decode_records(buf, pos: int, end: int, count: int, base_timestamp: int) -> list[Record]:
    """Decode exactly ``count`` records from ``buf[pos:end]``.

    Raises:
        CorruptRecordError: for a truncated or malformed record, fewer records than
            ``count``, or bytes left over after the last one.
    """
    records = []
    for _ in range(count):
        if pos >= end:
            raise CorruptRecordError(f"batch declares {count} records, holds {len(records)}")
        length, pos = read_varint(buf, pos, end)
        record_end = pos + length
        if length < 6 or record_end > end:  # 6: the smallest possible record body
            raise CorruptRecordError(f"record length {length} is impossible here")
        pos += 1  # attributes: no record-level attributes are defined
        timestamp_delta, pos = read_varlong(buf, pos, record_end)
        offset_delta, pos = read_varint(buf, pos, record_end)
        if offset_delta < 0:
            raise CorruptRecordError(f"negative offset delta {offset_delta}")
        key, pos = _read_bytes(buf, pos, record_end, "key")
        value, pos = _read_bytes(buf, pos, record_end, "value")
        header_count, pos = read_varint(buf, pos, record_end)
        if header_count < 0:
            raise CorruptRecordError(f"negative header count {header_count}")
        headers = []
        for _ in range(header_count):
            name, pos = _read_bytes(buf, pos, record_end, "header key")
            if name is None:
                raise CorruptRecordError("null header key")
            try:
                text = name.decode("utf-8")
            except UnicodeDecodeError:
                raise CorruptRecordError("header key is not UTF-8") from None
            header_value, pos = _read_bytes(buf, pos, record_end, "header value")
            headers.append((text, header_value))
        if pos != record_end:
            raise CorruptRecordError(f"record has {record_end - pos} bytes past its headers")
        records.append(
            Record(offset_delta, base_timestamp + timestamp_delta, key, value, tuple(headers))
        )
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left after the batch's {count} records")
    return records
