"""Walking the batches of a segment file: headers only, or whole and CRC-checked.

Reads go through ``os.pread`` in chunks, so a walk costs one system call per chunk (or per
batch when batches are larger than a chunk), never one per field.
"""

from __future__ import annotations

import os

from kraft.records.header import (
    HEADER_SIZE,
    CorruptRecordError,
    parse_header,
    peek_size,
    verify_crc,
)

_HEADER_CHUNK = 16 * 1024  # read size when only headers are wanted
_VERIFY_CHUNK = 1024 * 1024  # read size when whole batches are checked


class TornBatch(CorruptRecordError):
    """The scan met an incomplete or invalid batch at ``position``.  Recovery cuts the log
    there; anywhere else it means a damaged file and surfaces as a CorruptRecordError."""

    def __init__(self, position: int, reason: str):
        super().__init__(f"at position {position}: {reason}")
        self.position = position
        self.reason = reason


def scan_file(fd: int, start: int, end: int, *, check_crc: bool):
    """Yield ``(position, header)`` for each batch in ``[start, end)`` of a file.

    Raises TornBatch at the first batch that is incomplete, structurally invalid, or (with
    ``check_crc``) fails its CRC.  Without ``check_crc`` only headers are read.
    """
    buf = b""
    buf_start = start
    pos = start
    chunk = _VERIFY_CHUNK if check_crc else _HEADER_CHUNK
    while pos < end:
        off = pos - buf_start
        if off + HEADER_SIZE > len(buf):
            buf = os.pread(fd, min(chunk, end - pos), pos)
            buf_start, off = pos, 0
        try:
            size = peek_size(buf, off)
            header = parse_header(buf, off) if size is not None and pos + size <= end else None
            if header is not None and check_crc:
                if off + size > len(buf):
                    buf = os.pread(fd, max(chunk, size), pos)
                    buf_start, off = pos, 0
                verify_crc(buf, off, header)
        except CorruptRecordError as exc:
            raise TornBatch(pos, str(exc)) from None
        if header is None:
            raise TornBatch(pos, "incomplete batch")
        yield pos, header
        pos += size


def iter_buffer(buf, start: int = 0):
    """Yield ``(position, header)`` for whole batches in ``buf`` (trusted data, no CRC)."""
    pos = start
    while True:
        size = peek_size(buf, pos)
        if size is None or pos + size > len(buf):
            return
        yield pos, parse_header(buf, pos)
        pos += size
