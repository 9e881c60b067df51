"""Kafka's compression codecs: none=0, gzip=1, snappy=2, lz4=3, zstd=4.

The codec id lives in the low three bits of a batch's attributes; what it compresses is the
records section of a v2 batch, or the inner message set of a legacy wrapper message.

Interoperability notes, codec by codec:

* gzip: a gzip *file* (RFC 1952), not a bare zlib stream.  Written through zlib with a zero
  mtime so output is deterministic; concatenated members are read as one stream.
* snappy: Kafka's Java clients write snappy-java's "xerial" framing (an 8-byte magic
  ``\\x82SNAPPY\\x00``, int32 version and compat, then int32-length-prefixed raw snappy
  blocks of at most 32 KiB input each); librdkafka writes one raw snappy block but reads
  both.  We write xerial (every client reads it) and read both, told apart by the magic.
* lz4: the LZ4 *frame* format with independent blocks (Kafka's Java reader does not support
  linked blocks).  Kafka before KIP-57 computed the frame descriptor's header checksum over
  the wrong bytes, and magic 0 messages keep that bug forever, so legacy readers pass
  ``legacy_lz4=True`` and the checksum byte is recomputed before decoding.
* zstd: standard frames; Java's zstd-jni streams may omit the content size, so we stream.

Decompression is bounded by ``max_output_bytes``: a few kilobytes of gzip or zstd can
expand to gigabytes, and a broker or consumer must refuse that rather than run out of memory.
"""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum

import cramjam
import lz4.frame
import zstandard

from kraft.records.errors import CompressionError, DecompressionLimitError, UnsupportedCodecError


class Codec(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


NONE, GZIP, SNAPPY, LZ4, ZSTD = Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD

# Enough for any batch a default-configured Kafka cluster moves (message.max.bytes is about
# 1 MiB compressed), small enough that a bomb cannot exhaust a test machine.
DEFAULT_MAX_OUTPUT_BYTES = 64 * 1024 * 1024

# Names as Kafka's ``compression.type`` config spells them ("producer" is a broker policy,
# not a codec, so it is not here).
_NAMES = {"none": NONE, "uncompressed": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4,
          "zstd": ZSTD}


def codec_from_name(name: str) -> Codec:
    """The codec for a ``compression.type`` value such as ``"zstd"``.

    Raises:
        UnsupportedCodecError: for an unknown name.
    """
    try:
        return _NAMES[name.strip().lower()]
    except KeyError:
        raise UnsupportedCodecError(f"unknown compression type {name!r}") from None


def codec_of(codec_id: int) -> Codec:
    """Validate a codec id.  Raises UnsupportedCodecError for ids outside 0..4."""
    try:
        return Codec(codec_id)
    except ValueError:
        raise UnsupportedCodecError(f"unknown compression codec id {codec_id}") from None


def compress(codec: int, data, *, level: int | None = None) -> bytes:
    """Compress ``data`` the way Kafka's clients do for ``codec``.

    Args:
        codec: a codec id (0..4); NONE returns the data unchanged.
        data: a bytes-like object.
        level: the codec's compression level, or None for its default.
    Raises:
        UnsupportedCodecError: for an unknown codec id.
    """
    codec = codec_of(codec)
    if codec is NONE:
        return bytes(data)
    if codec is GZIP:
        # wbits 31 = gzip container; zlib writes mtime 0, which keeps this free of the clock.
        # Level 6 is Java's (and so Kafka's) default.
        co = zlib.compressobj(6 if level is None else level, zlib.DEFLATED, 31)
        return co.compress(data) + co.flush()
    if codec is SNAPPY:
        return _xerial_compress(data)
    if codec is LZ4:
        # Java's KafkaLZ4BlockInputStream only handles independent blocks and no block
        # checksums; 64 KiB blocks and no content size match what its writer produces.
        return lz4.frame.compress(
            data,
            compression_level=0 if level is None else level,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            block_checksum=False,
            store_size=False,
        )
    # Level 3 is zstd's and Kafka's default.
    return zstandard.ZstdCompressor(level=3 if level is None else level).compress(data)


def decompress(
    codec: int,
    data,
    *,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    legacy_lz4: bool = False,
) -> bytes:
    """Decompress ``data`` written with ``codec``.

    Args:
        codec: a codec id (0..4); NONE returns the data unchanged.
        data: the compressed bytes, all of them (trailing garbage is an error).
        max_output_bytes: refuse to produce more than this many bytes.
        legacy_lz4: accept the pre-KIP-57 LZ4 header checksum (magic 0 messages).
    Raises:
        UnsupportedCodecError: for an unknown codec id.
        DecompressionLimitError: when the output would exceed ``max_output_bytes``.
        CompressionError: for corrupt or truncated compressed data.
    """
    codec = codec_of(codec)
    data = bytes(data)
    if codec is NONE:
        out = data
    elif codec is GZIP:
        out = _gunzip(data, max_output_bytes)
    elif codec is SNAPPY:
        out = _snappy_decompress(data, max_output_bytes)
    elif codec is LZ4:
        out = _lz4_decompress(data, max_output_bytes, legacy_lz4)
    else:
        out = _zstd_decompress(data, max_output_bytes)
    if len(out) > max_output_bytes:
        raise _too_big(codec.name.lower(), max_output_bytes)
    return out


def _too_big(codec: str, limit: int) -> DecompressionLimitError:
    return DecompressionLimitError(f"{codec} output exceeds {limit} bytes")


# ---------------------------------------------------------------------------------- gzip

def _gunzip(data: bytes, limit: int) -> bytes:
    out = bytearray()
    rest = data
    while True:
        d = zlib.decompressobj(31)
        try:
            out += d.decompress(rest, limit - len(out) + 1)
        except zlib.error as e:
            raise CompressionError(f"corrupt gzip data: {e}") from None
        if len(out) > limit:
            raise _too_big("gzip", limit)
        if not d.eof:
            # Output stopped short of the limit without reaching the end: input ran out.
            raise CompressionError("truncated gzip data")
        rest = d.unused_data
        if not rest:
            return bytes(out)


# -------------------------------------------------------------------------------- snappy

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, compatible with 1
_XERIAL_BLOCK_BYTES = 32 * 1024  # snappy-java's default block size
_INT32 = struct.Struct(">i")


def _xerial_compress(data) -> bytes:
    view = memoryview(data)
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(view), _XERIAL_BLOCK_BYTES):
        block = bytes(cramjam.snappy.compress_raw(bytes(view[start : start + _XERIAL_BLOCK_BYTES])))
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


