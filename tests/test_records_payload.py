"""kraft.records.payload (and the header primitives under it): the broker's hot path
validates produce payloads and assigns offsets without decoding records."""

import random
import struct

import pytest

from kraft.records import (
    GZIP,
    LOG_APPEND_TIME,
    ZSTD,
    CorruptRecordError,
    InvalidRecordError,
    Record,
    RecordBatch,
    TruncatedBatchError,
    UnsupportedCodecError,
    assign_offsets,
    build_batch,
    count_records,
    decode_batches,
    iter_batches,
    make_control_batch,
    parse_header,
    recompress,
    set_log_append_time,
    validate_payload,
)
from kraft.records.header import compute_crc


def payload(*sizes, codec=GZIP):
    return b"".join(
        build_batch([(None, b"v%d" % i) for i in range(n)], timestamp=100 + n, compression=codec,
                    producer_id=4, producer_epoch=0, base_sequence=0)
        for n in sizes
    )


def test_validate_reports_batches_and_counts():
    data = payload(3, 1, 5)
    summary = validate_payload(data)
    assert summary.record_count == 9 and summary.offset_count == 9 and summary.size == len(data)
    assert [h.records_count for h in summary.headers] == [3, 1, 5]
    assert summary.positions[0] == 0 and summary.positions[1] == summary.headers[0].size
    assert count_records(data) == 9
    assert count_records(data + data[:70]) == 9  # a partial tail is not counted


def test_validate_rejects_every_truncation_and_every_bit_flip():
    data = payload(2)
    for n in range(len(data)):
        with pytest.raises(TruncatedBatchError):
            validate_payload(data[:n])
    for pos in range(17, len(data)):
        bad = bytearray(data)
        bad[pos] ^= 0x40
        with pytest.raises(CorruptRecordError):
            validate_payload(bad)


def test_validate_rejects_a_legacy_or_unknown_magic():
    bad = bytearray(payload(1))
    bad[16] = 1
    with pytest.raises(CorruptRecordError, match="magic"):
        validate_payload(bad)


def _recrc(buf):
    struct.pack_into(">I", buf, 17, compute_crc(buf, 0, len(buf)))
    return buf


def test_strict_produce_rules():
    empty = RecordBatch().encode()
    with pytest.raises(InvalidRecordError, match="no records"):
        validate_payload(empty)
    assert validate_payload(empty, strict=False).record_count == 0
    gap = RecordBatch(records=(Record(0, 1), Record(2, 1))).encode()
    with pytest.raises(InvalidRecordError, match="lastOffsetDelta"):
        validate_payload(gap)
    control = make_control_batch(0, b"\x00\x00\x00\x00\x00\x00", timestamp=1, producer_id=1,
                                 producer_epoch=0, transactional=True).encode()
    with pytest.raises(InvalidRecordError, match="control"):
        validate_payload(control)
    assert validate_payload(control, strict=False).record_count == 1
    with pytest.raises(InvalidRecordError, match="more than 1"):
        validate_payload(payload(1, 1), max_batches=1)
    assert validate_payload(payload(1), max_batches=1).record_count == 1


def test_assign_offsets_rewrites_in_place_and_keeps_crcs():
    buf = bytearray(payload(3, 1, 2, codec=ZSTD))
    assert assign_offsets(buf, 1000, 7) == 1006
    validate_payload(buf)  # every CRC still holds
    batches = decode_batches(buf)
    assert [b.base_offset for b in batches] == [1000, 1003, 1004]
    assert {b.partition_leader_epoch for b in batches} == {7}
    assert [o for b in batches for o, _, _ in b.iter_resolved()] == list(range(1000, 1006))
    second = len(payload(3, codec=ZSTD))  # leave the first batch alone
    assert assign_offsets(memoryview(buf), 0, 8, pos=second) == 3
    assert [b.base_offset for b in decode_batches(buf)] == [1000, 0, 1]


def test_assign_offsets_with_log_append_time_recomputes_crcs():
    buf = bytearray(payload(2, 2))
    assign_offsets(buf, 50, 1, log_append_time=999_000)
    validate_payload(buf)
    for _, header in iter_batches(buf):
        assert header.timestamp_type == LOG_APPEND_TIME and header.max_timestamp == 999_000
        assert header.compression == GZIP  # other attribute bits untouched
    assert {ts for b in decode_batches(buf) for _, ts, _ in b.iter_resolved()} == {999_000}


def test_set_log_append_time_on_one_batch():
    buf = bytearray(payload(1, 1))
    second = len(payload(1))
    set_log_append_time(buf, second, 5)
    headers = [h for _, h in iter_batches(buf)]
    assert [h.timestamp_type for h in headers] == [0, 1]


def test_assign_offsets_refuses_a_truncated_payload():
    buf = bytearray(payload(1, 1))
    with pytest.raises(TruncatedBatchError):
        assign_offsets(buf[:-1], 0, 0)


@pytest.mark.parametrize("source", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("target", [0, 1, 2, 3, 4])
def test_recompress_rewrites_the_codec_and_keeps_every_record_and_producer_field(source, target):
    """A topic's compression.type: the leader writes a client batch in the topic's codec."""
    records = tuple(Record(i, 1000 + 7 * i, b"k%d" % i, b"value %d " % i * 20, (("h", b"%d" % i),))
                    for i in range(12))
    original = RecordBatch(records=records, compression=source, producer_id=77, producer_epoch=3,
                           base_sequence=40, is_transactional=True).encode()
    rewritten = recompress(original, 0, parse_header(original), target, level=None)
    (summary_header,) = validate_payload(rewritten).headers  # a whole batch, its CRC right
    (before,), (after,) = decode_batches(original), decode_batches(rewritten)
    assert summary_header.compression == after.compression == target
    assert after.records == before.records
    for field in ("producer_id", "producer_epoch", "base_sequence", "is_transactional", "base_timestamp",
                  "max_timestamp", "last_offset_delta", "timestamp_type"):
        assert getattr(after, field) == getattr(before, field), field
    if target == 0:
        assert len(rewritten) > len(original) or source == 0


@pytest.mark.parametrize("codec, fast_level, best_level", [(ZSTD, 1, 19), (GZIP, 1, 9)])
def test_recompress_takes_the_level(codec, fast_level, best_level):
    rng = random.Random(1)
    words = [bytes(rng.choice(b"abcdefghij") for _ in range(rng.randint(2, 9))) for _ in range(300)]
    data = build_batch([(None, b" ".join(rng.choice(words) for _ in range(3000)))], timestamp=1)
    fast, best = (recompress(data, 0, parse_header(data), codec, level=lvl) for lvl in (fast_level, best_level))
    assert decode_batches(fast)[0].records == decode_batches(best)[0].records
    assert len(best) < len(fast)


def test_recompress_reads_the_batch_at_its_position():
    first, second = payload(2, codec=GZIP), payload(3, codec=0)
    buf = first + second
    out = recompress(buf, len(first), parse_header(buf, len(first)), ZSTD)
    assert decode_batches(out)[0].records == decode_batches(second)[0].records


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_a_codec_id_no_client_knows_is_refused_from_a_client(codec):
    """Stored, such a batch would stop every consumer of the partition at it."""
    data = bytearray(build_batch([(b"k", b"v")], timestamp=1))
    struct.pack_into(">h", data, 21, codec)
    struct.pack_into(">I", data, 17, compute_crc(data, 0, len(data)))
    with pytest.raises(UnsupportedCodecError, match=f"unknown compression type id {codec}"):
        validate_payload(data)
