"""The aborted-transaction index of a segment: ``<base>.txnindex``, Kafka's format.

A READ_COMMITTED fetch must tell the consumer which producers' data in the fetched range
belongs to aborted transactions.  Every ABORT marker appended to a segment adds one entry
to that segment's index, 34 bytes, big-endian, back to back (Kafka's ``AbortedTxn``)::

    version             int16   0
    producer_id         int64
    first_offset        int64   the transaction's first offset in this partition
    last_offset         int64   the offset of the ABORT marker
    last_stable_offset  int64   the partition's LSO once the marker was appended

``last_stable_offset`` lets a search stop early: an entry whose LSO reaches the fetch's
upper bound proves every transaction that started below that bound has ended by then, so
no later segment can hold another entry the fetch needs (``Log.collect_aborted_txns``).

The file exists only once a segment has an aborted transaction.  Entries are written
without fsync (``flush`` syncs them with the segment); a torn last entry fails the sanity
check and the partition rebuilds the index from the log (the log layer cannot: which
transaction a marker ends is producer state, ``broker.producer_state``).  Entries are
kept in memory once read: aborts are rare and an entry is small.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from kraft.log.errors import CorruptIndexError

TXN_INDEX_SUFFIX = ".txnindex"
TXN_INDEX_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = TXN_INDEX_VERSION

    def encode(self) -> bytes:
        return _ENTRY.pack(self.version, self.producer_id, self.first_offset, self.last_offset,
                           self.last_stable_offset)


def decode_entries(data: bytes, path: Path | str = "<bytes>") -> list[AbortedTxn]:
    """Raises CorruptIndexError for a length that is not whole entries or a bad version."""
    if len(data) % ENTRY_SIZE:
        raise CorruptIndexError(f"{path}: {len(data)} bytes is not a whole number of "
                                f"{ENTRY_SIZE}-byte aborted-transaction entries")
    out = []
    for pos in range(0, len(data), ENTRY_SIZE):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version != TXN_INDEX_VERSION:
            raise CorruptIndexError(f"{path}: aborted-transaction entry version {version} at byte {pos}")
        out.append(AbortedTxn(pid, first, last, lso, version))
    return out


def read_entries(path: Path) -> list[AbortedTxn]:
    """The entries of a ``.txnindex`` file (none when it does not exist)."""
    try:
        return decode_entries(path.read_bytes(), path)
    except FileNotFoundError:
        return []


@dataclass(frozen=True, slots=True)
class TxnSearch:
    """Entries overlapping a fetch; ``complete``: no later segment can add any."""

    aborted: list[AbortedTxn]
    complete: bool


class TransactionIndex:
    def __init__(self, path: Path):
        self.path = path
        self._entries: list[AbortedTxn] | None = None
        self.needs_fsync = False

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = read_entries(self.path)
        return self._entries

    def sanity_check(self) -> None:
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            return
        if size % ENTRY_SIZE:
            raise CorruptIndexError(f"{self.path}: size {size} is not a multiple of {ENTRY_SIZE}")

    def append(self, entry: AbortedTxn) -> None:
        entries = self.entries
        if entries and entry.last_offset <= entries[-1].last_offset:
            raise ValueError(f"aborted transaction ending at {entry.last_offset} does not follow "
                             f"the last one, ending at {entries[-1].last_offset}")
        with open(self.path, "ab") as f:
            f.write(entry.encode())
        entries.append(entry)
        self.needs_fsync = True

    def extend(self, entries) -> None:
        for entry in entries:
            self.append(entry)

    def reset(self) -> None:
        """Empty the index (its segment is being recovered: the partition refills it)."""
        self._unlink()
        self._entries = []
        self.needs_fsync = False

    def known_empty(self) -> None:
        """A new segment in a new directory: no file, nothing to read."""
        self._entries = []

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of markers at or after ``offset``."""
        kept = [e for e in self.entries if e.last_offset < offset]
        if len(kept) == len(self.entries):
            return
        self._rewrite(kept)

    def _rewrite(self, entries: list[AbortedTxn]) -> None:
        if not entries:
            self.reset()
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(b"".join(e.encode() for e in entries))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self._entries = list(entries)

    def _unlink(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> TxnSearch:
        """Aborted transactions ending at or after ``fetch_offset`` and starting below
        ``upper_bound_offset`` (Kafka's ``collectAbortedTxns``)."""
        found = []
        for e in self.entries:
            if e.last_offset >= fetch_offset and e.first_offset < upper_bound_offset:
                found.append(e)
            if e.last_stable_offset >= upper_bound_offset:
                return TxnSearch(found, True)
        return TxnSearch(found, False)

    def flush(self) -> None:
        if self.needs_fsync and self.path.exists():
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self.needs_fsync = False


__all__ = ["ENTRY_SIZE", "TXN_INDEX_SUFFIX", "AbortedTxn", "TransactionIndex", "TxnSearch",
           "decode_entries", "read_entries"]
