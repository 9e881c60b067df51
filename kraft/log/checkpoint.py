"""Offset checkpoint files in Kafka's text format.

A log directory holds several ``(topic, partition) -> offset`` maps, one file each:
``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint`` and (written by
replication) ``replication-offset-checkpoint``.  All share one format::

    0                 <- format version
    2                 <- number of entries
    orders 0 1234     <- topic, partition, offset separated by a space
    orders 1 987

Files are replaced atomically (see ``kraft.log.atomic``), so a reader sees either the old
map or the new one; a malformed file is an error naming the file and line, never a silent
zero, since trusting a wrong recovery point would skip recovery of unflushed data.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from kraft.log.atomic import atomic_write
from kraft.log.errors import CheckpointError

CHECKPOINT_VERSION = 0
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"

# Kafka's legal topic characters; a partition directory is "<topic>-<partition>".
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_INT = re.compile(r"-?[0-9]+")


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def dir_name(self) -> str:
        """The partition's directory name in a log directory, as Kafka names it."""
        return f"{self.topic}-{self.partition}"

    @classmethod
    def from_dir_name(cls, name: str) -> TopicPartition | None:
        """Parse ``<topic>-<partition>``; None for names that are not a partition directory
        (Kafka's ``-delete``/``-future``/``-stray`` renames end in a non-number)."""
        topic, sep, partition = name.rpartition("-")
        if not sep or not partition.isascii() or not partition.isdigit() or not _TOPIC.fullmatch(topic):
            return None
        return cls(topic, int(partition))


class OffsetCheckpointFile:
    """One ``(topic, partition) -> offset`` checkpoint file.

    ``read``/``write`` handle the whole map; ``get``/``put`` are the single-partition
    conveniences (``put`` rewrites the file with one entry changed).
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def read(self) -> dict[TopicPartition, int]:
        """The stored map; empty when the file does not exist.

        Raises:
            CheckpointError: the file is malformed (the message names file and line).
        """
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            raise CheckpointError(f"{self.path}: unreadable checkpoint ({exc})") from None
        return parse_checkpoint(text, str(self.path))

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Atomically replace the file with ``offsets``."""
        atomic_write(self.path, format_checkpoint(offsets).encode("utf-8"))

    def get(self, tp: tuple[str, int], default: int | None = None) -> int | None:
        return self.read().get(TopicPartition(*tp), default)

    def put(self, tp: tuple[str, int], offset: int) -> None:
        offsets = self.read()
        offsets[TopicPartition(*tp)] = offset
        self.write(offsets)


def format_checkpoint(offsets: Mapping[tuple[str, int], int]) -> str:
    lines = [str(CHECKPOINT_VERSION), str(len(offsets))]
    for (topic, partition), offset in sorted(offsets.items()):
        if not _TOPIC.fullmatch(topic):
            raise CheckpointError(f"illegal topic name {topic!r} in a checkpoint")
        lines.append(f"{topic} {int(partition)} {int(offset)}")
    return "\n".join(lines) + "\n"


def parse_checkpoint(text: str, source: str = "<checkpoint>") -> dict[TopicPartition, int]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()

    def fail(lineno: int, why: str):
        raise CheckpointError(f"{source}:{lineno}: malformed checkpoint: {why}")

    if not lines:
        fail(1, "empty file (expected a version line)")
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        fail(1, f"unsupported version {lines[0]!r} (expected {CHECKPOINT_VERSION})")
    if len(lines) < 2 or not _INT.fullmatch(lines[1].strip()):
        fail(2, f"expected the entry count, got {lines[1] if len(lines) > 1 else 'end of file'!r}")
    count = int(lines[1])
    if count != len(lines) - 2:
        fail(2, f"header says {count} entries, the file has {len(lines) - 2}")
    offsets: dict[TopicPartition, int] = {}
    for lineno, line in enumerate(lines[2:], 3):
        parts = line.split()
        if len(parts) != 3 or not _TOPIC.fullmatch(parts[0]) or not all(
            _INT.fullmatch(p) for p in parts[1:]
        ):
            fail(lineno, f"expected 'topic partition offset', got {line!r}")
        tp = TopicPartition(parts[0], int(parts[1]))
        if tp in offsets:
            fail(lineno, f"duplicate entry for {tp.dir_name()}")
        offsets[tp] = int(parts[2])
    return offsets
