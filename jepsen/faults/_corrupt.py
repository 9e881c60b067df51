"""Corruption of log segments: truncate a file's tail, flip random bits.

Run these only while the node is down (the file nemesis kills it first), one node at a
time, so the cluster can still repair the damage from the replicas.  Every random choice
comes from the caller's ``random.Random``, so a seed replays the same damage.
"""

from __future__ import annotations

import os
import random
from pathlib import Path


def segment_files(root: str | os.PathLike, pattern: str = "*.log") -> list[Path]:
    """Non-empty files under ``root`` matching ``pattern``, in a stable order."""
    return sorted(p for p in Path(root).rglob(pattern) if p.is_file() and p.stat().st_size > 0)


def truncate_tail(path: str | os.PathLike, drop_bytes: int) -> tuple[int, int]:
    """Cut ``drop_bytes`` off the end (at most the whole file); returns (old, new) size."""
    size = os.path.getsize(path)
    new = max(0, size - max(0, drop_bytes))
    os.truncate(path, new)
    return size, new


def flip_bits(path: str | os.PathLike, count: int, rng: random.Random) -> list[int]:
    """Flip ``count`` random bits in place; returns the flipped bit positions."""
    size = os.path.getsize(path)
    if size == 0 or count <= 0:
        return []
    positions = sorted(rng.randrange(size * 8) for _ in range(count))
    with open(path, "r+b") as f:
        for bit in positions:
            f.seek(bit // 8)
            byte = f.read(1)[0]
            f.seek(bit // 8)
            f.write(bytes([byte ^ (1 << (bit % 8))]))
        f.flush()
        os.fsync(f.fileno())
    return positions


def corrupt(root: str | os.PathLike, kind: str, rng: random.Random, *, pattern: str = "*.log",
            max_drop_bytes: int = 4096, bits: int = 1) -> dict:
    """Damage one randomly chosen segment under ``root``.

    Args:
        kind: ``truncate`` (cut 1..max_drop_bytes off its tail) or ``bitflip`` (flip ``bits``).
        rng: the seeded generator.
        pattern: which files count as segments.

    Returns:
        what was done, for the op's value (``{"file": None}`` when no segment exists).

    Raises:
        ValueError: an unknown kind.
    """
    if kind not in ("truncate", "bitflip"):
        raise ValueError(f"unknown corruption {kind!r} (truncate or bitflip)")
    files = segment_files(root, pattern)
    if not files:
        return {"file": None}
    path = rng.choice(files)
    if kind == "truncate":
        old, new = truncate_tail(path, rng.randint(1, max_drop_bytes))
        return {"file": str(path), "truncate": {"from": old, "to": new}}
    return {"file": str(path), "bitflip": flip_bits(path, bits, rng)}
