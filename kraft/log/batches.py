"""Checking and stamping the batches of an append, before any byte reaches a segment.

An append is rejected whole or written whole: every batch is parsed (and, when asked,
CRC-checked) and every offset decided before the first write, so a bad batch in the middle
of a multi-batch append leaves the log unchanged.
"""

from __future__ import annotations

from typing import NamedTuple

from kraft.log.config import LogConfig
from kraft.log.errors import (
    CorruptRecordError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from kraft.records.header import (
    BatchHeader,
    parse_header,
    peek_size,
    set_base_offset,
    set_partition_leader_epoch,
    verify_crc,
)


class AppendInfo(NamedTuple):
    """What an append wrote: offsets, timestamps, bytes, and each batch's ``(position,
    header)`` as stamped, so a caller (producer state, the leader-epoch cache) reads the
    headers it needs without parsing the bytes again.  A named tuple: one per append."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    batches: tuple[tuple[int, BatchHeader], ...]
    size: int

    @property
    def batch_count(self) -> int:
        return len(self.batches)

    @classmethod
    def of(cls, batches: list[tuple[int, BatchHeader]], size: int) -> AppendInfo:
        max_ts, max_ts_offset = -1, -1
        for _, h in batches:
            if h.max_timestamp > max_ts:
                max_ts, max_ts_offset = h.max_timestamp, h.last_offset
        return cls._make((batches[0][1].base_offset, batches[-1][1].last_offset, max_ts,
                          max_ts_offset, tuple(batches), size))


def parse_append(buf, config: LogConfig, *, check_crc: bool, leader: bool) -> list[tuple[int, BatchHeader]]:
    """``(position, header)`` of each batch in ``buf``, which must be whole batches.

    Raises CorruptRecordError (torn or invalid bytes), RecordTooLargeError (a leader batch
    over ``max.message.bytes``) or RecordBatchTooLargeError (over ``segment.bytes``: one
    append always goes to one segment).
    """
    if not buf:
        raise CorruptRecordError("an append needs at least one batch")
    batches = []
    pos = 0
    while pos < len(buf):
        size = peek_size(buf, pos)
        if size is None or pos + size > len(buf):
            raise CorruptRecordError(f"incomplete batch at byte {pos} of the append")
        h = parse_header(buf, pos)
        if check_crc:
            verify_crc(buf, pos, h)
        if leader and size > config.max_message_bytes:
            raise RecordTooLargeError(
                f"batch of {size} bytes exceeds max.message.bytes={config.max_message_bytes}"
            )
        batches.append((pos, h))
        pos += size
    check_fits_segment(len(buf), config)
    return batches


def check_fits_segment(size: int, config: LogConfig) -> None:
    """One append always goes to one segment: RecordBatchTooLargeError past ``segment.bytes``."""
    if size > config.segment_bytes:
        raise RecordBatchTooLargeError(f"append of {size} bytes exceeds segment.bytes={config.segment_bytes}")


def stamp_batches(buf: bytearray, batches: list[tuple[int, BatchHeader]], log_end_offset: int, *,
                  assign_offsets: bool, leader_epoch: int | None) -> list[tuple[int, BatchHeader]]:
    """Give leader batches consecutive offsets from the log end (patching ``buf``), or check
    that follower offsets increase from it; stamp the leader epoch when given.  Returns the
    headers as they now are."""
    out = []
    next_offset = log_end_offset
    for pos, h in batches:
        if assign_offsets:
            set_base_offset(buf, pos, next_offset)
        elif h.base_offset < next_offset:
            raise UnexpectedAppendOffsetError(h.base_offset, next_offset)
        if leader_epoch is not None:
            set_partition_leader_epoch(buf, pos, leader_epoch)
        if assign_offsets or leader_epoch is not None:
            # Both fields lie outside the CRC-covered bytes: the header is the old one with
            # them replaced, no need to parse the bytes again.
            h = BatchHeader._make((next_offset if assign_offsets else h.base_offset,
                                   h.batch_length,
                                   h.partition_leader_epoch if leader_epoch is None else leader_epoch)
                                  + h[3:])
        out.append((pos, h))
        next_offset = h.next_offset
    return out
