"""kraft.log: the segmented commit log, in Kafka's on-disk format.

``Log`` is one partition's log (see ``kraft.log.log`` for the theory of operation),
``LogDir`` a directory of them with Kafka's checkpoint files and clean-shutdown marker,
``LogConfig`` the topic-level settings under Kafka's names, ``OffsetCheckpointFile`` the
reusable ``(topic, partition) -> offset`` checkpoint, ``LogCleaner`` the compaction of
``cleanup.policy=compact`` logs (``kraft.log.cleaner``).
"""

from kraft.log.atomic import atomic_write, fsync_dir
from kraft.log.batches import AppendInfo
from kraft.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
    TopicPartition,
)
from kraft.log.cleaner import (
    CLEANER_OFFSET_CHECKPOINT,
    Cleanable,
    CleanResult,
    LogCleaner,
)
from kraft.log.config import LogConfig
from kraft.log.errors import (
    CheckpointError,
    CorruptIndexError,
    CorruptRecordError,
    LogClosedError,
    LogConfigError,
    LogError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from kraft.log.log import Log, TimestampLookup, wall_clock_ms
from kraft.log.logdir import CLEAN_SHUTDOWN_FILE, LogDir
from kraft.log.segment import LogSegment, ReadResult

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT", "CLEAN_SHUTDOWN_FILE", "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT", "REPLICATION_OFFSET_CHECKPOINT", "AppendInfo",
    "CheckpointError", "CleanResult", "Cleanable", "CorruptIndexError", "CorruptRecordError",
    "Log", "LogCleaner", "LogClosedError", "LogConfig", "LogConfigError", "LogDir", "LogError",
    "LogSegment", "OffsetCheckpointFile", "OffsetOutOfRangeError", "ReadResult",
    "RecordBatchTooLargeError", "RecordTooLargeError", "TimestampLookup", "TopicPartition",
    "UnexpectedAppendOffsetError", "atomic_write", "fsync_dir", "wall_clock_ms",
]
