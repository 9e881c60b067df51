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
from kraft.durability import atomic_write, overwrite

CHECKPOINT_FILE_NAME = "leader-epoch-checkpoint"


class EpochCheckpointStore(Protocol):
    def read(self) -> LeaderEpochCache:
        """The stored cache (empty when none was stored).

        Raises:
            LeaderEpochCheckpointError: what is stored is unreadable or malformed.
        """

    def write(self, cache: LeaderEpochCache, *, sync: bool, grown: bool = False) -> None:
        """Replace the stored cache; durable across a machine crash only with ``sync``.
        ``grown``: the cache only gained entries at its end since the last write."""


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

    def write(self, cache: LeaderEpochCache, *, sync: bool = True, grown: bool = False) -> None:
        """Atomically replace the file (fsynced unless ``sync`` is False).  A cache that only
        grew is written over the old file in place (``overwrite``): the entry count heads
        the file, so a torn write of a longer list is a malformed file, which opening the
        replica rebuilds from the batches' epochs."""
        data = cache.to_checkpoint_bytes()
        if grown and not sync:
            try:
                overwrite(self.path, data)
                return
            except FileNotFoundError:
                pass
        atomic_write(self.path, data, sync=sync)
