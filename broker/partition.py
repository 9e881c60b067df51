"""One partition replica on this broker: its log, its replication state, its producers.

The trio-side companion of the sans-IO ``PartitionState``: it owns the ``Log`` and the
leader-epoch checkpoint file, turns state decisions into appends and truncations, and wakes
the tasks waiting on this partition (acks=all producers, long-polling fetches).

Transactions: every append, leader or follower, goes through the producer state with what
its markers say (``read_txn_marker``), and an ABORT marker adds an entry to the ``.txnindex``
of the segment it lands in.  Opening the replica replays the whole log into the producer
state, which also rebuilds the ``.txnindex`` of the segments log recovery had to scan (the
log layer cannot: which transaction a marker ends is producer state).
"""

from __future__ import annotations

import logging
from pathlib import Path

import trio

from broker.leader_epoch_cache import LeaderEpochCache, LeaderEpochCheckpointError
from broker.partition_state import PartitionState
from broker.partition_state_types import ProduceCompletion
from broker.producer_state import CompletedTxn, ProducerStateManager
from kraft.log import Log
from kraft.log.cleaner import LogCleaner
from kraft.log.errors import CorruptIndexError
from kraft.log.txn_index import AbortedTxn
from kraft.protocol.error_codes import ErrorCode
from kraft.records.control import read_txn_marker
from kraft.records.header import iter_batches

log = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


