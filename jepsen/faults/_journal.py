"""Lose-unsynced-writes: cut a node's files back to what it last fsynced.

The contract (the kraft side must honour it).  When the environment variable
``KRAFT_FSYNC_JOURNAL`` names a file, the process appends one line to it for each durable
event, *immediately after* the event and before anything that relies on it (an ack, a vote
sent, a checkpoint advanced).  The line is a single ``write()`` on a descriptor opened
with ``O_APPEND`` (no fsync of the journal needed: it must survive a process crash, not a
machine crash).  Fields are separated by one TAB, paths are absolute, UTF-8::

    fsync <TAB> <size> <TAB> <path>     os.fsync/fdatasync of the file at <path> returned;
                                        <size> = os.fstat(fd).st_size right then
    rename <TAB> <src> <TAB> <dst>      os.rename/os.replace(src, dst) happened (a file, or a
                                        directory: everything under it moves along)
    unlink <TAB> <path>                 the file was deleted

A missing trailing newline marks a torn last line (the process died mid-write); it is
ignored.  ``JournalWriter`` is the reference implementation.

The model is a *prefix model* suited to append-only logs and write-tmp-fsync-rename
files: the durable content of a file is the prefix of its current bytes up to the size at
its last fsync.  ``lose_unsynced_writes`` therefore truncates every file under the node's
data directory to its last synced size and deletes files that were never synced (after
following renames).  What it does not model: overwrites inside an already-synced prefix
(they stay), directory entries that a real crash could lose although the file was synced
(a synced file is kept even if its directory was not fsynced), and a file shrunk below its
synced size (left as it is).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

JOURNAL_ENV = "KRAFT_FSYNC_JOURNAL"


class JournalError(ValueError):
    """The journal has a line that breaks the contract."""


class JournalWriter:
    """Reference writer of the journal (what kraft's fsync points call)."""

    def __init__(self, path: str | os.PathLike | None = None):
        path = path if path is not None else os.environ.get(JOURNAL_ENV)
        self._fd = (os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                    if path else None)

    def _line(self, *fields: str) -> None:
        if self._fd is not None:
            os.write(self._fd, ("\t".join(fields) + "\n").encode())

    def fsynced(self, path: str | os.PathLike, size: int) -> None:
        self._line("fsync", str(size), os.path.abspath(path))

    def renamed(self, src: str | os.PathLike, dst: str | os.PathLike) -> None:
        self._line("rename", os.path.abspath(src), os.path.abspath(dst))

    def unlinked(self, path: str | os.PathLike) -> None:
        self._line("unlink", os.path.abspath(path))

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def read_journal(path: str | os.PathLike) -> dict[str, int]:
    """The durable size of every file the journal knows, by absolute path.

    Raises:
        JournalError: a complete line with an unknown kind or malformed fields.
    """
    try:
        text = Path(path).read_bytes().decode()
    except FileNotFoundError:
        return {}
    lines = text.split("\n")
    synced: dict[str, int] = {}
    for number, line in enumerate(lines[:-1], 1):  # the last piece is torn or empty
        fields = line.split("\t")
        try:
            kind = fields[0]
            if kind == "fsync" and len(fields) == 3:
                synced[fields[2]] = int(fields[1])
            elif kind == "rename" and len(fields) == 3:
                _rename(synced, fields[1], fields[2])
            elif kind == "unlink" and len(fields) == 2:
                synced.pop(fields[1], None)
            else:
                raise ValueError
        except ValueError:
            raise JournalError(f"{path}:{number}: not a journal line: {line!r}") from None
    return synced


def _rename(synced: dict[str, int], src: str, dst: str) -> None:
    size = synced.pop(src, None)
    if size is None:
        synced.pop(dst, None)  # replaced by a file that was never synced
    else:
        synced[dst] = size
    inside = src.rstrip("/") + "/"
    for path in [p for p in synced if p.startswith(inside)]:
        synced[dst.rstrip("/") + "/" + path[len(inside):]] = synced.pop(path)


@dataclass
class LossReport:
    truncated: dict[str, tuple[int, int]] = field(default_factory=dict)  # path -> (was, now)
    deleted: list[str] = field(default_factory=list)
    kept: int = 0

    def to_dict(self) -> dict:
        return {"truncated": {p: list(v) for p, v in self.truncated.items()},
                "deleted": self.deleted, "kept": self.kept,
                "bytes_lost": sum(a - b for a, b in self.truncated.values())}


def _files(root: str | os.PathLike, journal: str | os.PathLike):
    journal_path = os.path.abspath(journal)
    for dirpath, _dirs, files in os.walk(root):
        for name in sorted(files):
            path = os.path.abspath(os.path.join(dirpath, name))
            if path != journal_path and os.path.isfile(path) and not os.path.islink(path):
                yield path


def record_baseline(root: str | os.PathLike, journal: str | os.PathLike) -> int:
    """Journal every file now under ``root`` as synced at its current size.

    For files written durably by a process that ran without the journal (``kraftctl
    format``) or after a clean shutdown; returns how many files were recorded.
    """
    writer = JournalWriter(journal)
    count = 0
    try:
        for path in _files(root, journal):
            writer.fsynced(path, os.path.getsize(path))
            count += 1
    finally:
        writer.close()
    return count


def lose_unsynced_writes(root: str | os.PathLike, journal: str | os.PathLike) -> LossReport:
    """Cut every regular file under ``root`` back to its last fsynced size; delete files
    never fsynced.  Run it only while the node's process is dead.

    Raises:
        JournalError: there is no journal at all (the node does not implement the contract,
            or no baseline was recorded): applying the fault would wipe the node.
    """
    if not os.path.exists(journal):
        raise JournalError(f"no fsync journal at {journal}: the node never reported an fsync "
                           f"(set {JOURNAL_ENV}, and record_baseline after formatting)")
    synced = read_journal(journal)
    report = LossReport()
    for path in _files(root, journal):
            size = os.path.getsize(path)
            durable = synced.get(path)
            if durable is None:
                os.unlink(path)
                report.deleted.append(path)
            elif size > durable:
                os.truncate(path, durable)
                report.truncated[path] = (size, durable)
            else:
                report.kept += 1
    return report
