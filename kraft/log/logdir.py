"""A log directory: partition logs plus the directory-level state Kafka keeps beside them.

Layout (Kafka's)::

    <log.dir>/
        recovery-point-offset-checkpoint    topic partition offset, per log
        log-start-offset-checkpoint
        .kafka_cleanshutdown                present only between a clean close and the next open
        orders-0/00000000000000000000.log   one directory per partition: "<topic>-<partition>"
        orders-0/00000000000000000000.index ...

The marker is written after every log is closed (flushed) and the checkpoints are written,
and removed once every log has been opened, so its presence means "nothing changed since a
clean close": logs then trust their indexes and skip recovery.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from kraft.log.atomic import atomic_write, fsync_dir
from kraft.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    OffsetCheckpointFile,
    TopicPartition,
)
from kraft.log.config import LogConfig
from kraft.log.file_cache import SEGMENT_FILES, OpenFileCache
from kraft.log.log import Log, wall_clock_ms

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
_DELETE_SUFFIX = "-delete"


class LogDir:
    """The logs of one ``log.dirs`` entry, their checkpoints and clean-shutdown marker."""

    def __init__(self, path: Path, config_for: Callable[[TopicPartition], LogConfig],
                 clock: Callable[[], int], had_clean_shutdown: bool,
                 files: OpenFileCache | None = SEGMENT_FILES):
        self.path = path
        self.files = files
        self.logs: dict[TopicPartition, Log] = {}
        self.had_clean_shutdown = had_clean_shutdown
        self._config_for = config_for
        self._clock = clock
        self._recovery_points = OffsetCheckpointFile(path / RECOVERY_POINT_CHECKPOINT)
        self._log_starts = OffsetCheckpointFile(path / LOG_START_OFFSET_CHECKPOINT)
        self._dir_dirty = False  # logs were created or deleted since the last fsync

    @classmethod
    def open(cls, path: str | os.PathLike,
             config: LogConfig | Callable[[TopicPartition], LogConfig] | None = None, *,
             clock: Callable[[], int] | None = None,
             files: OpenFileCache | None = SEGMENT_FILES) -> LogDir:
        """Open every partition log under ``path``.

        Args:
            config: one LogConfig for all logs, or a function giving each partition's.
            files: the cache of open segment files (default: the process's).
        Raises:
            CheckpointError: a checkpoint file is malformed.
        """
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        if config is None or isinstance(config, LogConfig):
            fixed = config or LogConfig()

            def config_for(tp: TopicPartition) -> LogConfig:
                return fixed
        else:
            config_for = config
        marker = path / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        self = cls(path, config_for, clock or wall_clock_ms, clean, files)
        recovery_points = self._recovery_points.read()
        log_starts = self._log_starts.read()
        for entry in sorted(os.scandir(path), key=lambda e: e.name):
            tp = TopicPartition.from_dir_name(entry.name)
            if tp is None or not entry.is_dir():
                if entry.is_dir() and entry.name.endswith(_DELETE_SUFFIX):
                    shutil.rmtree(entry.path)  # a deletion interrupted by a crash
                continue
            self.logs[tp] = Log.open(
                entry.path, config_for(tp), clock=self._clock,
                recovery_point=recovery_points.get(tp, 0), log_start_offset=log_starts.get(tp),
                had_clean_shutdown=clean, files=files,
            )
        if clean:  # from here on a crash is unclean again
            marker.unlink()
            fsync_dir(path)
        return self

    def get(self, tp: tuple[str, int]) -> Log | None:
        return self.logs.get(TopicPartition(*tp))

    def get_or_create(self, tp: tuple[str, int], config: LogConfig | None = None) -> Log:
        """The partition's log, created empty if it does not exist."""
        tp = TopicPartition(*tp)
        log = self.logs.get(tp)
        if log is None:
            # Nothing is fsynced here, as Kafka's LogManager creates a log: the new log's
            # directory and files become durable at its first flush (``Log.flush`` syncs its
            # directory) and its entry here at the next ``sync_dir``.  A machine crash before
            # then loses an empty log, which the replica creates again and re-fetches.
            # Creating thousands of replicas at once cost ~6 fsyncs each (issue 15).
            log = Log.open(self.path / tp.dir_name(), config or self._config_for(tp), clock=self._clock,
                           files=self.files)
            self._dir_dirty = True
            self.logs[tp] = log
        return log

    def delete(self, tp: tuple[str, int]) -> None:
        """Remove a partition's log: rename its directory aside, then delete it.  The
        rename is made durable at the next ``sync_dir``: a crash before then may bring the
        log back, and the broker deletes it again when the metadata says so."""
        tp = TopicPartition(*tp)
        log = self.logs.pop(tp)
        log.close(flush=False)
        doomed = self.path / (tp.dir_name() + _DELETE_SUFFIX)
        os.replace(log.dir, doomed)
        self._dir_dirty = True
        shutil.rmtree(doomed)

    def sync_dir(self) -> None:
        """fsync the directory once for every log created or deleted since the last call."""
        if self._dir_dirty:
            fsync_dir(self.path)
            self._dir_dirty = False

    def checkpoint(self) -> None:
        """Write the recovery points and log start offsets of every log."""
        self.sync_dir()
        self._recovery_points.write({tp: log.recovery_point for tp, log in self.logs.items()})
        self._log_starts.write({tp: log.log_start_offset for tp, log in self.logs.items()})

    def close(self) -> None:
        """Close (and flush) every log, checkpoint, then mark the shutdown clean."""
        for log in self.logs.values():
            log.close()
        self.checkpoint()
        atomic_write(self.path / CLEAN_SHUTDOWN_FILE, b"")
