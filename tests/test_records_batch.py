"""kraft.records.record, .batch and .varint: v2 batches round-trip, reject corruption,
and report truncation cleanly whatever prefix of a batch they are given."""

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraft.records import (
    CREATE_TIME,
    GZIP,
    LOG_APPEND_TIME,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    CorruptRecordError,
    Record,
    RecordBatch,
    TruncatedBatchError,
    UnsupportedCodecError,
    build_batch,
    decode_batches,
    make_batch,
    read_batch,
)
from kraft.records.header import compute_crc, parse_header, set_base_offset, set_partition_leader_epoch
from kraft.records.varint import read_varint, read_varlong, varint_size, write_varint, write_varlong

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)


def recrc(buf: bytearray) -> bytearray:
    """Make a deliberately edited batch pass its CRC, so the decoder's own checks are tested."""
    struct.pack_into(">I", buf, 17, compute_crc(buf, 0, len(buf)))
    return buf


# ------------------------------------------------------------------------------ varints

@pytest.mark.parametrize(
    "value, encoded",
    [(0, "00"), (-1, "01"), (1, "02"), (63, "7e"), (-64, "7f"), (64, "8001"), (300, "d804"),
     (2**31 - 1, "feffffff0f"), (-(2**31), "ffffffff0f")],
)
def test_varint_known_encodings(value, encoded):
    out = bytearray()
    write_varint(out, value)
    assert out.hex() == encoded
    assert read_varint(out, 0, len(out)) == (value, len(out))
    assert varint_size(value) == len(out)


@given(INT32)
def test_varint_round_trip(value):
    out = bytearray(b"\xaa")
    write_varint(out, value)
    assert read_varint(out, 1, len(out)) == (value, len(out))


@given(INT64)
def test_varlong_round_trip(value):
    out = bytearray()
    write_varlong(out, value)
    assert read_varlong(out, 0, len(out)) == (value, len(out))
    assert varint_size(value) == len(out)


def test_varint_rejects_out_of_range_and_malformed_input():
    with pytest.raises(ValueError):
        write_varint(bytearray(), 2**31)
    with pytest.raises(ValueError):
        write_varlong(bytearray(), -(2**63) - 1)
    with pytest.raises(CorruptRecordError, match="truncated"):
        read_varint(b"\x80\x80", 0, 2)
    with pytest.raises(CorruptRecordError, match="longer"):
        read_varint(b"\x80" * 5 + b"\x01", 0, 6)
    with pytest.raises(CorruptRecordError, match="overflows"):
        read_varint(b"\xff\xff\xff\xff\x1f", 0, 5)  # 35 bits do not fit an int32
    with pytest.raises(CorruptRecordError):
        read_varint(b"\x02", 0, 0)  # ``end`` is honoured, not len(buf)


# ----------------------------------------------------------------------- property tests

headers_st = st.lists(
    st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=3
).map(tuple)
record_st = st.builds(
    Record,
    timestamp=st.integers(-1, 2**45),
    key=st.none() | st.binary(max_size=20),
    value=st.none() | st.binary(max_size=60),
    headers=headers_st,
)


@st.composite
def batches(draw, codec=st.sampled_from(CODECS)):
    records = draw(st.lists(record_st, max_size=6))
    gaps = draw(st.lists(st.integers(1, 1000), min_size=len(records), max_size=len(records)))
    deltas, delta = [], -1
    for gap in gaps:  # strictly increasing deltas; gaps as after compaction
        delta += gap
        deltas.append(delta)
    records = [Record(d, r.timestamp, r.key, r.value, r.headers) for d, r in zip(deltas, records)]
    ts_type = draw(st.sampled_from([CREATE_TIME, LOG_APPEND_TIME]))
    transactional = draw(st.booleans())
    producer = draw(st.booleans()) or transactional
    return RecordBatch(
        records=tuple(records),
        base_offset=draw(st.integers(0, 2**62)),
        partition_leader_epoch=draw(st.integers(-1, 2**31 - 1)),
        compression=draw(codec),
        timestamp_type=ts_type,
        is_transactional=transactional,
        is_control=draw(st.booleans()),
        has_delete_horizon=draw(st.booleans()),
        producer_id=draw(st.integers(0, 2**62)) if producer else -1,
        producer_epoch=draw(st.integers(0, 2**15 - 1)) if producer else -1,
        base_sequence=draw(st.integers(0, 2**31 - 1)) if producer else -1,
        max_timestamp=draw(st.integers(0, 2**45)) if ts_type == LOG_APPEND_TIME else None,
    )


@settings(max_examples=150, deadline=None)
@given(batches())
def test_batch_round_trip_every_codec(batch):
    data = batch.encode()
    decoded = RecordBatch.decode(data)
    assert decoded == batch
    assert decoded.encode() == data  # decoding keeps every header field
    header = parse_header(data)
    assert header.size == len(data)
    assert header.records_count == len(batch.records)
    assert header.compression == batch.compression
    assert header.is_control == batch.is_control


