"""Zig-zag varints, the integer encoding inside v2 records.

A record batch's header is fixed-width, but every field of a record inside it is a signed
varint (int32) or varlong (int64): zig-zag mapped so small negative numbers stay short
(-1, the "null" length, is one byte), then 7 bits per byte, low group first, high bit set on
every byte but the last.

Decoders raise :class:`CorruptRecordError` on truncation or over-long encodings: records live
inside a batch whose length is already known, so running out of bytes there is corruption,
never "need more data".
"""

from __future__ import annotations

from kraft.records.header import CorruptRecordError

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def zigzag(value: int, bits: int) -> int:
    """Map a signed integer onto an unsigned one: 0, -1, 1, -2, ... -> 0, 1, 2, 3, ..."""
    return (value << 1) ^ (value >> (bits - 1))


def unzigzag(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def _write_unsigned(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def write_varint(out: bytearray, value: int) -> None:
    """Append ``value`` (an int32) as a zig-zag varint.  Raises ValueError out of range."""
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint out of int32 range: {value}")
    _write_unsigned(out, zigzag(value, 32) & 0xFFFFFFFF)


def write_varlong(out: bytearray, value: int) -> None:
    """Append ``value`` (an int64) as a zig-zag varlong.  Raises ValueError out of range."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {value}")
    _write_unsigned(out, zigzag(value, 64) & 0xFFFFFFFFFFFFFFFF)


def varint_size(value: int) -> int:
    """Bytes taken by ``value`` as a zig-zag varint (or varlong)."""
    unsigned = zigzag(value, 64) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while unsigned > 0x7F:
        unsigned >>= 7
        size += 1
    return size


def _read_unsigned(buf, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    result = 0
    shift = 0
    for i in range(max_bytes):
        if pos >= end:
            raise CorruptRecordError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
    raise CorruptRecordError(f"varint longer than {max_bytes} bytes")


def read_varint(buf, pos: int, end: int) -> tuple[int, int]:
    """Read a zig-zag int32 from ``buf[pos:end]``; returns ``(value, next_pos)``."""
    raw, pos = _read_unsigned(buf, pos, end, 5)
    if raw > 0xFFFFFFFF:
        raise CorruptRecordError("varint overflows int32")
    return unzigzag(raw), pos


def read_varlong(buf, pos: int, end: int) -> tuple[int, int]:
    """Read a zig-zag int64 from ``buf[pos:end]``; returns ``(value, next_pos)``."""
    raw, pos = _read_unsigned(buf, pos, end, 10)
    if raw > 0xFFFFFFFFFFFFFFFF:
        raise CorruptRecordError("varlong overflows int64")
    return unzigzag(raw), pos
