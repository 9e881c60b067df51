"""kraft.records.compression: every codec round-trips, reads the framings other clients
write, refuses corrupt or oversized input with typed errors."""

import gzip
import struct
import tracemalloc
import zlib

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.records.compression import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    CompressionError,
    Codec,
    DecompressionLimitError,
    UnsupportedCodecError,
    codec_from_name,
    compress,
    decompress,
    xxh32,
)
from kraft.records.errors import CorruptRecordError

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
COMPRESSED = [GZIP, SNAPPY, LZ4, ZSTD]
SAMPLE = b"".join(b"record %d: %s\n" % (i, b"abc" * (i % 7)) for i in range(2000))  # ~60 KiB


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(CODECS), st.binary(max_size=3000) | st.just(SAMPLE))
def test_round_trip(codec, data):
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", COMPRESSED)
def test_compression_levels_are_honoured(codec):
    fast, best = compress(codec, SAMPLE, level=1), compress(codec, SAMPLE, level=9)
    assert decompress(codec, fast) == decompress(codec, best) == SAMPLE
    if codec != SNAPPY:  # snappy has no levels
        assert len(best) < len(SAMPLE) // 4


def test_codec_ids_and_names():
    assert [int(x) for x in Codec] == [0, 1, 2, 3, 4]
    assert codec_from_name("ZSTD") is ZSTD and codec_from_name("uncompressed") is NONE
    for bad in ("producer", "brotli"):
        with pytest.raises(UnsupportedCodecError):
            codec_from_name(bad)
    for bad_id in (-1, 5, 7):
        with pytest.raises(UnsupportedCodecError):
            compress(bad_id, b"x")
        with pytest.raises(UnsupportedCodecError):
            decompress(bad_id, b"x")
    # The broker catches one class for every bad payload.
    assert issubclass(UnsupportedCodecError, CorruptRecordError)
    assert issubclass(DecompressionLimitError, CorruptRecordError)


# ----------------------------------------------------------------------------- framings

def test_gzip_is_a_gzip_file_and_deterministic():
    data = compress(GZIP, SAMPLE)
    assert data[:2] == b"\x1f\x8b" and data[4:8] == b"\0\0\0\0"  # magic, mtime 0
    assert gzip.decompress(data) == SAMPLE
    assert compress(GZIP, SAMPLE) == data


def test_gzip_concatenated_members_read_as_one_stream():
    data = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(GZIP, data) == b"first second"


