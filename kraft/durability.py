"""Durable file primitives, and reports of what a node has made durable.

``atomic_write`` replaces a file so that a crash leaves the old or the new content, never a
mixture: write ``<name>.tmp``, fsync it, rename it over the target, fsync the directory.

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


TMP_SUFFIX = ".tmp"


def fsync_dir(directory) -> None:
    """Make a directory's entries (creations, renames, deletions) durable."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_fully(fd: int, data, position: int) -> None:
    """``pwrite`` all of ``data`` at ``position`` (retrying short writes)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        view = view[written:]
        position += written


def overwrite(path, data: bytes) -> None:
    """Write ``data`` over the start of the existing file ``path`` and cut it there: no new
    file, so no directory entry to create (creating one cost a new file 0.1-0.7 ms on this
    ext4, against 17 us for this).  Not durable, and not atomic against a machine crash:
    only for a format whose reader rejects a torn file, written where a torn file is rebuilt
    and the new content only adds to the old (then every mixture of old and new sectors has
    the wrong length for its own header).  A process crash leaves the old content or the
    new one (one ``pwrite``), or the new one with the old one's tail, which the reader
    rejects as well.

    Raises:
        FileNotFoundError: ``path`` does not exist (nothing was written).
    """
    fd = os.open(os.fspath(path), os.O_WRONLY)
    try:
        write_fully(fd, data, 0)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


def atomic_write(path, data: bytes, *, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically, and durably unless ``sync`` is False.

    ``sync=False`` keeps the replacement atomic for a process crash (readers see the old
    or the new file) but leaves it in the page cache: for state a crash of the machine may
    lose because it is rebuilt or re-fetched (a replica's leader-epoch checkpoint, as
    Kafka's since KAFKA-15046)."""
    path = os.fspath(path)
    tmp = path + TMP_SUFFIX
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_fully(fd, data, 0)
        if sync:
            os.fsync(fd)
            note_fsync(tmp, fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    note_rename(tmp, path)
    if sync:
        fsync_dir(os.path.dirname(os.path.abspath(path)))