def _raw_snappy(block: bytes, budget: int, limit: int) -> bytes:
    try:
        # The raw format starts with the uncompressed length, so a bomb is refused unread.
        if cramjam.snappy.decompress_raw_len(block) > budget:
            raise _too_big("snappy", limit)
        return bytes(cramjam.snappy.decompress_raw(block))
    except cramjam.DecompressionError as e:
        raise CompressionError(f"corrupt snappy data: {e}") from None


def _snappy_decompress(data: bytes, limit: int) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return _raw_snappy(data, limit, limit)
    # Version and compat are not checked: some producers write them little-endian, and
    # there has only ever been one xerial format.
    if len(data) < len(_XERIAL_HEADER):
        raise CompressionError("truncated xerial snappy header")
    out = bytearray()
    pos = len(_XERIAL_HEADER)
    while pos < len(data):
        if len(data) - pos < 4:
            raise CompressionError("truncated xerial snappy block length")
        (size,) = _INT32.unpack_from(data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise CompressionError(f"xerial snappy block of {size} bytes overruns the data")
        out += _raw_snappy(data[pos : pos + size], limit - len(out), limit)
        pos += size
    return bytes(out)


# ----------------------------------------------------------------------------------- lz4

_LZ4_MAGIC = b"\x04\x22\x4d\x18"


def _lz4_fix_header_checksum(data: bytes) -> bytes:
    """Rewrite the frame descriptor's checksum byte to the value the LZ4 spec requires
    (second byte of xxh32 over FLG..end of descriptor).  Old Kafka hashed from the magic."""
    if len(data) < 7 or not data.startswith(_LZ4_MAGIC):
        return data  # let the decoder report it
    flg = data[4]
    end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if len(data) <= end:
        return data
    checksum = (xxh32(data[4:end]) >> 8) & 0xFF
    return data[:end] + bytes([checksum]) + data[end + 1 :]


def _lz4_decompress(data: bytes, limit: int, legacy: bool) -> bytes:
    if legacy:
        data = _lz4_fix_header_checksum(data)
    out = bytearray()
    rest = data
    while True:
        d = lz4.frame.LZ4FrameDecompressor()
        try:
            out += d.decompress(rest, max_length=limit - len(out) + 1)
        except RuntimeError as e:
            raise CompressionError(f"corrupt lz4 data: {e}") from None
        if len(out) > limit:
            raise _too_big("lz4", limit)
        if not d.eof:
            raise CompressionError("truncated lz4 frame")
        rest = d.unused_data
        if not rest:
            return bytes(out)


# The xxHash32 algorithm, needed only for the one-byte LZ4 descriptor checksum (at most 14
# input bytes), so a plain Python version costs nothing and avoids a dependency.
_P1, _P2, _P3, _P4, _P5 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D, 0x27D4EB2F, 0x165667B1
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 of ``data``."""
    n = len(data)
    pos = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while pos + 16 <= n:
            for i in range(4):
                lane = int.from_bytes(data[pos : pos + 4], "little")
                v[i] = (_rotl((v[i] + lane * _P2) & _M32, 13) * _P1) & _M32
                pos += 4
        acc = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        acc = (seed + _P5) & _M32
    acc = (acc + n) & _M32
    while pos + 4 <= n:
        lane = int.from_bytes(data[pos : pos + 4], "little")
        acc = (_rotl((acc + lane * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    while pos < n:
        acc = (_rotl((acc + data[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    acc ^= acc >> 15
    acc = (acc * _P2) & _M32
    acc ^= acc >> 13
    acc = (acc * _P3) & _M32
    acc ^= acc >> 16
    return acc


# ---------------------------------------------------------------------------------- zstd

# zstd can turn 4 input bytes into a 128 KiB block, and python-zstandard's streaming
# decompressor has no output cap, so input is fed in slices small enough that one slice
# cannot overshoot the remaining budget by more than about 2 MiB.
_ZSTD_MAX_RATIO = 32 * 1024
_ZSTD_MIN_SLICE = 64


def _zstd_decompress(data: bytes, limit: int) -> bytes:
    dctx = zstandard.ZstdDecompressor()
    out = bytearray()
    view = memoryview(data)
    pos = 0
    while pos < len(view):
        d = dctx.decompressobj()
        while True:
            slice_size = max(_ZSTD_MIN_SLICE, (limit - len(out)) // _ZSTD_MAX_RATIO)
            piece = view[pos : pos + slice_size]
            pos += len(piece)
            try:
                out += d.decompress(piece)
            except zstandard.ZstdError as e:
                raise CompressionError(f"corrupt zstd data: {e}") from None
            if len(out) > limit:
                raise _too_big("zstd", limit)
            if d.eof:
                # Bytes of the last slice past this frame belong to the next frame.
                pos -= len(d.unused_data)
                break
            if pos >= len(view):
                raise CompressionError("truncated zstd frame")
    if not data:
        raise CompressionError("empty zstd data")
    return bytes(out)