@settings(max_examples=40, deadline=None)
@given(batches(), st.binary(max_size=30))
def test_decoders_with_trailing_data(batch, trailing):
    data = batch.encode()
    assert RecordBatch.decode(data + trailing) == batch
    assert read_batch(data + trailing) == (batch, len(data))
    assert read_batch(b"\x00" * 5 + data + trailing, 5) == (batch, 5 + len(data))
    assert decode_batches(data + data) == [batch, batch]


@pytest.mark.parametrize("codec", CODECS)
def test_every_prefix_is_incomplete_never_a_crash(codec):
    batch = make_batch(
        [Record(timestamp=10, key=b"key", value=b"value" * 3, headers=(("h", None),)), (None, b"x")],
        compression=codec, producer_id=7, producer_epoch=1, base_sequence=0,
    )
    data = batch.encode()
    for n in range(len(data)):
        prefix = data[:n]
        assert read_batch(prefix) is None
        with pytest.raises(TruncatedBatchError):
            RecordBatch.decode(prefix)
        assert decode_batches(prefix) == []
        assert decode_batches(data + prefix) == [batch]
        if n:
            with pytest.raises(TruncatedBatchError):
                decode_batches(data + prefix, allow_partial_tail=False)
    assert read_batch(data) == (batch, len(data))


def test_incremental_reader_fed_byte_by_byte():
    stream = b"".join(
        build_batch([(b"k", b"v%d" % i)], base_offset=i, compression=GZIP) for i in range(3)
    )
    got, buf, pos = [], bytearray(), 0
    for byte in stream:
        buf.append(byte)
        while (result := read_batch(buf, pos)) is not None:
            batch, pos = result
            got.append(batch)
    assert [b.base_offset for b in got] == [0, 1, 2]
    assert [b.records[0].value for b in got] == [b"v0", b"v1", b"v2"]


# ----------------------------------------------------------------------------- corruption

def test_every_flipped_bit_in_the_crc_region_is_detected():
    data = build_batch([(b"k", b"v", [("h", b"x")]), (None, None)], timestamp=5, producer_id=1,
                       producer_epoch=0, base_sequence=0)
    for pos in range(17, len(data)):  # the CRC itself and everything it covers
        for bit in range(8):
            bad = bytearray(data)
            bad[pos] ^= 1 << bit
            with pytest.raises(CorruptRecordError):
                RecordBatch.decode(bad)


def test_patching_base_offset_and_leader_epoch_keeps_the_crc():
    data = bytearray(build_batch([(b"k", b"v")] * 3, compression=LZ4))
    set_base_offset(data, 0, 1234567890123)
    set_partition_leader_epoch(data, 0, 42)
    batch = RecordBatch.decode(data)
    assert (batch.base_offset, batch.partition_leader_epoch) == (1234567890123, 42)
    assert [o for o, _, _ in batch.iter_resolved()] == [1234567890123, 1234567890124, 1234567890125]


def test_check_crc_false_skips_only_the_crc():
    bad = bytearray(build_batch([(b"k", b"v")]))
    bad[17] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        RecordBatch.decode(bad)
    assert RecordBatch.decode(bad, check_crc=False).records[0].value == b"v"


def _one_record_batch() -> bytearray:
    return bytearray(build_batch([Record(timestamp=0, key=b"k", value=b"vv", headers=(("h", b"x"),))]))


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda b: struct.pack_into(">i", b, 57, 2), "declares 2 records"),
        (lambda b: struct.pack_into(">i", b, 57, 0), "left after"),
        (lambda b: b.__setitem__(61, 0x7E), "impossible"),  # record length 63 > the rest
        (lambda b: b.__setitem__(65, 0x03), "negative key length"),  # key length -2
        (lambda b: b.__setitem__(67, 0x1E), "value of 15 bytes overruns"),
        (lambda b: b.__setitem__(70, 0x01), "negative header count"),
        (lambda b: b.__setitem__(71, 0x01), "null header key"),
        (lambda b: b.__setitem__(72, 0xFF), "UTF-8"),
        (lambda b: b.extend(b"\x00"), "left after"),
        (lambda b: (b.__setitem__(61, 0x1C), b.extend(b"\x00")), "past its headers"),  # length 14
    ],
)
def test_malformed_records_under_a_valid_crc(edit, message):
    data = _one_record_batch()
    # From byte 61: len | attrs | tsDelta | offDelta | keyLen 'k' (65) | valLen 'vv' (67) |
    #               hdrCount (70) | hKeyLen (71) 'h' (72) | hValLen 'x'
    assert data[61:].hex() == "1a000000" + "02" + "6b" + "04" + "7676" + "02" + "02" + "68" + "02" + "78"
    edit(data)
    struct.pack_into(">i", data, 8, len(data) - 12)
    with pytest.raises(CorruptRecordError, match=message):
        RecordBatch.decode(recrc(data))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fuzzed_records_section_raises_only_corrupt_record_error(data):
    codec = data.draw(st.sampled_from(CODECS))
    records = [(b"key", b"value", [("a", b"b")]), (None, b"x" * 40)]
    original = bytearray(build_batch(records, compression=codec))
    body = bytearray(original[61:])
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(body) - 1))
        body[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(body)))
    fuzzed = original[:61] + body[:cut]
    struct.pack_into(">i", fuzzed, 8, len(fuzzed) - 12)
    try:
        RecordBatch.decode(recrc(fuzzed))
    except CorruptRecordError:
        pass


