"""kraft.records.record_checks: finding a record without a key (compacted topics refuse them)
and a timestamp out of bounds."""

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
    find_timestamp_out_of_range,
    has_null_key,
    headers_show_within,
    iter_batches,
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


def _timestamped(timestamps, codec=NONE, **kw):
    records = tuple(Record(i, ts, b"k", b"v") for i, ts in enumerate(timestamps))
    return RecordBatch(records=records, compression=codec, **kw).encode()


@pytest.mark.parametrize("codec", CODECS)
def test_a_timestamp_out_of_bounds_is_found_at_its_index(codec):
    data = _timestamped([1000, 1500, 9000, 1200], codec)
    assert find_timestamp_out_of_range(data, None, 5000) == (2, 9000)
    assert find_timestamp_out_of_range(data, 1100, None) == (0, 1000)
    assert find_timestamp_out_of_range(data, 1000, 9000) is None
    assert find_timestamp_out_of_range(data, None, None) is None


def test_a_record_older_than_its_first_is_found_though_the_header_looks_in_bounds():
    """The first record's timestamp is the batch's base; a later delta may be negative."""
    data = _timestamped([5000, 3000, 6000])
    assert find_timestamp_out_of_range(data, 4000, 7000) == (1, 3000)


def test_timestamps_counted_across_batches_and_records_without_one_skipped():
    first = _timestamped([100, 200], GZIP)
    second = _timestamped([-1, 900])
    assert find_timestamp_out_of_range(first + second, 50, 500) == (3, 900)
    assert find_timestamp_out_of_range(second, 0, 1000) is None  # -1: no timestamp


def test_log_append_time_batches_carry_no_producer_timestamps_to_check():
    data = _timestamped([1, 2], timestamp_type=1, max_timestamp=5000)
    assert find_timestamp_out_of_range(data, 100, 200) is None


def test_headers_alone_clear_batches_only_under_an_upper_bound():
    """Kafka 4's default bound (at most an hour ahead) is checked from each header's
    maxTimestamp; a lower bound, or a CreateTime batch past the upper one, needs the records
    (find_timestamp_out_of_range then names the record).  LogAppendTime and control batches
    carry no producer timestamps."""
    def headers(data):
        return [h for _, h in iter_batches(data, 0, check_crc=False)]

    within, ahead = _timestamped([1000, 4000, 2000], GZIP), _timestamped([1000, 9000])
    assert headers_show_within(headers(within), None, 4000)
    assert not headers_show_within(headers(within), None, 3999)
    assert not headers_show_within(headers(within + ahead), None, 5000)
    assert find_timestamp_out_of_range(within + ahead, None, 5000) == (4, 9000)
    assert not headers_show_within(headers(within), 0, 4000)  # a low bound reads the records
    appended = _timestamped([1, 2], timestamp_type=1, max_timestamp=9000)
    control = make_control_batch(1, b"\x00\x00\x00\x00\x00\x00", timestamp=9000).encode()
    assert headers_show_within(headers(appended + control), None, 100)
