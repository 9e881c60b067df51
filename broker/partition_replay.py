"""What opening a partition replica replays from its log, and what an append adds to the
``.txnindex``: the batches' headers with their transaction markers (only markers are read
beyond their headers), the leader epochs they carry, and the aborted-transaction entries
of the segments log recovery had to scan (the log layer cannot rebuild those: which
transaction a marker ends is producer state)."""

from __future__ import annotations

import logging

from broker.leader_epoch_cache import LeaderEpochCache
from broker.producer_state import CompletedTxn
from kraft.log import Log
from kraft.log.errors import CorruptIndexError
from kraft.log.txn_index import AbortedTxn
from kraft.records.control import read_txn_marker

log = logging.getLogger(__name__)


def assigning_epochs(batches, cache: LeaderEpochCache):
    """``batches`` ((header, marker) pairs), assigning each one's leader epoch to ``cache``."""
    for header, marker in batches:
        cache.assign_from_batch(header.partition_leader_epoch, header.base_offset)
        yield header, marker


def with_markers(plog: Log):
    """``(header, TxnMarker or None)`` for the log's batches: only transaction markers
    are read beyond their headers."""
    for header, data in plog.iter_batches(with_data=is_txn_marker):
        yield header, read_txn_marker(data) if data is not None else None


def is_txn_marker(header) -> bool:
    return header.is_control and header.is_transactional


def aborted_entry(txn: CompletedTxn, stable_offset: int) -> AbortedTxn:
    return AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, stable_offset)


def rebuild_txn_indexes(plog: Log, recovered, aborted: list[AbortedTxn]) -> None:
    """Make the ``.txnindex`` of each segment log recovery scanned (``recovered``: base
    offsets) hold what the replay found; the others are trusted as written."""
    if not recovered:
        return
    wanted: dict[int, list[AbortedTxn]] = {}
    for entry in aborted:
        wanted.setdefault(plog.segment_holding(entry.last_offset).base_offset, []).append(entry)
    bases = set(recovered)
    for seg in plog.segments:
        if seg.base_offset not in bases:
            continue
        want = wanted.get(seg.base_offset, [])
        try:
            same = seg.txn_index.entries == want
        except CorruptIndexError:
            same = False
        if not same:
            log.info("%s: rebuilding %s (%d aborted transactions)", plog.dir.name,
                     seg.txn_index.path.name, len(want))
            seg.txn_index.reset()
            seg.txn_index.extend(want)
