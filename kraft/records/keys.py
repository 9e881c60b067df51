"""Record keys without decoding whole records: the produce check of compacted topics.

Kafka refuses a record without a key on a topic whose ``cleanup.policy`` includes
``compact`` (INVALID_RECORD, "Compacted topic cannot accept message without key"): no later
record could ever supersede it.  The broker's hot path never decodes records, so it calls
:func:`find_null_key` only for such topics.  It walks each record's length prefix and the
fields before the key (attributes, timestamp delta, offset delta), decompressing the records
section of a compressed batch first, and stops at the first record whose key length is -1.
It checks no more of a record than it reads; a full decode is the consumer's business.
"""

from __future__ import annotations

from kraft.records.compression import DEFAULT_MAX_OUTPUT_BYTES, NONE, decompress
from kraft.records.errors import CorruptRecordError
from kraft.records.header import HEADER_SIZE, iter_batches
from kraft.records.varint import read_varint, read_varlong


def find_null_key(buf, pos: int = 0, *, max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES) -> int | None:
    """The index of the first record without a key among the records of the whole v2
    batches in ``buf`` (from ``pos``; counting every data record in order, from 0), or None
    when every record has a key.  Control batches are skipped (their records are keyed
    anyway); CRCs are not checked (the caller has validated the payload).

    Raises:
        CorruptRecordError: a record's framing is impossible, or (as its subclasses) the
            compressed records section does not decompress within ``max_output_bytes``.
    """
    index = 0
    view = memoryview(buf)
    for start, h in iter_batches(buf, pos, check_crc=False):
        if h.is_control:
            continue
        section = view[start + HEADER_SIZE: start + h.size]
        if h.compression != NONE and (len(section) or h.records_count):
            section = decompress(h.compression, section, max_output_bytes=max_output_bytes)
        found = _null_key_in_section(section, h.records_count)
        if found is not None:
            return index + found
        index += h.records_count
    return None


def has_null_key(buf, pos: int = 0, *, max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES) -> bool:
    """Whether any record of the whole v2 batches in ``buf`` lacks a key (see
    :func:`find_null_key`)."""
    return find_null_key(buf, pos, max_output_bytes=max_output_bytes) is not None


def _null_key_in_section(section, count: int) -> int | None:
    pos, end = 0, len(section)
    for i in range(count):
        if pos >= end:
            raise CorruptRecordError(f"batch declares {count} records, holds {i}")
        length, pos = read_varint(section, pos, end)
        record_end = pos + length
        if length < 6 or record_end > end:  # 6: the smallest possible record body
            raise CorruptRecordError(f"record length {length} is impossible here")
        p = pos + 1  # attributes
        _, p = read_varlong(section, p, record_end)  # timestamp delta
        _, p = read_varint(section, p, record_end)  # offset delta
        key_length, p = read_varint(section, p, record_end)
        if key_length == -1:
            return i
        if key_length < -1 or p + key_length > record_end:
            raise CorruptRecordError(f"key length {key_length} is impossible here")
        pos = record_end
    return None


__all__ = ["find_null_key", "has_null_key"]
