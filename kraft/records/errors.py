"""The errors raised by ``kraft.records``.

Everything derives from :class:`CorruptRecordError` (defined next to the header parser, which
the log layer already uses), so a broker that catches that one class answers any bad produce
payload with CORRUPT_MESSAGE (2).  The subclasses exist for callers that want to tell the
cases apart: a reader that can wait for more bytes (:class:`TruncatedBatchError`), a produce
path that maps policy violations to INVALID_RECORD (87) or an unknown codec to
UNSUPPORTED_COMPRESSION_TYPE (76).
"""

from __future__ import annotations

from kraft.records.header import CorruptRecordError

__all__ = [
    "CorruptRecordError",
    "TruncatedBatchError",
    "InvalidRecordError",
    "CompressionError",
    "UnsupportedCodecError",
    "DecompressionLimitError",
]


class TruncatedBatchError(CorruptRecordError):
    """The input ends before the batch (or legacy message) it starts does.

    Raised by decoders that were asked for exactly one whole batch; the incremental readers
    return ``None`` instead.  Truncation *inside* a batch whose length field says it is whole
    is plain corruption and raises :class:`CorruptRecordError`.
    """


class InvalidRecordError(CorruptRecordError):
    """A well-formed batch that a broker must refuse (INVALID_RECORD, 87): for instance an
    empty batch, a record count that disagrees with lastOffsetDelta, or a control batch sent
    by a client."""


class CompressionError(CorruptRecordError):
    """Compressed data could not be decoded (bad framing, bad checksum, truncated stream)."""


class UnsupportedCodecError(CompressionError):
    """A compression codec id outside none=0, gzip=1, snappy=2, lz4=3, zstd=4."""


class DecompressionLimitError(CompressionError):
    """Decompressed data would exceed the caller's ``max_output_bytes`` (a decompression bomb,
    or a batch too large for this reader)."""
