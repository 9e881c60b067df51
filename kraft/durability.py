"""Reports of what a node has made durable, for the fault-injection harness.

When ``KRAFT_FSYNC_JOURNAL`` names a file, every fsync, rename and unlink kraft performs is
appended to it as one line (tab-separated, absolute paths), right after it happened and
before anything that depends on it (an acknowledgement, a vote, a checkpoint)::

    fsync   <size of the file after the fsync>   <path>
    rename  <src>   <dst>
    unlink  <path>

jepsen's lose-unsynced-writes fault reads it to cut every file back to what the node last
fsynced, as a power loss would.  Without the variable every function here is a no-op.
"""

from __future__ import annotations

import os

_JOURNAL = os.environ.get("KRAFT_FSYNC_JOURNAL")
_fd: int | None = None


def _write(line: str) -> None:
    global _fd
    if _fd is None:
        _fd = os.open(_JOURNAL, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(_fd, line.encode())  # one write() per line: O_APPEND keeps lines whole


def note_fsync(path, fd: int) -> None:
    if _JOURNAL:
        _write(f"fsync\t{os.fstat(fd).st_size}\t{os.path.abspath(path)}\n")


def note_rename(src, dst) -> None:
    if _JOURNAL:
        _write(f"rename\t{os.path.abspath(src)}\t{os.path.abspath(dst)}\n")


def note_unlink(path) -> None:
    if _JOURNAL:
        _write(f"unlink\t{os.path.abspath(path)}\n")


def fsync_dir(directory) -> None:
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
