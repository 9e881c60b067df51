"""The produce checks that must read records: keys on compacted topics, timestamp bounds.

A leader never decodes records on the hot path (DESIGN.md principle 4); these checks run
only for a topic that asks for them.  Kafka refuses a record without a key on a topic whose
``cleanup.policy`` includes ``compact`` (INVALID_RECORD, "Compacted topic cannot accept
message without key": no later record could ever supersede it), and a CreateTime record
whose timestamp lies outside ``message.timestamp.before.max.ms`` before or
``message.timestamp.after.max.ms`` after the leader's clock (INVALID_TIMESTAMP).  Both walk
each record's length prefix and the fields before the key (attributes, timestamp delta,
offset delta, key length), decompressing the records section of a compressed batch first,
and stop at the first record that fails.  They check no more of a record than they read; a
full decode is the consumer's business.
"""

from __future__ import annotations

from collections.abc import Iterator

from kraft.records.compression import DEFAULT_MAX_OUTPUT_BYTES, NONE, decompress
from kraft.records.errors import CorruptRecordError
from kraft.records.header import HEADER_SIZE, BatchHeader, iter_batches
from kraft.records.varint import read_varint, read_varlong

NO_TIMESTAMP = -1


def find_null_key(buf, pos: int = 0, *, max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES) -> int | None:
    """The index of the first record without a key among the records of the whole v2
    batches in ``buf`` (from ``pos``; counting every data record in order, from 0), or None
    when every record has a key.  Control batches are skipped (their records are keyed
    anyway); CRCs are not checked (the caller has validated the payload).

    Raises:
        CorruptRecordError: a record's framing is impossible, or (as its subclasses) the
            compressed records section does not decompress within ``max_output_bytes``.
    """
    for index, _, _, key_length in _records(buf, pos, max_output_bytes, lambda h: True):
        if key_length == -1:
            return index
    return None


def has_null_key(buf, pos: int = 0, *, max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES) -> bool:
    """Whether any record of the whole v2 batches in ``buf`` lacks a key (see
    :func:`find_null_key`)."""
    return find_null_key(buf, pos, max_output_bytes=max_output_bytes) is not None


def find_timestamp_out_of_range(buf, low: int | None, high: int | None, pos: int = 0, *,
                                max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES) -> tuple[int, int] | None:
    """(index, timestamp) of the first record of a CreateTime batch in ``buf`` whose
    timestamp is below ``low`` or above ``high`` (None: no bound; records without a
    timestamp, -1, are not checked), counting data records as :func:`find_null_key` does;
    None when there is none.  With only ``high``, a batch whose maxTimestamp is within it
    is not read; a ``low`` means reading every record (a record's timestamp delta may be
    negative: no header field bounds them from below).

    Raises: as :func:`find_null_key`.
    """
    if low is None and high is None:
        return None
    for index, header, delta, _ in _records(buf, pos, max_output_bytes, lambda h: _may_break(h, low, high)):
        timestamp = header.base_timestamp + delta
        if timestamp == NO_TIMESTAMP:
            continue
        if (low is not None and timestamp < low) or (high is not None and timestamp > high):
            return index, timestamp
    return None


def headers_show_within(headers, low: int | None, high: int | None) -> bool:
    """Whether batch headers alone show every CreateTime record of their batches within
    ``high`` (see :func:`find_timestamp_out_of_range`): true when there is no ``low`` and
    each batch's maxTimestamp is within ``high``, so a leader checks Kafka 4's default
    bound (``message.timestamp.after.max.ms``, one hour) from the headers it already has,
    reading no record of a producer whose clock is right."""
    return not any(_may_break(h, low, high) for h in headers if not h.is_control)


def _may_break(h: BatchHeader, low: int | None, high: int | None) -> bool:
    """Whether a data batch may hold a record outside the bounds: a lower bound needs every
    record read (a record's timestamp delta may be negative), an upper one only a batch whose
    maxTimestamp is past it."""
    if h.timestamp_type:  # LogAppendTime: no producer timestamps to check
        return False
    return low is not None or (high is not None and h.max_timestamp > high)


def _records(buf, pos: int, max_output_bytes: int, wanted) -> Iterator[tuple[int, BatchHeader, int, int]]:
    """(index, batch header, timestamp delta, key length) of each data record of the
    batches ``wanted(header)`` picks; the others are counted, not read."""
    index = 0
    view = memoryview(buf)
    for start, h in iter_batches(buf, pos, check_crc=False):
        if h.is_control:
            continue
        if wanted(h):
            section = view[start + HEADER_SIZE: start + h.size]
            if h.compression != NONE and (len(section) or h.records_count):
                section = decompress(h.compression, section, max_output_bytes=max_output_bytes)
            for i, delta, key_length in _fields(section, h.records_count):
                yield index + i, h, delta, key_length
        index += h.records_count


def _fields(section, count: int) -> Iterator[tuple[int, int, int]]:
    pos, end = 0, len(section)
    for i in range(count):
        if pos >= end:
            raise CorruptRecordError(f"batch declares {count} records, holds {i}")
        length, pos = read_varint(section, pos, end)
        record_end = pos + length
        if length < 6 or record_end > end:  # 6: the smallest possible record body
            raise CorruptRecordError(f"record length {length} is impossible here")
        p = pos + 1  # attributes
        delta, p = read_varlong(section, p, record_end)  # timestamp delta
        _, p = read_varint(section, p, record_end)  # offset delta
        key_length, p = read_varint(section, p, record_end)
        if key_length < -1 or p + key_length > record_end:
            raise CorruptRecordError(f"key length {key_length} is impossible here")
        yield i, delta, key_length
        pos = record_end


__all__ = ["find_null_key", "find_timestamp_out_of_range", "has_null_key", "headers_show_within"]
