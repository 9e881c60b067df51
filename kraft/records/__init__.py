"""Kafka record batches, sans-IO: v2 encode/decode, legacy v0/v1 reading, compression, and
the broker's header-only hot path.

Modules: ``header`` (the fixed v2 header, patched in place), ``payload`` (validate and
assign offsets to a produce payload), ``record`` and ``batch`` (decoded records and
batches, builders), ``control`` (transaction markers, KRaft control records), ``legacy``
(magic 0/1 message sets), ``compression`` (gzip, snappy, lz4, zstd), ``varint``,
``record_checks`` (a record without a key, a timestamp out of bounds: the produce checks a
topic's config asks for).
"""

from kraft.records.batch import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    RecordBatch,
    build_batch,
    decode_batches,
    make_batch,
    read_batch,
)
from kraft.records.compression import (
    DEFAULT_MAX_OUTPUT_BYTES,
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    Codec,
    codec_from_name,
    compress,
    decompress,
)
from kraft.records.control import (
    ControlKey,
    ControlType,
    EndTxnMarker,
    control_records,
    decode_control_key,
    encode_control_key,
    make_control_batch,
    make_end_txn_batch,
)
from kraft.records.errors import (
    CompressionError,
    CorruptRecordError,
    DecompressionLimitError,
    InvalidRecordError,
    TruncatedBatchError,
    UnsupportedCodecError,
)
from kraft.records.header import BatchHeader, iter_batches, parse_header, peek_size, verify_crc
from kraft.records.record_checks import find_null_key, find_timestamp_out_of_range, has_null_key, headers_show_within
from kraft.records.legacy import (
    LegacyBatch,
    decode_all,
    decode_message_set,
    legacy_to_batch,
    peek_magic,
    read_legacy,
)
from kraft.records.payload import (
    PayloadSummary,
    assign_offsets,
    count_records,
    recompress,
    set_log_append_time,
    validate_payload,
)
from kraft.records.record import NO_TIMESTAMP, Record

__all__ = [
    "CREATE_TIME", "LOG_APPEND_TIME", "NO_TIMESTAMP", "DEFAULT_MAX_OUTPUT_BYTES",
    "NONE", "GZIP", "SNAPPY", "LZ4", "ZSTD", "Codec", "codec_from_name", "compress", "decompress",
    "Record", "RecordBatch", "make_batch", "build_batch", "read_batch", "decode_batches",
    "ControlType", "ControlKey", "EndTxnMarker", "encode_control_key", "decode_control_key",
    "control_records", "make_control_batch", "make_end_txn_batch",
    "LegacyBatch", "read_legacy", "decode_message_set", "decode_all", "peek_magic",
    "legacy_to_batch",
    "BatchHeader", "parse_header", "peek_size", "verify_crc", "iter_batches",
    "find_null_key", "find_timestamp_out_of_range", "has_null_key", "headers_show_within",
    "PayloadSummary", "validate_payload", "count_records", "assign_offsets", "recompress",
    "set_log_append_time",
    "CorruptRecordError", "TruncatedBatchError", "InvalidRecordError", "CompressionError",
    "UnsupportedCodecError", "DecompressionLimitError",
]
