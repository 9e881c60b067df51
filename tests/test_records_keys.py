"""kraft.records.keys: finding a record without a key (compacted topics refuse them)."""

import pytest

from kraft.records import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    CompressionError,
    CorruptRecordError,
    Record,
    RecordBatch,
    build_batch,
    find_null_key,
    has_null_key,
    make_control_batch,
)
from kraft.records.header import HEADER_SIZE

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]


@pytest.mark.parametrize("codec", CODECS)
def test_keyed_records_have_no_null_key(codec):
    data = build_batch([(b"k%d" % i, b"v%d" % i) for i in range(50)], timestamp=1, compression=codec)
    assert find_null_key(data) is None and not has_null_key(data)


@pytest.mark.parametrize("codec", CODECS)
def test_null_key_found_at_its_index(codec):
    records = [(b"k%d" % i, b"v") for i in range(10)]
    records[7] = (None, b"no key")
    data = build_batch(records, timestamp=1, compression=codec)
    assert find_null_key(data) == 7 and has_null_key(data)


def test_empty_key_and_tombstone_are_keyed():
    data = build_batch([(b"", b"empty key"), (b"k", None)], timestamp=1)
    assert find_null_key(data) is None


def test_index_counts_records_across_batches():
    first = build_batch([(b"a", b"1"), (b"b", b"2")], timestamp=1, compression=GZIP)
    second = build_batch([(b"c", b"3"), (None, b"4")], timestamp=1)
    assert find_null_key(first + second) == 3
    assert find_null_key(second + first) == 1
    assert find_null_key(first + first) is None


def test_records_with_headers_and_large_values():
    records = [Record(i, 5, b"key", b"x" * 300, (("h", b"v"), ("h2", None))) for i in range(3)]
    data = RecordBatch(records=tuple(records)).encode()
    assert find_null_key(data) is None
    records.append(Record(3, 5, None, b"x" * 300, (("h", b"v"),)))
    assert find_null_key(RecordBatch(records=tuple(records)).encode()) == 3


def test_control_batches_are_skipped():
    control = make_control_batch(0, b"\x00\x00\x00\x00\x00\x00", timestamp=1).encode()
    keyless = build_batch([(None, b"v")], timestamp=1)
    assert find_null_key(control) is None
    assert find_null_key(control + keyless) == 0


def test_start_position_and_partial_tail():
    keyed = build_batch([(b"k", b"v")], timestamp=1)
    keyless = build_batch([(None, b"v")], timestamp=1)
    assert find_null_key(keyless + keyed, len(keyless)) is None
    assert find_null_key(keyed + keyless[:-3]) is None  # an incomplete tail is not read


def test_corrupt_record_framing_raises():
    data = bytearray(build_batch([(b"key", b"value")], timestamp=1))
    data[HEADER_SIZE] = 0x7E  # record length 63: past the end of the batch
    with pytest.raises(CorruptRecordError):
        find_null_key(data)
    short = bytearray(build_batch([(b"key", b"value")], timestamp=1))
    short[HEADER_SIZE + 4] = 0x7E  # key length 63 in a record of 12 bytes
    with pytest.raises(CorruptRecordError):
        find_null_key(short)


def test_corrupt_compressed_section_raises():
    data = bytearray(build_batch([(b"k", b"v" * 100)], timestamp=1, compression=GZIP))
    data[HEADER_SIZE + 12] ^= 0xFF
    with pytest.raises(CompressionError):
        find_null_key(data)


def test_decompression_limit():
    data = build_batch([(b"k", b"v" * 10_000)], timestamp=1, compression=ZSTD)
    with pytest.raises(CorruptRecordError):
        find_null_key(data, max_output_bytes=1000)
