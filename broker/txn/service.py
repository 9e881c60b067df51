"""The trio shell around the transaction coordinator core: the transaction APIs, persistence
through ``__transaction_state``, partition loading, the marker channel, the timeout ticker.

Every result of the core is applied in one place (:meth:`TransactionService._apply`): its
write is appended to ``__transaction_state`` (each partition through a FIFO lock, so the log
holds the transitions in the order the core made them) and committed (acks=all), handed back
to the core, and the markers that follow are given to the marker channel.  A write that does
not answer a request (a coordinator-side abort, a Complete state, an expiry) runs in the
background.

A request that finds its id completing (markers being written, a write in flight) waits for
the id's next state, up to ``COMPLETING_WAIT_S``, before it is answered
CONCURRENT_TRANSACTIONS: EndTxn(commit) is answered once PrepareCommit is durable, so a
producer's next AddPartitionsToTxn usually arrives while the markers are still going out.
Answering it CONCURRENT_TRANSACTIONS at once opens a race librdkafka loses: if the
application aborts while the retry is in flight, librdkafka sends EndTxn(abort), which then
finds the previous transaction's PrepareCommit or CompleteCommit and gets INVALID_TXN_STATE, a
fatal error for the producer.  The connection's requests are handled one after another, so
while the AddPartitionsToTxn waits, the EndTxn behind it waits too and then finds the new
transaction Ongoing.  (Kafka answers at once; its markers are usually written before the
retry, so the race is rare there but not absent.)
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

import trio

from broker.group.records import partition_for as offsets_partition_for
from broker.internal_topics import OFFSETS_TOPIC, TXN_STATE_TOPIC
from broker.producer_ids import ProducerIdAllocator, ProducerIdError
from broker.txn.coordinator import MarkerJob, Result, TransactionCoordinator, TxnConfig, Write
from broker.txn.log_records import encode_key, encode_value, replay
from kraft.protocol.error_codes import ErrorCode
from kraft.records import build_batch, decode_batches

log = logging.getLogger(__name__)

TXN_API_VERSIONS: dict[str, tuple[int, int]] = {
    "AddPartitionsToTxn": (0, 5), "AddOffsetsToTxn": (0, 4), "EndTxn": (0, 4),
    "DescribeTransactions": (0, 0), "ListTransactions": (0, 1),
}
# Request versions before KIP-588 know no PRODUCER_FENCED: they get INVALID_PRODUCER_EPOCH.
COMPLETE_RETRY_BACKOFF_S = 0.5
IDLE_TICK_MAX_S = 10.0  # how long the tick loop sleeps at most (wall-clock jumps)
# How long a request waits for its id's completing transaction before CONCURRENT_TRANSACTIONS
# (well inside the clients' request timeouts: 30 s in Kafka's, librdkafka's and kafka-python's).
COMPLETING_WAIT_S = 5.0
FENCED_SINCE = {"InitProducerId": 4, "AddPartitionsToTxn": 2, "AddOffsetsToTxn": 2, "EndTxn": 2}


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


def client_error(api: str, version: int, code: int) -> int:
    if code == ErrorCode.PRODUCER_FENCED and version < FENCED_SINCE.get(api, 0):
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return int(code)


def _append_error(exc: BaseException) -> int:
    code = getattr(exc, "error_code", None)
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                ErrorCode.REQUEST_TIMED_OUT, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return ErrorCode.UNKNOWN_SERVER_ERROR


class TransactionService:
    """Serve the transaction APIs for the ``__transaction_state`` partitions this broker leads.

    Args:
        store: an InternalTopicStore over ``__transaction_state`` (broker.internal_topics).
        producer_ids: the broker's ProducerIdAllocator.
        image: returns the current metadata image.
        marker_channel: ``on_done -> MarkerChannel`` (given the callback it must call).
    """

    apis = frozenset(TXN_API_VERSIONS)

    def __init__(self, broker_id: int, config, store, producer_ids: ProducerIdAllocator, image: Callable,
                 make_marker_channel: Callable, *, clock: Callable[[], int] | None = None,
                 tick_interval_s: float = 1.0):
        self.broker_id = broker_id
        self.config = config
        self.store = store
        self.producer_ids = producer_ids
        self.image = image
        self.clock = clock or _wall_clock_ms
        self.core = TransactionCoordinator(TxnConfig.from_config(config), new_producer_id=producer_ids.take,
                                           is_leader=store.is_leader)
        self.offsets_partitions = config["offsets.topic.num.partitions"]
        self.markers = make_marker_channel(self._markers_written, self._job_is_current)
        self.tick_interval_s = min(tick_interval_s, self.core.config.abort_timed_out_interval_ms / 1000)
        self._locks: dict[int, trio.Lock] = {}
        self._load_send, self._load_recv = trio.open_memory_channel(math.inf)
        # (async function, argument): the writes and completions that outlive a request
        self._background_send, self._background_recv = trio.open_memory_channel(math.inf)
        self._state_changes: dict[str, trio.Event] = {}  # id -> set when its state changes next

    def partition_for(self, transactional_id: str) -> int:
        return self.core.partition_of(transactional_id)

    # ------------------------------------------------------------------ ownership

    def on_become_leader(self, partition: int) -> None:
        epoch = self.store.leader_epoch(partition)
        if self.core.owned.get(partition) == epoch or self.core.loading.get(partition) == epoch:
            return
        self.core.begin_loading(partition, epoch)
        self._load_send.send_nowait((partition, epoch))

    def on_resign(self, partition: int) -> None:
        self.core.unload(partition)
        for txn_id in [t for t in self._state_changes if self.core.partition_of(t) == partition]:
            self._changed(txn_id)  # waiting requests learn NOT_COORDINATOR now

    async def load_partition(self, partition: int, epoch: int) -> None:
        records = []
        for data in self.store.read_all(partition):
            for batch in decode_batches(data):
                if not batch.is_control:
                    records.extend((r.key, r.value) for r in batch.records)
            await trio.lowlevel.checkpoint()
        values = replay(records)
        jobs = self.core.load(partition, epoch, values)
        if partition in self.core.owned:
            log.info("broker %s: loaded %d transactional ids from %s-%d (coordinator epoch %d), "
                     "%d transactions completing", self.broker_id, len(values), TXN_STATE_TOPIC, partition,
                     epoch, len(jobs))
        for job in jobs:
            self.markers.send(job)

    # ------------------------------------------------------------------ running

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(self.markers.run)
            nursery.start_soon(self._loader, nursery)
            nursery.start_soon(self._background, nursery)
            task_status.started()
            while True:
                # Until the core's next check (every 10 s by default), not every second: an
                # idle broker wakes for nothing else here.
                now = self.clock()
                due_s = min((self.core.next_tick_ms(now) - now) / 1000, IDLE_TICK_MAX_S)
                await trio.sleep(max(self.tick_interval_s, due_s))
                for write in self.core.tick(self.clock()):
                    self._in_background(Result(write=write))

    async def _loader(self, nursery: trio.Nursery) -> None:
        async for partition, epoch in self._load_recv:
            nursery.start_soon(self._load_logged, partition, epoch)

    async def _load_logged(self, partition: int, epoch: int) -> None:
        try:
            await self.load_partition(partition, epoch)
        except Exception:
            log.exception("broker %s: loading %s-%d failed; retrying", self.broker_id, TXN_STATE_TOPIC, partition)
            await trio.sleep(1)
            if self.core.loading.get(partition) == epoch:
                self._load_send.send_nowait((partition, epoch))

    async def _background(self, nursery: trio.Nursery) -> None:
        async for fn, arg in self._background_recv:
            nursery.start_soon(fn, arg)

    def _in_background(self, result: Result) -> None:
        self._background_send.send_nowait((self._apply, result))

    async def _apply(self, result: Result) -> Result:
        """Persist ``result``'s write (if any) and send the markers that follow."""
        for job in result.markers:
            self.markers.send(job)
        if result.write is None:
            return result
        error = await self._append(result.write)
        done = self.core.write_done(result.write, error, self.clock())
        self._changed(result.write.transactional_id)
        for job in done.markers:
            self.markers.send(job)
        return done

    async def _append(self, write: Write) -> int:
        lock = self._locks.setdefault(write.partition, trio.Lock())
        async with lock:
            value = None if write.value is None else encode_value(write.value)
            batch = build_batch([(encode_key(write.transactional_id), value)], timestamp=self.clock())
            try:
                await self.store.append(write.partition, batch)
            except Exception as exc:  # noqa: BLE001 - any failed append becomes an error code
                log.info("broker %s: append to %s-%d failed: %r", self.broker_id, TXN_STATE_TOPIC,
                         write.partition, exc)
                return _append_error(exc)
        return ErrorCode.NONE

    def _markers_written(self, job: MarkerJob) -> None:
        self._background_send.send_nowait((self._complete, job))

    async def _complete(self, job: MarkerJob) -> None:
        """Write the Complete state of ``job``'s transaction, again and again while the
        append fails with a retriable error (Kafka retries it too): until it is written the
        id answers CONCURRENT_TRANSACTIONS."""
        while True:
            result = self.core.markers_done(job, self.clock())
            if result.write is None:
                return  # no longer this coordinator's, or moved on
            done = await self._apply(result)
            if done.error != ErrorCode.COORDINATOR_NOT_AVAILABLE:
                return
            await trio.sleep(COMPLETE_RETRY_BACKOFF_S)

    def _job_is_current(self, job: MarkerJob) -> bool:
        return self.core.owned.get(self.core.partition_of(job.transactional_id)) == job.coordinator_epoch

    def _changed(self, txn_id: str) -> None:
        if (event := self._state_changes.pop(txn_id, None)) is not None:
            event.set()

    async def _settled(self, txn_id: str, decide: Callable[[], Result]) -> Result:
        """``decide()`` (a core request), again each time the id's state changes while its
        answer is CONCURRENT_TRANSACTIONS with nothing to write, for up to
        ``COMPLETING_WAIT_S`` (see the module's docstring)."""
        deadline = trio.current_time() + COMPLETING_WAIT_S
        while True:
            result = decide()
            if result.error != ErrorCode.CONCURRENT_TRANSACTIONS or result.write is not None or result.markers:
                return result
            changed = self._state_changes.setdefault(txn_id, trio.Event())
            with trio.move_on_at(deadline):
                await changed.wait()
                continue
            return result

    async def _answer(self, result: Result) -> Result:
        """The result a request is answered with: after its write, or at once (a write that
        does not answer it goes on in the background).  The write itself always runs in the
        service's nursery: a request cancelled with its connection must not leave the id
        with a pending state that no write_done ever clears."""
        if result.write is None:
            return await self._apply(result)
        if not result.write.reply:
            self._in_background(result)
            return Result(result.error)
        finished, answer = trio.Event(), []

        async def apply(result: Result) -> None:
            answer.append(await self._apply(result))
            finished.set()

        self._background_send.send_nowait((apply, result))
        await finished.wait()
        return answer[0]

    # ------------------------------------------------------------------ APIs

    async def init_producer_id(self, body: dict, version: int) -> dict:
        txn_id = body["transactional_id"]
        expected = (body.get("producer_id", -1), body.get("producer_epoch", -1)) if version >= 3 else None
        error = self.core.coordinator_error(txn_id) if txn_id else ErrorCode.INVALID_REQUEST
        if error == ErrorCode.NONE:
            def decide() -> Result:
                try:
                    return self.core.init_producer_id(txn_id, body["transaction_timeout_ms"], self.clock(), expected)
                except IndexError:  # another request took the last id of the block meanwhile
                    return Result(ErrorCode.COORDINATOR_NOT_AVAILABLE)

            try:
                await self.producer_ids.ensure_available()
            except ProducerIdError:
                result = Result(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            else:
                result = await self._settled(txn_id, decide)
            result = await self._answer(result)
        else:
            result = Result(error)
        return {"throttle_time_ms": 0, "error_code": client_error("InitProducerId", version, result.error),
                "producer_id": result.producer_id if not result.error else -1,
                "producer_epoch": result.producer_epoch if not result.error else -1}

    async def handle(self, api: str, version: int, body: dict) -> dict:
        if api == "AddPartitionsToTxn":
            return await self.add_partitions_to_txn(body, version)
        if api == "AddOffsetsToTxn":
            partition = offsets_partition_for(body["group_id"], self.offsets_partitions)
            result = await self._answer(await self._settled(body["transactional_id"], lambda: self.core.add_partitions(
                body["transactional_id"], body["producer_id"], body["producer_epoch"],
                {(OFFSETS_TOPIC, partition)}, self.clock())))
            return {"throttle_time_ms": 0, "error_code": client_error(api, version, result.error)}
        if api == "EndTxn":
            result = await self._answer(await self._settled(body["transactional_id"], lambda: self.core.end_txn(
                body["transactional_id"], body["producer_id"], body["producer_epoch"], body["committed"],
                self.clock())))
            if result.error == ErrorCode.INVALID_TXN_STATE:
                # As Kafka logs an invalid transition: librdkafka makes it fatal for the producer,
                # and the question after a fault run is which state the EndTxn found.
                meta = self.core.txns.get(body["transactional_id"])
                log.info("broker %s: EndTxn(%s) of %r (producer %d epoch %d) found it %s: INVALID_TXN_STATE",
                         self.broker_id, "commit" if body["committed"] else "abort", body["transactional_id"],
                         body["producer_id"], body["producer_epoch"], meta.state.kafka_name if meta else "unknown")
            return {"throttle_time_ms": 0, "error_code": client_error(api, version, result.error)}
        if api == "DescribeTransactions":
            return {"throttle_time_ms": 0,
                    "transaction_states": [self.core.describe(t) for t in body["transactional_ids"]]}
        if api == "ListTransactions":
            out = self.core.list_transactions(body["state_filters"], body["producer_id_filters"],
                                              body.get("duration_filter", -1), self.clock())
            return {"throttle_time_ms": 0, **out}
        raise ValueError(f"{api} is not a transaction API")

    async def add_partitions_to_txn(self, body: dict, version: int) -> dict:
        if version <= 3:
            topics = await self._add_partitions(body["v3_and_below_transactional_id"],
                                                body["v3_and_below_producer_id"],
                                                body["v3_and_below_producer_epoch"],
                                                body["v3_and_below_topics"], False, version)
            return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": topics}
        results = []
        for txn in body["transactions"]:
            topics = await self._add_partitions(txn["transactional_id"], txn["producer_id"], txn["producer_epoch"],
                                                txn["topics"], txn["verify_only"], version)
            results.append({"transactional_id": txn["transactional_id"], "topic_results": topics})
        return {"throttle_time_ms": 0, "error_code": 0, "results_by_transaction": results}

    async def _add_partitions(self, txn_id: str, pid: int, epoch: int, topics: list[dict], verify_only: bool,
                              version: int) -> list[dict]:
        wanted = [(t["name"], p) for t in topics for p in t["partitions"]]
        image = self.image()
        unknown = {(t, p) for t, p in wanted
                   if image.topic(t) is None or p not in image.topic(t).partitions}
        if unknown:
            # Kafka: the unknown ones are named, the others are not attempted.
            codes = {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                     for tp in wanted}
        elif verify_only:
            codes = self.verify(txn_id, pid, epoch, wanted)
        else:
            result = await self._answer(await self._settled(
                txn_id, lambda: self.core.add_partitions(txn_id, pid, epoch, set(wanted), self.clock())))
            codes = dict.fromkeys(wanted, client_error("AddPartitionsToTxn", version, result.error))
        by_topic: dict[str, list[dict]] = {}
        for (t, p), code in codes.items():
            by_topic.setdefault(t, []).append({"partition_index": p, "partition_error_code": int(code)})
        return [{"name": t, "results_by_partition": ps} for t, ps in by_topic.items()]

    def verify(self, txn_id: str, pid: int, epoch: int, wanted: list) -> dict:
        """KIP-890's verification (AddPartitionsToTxn v4+ verify_only, and a partition leader
        here, ``broker.txn.verification``): is each of ``wanted`` ((topic, partition) pairs)
        in the ongoing transaction of this producer?"""
        error = self.core.coordinator_error(txn_id)
        meta = self.core.txns.get(txn_id)
        if error == ErrorCode.NONE and (meta is None or meta.value.producer_id != pid):
            error = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        elif error == ErrorCode.NONE and meta.value.producer_epoch != epoch:
            error = ErrorCode.PRODUCER_FENCED
        if error != ErrorCode.NONE:
            return dict.fromkeys(wanted, error)
        ongoing = meta.state.name == "ONGOING"
        return {tp: ErrorCode.NONE if ongoing and tp in meta.value.partitions else ErrorCode.INVALID_TXN_STATE
                for tp in wanted}