def test_impossible_header_lengths():
    data = bytearray(build_batch([(b"k", b"v")]))
    struct.pack_into(">i", data, 8, 20)  # shorter than a v2 header, longer than the minimum legacy
    with pytest.raises(CorruptRecordError, match="shorter than its header"):
        RecordBatch.decode(data)
    struct.pack_into(">i", data, 8, 3)
    with pytest.raises(CorruptRecordError, match="impossible"):
        read_batch(data)
    good = bytearray(build_batch([(b"k", b"v")]))
    good[16] = 1
    with pytest.raises(CorruptRecordError, match="magic"):
        RecordBatch.decode(good)


# ------------------------------------------------------------------------------ builder

def test_builder_renumbers_and_fills_the_header():
    batch = make_batch(
        [Record(offset_delta=9, timestamp=30, value=b"a"), (b"k", b"b"),
         Record(timestamp=20, value=b"c")],
        timestamp=50, base_offset=100, producer_id=5, producer_epoch=2, base_sequence=10,
        transactional=True,
    )
    assert [r.offset_delta for r in batch.records] == [0, 1, 2]
    assert [r.timestamp for r in batch.records] == [30, 50, 20]
    assert (batch.base_timestamp, batch.max_timestamp, batch.last_offset_delta) == (30, 50, 2)
    assert batch.attributes == 0x10
    header = parse_header(batch.encode())
    assert (header.base_offset, header.producer_id, header.producer_epoch) == (100, 5, 2)
    assert (header.base_sequence, header.last_sequence, header.next_offset) == (10, 12, 103)
    assert header.is_transactional and not header.is_control


def test_builder_keeps_deltas_when_asked():
    batch = make_batch([Record(0, 1, value=b"a"), Record(5, 2, value=b"b")], renumber=False)
    assert batch.last_offset_delta == 5 and batch.next_offset == 6
    assert [o for o, _, _ in RecordBatch.decode(batch.encode()).iter_resolved()] == [0, 5]


def test_log_append_time_overrides_record_timestamps():
    with pytest.raises(ValueError, match="max_timestamp"):
        make_batch([(None, b"v")], timestamp_type=LOG_APPEND_TIME)
    batch = make_batch([(None, b"v"), (None, b"w")], timestamp=1, timestamp_type=LOG_APPEND_TIME,
                       log_append_time=999)
    decoded = RecordBatch.decode(batch.encode())
    assert parse_header(batch.encode()).timestamp_type == 1
    assert [ts for _, ts, _ in decoded.iter_resolved()] == [999, 999]
    assert [r.timestamp for r in decoded.records] == [1, 1]  # create times survive


def test_builder_and_record_validation():
    with pytest.raises(ValueError, match="producer id"):
        make_batch([(None, b"v")], transactional=True)
    with pytest.raises(UnsupportedCodecError):
        make_batch([(None, b"v")], compression=5)
    with pytest.raises(TypeError):
        make_batch([b"just a value"])
    with pytest.raises(TypeError):
        Record(value="text")
    with pytest.raises(TypeError):
        Record(headers=((b"bytes-name", b"v"),))
    with pytest.raises(ValueError):
        Record(offset_delta=-1)
    with pytest.raises(ValueError, match="out of range"):
        RecordBatch(producer_epoch=2**15).encode()
    loose = Record(key=bytearray(b"k"), value=memoryview(b"v"), headers=[("h", bytearray(b"x"))])
    assert loose == Record(key=b"k", value=b"v", headers=(("h", b"x"),))


def test_empty_batches_decode_with_or_without_a_codec_payload():
    for codec in CODECS:
        assert RecordBatch.decode(RecordBatch(compression=codec).encode()).records == ()
    # A compacted batch may keep its codec bits with no payload at all.
    bare = bytearray(RecordBatch().encode())
    struct.pack_into(">h", bare, 21, ZSTD)
    assert RecordBatch.decode(recrc(bare)).compression == ZSTD


def test_records_count_is_checked_against_the_compressed_payload():
    data = bytearray(build_batch([(None, b"v")] * 3, compression=SNAPPY))
    struct.pack_into(">i", data, 57, 4)
    with pytest.raises(CorruptRecordError, match="declares 4 records"):
        RecordBatch.decode(recrc(data))
