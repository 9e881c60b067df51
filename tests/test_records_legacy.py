"""kraft.records.legacy: magic 0/1 message sets decode into the v2 Record shape, including
compressed wrappers with relative offsets, and convert into equivalent v2 batches.

The messages here come from a small encoder written from the format description, so each
edge case can be built exactly; test_records_interop.py checks against kafka-python's."""

import struct
import zlib

import pytest

from kraft.records import (
    CREATE_TIME,
    GZIP,
    LOG_APPEND_TIME,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    CorruptRecordError,
    InvalidRecordError,
    LegacyBatch,
    Record,
    RecordBatch,
    TruncatedBatchError,
    UnsupportedCodecError,
    build_batch,
    compress,
    decode_all,
    decode_message_set,
    legacy_to_batch,
    peek_magic,
    read_legacy,
)
from kraft.records.compression import xxh32


def sized(data):
    return struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data


def message(offset, key, value, *, magic=1, attributes=0, timestamp=0):
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    body += sized(key) + sized(value)
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


def old_kafka_lz4(data):
    """An LZ4 frame with the header checksum pre-KIP-57 Kafka wrote (hashed from the magic)."""
    frame = compress(LZ4, data)
    return frame[:6] + bytes([(xxh32(frame[:6]) >> 8) & 0xFF]) + frame[7:]


def wrapper(inner, codec, *, magic=1, offset=0, timestamp=0, log_append=False):
    payload = b"".join(inner)
    value = old_kafka_lz4(payload) if codec == LZ4 and magic == 0 else compress(codec, payload)
    attributes = codec | (0x08 if log_append else 0)
    return message(offset, None, value, magic=magic, attributes=attributes, timestamp=timestamp)


def flat(batches):
    return [(o, ts, r.key, r.value) for b in batches for o, ts, r in b.iter_resolved()]


# ------------------------------------------------------------------------------ decoding

def test_uncompressed_magic_0_and_1():
    data = message(5, b"k", b"v", magic=0) + message(6, None, None, magic=1, timestamp=77) + message(
        9, b"", b"x", magic=1, attributes=0x08, timestamp=88
    )
    batches = decode_message_set(data)
    assert flat(batches) == [(5, -1, b"k", b"v"), (6, 77, None, None), (9, 88, b"", b"x")]
    assert [(b.magic, b.timestamp_type, b.compression) for b in batches] == [
        (0, -1, NONE), (1, CREATE_TIME, NONE), (1, LOG_APPEND_TIME, NONE)]
    assert [b.size for b in batches] == [len(message(5, b"k", b"v", magic=0)), 34, 35]


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4])
def test_compressed_magic_1_uses_relative_offsets(codec):
    inner = [message(i, b"k%d" % i, b"v%d" % i, timestamp=1000 + i) for i in range(3)]
    # The wrapper carries the absolute offset of the last inner message.
    batch, end = read_legacy(wrapper(inner, codec, offset=102))
    assert flat([batch]) == [
        (100, 1000, b"k0", b"v0"), (101, 1001, b"k1", b"v1"), (102, 1002, b"k2", b"v2")]
    assert (batch.base_offset, batch.last_offset, batch.next_offset) == (100, 102, 103)
    assert batch.compression == codec and end == batch.size


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4])
def test_compressed_magic_0_uses_absolute_offsets_and_old_lz4_checksums(codec):
    inner = [message(50 + i, None, b"v%d" % i, magic=0) for i in range(3)]
    (batch,) = decode_message_set(wrapper(inner, codec, magic=0, offset=52))
    assert flat([batch]) == [(50, -1, None, b"v0"), (51, -1, None, b"v1"), (52, -1, None, b"v2")]


def test_log_append_time_wrapper_overrides_inner_timestamps():
    inner = [message(i, None, b"v", timestamp=1 + i) for i in range(2)]
    (batch,) = decode_message_set(wrapper(inner, GZIP, offset=11, timestamp=5000, log_append=True))
    assert batch.timestamp_type == LOG_APPEND_TIME
    assert [ts for _, ts, _ in batch.iter_resolved()] == [5000, 5000]


def test_compacted_wrapper_keeps_offset_gaps():
    inner = [message(0, b"a", b"1"), message(3, b"b", b"2"), message(7, b"c", b"3")]
    (batch,) = decode_message_set(wrapper(inner, SNAPPY, offset=17))
    assert [o for o, _, _ in batch.iter_resolved()] == [10, 13, 17]
    assert [r.offset_delta for r in batch.records] == [0, 3, 7]


def test_every_prefix_is_incomplete_and_trailing_data_is_left_alone():
    data = message(0, b"k", b"v", magic=0) + wrapper([message(0, None, b"x")], GZIP, offset=1)
    first = len(message(0, b"k", b"v", magic=0))
    for n in range(len(data)):
        expected = 1 if n >= first else 0
        assert len(decode_message_set(data[:n])) == expected
        if n < first:
            assert read_legacy(data[:n]) is None
        if n not in (0, first):
            with pytest.raises(TruncatedBatchError):
                decode_message_set(data[:n], allow_partial_tail=False)
    assert len(decode_message_set(data + b"\x00\x01\x02")) == 2
    batch, end = read_legacy(data + b"trailing", first)
    assert end == len(data) and batch.records[0].value == b"x"


# ---------------------------------------------------------------------------- corruption

@pytest.mark.parametrize("magic", [0, 1])
def test_every_flipped_bit_is_detected_by_the_crc(magic):
    data = message(3, b"key", b"value", magic=magic, timestamp=9)
    for pos in range(12, len(data)):  # crc, magic, attributes, timestamp, key, value
        for bit in range(8):
            bad = bytearray(data)
            bad[pos] ^= 1 << bit
            with pytest.raises(CorruptRecordError):
                decode_message_set(bad)


