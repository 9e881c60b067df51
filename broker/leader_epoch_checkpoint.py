"""Where a partition's leader-epoch cache is kept between runs.

``Partition`` reads the cache when it opens a replica and writes it when it changed
(``broker/partition.py``); the store decides where the bytes go.  The broker's store is
the ``leader-epoch-checkpoint`` file in the partition directory, replaced atomically; the
data-plane simulator's (``broker/sim/disk.py``) is memory that a simulated power loss cuts
back to what was last synced.  The format is ``LeaderEpochCache.to_checkpoint_bytes``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from broker.leader_epoch_cache import LeaderEpochCache, LeaderEpochCheckpointError
from kraft.durability import atomic_write

CHECKPOINT_FILE_NAME = "leader-epoch-checkpoint"


class EpochCheckpointStore(Protocol):
    def read(self) -> LeaderEpochCache:
        """The stored cache (empty when none was stored).

        Raises:
            LeaderEpochCheckpointError: what is stored is unreadable or malformed.
        """

    def write(self, cache: LeaderEpochCache, *, sync: bool) -> None:
        """Replace the stored cache; durable across a machine crash only with ``sync``."""


class LeaderEpochCheckpointFile:
    """The ``leader-epoch-checkpoint`` file of one partition directory."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    @classmethod
    def in_directory(cls, directory: str | os.PathLike) -> LeaderEpochCheckpointFile:
        return cls(Path(directory) / CHECKPOINT_FILE_NAME)

    def read(self) -> LeaderEpochCache:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return LeaderEpochCache()
        except OSError as exc:
            raise LeaderEpochCheckpointError(f"{self.path}: unreadable checkpoint ({exc.strerror})") from None
        return LeaderEpochCache.from_checkpoint_bytes(data, str(self.path))

    def write(self, cache: LeaderEpochCache, *, sync: bool = True) -> None:
        """Atomically replace the file (fsynced unless ``sync`` is False)."""
        atomic_write(self.path, cache.to_checkpoint_bytes(), sync=sync)
