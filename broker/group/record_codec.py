"""The primitives of ``__consumer_offsets`` and ``__transaction_state`` records: Kafka's
non-flexible struct encoding (int16-length strings, int32-length bytes and arrays) and the
flexible one (compact lengths, tagged-field sections), which later value versions use."""

from __future__ import annotations

import struct


class RecordFormatError(ValueError):
    """A ``__consumer_offsets`` record that does not parse."""


# ------------------------------------------------------------------ primitives


class _Writer:
    def __init__(self, flexible: bool = False):
        self.out = bytearray()
        self.flexible = flexible

    def fixed(self, fmt: str, v: int) -> None:
        self.out += struct.pack(">" + fmt, v)

    def _uvarint(self, n: int) -> None:
        while n >= 0x80:
            self.out.append((n & 0x7F) | 0x80)
            n >>= 7
        self.out.append(n)

    def _length(self, n: int | None, int16: bool) -> None:
        if self.flexible:
            self._uvarint(0 if n is None else n + 1)
        else:
            self.fixed("h" if int16 else "i", -1 if n is None else n)

    def string(self, s: str | None) -> None:
        data = None if s is None else s.encode()
        self._length(None if data is None else len(data), True)
        if data is not None:
            self.out += data

    def bytes_(self, b: bytes | None) -> None:
        self._length(None if b is None else len(b), False)
        if b is not None:
            self.out += b

    def array_len(self, n: int) -> None:
        self._length(n, False)

    def tags(self, fields: dict[int, bytes] | None = None) -> None:
        """The tagged-field section: ``fields`` (tag -> its encoded value), by tag."""
        if self.flexible:
            fields = fields or {}
            self._uvarint(len(fields))
            for tag in sorted(fields):
                self._uvarint(tag)
                self._uvarint(len(fields[tag]))
                self.out += fields[tag]


class _Reader:
    def __init__(self, buf: bytes, pos: int = 0, flexible: bool = False):
        self.buf = bytes(buf)
        self.pos = pos
        self.flexible = flexible

    def fixed(self, fmt: str) -> int:
        size = struct.calcsize(">" + fmt)
        if self.pos + size > len(self.buf):
            raise RecordFormatError("record truncated")
        (v,) = struct.unpack_from(">" + fmt, self.buf, self.pos)
        self.pos += size
        return v

    def _uvarint(self) -> int:
        shift = n = 0
        while True:
            if self.pos >= len(self.buf) or shift > 28:
                raise RecordFormatError("bad varint")
            b = self.buf[self.pos]
            self.pos += 1
            n |= (b & 0x7F) << shift
            if b < 0x80:
                return n
            shift += 7

    def _length(self, int16: bool) -> int | None:
        n = self._uvarint() - 1 if self.flexible else self.fixed("h" if int16 else "i")
        return None if n < 0 else n

    def _take(self, n: int) -> bytes:
        if self.pos + n > len(self.buf):
            raise RecordFormatError("record truncated")
        data = self.buf[self.pos:self.pos + n]
        self.pos += n
        return data

    def string(self, nullable: bool = False) -> str | None:
        n = self._length(True)
        if n is None:
            if not nullable:
                raise RecordFormatError("null in a non-nullable string")
            return None
        try:
            return self._take(n).decode()
        except UnicodeDecodeError as exc:
            raise RecordFormatError(str(exc)) from None

    def bytes_(self) -> bytes:
        n = self._length(False)
        return b"" if n is None else self._take(n)

    def array_len(self) -> int:
        n = self._length(False)
        return 0 if n is None else n

    def tags(self) -> dict[int, bytes]:
        """The tagged-field section: tag -> its encoded value (those a reader does not know
        are skipped by leaving them unread)."""
        fields = {}
        if self.flexible:
            for _ in range(self._uvarint()):
                tag = self._uvarint()
                fields[tag] = self._take(self._uvarint())
        return fields

    def end(self) -> None:
        if self.pos != len(self.buf):
            raise RecordFormatError(f"{len(self.buf) - self.pos} trailing bytes")