KV = message(0, b"k", b"v")  # key length at 26..30


def _recrc(data: bytes) -> bytes:
    body = data[16:]
    return data[:12] + struct.pack(">I", zlib.crc32(body)) + body


@pytest.mark.parametrize(
    "data, match",
    [
        (message(0, None, b"v", magic=2), "magic 2"),
        (_recrc(message(0, b"k", b"v")[:-5] + b"\xff\xff\xff\xfe" + b"v"), "value length"),
        (_recrc(KV[:26] + b"\xff\xff\xff\x00" + KV[30:]), "key length"),
        (message(0, None, None, attributes=GZIP), "no value"),
        (wrapper([], GZIP), "empty"),
        (wrapper([message(0, None, b"vv")[:-1]], GZIP), "truncated message inside"),
        (wrapper([wrapper([message(0, None, b"v")], GZIP)], SNAPPY), "nested"),
        (wrapper([message(1, None, b"a"), message(1, None, b"b")], GZIP, offset=1), "not increasing"),
        (_recrc(struct.pack(">qiI", 0, 14, 0) + b"\x01" + bytes(9)), "truncated in its key length"),
    ],
    ids=["magic2", "value-length", "key-length", "null-wrapper", "empty-wrapper", "truncated-inner",
         "nested", "offsets", "short"],
)
def test_malformed_messages(data, match):
    with pytest.raises(CorruptRecordError, match=match):
        decode_message_set(data)


def test_zstd_is_refused_in_legacy_formats():
    with pytest.raises(UnsupportedCodecError):
        decode_message_set(wrapper([message(0, None, b"v")], ZSTD))


def test_decompression_bound_applies_to_wrappers():
    data = wrapper([message(0, None, bytes(100_000))], GZIP)
    assert decode_message_set(data)[0].records[0].value == bytes(100_000)
    with pytest.raises(CorruptRecordError, match="exceeds"):
        decode_message_set(data, max_output_bytes=50_000)


# ---------------------------------------------------------------------------- conversion

def test_legacy_to_batch_preserves_offsets_timestamps_and_codec():
    data = wrapper([message(i, b"k", b"v%d" % i, timestamp=10 + i) for i in range(3)], LZ4, offset=42)
    data += message(43, None, b"last", timestamp=99)
    batch = legacy_to_batch(data, partition_leader_epoch=4)
    assert isinstance(batch, RecordBatch)
    assert (batch.base_offset, batch.next_offset, batch.compression) == (40, 44, LZ4)
    assert (batch.timestamp_type, batch.max_timestamp) == (CREATE_TIME, 99)
    assert batch.partition_leader_epoch == 4
    assert flat([batch]) == flat(decode_message_set(data))
    again = RecordBatch.decode(batch.encode())
    assert again == batch
    assert legacy_to_batch(data, compression=NONE).compression == NONE


def test_legacy_to_batch_of_magic_0_has_no_timestamps():
    batch = legacy_to_batch(message(0, None, b"a", magic=0) + message(1, None, b"b", magic=0))
    assert [r.timestamp for r in batch.records] == [-1, -1]
    assert (batch.base_timestamp, batch.max_timestamp, batch.compression) == (-1, -1, NONE)


def test_legacy_to_batch_keeps_a_shared_log_append_time():
    shared = wrapper([message(0, None, b"a"), message(1, None, b"b")], GZIP, offset=1,
                     timestamp=700, log_append=True)
    batch = legacy_to_batch(shared)
    assert (batch.timestamp_type, batch.max_timestamp) == (LOG_APPEND_TIME, 700)
    mixed = shared + message(2, None, b"c", attributes=0x08, timestamp=800)
    batch = legacy_to_batch(decode_message_set(mixed))
    assert batch.timestamp_type == CREATE_TIME
    assert [ts for _, ts, _ in batch.iter_resolved()] == [700, 700, 800]


def test_legacy_to_batch_refuses_what_v2_cannot_say():
    with pytest.raises(InvalidRecordError):
        legacy_to_batch(b"")
    with pytest.raises(TruncatedBatchError):
        legacy_to_batch(message(0, None, b"v")[:-1])
    backwards = message(5, None, b"a") + message(4, None, b"b")
    with pytest.raises(CorruptRecordError, match="do not increase"):
        legacy_to_batch(backwards)
    huge_gap = [LegacyBatch(1, 0, (Record(0, 0),)), LegacyBatch(1, 2**31, (Record(0, 0),))]
    with pytest.raises(CorruptRecordError):
        legacy_to_batch(huge_gap)


# ------------------------------------------------------------------------ mixed formats

def test_decode_all_reads_a_log_written_across_a_format_upgrade():
    v2 = build_batch([(None, b"new")], base_offset=2, timestamp=5)
    data = message(0, None, b"old", magic=0) + message(1, None, b"v1", timestamp=3) + v2
    items = decode_all(data + v2[:30])
    assert [type(i).__name__ for i in items] == ["LegacyBatch", "LegacyBatch", "RecordBatch"]
    assert [o for i in items for o, _, _ in i.iter_resolved()] == [0, 1, 2]
    with pytest.raises(TruncatedBatchError):
        decode_all(data + v2[:30], allow_partial_tail=False)
    assert [peek_magic(data, p) for p in (0, len(message(0, None, b"old", magic=0)))] == [0, 1]
    assert peek_magic(data[:16]) is None
    bad = bytearray(v2)
    bad[16] = 3
    with pytest.raises(CorruptRecordError, match="magic 3"):
        decode_all(bytes(bad))
