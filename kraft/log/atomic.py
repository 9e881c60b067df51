"""Crash-safe file replacement and directory fsync for the log (see ``kraft.durability``,
which also reports each fsync to the fault-injection harness when asked to)."""

from kraft.durability import TMP_SUFFIX, atomic_write, fsync_dir, write_fully

__all__ = ["TMP_SUFFIX", "atomic_write", "fsync_dir", "write_fully"]
