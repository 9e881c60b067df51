"""The fixed 61-byte header of a record batch (magic 2), read and patched in place.

This is the broker's hot-path view of data: it validates a batch by its header and CRC and
rewrites the base offset and partition leader epoch without decoding any record.  Those two
fields sit before the CRC-covered region (attributes..end), so patching them keeps the CRC
valid.

Layout (big-endian), offsets from the start of the batch::

    0  baseOffset            int64      <- patched by the leader on append
    8  batchLength           int32      bytes after this field
    12 partitionLeaderEpoch  int32      <- patched by the leader on append
    16 magic                 int8       2 (0 and 1 are legacy message sets)
    17 crc                   uint32     CRC-32C of bytes [21, end)
    21 attributes            int16
    23 lastOffsetDelta       int32
    27 baseTimestamp         int64
    35 maxTimestamp          int64
    43 producerId            int64
    51 producerEpoch         int16
    53 baseSequence          int32
    57 recordsCount          int32
    61 records...
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import crc32c as _crc32c

HEADER_SIZE = 61
# baseOffset + batchLength: the part of every batch (and legacy message) outside its length.
LOG_OVERHEAD = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
PARTITION_LEADER_EPOCH_OFFSET = 12

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40

_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")


class CorruptRecordError(ValueError):
    """A batch failed validation (bad length, magic or CRC).  Maps to CORRUPT_MESSAGE (2)."""


class BatchHeader(NamedTuple):
    """The header's fields, in their order in the bytes.  A named tuple, not a dataclass:
    two are built per produced batch (parsed, then stamped), and a frozen dataclass's
    construction costs eight times a tuple's."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch, including baseOffset and batchLength."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def parse_header(buf, pos: int = 0) -> BatchHeader:
    """Parse the v2 header at ``buf[pos:]``.  Checks magic and length, not the CRC."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(f"batch header needs {HEADER_SIZE} bytes, have {len(buf) - pos}")
    fields = _HEADER.unpack_from(buf, pos)
    header = BatchHeader._make(fields)
    if header.magic != 2:
        raise CorruptRecordError(f"unsupported magic {header.magic} (expected 2)")
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(f"batch length {header.batch_length} shorter than its header")
    if header.last_offset_delta < 0 or header.records_count < 0:
        raise CorruptRecordError("negative lastOffsetDelta or record count")
    return header


def peek_size(buf, pos: int = 0) -> int | None:
    """Total size of the batch (or legacy message) at ``pos``, or None when fewer than 12
    bytes are there.  Raises CorruptRecordError for a length that cannot be valid."""
    if len(buf) - pos < LOG_OVERHEAD:
        return None
    _, length = _OFFSET_AND_LENGTH.unpack_from(buf, pos)
    if length < 14:  # the smallest legacy message (magic 0, null key and value)
        raise CorruptRecordError(f"batch length {length} is impossible")
    return length + LOG_OVERHEAD


def compute_crc(buf, pos: int, size: int) -> int:
    """CRC-32C over attributes..end of the batch at ``buf[pos:pos+size]``."""
    return _crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])


def verify_crc(buf, pos: int, header: BatchHeader) -> None:
    if len(buf) - pos < header.size:
        raise CorruptRecordError("batch is truncated")
    actual = compute_crc(buf, pos, header.size)
    if actual != header.crc:
        raise CorruptRecordError(
            f"CRC mismatch at base offset {header.base_offset}: stored {header.crc:#010x}, "
            f"computed {actual:#010x}"
        )


def iter_batches(buf, pos: int = 0, *, check_crc: bool = True):
    """Yield ``(position, header)`` for each whole v2 batch in ``buf`` from ``pos``.

    Stops quietly at an incomplete tail (a fetch response may end with a partial batch);
    raises CorruptRecordError for a batch that is whole but invalid.
    """
    end = len(buf)
    while pos < end:
        size = peek_size(buf, pos)
        if size is None or pos + size > end:
            return
        header = parse_header(buf, pos)
        if check_crc:
            verify_crc(buf, pos, header)
        yield pos, header
        pos += size


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Rewrite the base offset in place; outside the CRC-covered region."""
    _INT64.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Rewrite the partition leader epoch in place; outside the CRC-covered region."""
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)