class Partition:
    def __init__(self, topic: str, index: int, topic_id, plog: Log, broker_id: int, *,
                 high_watermark: int = 0, unsafe_ack_before_replication: bool = False,
                 cleaner: LogCleaner | None = None, waiting: set | None = None):
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = plog
        self.cleaner = cleaner  # told of truncations: its checkpoint must not pass the log end
        self.truncations = 0  # the log cleaner discards a plan made before a truncation
        self._epoch_path = Path(plog.dir) / LEADER_EPOCH_CHECKPOINT
        try:
            cache = LeaderEpochCache.read_checkpoint(self._epoch_path)
        except LeaderEpochCheckpointError as exc:  # torn by a machine crash: rebuilt below
            log.warning("%s-%d: %s; rebuilding the leader epochs from the log", topic, index, exc)
            cache = LeaderEpochCache()
        cache.truncate_from_end(plog.log_end_offset)  # entries past a recovered log end
        self._written_epochs = cache.entries
        self._epochs_unsynced = False  # the checkpoint file was written but not fsynced
        self.producers = ProducerStateManager()
        # The checkpoint is written without fsync (``checkpoint_epochs``), so after a machine
        # crash it may lack epochs of batches that survived: the batches' own epochs fill
        # them in, as Kafka's recovery re-assigns epochs from the segments it reads.
        aborted: list[AbortedTxn] = []
        self.producers.truncate_and_reload(
            _assigning_epochs(_with_markers(plog), cache),
            on_completed=lambda txn, lso: aborted.append(_aborted_entry(txn, lso)) if txn.is_aborted else None)
        recovered = plog.load_result.recovered if plog.load_result is not None else ()
        _rebuild_txn_indexes(plog, recovered, aborted)
        self.state = PartitionState(
            broker_id, cache, log_start_offset=plog.log_start_offset,
            log_end_offset=plog.log_end_offset, high_watermark=high_watermark,
            unsafe_ack_before_replication=unsafe_ack_before_replication)
        self._watchers: set = set()  # long-polling fetches (``watch``)
        self.version = 0  # changes counted by ``notify``
        self.followed_leader: int | None = None  # the owner's index of followers (ReplicaManager)
        self.on_change = None  # called by ``notify`` (the owner tells the replica fetchers)
        self._waiters: dict[int, list] = {}  # waiter id -> [event, error]
        self._waiting = waiting  # the owner's set of partitions with waiters (deadline checks)
        # BrokerTopicMetrics (kraft.metrics.stats), set by the owner: this topic's and the
        # broker's, counted per append (never per record).
        self.topic_stats = None
        self.broker_stats = None

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.index}"

    # -- waking waiters ---------------------------------------------------------------

    def notify(self) -> None:
        """New data, a new high watermark, log start, epoch or role: wake long-polling
        fetches and count the change (``version``: fetch sessions skip the partitions
        whose version they have seen)."""
        self.version += 1
        if self.on_change is not None:
            self.on_change(self)
        watchers, self._watchers = self._watchers, set()
        for wake in watchers:
            wake(self)

    def watch(self, wake) -> None:
        """Call ``wake(partition)`` at the next ``notify``: one callback serves a fetch that
        waits on thousands of partitions (a follower's), where a task per partition cost
        more than the fetch itself."""
        self._watchers.add(wake)

    def unwatch(self, wake) -> None:
        self._watchers.discard(wake)

    def add_waiter(self, waiter_id: int) -> list:
        slot = [trio.Event(), None]
        self._waiters[waiter_id] = slot
        if self._waiting is not None:
            self._waiting.add(self)
        return slot

    def drop_waiter(self, waiter_id: int) -> None:
        self._waiters.pop(waiter_id, None)

    def complete(self, completions) -> None:
        for c in completions:
            slot = self._waiters.pop(c.waiter_id, None)
            if slot is not None:
                slot[1] = c.error
                slot[0].set()
        if completions:
            self.notify()

    # -- log changes ------------------------------------------------------------------

    def checkpoint_epochs(self, *, sync: bool = False) -> None:
        """Write the leader-epoch checkpoint when the cache changed since the last write.

        Not fsynced unless ``sync`` (at close): like the log's own data, which is not
        fsynced either (durability is by replication), a machine crash may lose it, and
        opening the replica rebuilds it from the batches' epochs.  Creating thousands of
        replicas must not cost two fsyncs each (issue 15)."""
        entries = self.state.epoch_cache.entries
        if entries != self._written_epochs or (sync and self._epochs_unsynced):
            self.state.epoch_cache.write_checkpoint(self._epoch_path, sync=sync)
            self._written_epochs = entries
            self._epochs_unsynced = not sync

    def append_as_leader(self, buf: bytearray) -> tuple[int, int, list[ProduceCompletion]]:
        """Append a validated produce payload (or a transaction marker the broker wrote):
        (first offset, last offset, completions)."""
        info = self.log.append(buf, assign_offsets=True, leader_epoch=self.state.leader_epoch)
        if self.topic_stats is not None:  # MessagesInPerSec / BytesInPerSec, as Kafka after an append
            self.topic_stats.appended(info.last_offset - info.first_offset + 1, len(buf))
        # The log patched ``buf`` in place: its headers now carry the assigned offsets.
        headers = self._update_producers(buf)
        completions = self.state.on_local_append(self.log.log_end_offset, headers)
        self.notify()
        return info.first_offset, info.last_offset, completions

    def _update_producers(self, data) -> list:
        """Producer state and ``.txnindex`` for batches just appended; returns their headers."""
        headers = []
        for pos, h in iter_batches(data, check_crc=False):
            headers.append(h)
            marker = read_txn_marker(bytes(data[pos:pos + h.size])) if h.is_control and h.is_transactional else None
            completed = self.producers.update(h, marker=marker)
            if completed is not None and completed.is_aborted:
                self.log.append_aborted_txn(_aborted_entry(completed, self.producers.stable_offset_after(completed)))
        # A follower's LSO is asked for by nobody: completed transactions are forgotten here.
        self.producers.on_high_watermark(self.state.high_watermark)
        return headers

    @property
    def last_stable_offset(self) -> int:
        """The LSO: what READ_COMMITTED consumers may read up to (``producer_state``); never
        below the log start (retention may delete the start of a transaction still open)."""
        return max(self.producers.last_stable_offset(self.state.high_watermark), self.state.log_start_offset)

    def append_as_follower(self, data: bytes) -> list:
        """Append fetched batches (offsets kept); returns their headers."""
        self.log.append(data, assign_offsets=False)
        if self.broker_stats is not None:
            self.broker_stats.replication_bytes_in += len(data)
        headers = self._update_producers(data)
        self.state.on_local_append(self.log.log_end_offset, headers)
        self.checkpoint_epochs()
        self.notify()
        return headers

    def truncate_to(self, offset: int) -> None:
        if offset < self.log.log_end_offset:
            log.info("%s: truncating from %d to %d", self.name, self.log.log_end_offset, offset)
            self.log.truncate_to(offset)
            self._truncated()
            self.producers.truncate_and_reload(_with_markers(self.log))
        self.state.on_truncated(offset)
        self.checkpoint_epochs()
        self.notify()

    def restart_at(self, offset: int) -> None:
        """Our log ends before the leader's start: drop it and start over at ``offset``."""
        self.log.truncate_fully_and_start_at(offset)
        self._truncated()
        self.producers.truncate_and_reload(())
        self.checkpoint_epochs()
        self.notify()

    def _truncated(self) -> None:
        self.truncations += 1
        if self.cleaner is not None:
            self.cleaner.truncated(self.log, self.log.log_end_offset)

    def close(self) -> None:
        self.complete(self.state.become_offline().completed)


def _assigning_epochs(batches, cache: LeaderEpochCache):
    """``batches`` ((header, marker) pairs), assigning each one's leader epoch to ``cache``."""
    for header, marker in batches:
        cache.assign_from_batch(header.partition_leader_epoch, header.base_offset)
        yield header, marker


def _with_markers(plog: Log):
    """``(header, TxnMarker or None)`` for the log's batches: only transaction markers
    are read beyond their headers."""
    for header, data in plog.iter_batches(with_data=_is_txn_marker):
        yield header, read_txn_marker(data) if data is not None else None


def _is_txn_marker(header) -> bool:
    return header.is_control and header.is_transactional


def _aborted_entry(txn: CompletedTxn, stable_offset: int) -> AbortedTxn:
    return AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, stable_offset)


def _rebuild_txn_indexes(plog: Log, recovered, aborted: list[AbortedTxn]) -> None:
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


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
