"""One partition replica on this broker: its log, its replication state, its producers.

The one shell of a partition, the trio-side companion of the sans-IO ``PartitionState``: it
owns the ``Log`` and the leader-epoch checkpoint file.  A produce, a follower's fetch, a
fetched answer, a registration from the metadata image, an AlterPartition answer, a
truncation, retention and DeleteRecords each ask the state for a decision and apply its
effects here (appends, truncations, waking the acks=all producers and long-polling fetches
waiting on this partition); the data path, the replica fetcher, the replica manager, the
node and the data-plane simulator only call these methods.

Transactions: every append, leader or follower, goes through the producer state with what
its markers say (``read_txn_marker``), and an ABORT marker adds an entry to the ``.txnindex``
of the segment it lands in.  Opening the replica replays the whole log into the producer
state, which also rebuilds the ``.txnindex`` of the segments log recovery had to scan
(``broker/partition_replay.py``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import trio

from broker.leader_epoch_cache import LeaderEpochCache, LeaderEpochCheckpointError
from broker.leader_epoch_checkpoint import EpochCheckpointStore, LeaderEpochCheckpointFile
from broker.partition_state import PartitionState
from broker.partition_state_types import EpochEndOffset, FetchPosition, ProduceCompletion, Role
from broker.partition_replay import aborted_entry, assigning_epochs, rebuild_txn_indexes, with_markers
from broker.producer_state import ProducerStateManager, Verdict
from kraft import clock
from kraft.log import Log
from kraft.log.cleaner import LogCleaner
from kraft.log.errors import LogError, RecordBatchTooLargeError, RecordTooLargeError, UnexpectedAppendOffsetError
from kraft.log.txn_index import AbortedTxn
from kraft.protocol.error_codes import ErrorCode
from kraft.records import (
    CorruptRecordError,
    PayloadSummary,
    find_null_key,
    find_timestamp_out_of_range,
    headers_show_within,
    recompress,
    set_log_append_time,
)
from kraft.records.control import read_txn_marker
from kraft.records.errors import UnsupportedCodecError
from kraft.records.header import parse_header

log = logging.getLogger(__name__)

# Mutation switches of the data-plane simulator (``broker/sim``), each breaking one rule of
# the partition core on purpose so the simulation can show it notices.  No broker
# configuration reaches them: only the simulator passes ``sim_unsafe``.
SIM_UNSAFE_SWITCHES = ("unsafe_hw_from_non_isr_replica", "unsafe_skip_truncation_on_divergence",
                       "unsafe_no_producer_dedup")


@dataclass(slots=True)
class ProduceOutcome:
    """What ``Partition.produce`` did: ``error`` (NONE when appended or a duplicate),
    the offsets, and for acks=all a ``waiter`` (``[event, error]``) to await, which the
    caller drops by ``waiter_id`` when it stops waiting."""

    error: ErrorCode
    base_offset: int = -1
    last_offset: int = -1
    appended: bool = False  # False for a duplicate answered with the original offsets
    message: str | None = None
    invalid_batch: int | None = None  # INVALID_RECORD: the index of the offending batch
    waiter: list | None = None
    waiter_id: int = -1
    log_append_time: int = -1  # the append time stamped on a LogAppendTime topic's batches
    log_start_offset: int = -1  # beside an error: the log start, where Kafka tells it


class Partition:
    """``plog``: the replica's ``Log`` (the simulator's in-memory one has the same methods);
    ``epoch_checkpoint``: where the leader-epoch cache is kept (default: the
    ``leader-epoch-checkpoint`` file in the log's directory)."""

    def __init__(self, topic: str, index: int, topic_id, plog: Log, broker_id: int, *,
                 high_watermark: int = 0, unsafe_ack_before_replication: bool = False,
                 unsafe_follower_read_log_end: bool = False,
                 cleaner: LogCleaner | None = None, waiting: set | None = None,
                 epoch_checkpoint: EpochCheckpointStore | None = None,
                 sim_unsafe: frozenset[str] = frozenset()):
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = plog
        self.cleaner = cleaner  # told of truncations: its checkpoint must not pass the log end
        self.truncations = 0  # the log cleaner discards a plan made before a truncation
        if not sim_unsafe <= set(SIM_UNSAFE_SWITCHES):
            raise ValueError(f"unknown switches {sorted(sim_unsafe - set(SIM_UNSAFE_SWITCHES))}")
        self._epoch_checkpoint = (epoch_checkpoint if epoch_checkpoint is not None
                                  else LeaderEpochCheckpointFile.in_directory(plog.dir))
        try:
            cache = self._epoch_checkpoint.read()
            self._written_epochs: tuple | None = cache.pairs  # what the store holds (None: unreadable)
        except LeaderEpochCheckpointError as exc:  # torn by a machine crash: rebuilt below
            log.warning("%s-%d: %s; rebuilding the leader epochs from the log", topic, index, exc)
            cache = LeaderEpochCache()
            self._written_epochs = None
        cache.truncate_from_end(plog.log_end_offset)  # entries past a recovered log end
        self._epochs_unsynced = False  # the checkpoint file was written but not fsynced
        self.producers = ProducerStateManager(
            unsafe_no_dedup="unsafe_no_producer_dedup" in sim_unsafe)
        # The checkpoint is written without fsync (``checkpoint_epochs``), so after a machine
        # crash it may lack epochs of batches that survived: the batches' own epochs fill
        # them in, as Kafka's recovery re-assigns epochs from the segments it reads.
        aborted: list[AbortedTxn] = []
        self.producers.truncate_and_reload(
            assigning_epochs(with_markers(plog), cache),
            on_completed=lambda txn, lso: aborted.append(aborted_entry(txn, lso)) if txn.is_aborted else None)
        recovered = plog.load_result.recovered if plog.load_result is not None else ()
        rebuild_txn_indexes(plog, recovered, aborted)
        self.state = PartitionState(
            broker_id, cache, log_start_offset=plog.log_start_offset,
            log_end_offset=plog.log_end_offset, high_watermark=high_watermark,
            unsafe_ack_before_replication=unsafe_ack_before_replication,
            unsafe_hw_from_non_isr_replica="unsafe_hw_from_non_isr_replica" in sim_unsafe,
            unsafe_skip_truncation="unsafe_skip_truncation_on_divergence" in sim_unsafe)
        # UNSAFE (kraft.unsafe.follower.read.log.end): a follower serves consumers past its HW
        self.unsafe_follower_read_log_end = unsafe_follower_read_log_end
        # producer id -> the guard of a transaction verification under way (broker.txn.verification)
        self.verification_guards: dict[int, object] = {}
        self._watchers: set = set()  # long-polling fetches (``watch``)
        self.version = 0  # changes counted by ``notify``
        self.followed_leader: int | None = None  # the owner's index of followers (ReplicaManager)
        self.on_change = None  # called by ``notify`` (the owner tells the replica fetchers)
        # Called with this partition when a leadership or a follower's append added a
        # leader epoch: the owner writes the checkpoint soon after (``checkpoint_epochs``);
        # None: written at once.
        self.on_epochs_changed = None
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

    # -- decisions applied ------------------------------------------------------------

    def apply_registration(self, local_id: int, leader: int, leader_epoch: int, partition_epoch: int,
                           replicas, isr, now_ms: int) -> bool:
        """The metadata image's registration of this partition (the replica manager's
        reconciler, or the simulator's controller model): become leader or follower, or
        take an ISR change of the current leadership.  True when it was applied (not stale)."""
        st = self.state
        leo = self.log.log_end_offset
        if leader == local_id:
            if st.is_leader and leader_epoch == st.leader_epoch:
                self.complete(st.on_partition_change_committed(isr, partition_epoch, replicas))
                applied = True
            else:
                change = st.become_leader(leader_epoch, partition_epoch, replicas, isr, leo,
                                          st.high_watermark, now_ms)
                applied = change.applied
                if applied:
                    log.info("%s: leader in epoch %d, ISR %s", self.name, leader_epoch, list(isr))
                self.complete(change.completed)
            self.checkpoint_epochs(soon=True)
        else:
            change = st.become_follower(leader, leader_epoch, partition_epoch, replicas, isr, leo,
                                        st.high_watermark, now_ms)
            applied = change.applied
            self.complete(change.completed)
        self.notify()
        return applied

    def produce(self, records, payload: PayloadSummary | CorruptRecordError, acks: int,
                min_insync_replicas: int, deadline_ms: int) -> ProduceOutcome:
        """A client's batches for this partition, in Kafka's order of checks: leadership and
        the ISR (``check_produce``), the payload (``payload``: its validated headers, or why
        it is corrupt), keys on a compacted topic, ``max.message.bytes``, the producer's
        sequence; then the append, and for acks=all a waiter on the high watermark.

        A retry of a batch this log holds is answered with the original offsets, but only
        once the original is as replicated as acks asks (the first attempt may still wait
        for the ISR, or a partition may have cut this leader off: answering at once would
        acknowledge a write no follower has).  An ``OSError`` from the disk is raised: the
        owner takes the log directory offline."""
        error = self.state.check_produce(acks, min_insync_replicas)
        if error != ErrorCode.NONE:
            return ProduceOutcome(error)
        config = self.log.config
        late = None
        try:
            if isinstance(payload, CorruptRecordError):
                raise payload
            keyless = find_null_key(records) if config.compact else None
            bounds = self._timestamp_bounds_to_read(payload.headers)
            if bounds is not None:
                low, high = bounds
                late = find_timestamp_out_of_range(records, low, high)
        except CorruptRecordError as exc:
            log.info("%s: rejected produce payload: %s", self.name, exc)
            code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE if isinstance(exc, UnsupportedCodecError) \
                else ErrorCode.CORRUPT_MESSAGE
            return ProduceOutcome(code, message=str(exc)[:200])
        # A record Kafka's validator refuses is answered with the log start offset, as Kafka's
        # (an unknown one, -1, goes with the other refusals).
        start = self.log.log_start_offset
        if keyless is not None:  # as Kafka: a compacted topic's records need keys
            return ProduceOutcome(ErrorCode.INVALID_RECORD, invalid_batch=keyless, log_start_offset=start, message=(
                f"Compacted topic cannot accept message without key in topic partition {self.name}."))
        if late is not None:  # Kafka's words (it names the record by its index too)
            return ProduceOutcome(ErrorCode.INVALID_TIMESTAMP, invalid_batch=late[0], log_start_offset=start, message=(
                f"Timestamp {late[1]} of message with offset {late[0]} is out of range. The timestamp "
                f"should be within [{'-inf' if low is None else low}, {'inf' if high is None else high}]"))
        max_bytes = config.max_message_bytes
        if any(h.size > max_bytes for h in payload.headers):
            return ProduceOutcome(ErrorCode.MESSAGE_TOO_LARGE)
        buf, batches = bytearray(records), list(zip(payload.positions, payload.headers))
        codec = config.compression_codec
        if codec is not None and any(h.compression != codec for h in payload.headers):
            try:
                buf, batches = self._recompressed(buf, batches, codec)
            except CorruptRecordError as exc:
                return ProduceOutcome(ErrorCode.CORRUPT_MESSAGE, message=str(exc)[:200])
            if any(h.size > max_bytes for _, h in batches):  # Kafka checks the rewritten size too
                return ProduceOutcome(ErrorCode.MESSAGE_TOO_LARGE)
        check = self.producers.check_append(payload.headers)
        if check.verdict is Verdict.DUPLICATE:  # answered as Kafka: the original's timestamp as append time
            outcome = ProduceOutcome(ErrorCode.NONE, check.first_offset, check.last_offset,
                                     log_append_time=check.timestamp)
        elif check.verdict is not Verdict.NEW:  # (Kafka tells the log start beside these)
            return ProduceOutcome(check.error_code, message=check.message, log_start_offset=self.log.log_start_offset)
        else:
            outcome = self._append_checked(buf, batches)
            if outcome.error != ErrorCode.NONE:
                return outcome
        return self._await_isr(outcome, min_insync_replicas, deadline_ms) if acks == -1 else outcome

    def produce_together(self, payloads: list[tuple[bytes, PayloadSummary]], acks: int,
                         min_insync_replicas: int, deadlines_ms: list[int]) -> list[ProduceOutcome] | None:
        """The batches of several produce requests for this partition (``(records, their
        validated summary)``, in arrival order), appended as one: one log write and one
        producer-state pass for a pipelining producer's burst of one-batch requests (a
        producer sending a record per request).  Each request gets the outcome ``produce``
        would have given it, called once per request in turn.

        Returns None, having changed nothing, when one of them would be answered otherwise
        than appended (a corrupt or too large batch, a compacted topic's key check, a retry
        of a batch this log holds, a sequence error): the caller then produces them one by
        one, so each request keeps its own answer.  ``deadlines_ms``: each request's acks=all
        deadline."""
        error = self.state.check_produce(acks, min_insync_replicas)
        if error != ErrorCode.NONE:  # leadership or the ISR: the same for every request
            return [ProduceOutcome(error) for _ in payloads]
        config = self.log.config
        headers = [h for _, payload in payloads for h in payload.headers]
        if (config.compact or config.compression_codec is not None
                or self._timestamp_bounds_to_read(headers) is not None
                or any(h.size > config.max_message_bytes for h in headers)
                or sum(payload.size for _, payload in payloads) > config.segment_bytes):
            return None
        if self.producers.check_append(headers).verdict is not Verdict.NEW:
            return None
        batches, start = [], 0
        for records, payload in payloads:
            batches += [(start + pos, h) for pos, h in zip(payload.positions, payload.headers)]
            start += len(records)
        whole = self._append_checked(bytearray().join(records for records, _ in payloads), batches)
        if whole.error != ErrorCode.NONE:  # the disk: every request's answer
            return [ProduceOutcome(whole.error) for _ in payloads]
        outcomes, offset = [], whole.base_offset
        for (_, payload), deadline_ms in zip(payloads, deadlines_ms):
            count = payload.offset_count
            outcome = ProduceOutcome(ErrorCode.NONE, offset, offset + count - 1, appended=True,
                                     log_append_time=whole.log_append_time)
            offset += count
            outcomes.append(self._await_isr(outcome, min_insync_replicas, deadline_ms) if acks == -1 else outcome)
        return outcomes

    def _timestamp_bounds_to_read(self, headers) -> tuple[int | None, int | None] | None:
        """The (low, high) timestamp bounds a produce's records must be read against, or None
        when their batch headers already show them within (Kafka 4's default bound, checked
        from each header's maxTimestamp), the topic bounds nothing, or its leader stamps
        LogAppendTime."""
        config = self.log.config
        if not config.timestamps_bounded or config.log_append_time:
            return None
        low, high = config.timestamp_bounds(clock.wall_ms())
        return None if headers_show_within(headers, low, high) else (low, high)

    def _recompressed(self, buf: bytearray, batches: list, codec: int) -> tuple[bytearray, list]:
        """``buf``'s batches with every one in another codec rewritten in ``codec`` (the
        topic's ``compression.type``, at its level), and their positions and headers."""
        level = self.log.config.compression_level(codec)
        out, rewritten = bytearray(), []
        for pos, header in batches:
            at = len(out)
            if header.compression == codec:
                out += memoryview(buf)[pos: pos + header.size]
                rewritten.append((at, header))
            else:
                out += recompress(buf, pos, header, codec, level)
                rewritten.append((at, parse_header(out, at)))
        return out, rewritten

    def _append_checked(self, buf: bytearray, batches: list) -> ProduceOutcome:
        """Append batches every check has passed; the outcome, or the error the log raised.
        On a ``message.timestamp.type=LogAppendTime`` topic each batch is stamped with the
        append time first (its header only: the records are not read)."""
        append_time = -1
        if self.log.config.log_append_time:
            append_time = clock.wall_ms()
            for pos, _ in batches:
                set_log_append_time(buf, pos, append_time)
            batches = [(pos, parse_header(buf, pos)) for pos, _ in batches]
        try:
            first, last, completions = self.append_as_leader(buf, batches)
        except RecordTooLargeError:
            return ProduceOutcome(ErrorCode.MESSAGE_TOO_LARGE)
        except RecordBatchTooLargeError:  # more than segment.bytes: Kafka's answer, not retriable
            return ProduceOutcome(ErrorCode.RECORD_LIST_TOO_LARGE)
        except (CorruptRecordError, LogError) as exc:
            log.warning("%s: append failed: %s", self.name, exc)
            return ProduceOutcome(ErrorCode.KAFKA_STORAGE_ERROR)
        self.complete(completions)
        return ProduceOutcome(ErrorCode.NONE, first, last, appended=True, log_append_time=append_time)

    def append_internal(self, batch: bytes, min_insync_replicas: int, deadline_ms: int, *,
                        marker: tuple[int, int, int] | None = None) -> ProduceOutcome:
        """A batch the broker writes itself, acks=all: a group's or a transaction's record
        in an internal topic, or a transaction marker (``marker``: its producer id, producer
        epoch and coordinator epoch, checked against the producer state first).  Log errors
        are raised."""
        error = self.state.check_produce(-1, min_insync_replicas)
        if error != ErrorCode.NONE:
            return ProduceOutcome(error)
        if marker is not None:
            check = self.producers.check_marker(*marker)
            if check.error_code != ErrorCode.NONE:
                return ProduceOutcome(check.error_code, message=check.message)
        first, last, completions = self.append_as_leader(bytearray(batch))
        self.complete(completions)
        return self._await_isr(ProduceOutcome(ErrorCode.NONE, first, last, appended=True),
                               min_insync_replicas, deadline_ms)

    def _await_isr(self, outcome: ProduceOutcome, min_insync_replicas: int, deadline_ms: int) -> ProduceOutcome:
        """acks=all: the answer waits for the HW to pass the batch, unless it already has."""
        reg = self.state.register_produce_waiter(outcome.last_offset + 1, deadline_ms, min_insync_replicas)
        if reg.completion is not None:
            outcome.error = reg.completion.error
        else:
            outcome.waiter_id = reg.waiter_id
            outcome.waiter = self.add_waiter(reg.waiter_id)
        return outcome

    def on_follower_fetch(self, replica_id: int, fetch_offset: int, last_fetched_epoch: int, now_ms: int, *,
                          current_leader_epoch: int, log_start_offset: int, broker_epoch: int = -1):
        """The leader's side of a follower's fetch: the state records the follower's
        position (the high watermark may move, acks=all waiters may complete); returns the
        state's ``FollowerFetchResult``, whose ``isr_proposal`` the owner sends."""
        st = self.state
        hw = st.high_watermark
        result = st.on_follower_fetch(replica_id, fetch_offset, last_fetched_epoch, now_ms,
                                      current_leader_epoch=current_leader_epoch,
                                      log_start_offset=log_start_offset, broker_epoch=broker_epoch)
        self.complete(result.completed)
        if st.high_watermark != hw and not result.completed:
            self.notify()  # the other followers' sessions must tell it
        return result

    def expire_waiters(self, now_ms: int) -> bool:
        """Fail the acks=all waiters past their deadline; True while some still wait."""
        self.complete(self.state.on_tick(now_ms))
        return bool(self.state.pending_waiters)

    def on_alter_partition_error(self, proposal, error: ErrorCode | None) -> bool:
        """The controller refused this ISR proposal (``error``) or did not answer (None):
        the state decides whether the change is dropped (waiters it held complete) or kept
        pending; True when the proposal should be sent again."""
        retry, completions = self.state.on_alter_partition_error(proposal, error)
        self.complete(completions)
        if not completions and self.state.pending is None:
            self.notify()
        return retry

    def apply_retention(self) -> None:
        """``retention.ms`` / ``retention.bytes`` below the high watermark; the state learns
        the new log start."""
        st = self.state
        if not (st.is_leader or st.role is Role.FOLLOWER):
            return
        start = st.log_start_offset
        self.log.apply_retention(upper_bound_offset=st.high_watermark)
        st.on_log_start_offset(self.log.log_start_offset)
        if st.log_start_offset != start:
            self.notify()

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords on the leader: the log start moves to ``offset`` (at most the high
        watermark, checked by the caller), the segments wholly below it go, and the
        followers learn the new start from their next fetch.  Returns the log start."""
        start = self.log.delete_records_before(offset)
        self.state.on_log_start_offset(start)
        self.notify()  # the followers' fetch sessions carry the new start
        return start

    def on_offset_out_of_range(self, leader_start: int, leader_end: int) -> None:
        """A follower's fetch offset is outside the leader's log: truncate to its end, or
        start over at its start, as the state decides."""
        decision = self.state.on_offset_out_of_range(leader_start, leader_end)
        if decision.truncate_to is not None:
            self.truncate_to(decision.truncate_to)
        elif decision.start_at is not None:
            self.restart_at(decision.start_at)

    def apply_fetched(self, position: FetchPosition, records: bytes, high_watermark: int,
                      diverging: EpochEndOffset | None, log_start_offset: int) -> int:
        """A follower's answer from its leader for this partition: append the whole batches
        ``records`` (when the fetch was of the current leadership), then truncate or move
        the log start as the state decides.  Returns the bytes appended."""
        st = self.state
        appended = 0
        if (diverging is None and records and st.leader_epoch == position.current_leader_epoch
                and st.role is Role.FOLLOWER):
            self.append_as_follower(records)
            appended = len(records)
        hw = st.high_watermark
        decision = st.on_fetch_response(high_watermark, diverging, log_start_offset,
                                        request_leader_epoch=position.current_leader_epoch)
        if decision.ignored:
            return appended
        if decision.truncate_to is not None:
            self.truncate_to(decision.truncate_to)
        if decision.log_start_offset is not None:
            self.log.delete_records_before(decision.log_start_offset)
        # A high watermark that moved wakes the consumers long-polling this follower (KIP-392).
        if decision.truncate_to is not None or decision.log_start_offset is not None or st.high_watermark != hw:
            self.notify()
        return appended

    # -- log changes ------------------------------------------------------------------

    def checkpoint_epochs(self, *, sync: bool = False, soon: bool = False) -> None:
        """Write the leader-epoch checkpoint when the cache changed since the last write.

        Not fsynced unless ``sync`` (at close): like the log's own data, which is not
        fsynced either (durability is by replication), a machine crash may lose it, and
        opening the replica rebuilds it from the batches' epochs.  Creating thousands of
        replicas must not cost two fsyncs each (issue 15).

        ``soon``: an epoch added at the end (a leadership, a follower's append), which the
        owner may write a moment later (``on_epochs_changed``), as Kafka writes it off the
        request thread since KAFKA-15046.  A crash before the write loses it as a machine
        crash would; the batches' epochs restore it.  Truncations write at once: a stale
        file could then hold an epoch past where the log now has other batches."""
        entries = self.state.epoch_cache.pairs
        if soon and self.on_epochs_changed is not None:
            if entries != self._written_epochs:
                self.on_epochs_changed(self)
            return
        if entries != self._written_epochs or (sync and self._epochs_unsynced):
            written = self._written_epochs
            self._epoch_checkpoint.write(self.state.epoch_cache, sync=sync,
                                         grown=written is not None and entries[:len(written)] == written)
            self._written_epochs = entries
            self._epochs_unsynced = not sync

    def append_as_leader(self, buf: bytearray, batches=None) -> tuple[int, int, list[ProduceCompletion]]:
        """Append a validated produce payload (or a transaction marker the broker wrote):
        (first offset, last offset, completions).  ``batches``: the payload's ``(position,
        header)`` pairs when the caller has parsed and checked them already."""
        info = self.log.append(buf, assign_offsets=True, leader_epoch=self.state.leader_epoch,
                               batches=batches)
        if self.topic_stats is not None:  # MessagesInPerSec / BytesInPerSec, as Kafka after an append
            self.topic_stats.appended(info.last_offset - info.first_offset + 1, len(buf))
        headers = self._update_producers(buf, info.batches)
        completions = self.state.on_local_append(self.log.log_end_offset, headers)
        self.notify()
        return info.first_offset, info.last_offset, completions

    def _update_producers(self, data, batches) -> list:
        """Producer state and ``.txnindex`` for the batches just appended (``(position,
        header)`` as the log stamped them); returns their headers."""
        headers = []
        for pos, h in batches:
            headers.append(h)
            marker = read_txn_marker(bytes(data[pos:pos + h.size])) if h.is_control and h.is_transactional else None
            if marker is not None:  # a verification asked before it answers for an ended transaction
                self.verification_guards.pop(h.producer_id, None)
            completed = self.producers.update(h, marker=marker)
            if completed is not None and completed.is_aborted:
                self.log.append_aborted_txn(aborted_entry(completed, self.producers.stable_offset_after(completed)))
        # A follower's LSO is asked for by nobody: completed transactions are forgotten here.
        self.producers.on_high_watermark(self.state.high_watermark)
        return headers

    @property
    def last_stable_offset(self) -> int:
        """The LSO: what READ_COMMITTED consumers may read up to (``producer_state``); never
        below the log start (retention may delete the start of a transaction still open)."""
        return max(self.producers.last_stable_offset(self.state.high_watermark), self.state.log_start_offset)

    def starts_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether a transactional batch of this producer would start a transaction here (no
        ongoing one of its, in this epoch): the batches a leader verifies first (KIP-890)."""
        entry = self.producers.get(producer_id)
        return entry is None or entry.current_txn_first_offset < 0 or entry.producer_epoch != producer_epoch

    def consumer_read_bound(self, last_stable_offset: int | None) -> int | None:
        """Where a consumer's read of this replica stops: ``last_stable_offset`` (this
        partition's, which the caller has at hand) for read_committed, None for
        read_uncommitted, whose bound is the high watermark, a follower's own when a consumer
        reads from it (KIP-392).  None (the log end) on a follower under the unsafe switch."""
        if self.unsafe_follower_read_log_end and not self.state.is_leader:
            return None
        return self.state.high_watermark if last_stable_offset is None else last_stable_offset

    def append_as_follower(self, data: bytes) -> list:
        """Append fetched batches (offsets kept); returns their headers.

        The leader's first batch may begin below our log end when DeleteRecords put the
        leader's log start inside a batch.  An empty log (started at that log start after
        an out-of-range fetch) then starts over at the batch's base offset, as Kafka's
        follower does.  A log that is not empty holds other records there: the leader's
        epoch cache, cut at its log start, could not show the divergence, so the records
        it sends replace ours (Kafka fails the partition instead)."""
        try:
            info = self.log.append(data, assign_offsets=False)
        except UnexpectedAppendOffsetError as exc:
            first, leo = parse_header(data), self.log.log_end_offset
            if not exc.first_offset == first.base_offset < leo <= first.last_offset:
                raise
            if leo == self.log.log_start_offset:
                log.info("%s: the leader's batch %d..%d holds our log start %d: starting at %d",
                         self.name, first.base_offset, first.last_offset, leo, first.base_offset)
                self.restart_at(first.base_offset)
            else:
                log.warning("%s: the leader's batch %d..%d overlaps our log end %d: truncating to %d",
                            self.name, first.base_offset, first.last_offset, leo, first.base_offset)
                self.truncate_to(first.base_offset)
            info = self.log.append(data, assign_offsets=False)
        if self.broker_stats is not None:
            self.broker_stats.replication_bytes_in += len(data)
        headers = self._update_producers(data, info.batches)
        self.state.on_local_append(self.log.log_end_offset, headers)
        self.checkpoint_epochs(soon=True)
        self.notify()
        return headers

    def truncate_to(self, offset: int) -> None:
        if offset < self.log.log_end_offset:
            log.info("%s: truncating from %d to %d", self.name, self.log.log_end_offset, offset)
            self.log.truncate_to(offset)
            self._truncated()
            self.producers.truncate_and_reload(with_markers(self.log))
        if self.log.log_start_offset < self.state.log_start_offset:
            # Below the log start the log starts over at ``offset`` (Kafka's
            # truncateFullyAndStartAt), and so do the state's offsets and epochs.
            self.state.on_started_at(self.log.log_start_offset)
        else:
            # A batch holding ``offset`` goes whole: the state learns where the log ends.
            self.state.on_truncated(min(offset, self.log.log_end_offset))
        self.checkpoint_epochs()
        self.notify()

    def restart_at(self, offset: int) -> None:
        """Our log ends before the leader's start: drop it and start over at ``offset``."""
        self.log.truncate_fully_and_start_at(offset)
        self.state.on_started_at(offset)
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
