"""Kafka's primitive wire types: fixed-width integers, varints, strings, bytes, UUIDs.

A ``Reader`` walks a buffer and raises ``MalformedMessage`` for anything it cannot read —
truncation, impossible lengths, bad UTF-8, an over-long varint — so decoders built on it
never leak IndexError or struct.error.  Writers append to a ``bytearray``.
"""

from __future__ import annotations

import struct
import uuid

from kraft.protocol.errors import MalformedMessage

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")

ZERO_UUID = uuid.UUID(int=0)


class Reader:
    """A cursor over a bytes-like buffer."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf, pos: int = 0, end: int | None = None):
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def _need(self, n: int) -> int:
        pos = self.pos
        if n < 0 or pos + n > self.end:
            raise MalformedMessage(f"need {n} bytes at position {pos}, only {self.end - pos} left")
        self.pos = pos + n
        return pos

    def _fixed(self, s: struct.Struct):
        return s.unpack_from(self.buf, self._need(s.size))[0]

    def int8(self) -> int:
        return self._fixed(_I8)

    def int16(self) -> int:
        return self._fixed(_I16)

    def uint16(self) -> int:
        return self._fixed(_U16)

    def int32(self) -> int:
        return self._fixed(_I32)

    def uint32(self) -> int:
        return self._fixed(_U32)

    def int64(self) -> int:
        return self._fixed(_I64)

    def float64(self) -> float:
        return self._fixed(_F64)

    def bool(self) -> bool:
        return self._fixed(_I8) != 0

    def uuid(self) -> uuid.UUID:
        pos = self._need(16)
        return uuid.UUID(bytes=bytes(self.buf[pos : pos + 16]))

    def uvarint(self) -> int:
        """Unsigned LEB128, at most 5 bytes (a 32-bit value), as Kafka's ByteUtils."""
        result = 0
        shift = 0
        buf = self.buf
        while True:
            if self.pos >= self.end:
                raise MalformedMessage("truncated varint")
            b = buf[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 28:
                raise MalformedMessage("varint is longer than 5 bytes")

    def raw(self, n: int) -> bytes:
        pos = self._need(n)
        return bytes(self.buf[pos : pos + n])

    def skip(self, n: int) -> None:
        self._need(n)

    def _text(self, n: int) -> str:
        pos = self._need(n)
        try:
            return str(self.buf[pos : pos + n], "utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedMessage(f"string is not UTF-8: {exc}") from None

    # -- length-prefixed forms.  ``compact`` = uvarint(N+1), 0 meaning null.

    def _length(self, compact: bool, wide: bool) -> int:
        if compact:
            return self.uvarint() - 1
        return self.int32() if wide else self.int16()

    def string(self, compact: bool, nullable: bool) -> str | None:
        n = self._length(compact, False)
        if n < 0:
            if n == -1 and nullable:
                return None
            raise MalformedMessage(f"invalid string length {n}")
        return self._text(n)

    def bytes_(self, compact: bool, nullable: bool) -> bytes | None:
        n = self._length(compact, True)
        if n < 0:
            if n == -1 and nullable:
                return None
            raise MalformedMessage(f"invalid bytes length {n}")
        return self.raw(n)

    def array_length(self, compact: bool, nullable: bool) -> int | None:
        n = self._length(compact, True)
        if n < 0:
            if n == -1 and nullable:
                return None
            raise MalformedMessage(f"invalid array length {n}")
        # Each element takes at least one byte; a larger count is a lie that would make us
        # allocate or loop far past the data.
        if n > self.remaining:
            raise MalformedMessage(f"array length {n} exceeds the {self.remaining} bytes left")
        return n


# -- writers: each appends to ``out`` -------------------------------------------------------


def write_uvarint(out: bytearray, value: int) -> None:
    if value < 0:
        raise ValueError(f"uvarint cannot encode {value}")
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def write_int8(out: bytearray, v: int) -> None:
    out += _I8.pack(v)


def write_int16(out: bytearray, v: int) -> None:
    out += _I16.pack(v)


def write_uint16(out: bytearray, v: int) -> None:
    out += _U16.pack(v)


def write_int32(out: bytearray, v: int) -> None:
    out += _I32.pack(v)


def write_uint32(out: bytearray, v: int) -> None:
    out += _U32.pack(v)


def write_int64(out: bytearray, v: int) -> None:
    out += _I64.pack(v)


def write_float64(out: bytearray, v: float) -> None:
    out += _F64.pack(v)


def write_bool(out: bytearray, v: bool) -> None:
    out.append(1 if v else 0)


def write_uuid(out: bytearray, v: uuid.UUID) -> None:
    out += v.bytes


def write_length(out: bytearray, n: int | None, compact: bool, wide: bool) -> None:
    """A length prefix; ``None`` writes the null marker."""
    if compact:
        write_uvarint(out, 0 if n is None else n + 1)
    elif wide:
        out += _I32.pack(-1 if n is None else n)
    else:
        out += _I16.pack(-1 if n is None else n)


def write_string(out: bytearray, v: str | None, compact: bool) -> None:
    if v is None:
        write_length(out, None, compact, False)
        return
    data = v.encode("utf-8")
    if not compact and len(data) > 0x7FFF:
        raise ValueError(f"string of {len(data)} bytes exceeds int16 length")
    write_length(out, len(data), compact, False)
    out += data


def write_bytes(out: bytearray, v, compact: bool) -> None:
    if v is None:
        write_length(out, None, compact, True)
        return
    write_length(out, len(v), compact, True)
    out += v


class SplicedRecords:
    """Record bytes that are not in memory (a slice of a segment file): the encoder writes
    their length and leaves a hole for them, which the sender fills (``sendfile``).
    ``size`` is the exact number of bytes the hole stands for."""

    __slots__ = ("size",)

    def __init__(self, size: int):
        self.size = size

    def __len__(self) -> int:
        return self.size


class SplicingBuffer(bytearray):
    """An output buffer that may hold holes: ``holes`` lists (offset in the buffer,
    ``SplicedRecords``), in order.  Only records may be holes."""

    def __init__(self):
        super().__init__()
        self.holes: list[tuple[int, SplicedRecords]] = []


def write_records(out: bytearray, v, compact: bool) -> None:
    if not isinstance(v, SplicedRecords):
        write_bytes(out, v, compact)
        return
    if not isinstance(out, SplicingBuffer):  # e.g. a tagged field's own buffer
        raise TypeError("spliced records can only be written into a SplicingBuffer")
    write_length(out, v.size, compact, True)
    out.holes.append((len(out), v))
