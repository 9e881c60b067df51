"""Record batches (magic 2): a decoded view, its encoder, and a builder for producers.

The fixed header is parsed by :mod:`kraft.records.header`; this module adds the records
section (compressed as one stream when the batch has a codec).  The broker's hot path never
comes here: it validates and patches headers in place (:mod:`kraft.records.payload`).
Clients, tests, the log's compaction and the metadata layer decode whole batches.

Three ways to read, for three kinds of caller:

* :meth:`RecordBatch.decode` wants exactly one whole batch and raises
  :class:`TruncatedBatchError` when the input stops short (bytes after it are ignored);
* :func:`read_batch` returns ``None`` when more bytes are needed, else the batch and where
  the next one starts (an incremental reader in the sans-IO style);
* :func:`decode_batches` reads all whole batches, optionally tolerating a partial tail as a
  fetch response may legitimately end with one.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from kraft.records import compression as _compression
from kraft.records.errors import TruncatedBatchError
from kraft.records.header import (
    CONTROL_FLAG,
    CRC_OFFSET,
    DELETE_HORIZON_FLAG,
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG,
    compute_crc,
    parse_header,
    peek_size,
    verify_crc,
)
from kraft.records.record import NO_TIMESTAMP, Record, decode_records, encode_records

CREATE_TIME = 0
LOG_APPEND_TIME = 1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_UINT32 = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class RecordBatch:
    """A decoded v2 record batch: every header field plus its records.

    ``last_offset_delta``, ``base_timestamp`` and ``max_timestamp`` default to values derived
    from the records (last record's offset delta, first record's timestamp, greatest record
    timestamp) but are kept as given, so a decoded batch re-encodes byte for byte.  For a
    LogAppendTime batch ``max_timestamp`` is the append time and is required.
    """

    records: tuple[Record, ...] = ()
    base_offset: int = 0
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH
    compression: int = _compression.NONE
    timestamp_type: int = CREATE_TIME
    is_transactional: bool = False
    is_control: bool = False
    has_delete_horizon: bool = False
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    base_sequence: int = NO_SEQUENCE
    last_offset_delta: int | None = None
    base_timestamp: int | None = None
    max_timestamp: int | None = None

    def __post_init__(self):
        records = tuple(self.records)
        if not all(type(r) is Record for r in records):
            raise TypeError("RecordBatch.records must hold Record instances")
        object.__setattr__(self, "records", records)
        object.__setattr__(self, "compression", _compression.codec_of(self.compression))
        if self.timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise ValueError(f"timestamp type {self.timestamp_type} is neither 0 nor 1")
        if self.last_offset_delta is None:
            last_delta = records[-1].offset_delta if records else 0
            object.__setattr__(self, "last_offset_delta", last_delta)
        if self.base_timestamp is None:
            first_timestamp = records[0].timestamp if records else NO_TIMESTAMP
            object.__setattr__(self, "base_timestamp", first_timestamp)
        if self.max_timestamp is None:
            if self.timestamp_type == LOG_APPEND_TIME:
                raise ValueError("a LogAppendTime batch needs max_timestamp (the append time)")
            latest = max((r.timestamp for r in records), default=NO_TIMESTAMP)
            object.__setattr__(self, "max_timestamp", latest)

    # -- derived header fields, named as in BatchHeader

    magic = 2

    @property
    def attributes(self) -> int:
        return (
            self.compression
            | (TIMESTAMP_TYPE_MASK if self.timestamp_type == LOG_APPEND_TIME else 0)
            | (TRANSACTIONAL_FLAG if self.is_transactional else 0)
            | (CONTROL_FLAG if self.is_control else 0)
            | (DELETE_HORIZON_FLAG if self.has_delete_horizon else 0)
        )

    @property
    def records_count(self) -> int:
        return len(self.records)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    def iter_resolved(self) -> Iterator[tuple[int, int, Record]]:
        """Yield ``(offset, timestamp, record)`` as a consumer sees them: absolute offsets,
        and in a LogAppendTime batch the batch's append time instead of each create time."""
        append_time = self.max_timestamp if self.timestamp_type == LOG_APPEND_TIME else None
        for record in self.records:
            ts = record.timestamp if append_time is None else append_time
            yield self.base_offset + record.offset_delta, ts, record

    # -- wire format

    def encode(self, *, compression_level: int | None = None) -> bytes:
        """The batch on the wire, CRC included.

        Raises:
            ValueError: for a field out of its wire range.
        """
        body = encode_records(self.records, self.base_timestamp)
        if self.compression != _compression.NONE:
            body = _compression.compress(self.compression, body, level=compression_level)
        out = bytearray(HEADER_SIZE)
        try:
            _HEADER.pack_into(
                out, 0, self.base_offset, HEADER_SIZE - LOG_OVERHEAD + len(body),
                self.partition_leader_epoch, 2, 0, self.attributes, self.last_offset_delta,
                self.base_timestamp, self.max_timestamp, self.producer_id, self.producer_epoch,
                self.base_sequence, len(self.records),
            )
        except struct.error as e:
            raise ValueError(f"batch header field out of range: {e}") from None
        out += body
        _UINT32.pack_into(out, CRC_OFFSET, compute_crc(out, 0, len(out)))
        return bytes(out)

    @classmethod
    def decode(
        cls,
        buf,
        pos: int = 0,
        *,
        check_crc: bool = True,
        max_output_bytes: int = _compression.DEFAULT_MAX_OUTPUT_BYTES,
    ) -> RecordBatch:
        """Decode the one batch at ``buf[pos:]``; bytes after it are ignored.

        Args:
            max_output_bytes: bound on the decompressed records section.
        Raises:
            TruncatedBatchError: ``buf`` ends before the batch does.
            CorruptRecordError: a bad magic, length, CRC, record or compressed stream.
        """
        size = peek_size(buf, pos)
        if size is None or len(buf) - pos < size:
            raise TruncatedBatchError(
                f"record batch truncated: have {len(buf) - pos} bytes, need {size or 'more'}"
            )
        header = parse_header(buf, pos)
        if check_crc:
            verify_crc(buf, pos, header)
        section = memoryview(buf)[pos + HEADER_SIZE : pos + header.size]
        codec = header.compression
        if codec != _compression.NONE and (len(section) or header.records_count):
            # A compacted batch may keep its codec bit with no records and no payload.
            section = _compression.decompress(codec, section, max_output_bytes=max_output_bytes)
        records = decode_records(
            section, 0, len(section), header.records_count, header.base_timestamp
        )
        return cls(
            records=tuple(records),
            base_offset=header.base_offset,
            partition_leader_epoch=header.partition_leader_epoch,
            compression=codec,
            timestamp_type=header.timestamp_type,
            is_transactional=header.is_transactional,
            is_control=header.is_control,
            has_delete_horizon=bool(header.attributes & DELETE_HORIZON_FLAG),
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            last_offset_delta=header.last_offset_delta,
            base_timestamp=header.base_timestamp,
            max_timestamp=header.max_timestamp,
        )


