"""Errors raised by the log.  Each carries the Kafka error code a broker answers with.

The codes are plain ints (not ``kraft.protocol.ErrorCode``) so the log does not depend on
the protocol package; the values are Kafka's.
"""

from __future__ import annotations

from kraft.records.header import CorruptRecordError

__all__ = [
    "CheckpointError",
    "CorruptIndexError",
    "CorruptRecordError",
    "LogClosedError",
    "LogConfigError",
    "LogError",
    "OffsetOutOfRangeError",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "UnexpectedAppendOffsetError",
]


class LogError(Exception):
    """Base class of the log's own errors."""

    error_code = -1  # UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(LogError):
    """A read or truncation named an offset outside [log start offset, log end offset]."""

    error_code = 1  # OFFSET_OUT_OF_RANGE

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int, what: str = "read"):
        super().__init__(
            f"cannot {what} offset {offset}: the log holds [{log_start_offset}, {log_end_offset})"
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class UnexpectedAppendOffsetError(LogError):
    """A follower append (offsets kept) whose offsets do not increase past the log end.

    ``first_offset`` is the offending batch's base offset, ``expected_at_least`` the smallest
    base offset the log would accept there.  A replica fetcher usually answers it by
    truncating (Kafka's UnexpectedAppendOffsetException).
    """

    def __init__(self, first_offset: int, expected_at_least: int):
        super().__init__(
            f"follower append with base offset {first_offset}: offsets must be at least "
            f"{expected_at_least} (monotonically increasing)"
        )
        self.first_offset = first_offset
        self.expected_at_least = expected_at_least


class RecordTooLargeError(LogError):
    """A batch larger than ``max.message.bytes`` (leader appends only, as in Kafka)."""

    error_code = 10  # MESSAGE_TOO_LARGE


class RecordBatchTooLargeError(LogError):
    """A batch that could never fit in a segment (larger than ``segment.bytes``)."""

    error_code = 18  # RECORD_LIST_TOO_LARGE


class LogClosedError(LogError):
    """The log was used after ``close()``."""

    error_code = 56  # KAFKA_STORAGE_ERROR


class CorruptIndexError(LogError):
    """An index file fails its sanity check; the segment's indexes are rebuilt from the log."""


class CheckpointError(LogError):
    """A checkpoint file is malformed; the message names the file and line."""

    error_code = 56  # KAFKA_STORAGE_ERROR


class LogConfigError(ValueError):
    """A bad topic-level log configuration key or value; the message names it."""