def test_snappy_writes_xerial_framing_in_32k_blocks():
    data = compress(SNAPPY, SAMPLE)
    assert data[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, blocks, out = 16, 0, b""
    while pos < len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        out += bytes(cramjam.snappy.decompress_raw(data[pos + 4 : pos + 4 + size]))
        pos += 4 + size
        blocks += 1
    assert out == SAMPLE and blocks == -(-len(SAMPLE) // 32768)


def test_snappy_reads_raw_blocks_as_librdkafka_writes():
    raw = bytes(cramjam.snappy.compress_raw(SAMPLE))
    assert decompress(SNAPPY, raw) == SAMPLE


def test_snappy_xerial_with_little_endian_version_fields():
    # Some producers write version/compat little-endian; the framing is otherwise the same.
    block = bytes(cramjam.snappy.compress_raw(b"hello"))
    data = b"\x82SNAPPY\x00" + struct.pack("<ii", 1, 1) + struct.pack(">i", len(block)) + block
    assert decompress(SNAPPY, data) == b"hello"


def _lz4_flags(frame: bytes) -> int:
    assert frame[:4] == b"\x04\x22\x4d\x18"
    return frame[4]


def test_lz4_writes_frames_kafkas_java_reader_accepts():
    flg = _lz4_flags(compress(LZ4, SAMPLE))
    assert flg >> 6 == 1  # version 01
    assert flg & 0x20  # independent blocks
    assert not flg & 0x10 and not flg & 0x08 and not flg & 0x01  # no block checksum, size, dict


@pytest.mark.parametrize(
    "options",
    [
        {},  # lz4's defaults: linked blocks, content size
        {"block_linked": False, "store_size": False},  # Kafka's Java writer
        {"block_linked": False, "content_checksum": True, "block_size": lz4.frame.BLOCKSIZE_MAX64KB},
        {"block_checksum": True, "block_size": lz4.frame.BLOCKSIZE_MAX4MB},
        {"compression_level": lz4.frame.COMPRESSIONLEVEL_MINHC},
    ],
)
def test_lz4_reads_frames_from_other_writers(options):
    assert decompress(LZ4, lz4.frame.compress(SAMPLE, **options)) == SAMPLE


def _break_header_checksum_like_old_kafka(frame: bytes) -> bytes:
    """Kafka before KIP-57 hashed the descriptor *with* the 4 magic bytes."""
    flg = frame[4]
    end = 6 + (8 if flg & 0x08 else 0)
    wrong = (xxh32(frame[0:end]) >> 8) & 0xFF
    assert wrong != frame[end], "pick a sample where the two checksums differ"
    return frame[:end] + bytes([wrong]) + frame[end + 1 :]


def test_lz4_legacy_header_checksum_only_when_asked():
    broken = _break_header_checksum_like_old_kafka(compress(LZ4, SAMPLE))
    with pytest.raises(CompressionError):
        decompress(LZ4, broken)
    assert decompress(LZ4, broken, legacy_lz4=True) == SAMPLE
    assert decompress(LZ4, compress(LZ4, SAMPLE), legacy_lz4=True) == SAMPLE


def test_xxh32_known_vectors():
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


@pytest.mark.parametrize("store_size", [False, True])
@pytest.mark.parametrize("checksum", [False, True])
@pytest.mark.parametrize("block_size", [4, 5, 6, 7])
def test_xxh32_matches_the_lz4_library_header_checksums(store_size, checksum, block_size):
    frame = lz4.frame.compress(b"x" * 100, store_size=store_size, content_checksum=checksum,
                               block_size=block_size)
    end = 6 + (8 if store_size else 0)
    assert frame[end] == (xxh32(frame[4:end]) >> 8) & 0xFF


def test_xxh32_long_inputs_against_the_lz4_content_checksum():
    # A frame's content checksum is xxh32 of the whole input: covers the >= 16-byte path.
    for data in (SAMPLE[:16], SAMPLE[:17], SAMPLE[:1000], SAMPLE):
        frame = lz4.frame.compress(data, content_checksum=True)
        assert struct.unpack("<I", frame[-4:])[0] == xxh32(data)


def test_zstd_reads_streams_without_content_size_and_several_frames():
    cctx = zstandard.ZstdCompressor(write_content_size=False)
    stream = cctx.compressobj()
    frame = stream.compress(SAMPLE) + stream.flush()
    assert decompress(ZSTD, frame) == SAMPLE
    assert decompress(ZSTD, frame + compress(ZSTD, b"more")) == SAMPLE + b"more"


# ------------------------------------------------------------------------------- errors

@pytest.mark.parametrize("codec", COMPRESSED)
def test_decompression_is_bounded(codec):
    bomb = compress(codec, bytes(4 << 20))
    assert len(bomb) < 300_000
    with pytest.raises(DecompressionLimitError):
        decompress(codec, bomb, max_output_bytes=1 << 20)
    exact = compress(codec, bytes(1000))
    assert decompress(codec, exact, max_output_bytes=1000) == bytes(1000)
    with pytest.raises(DecompressionLimitError):
        decompress(codec, exact, max_output_bytes=999)


def _streamed_bomb(codec, mib):
    """``mib`` MiB of zeros compressed without ever holding them in memory."""
    chunk = bytes(1 << 20)
    if codec == GZIP:
        co = zlib.compressobj(9, zlib.DEFLATED, 31)
        return b"".join(co.compress(chunk) for _ in range(mib)) + co.flush()
    if codec == LZ4:
        ctx = lz4.frame.create_compression_context()
        parts = [lz4.frame.compress_begin(ctx, block_linked=False)]
        parts += [lz4.frame.compress_chunk(ctx, chunk) for _ in range(mib)]
        return b"".join(parts) + lz4.frame.compress_flush(ctx)
    if codec == ZSTD:
        co = zstandard.ZstdCompressor().compressobj()
        return b"".join(co.compress(chunk) for _ in range(mib)) + co.flush()
    one = compress(SNAPPY, chunk)  # xerial: repeat the blocks of one MiB
    return one[:16] + one[16:] * mib


@pytest.mark.parametrize("codec", COMPRESSED)
def test_a_bomb_is_refused_without_inflating_it(codec):
    bomb = _streamed_bomb(codec, 128)
    tracemalloc.start()
    try:
        with pytest.raises(DecompressionLimitError):
            decompress(codec, bomb, max_output_bytes=1 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < len(bomb) + (8 << 20), f"peak {peak >> 20} MiB for a 1 MiB limit"


def test_uncompressed_data_is_bounded_too():
    with pytest.raises(DecompressionLimitError):
        decompress(NONE, b"12345", max_output_bytes=4)


def test_raw_snappy_bomb_is_refused_before_decompressing():
    # The preamble claims 2**31 bytes; the block is tiny.  Refusal must not allocate.
    fake = b"\x80\x80\x80\x80\x08" + b"\x00"
    with pytest.raises(DecompressionLimitError):
        decompress(SNAPPY, fake)


@pytest.mark.parametrize("codec", COMPRESSED)
def test_every_truncation_is_an_error_or_a_whole_xerial_block_prefix(codec):
    data = compress(codec, SAMPLE[:40000] if codec == SNAPPY else SAMPLE[:3000])
    for n in range(len(data)):
        try:
            out = decompress(codec, data[:n])
        except CompressionError:
            continue
        # xerial framing cannot tell a stream cut at a block boundary from a shorter one.
        assert codec == SNAPPY and SAMPLE.startswith(out) and len(out) % 32768 == 0, n


@pytest.mark.parametrize("codec", COMPRESSED)
@pytest.mark.parametrize("garbage", [b"", b"\xff", b"not compressed at all", bytes(range(256))])
def test_garbage_is_a_compression_error(codec, garbage):
    with pytest.raises(CompressionError):
        decompress(codec, garbage)


@pytest.mark.parametrize("codec", [GZIP, LZ4, ZSTD])
def test_trailing_garbage_after_a_frame_is_an_error(codec):
    with pytest.raises(CompressionError):
        decompress(codec, compress(codec, b"payload") + b"\x01\x02junk")


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(COMPRESSED), st.data())
def test_bit_flips_never_escape_as_other_exceptions(codec, data):
    blob = bytearray(compress(codec, SAMPLE[:2000]))
    pos = data.draw(st.integers(0, len(blob) - 1))
    blob[pos] ^= 1 << data.draw(st.integers(0, 7))
    try:
        decompress(codec, blob)
    except CompressionError:
        pass


def test_xerial_block_length_errors():
    header = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for bad in (header[:12], header + b"\x00\x00", header + struct.pack(">i", -5),
                header + struct.pack(">i", 100) + b"short"):
        with pytest.raises(CompressionError):
            decompress(SNAPPY, bad)


def test_zlib_stream_is_not_accepted_as_gzip():
    with pytest.raises(CompressionError):
        decompress(GZIP, zlib.compress(SAMPLE))