def read_batch(buf, pos: int = 0, **options) -> tuple[RecordBatch, int] | None:
    """Incremental reader: ``None`` if ``buf[pos:]`` does not yet hold a whole batch, else
    ``(batch, next_pos)``.  Options are those of :meth:`RecordBatch.decode`.

    Raises:
        CorruptRecordError: the batch is whole but invalid (or its length field impossible).
    """
    size = peek_size(buf, pos)
    if size is None or len(buf) - pos < size:
        return None
    return RecordBatch.decode(buf, pos, **options), pos + size


def decode_batches(
    buf, pos: int = 0, *, allow_partial_tail: bool = True, **options
) -> list[RecordBatch]:
    """Decode every whole batch in ``buf`` from ``pos``.

    Args:
        allow_partial_tail: ignore an incomplete last batch (a fetch response may end with
            one); when False it raises TruncatedBatchError.
        options: as for :meth:`RecordBatch.decode`.
    """
    batches = []
    while pos < len(buf):
        result = read_batch(buf, pos, **options)
        if result is None:
            if allow_partial_tail:
                break
            raise TruncatedBatchError(f"partial record batch at position {pos}")
        batch, pos = result
        batches.append(batch)
    return batches


def _as_record(item, index: int, timestamp: int) -> Record:
    if isinstance(item, Record):
        return item
    if isinstance(item, tuple) and len(item) in (2, 3):
        return Record(index, timestamp, *item)
    raise TypeError(f"expected a Record or a (key, value[, headers]) tuple, got {item!r}")


def make_batch(
    records: Iterable[Record | tuple],
    *,
    base_offset: int = 0,
    compression: int = _compression.NONE,
    timestamp: int = NO_TIMESTAMP,
    timestamp_type: int = CREATE_TIME,
    log_append_time: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    renumber: bool = True,
) -> RecordBatch:
    """Assemble a batch the way a producer does.

    Args:
        records: Record instances, or ``(key, value)`` / ``(key, value, headers)`` tuples
            (which get ``timestamp``).
        renumber: give the records offset deltas 0, 1, 2, ... (as producers must); pass
            False to keep the deltas of Record instances (compacted data has gaps).
        log_append_time: with ``timestamp_type=LOG_APPEND_TIME``, the append time.
    Raises:
        ValueError, TypeError: for an inconsistent request (e.g. a transactional batch
            without a producer id).
    """
    items = [_as_record(item, i, timestamp) for i, item in enumerate(records)]
    if renumber:
        items = [
            r if r.offset_delta == i else Record(i, r.timestamp, r.key, r.value, r.headers)
            for i, r in enumerate(items)
        ]
    if transactional and producer_id < 0:
        raise ValueError("a transactional batch needs a producer id")
    return RecordBatch(
        records=tuple(items),
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        compression=compression,
        timestamp_type=timestamp_type,
        is_transactional=transactional,
        is_control=control,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        max_timestamp=log_append_time if timestamp_type == LOG_APPEND_TIME else None,
    )


def build_batch(
    records: Iterable[Record | tuple], *, compression_level: int | None = None, **options
) -> bytes:
    """:func:`make_batch` then encode: the bytes of one batch, ready to produce or append.

    >>> data = build_batch([(b"k", b"v")], timestamp=1700000000000, compression=1)
    """
    return make_batch(records, **options).encode(compression_level=compression_level)

