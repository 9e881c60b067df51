"""The transaction marker channel (Kafka's TransactionMarkerChannelManager): sends the
COMMIT/ABORT markers of completing transactions to the leaders of their partitions.

Each (job, partition) waits in the queue of the partition's current leader; one sender task
per leader broker drains its queue into a WriteTxnMarkers request (every waiting job in one
request, at most one job per producer id), so a leader of many partitions gets one request
per round.  A partition whose marker failed (leader moved, not enough replicas, the
connection broke) is routed again from the newest metadata after a backoff, until it is
written; a partition whose topic was deleted needs no marker.  When a job's last partition
is written, ``on_done(job)`` is called (the coordinator then writes the Complete state).
A job whose coordinator lost its ``__transaction_state`` partition is dropped
(``is_current``): the new coordinator sends the markers again after loading.

A request in flight is abandoned (its connection dropped) as soon as the metadata says its
broker leads none of its partitions any more: a paused or partitioned leader would otherwise
hold the markers, and with them the producer's next transaction, for the whole request
timeout after the controller replaced it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

import trio

from broker.replica_fetcher import broker_address
from broker.txn.coordinator import MarkerJob
from kraft.client import KafkaClient, NodeUnavailable
from kraft.protocol.error_codes import ErrorCode

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION = 1
REQUEST_TIMEOUT_S = 30.0
LEADERSHIP_CHECK_S = 0.25  # how often a request in flight asks whether its broker still leads


class MarkerChannel:
    def __init__(self, client: KafkaClient, image: Callable, listener_name: str | None,
                 on_done: Callable[[MarkerJob], None], is_current: Callable[[MarkerJob], bool] = lambda job: True,
                 retry_backoff_s: float = 0.1):
        self.client = client
        self.image = image
        self.listener_name = listener_name
        self.on_done = on_done
        self.is_current = is_current
        self.retry_backoff_s = retry_backoff_s
        self.remaining: dict[MarkerJob, set[tuple[str, int]]] = {}
        self._queues: dict[int, list[tuple[MarkerJob, tuple[str, int]]]] = {}
        self._unrouted: list[tuple[MarkerJob, tuple[str, int]]] = []
        self._senders: set[int] = set()
        self._unrouted_event = trio.Event()
        self._wake_send, self._wake_recv = trio.open_memory_channel(math.inf)

    def send(self, job: MarkerJob) -> None:
        """Write ``job``'s markers (again: a job already in flight is left as it is)."""
        if job in self.remaining:
            return
        self.remaining[job] = set(job.partitions)
        if not job.partitions:
            self._finish(job)
            return
        self._route([(job, tp) for tp in sorted(job.partitions)])

    def _route(self, items) -> None:
        image = self.image()
        for job, tp in items:
            if job not in self.remaining:
                continue
            reg = _registration(image, tp)
            if reg is None:
                self._written(job, tp)  # deleted: nothing to mark
                continue
            broker = image.broker(reg.leader) if reg.leader >= 0 else None
            if broker is None or broker.fenced:
                self._retry_later([(job, tp)])
                continue
            self._queues.setdefault(reg.leader, []).append((job, tp))
        self._wake_send.send_nowait(None)

    def _written(self, job: MarkerJob, tp: tuple[str, int]) -> None:
        left = self.remaining.get(job)
        if left is None:
            return
        left.discard(tp)
        if not left:
            self._finish(job)

    def _finish(self, job: MarkerJob) -> None:
        del self.remaining[job]
        self.on_done(job)

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._reroute_loop)
            task_status.started()
            async for _ in self._wake_recv:
                for broker_id, queue in list(self._queues.items()):
                    if queue and broker_id not in self._senders:
                        self._senders.add(broker_id)
                        nursery.start_soon(self._sender, broker_id)

    async def _reroute_loop(self) -> None:
        while True:
            await self._unrouted_event.wait()
            await trio.sleep(self.retry_backoff_s)
            self._unrouted_event = trio.Event()
            items, self._unrouted = self._unrouted, []
            self._route(items)

    def _retry_later(self, items) -> None:
        self._unrouted.extend(items)
        self._unrouted_event.set()

    async def _sender(self, broker_id: int) -> None:
        try:
            while self._queues.get(broker_id):
                await self._send_round(broker_id)
        finally:
            self._senders.discard(broker_id)

    async def _send_round(self, broker_id: int) -> None:
        queue = self._queues.pop(broker_id, [])
        batch: dict[MarkerJob, list[tuple[str, int]]] = {}
        by_pid: dict[int, MarkerJob] = {}
        later = []
        for job, tp in queue:
            if job not in self.remaining or not self.is_current(job):
                self.remaining.pop(job, None)
                continue
            if by_pid.setdefault(job.producer_id, job) is not job:
                later.append((job, tp))  # one transaction per producer id in a request
                continue
            batch.setdefault(job, []).append(tp)
        if later:
            self._queues.setdefault(broker_id, []).extend(later)
        if not batch:
            return
        address = broker_address(self.image(), broker_id, self.listener_name)
        items = [(job, tp) for job, tps in batch.items() for tp in tps]
        if address is None:
            self._retry_later(items)
            return
        body = {"markers": [_marker(job, tps) for job, tps in batch.items()]}
        resp = await self._request_while_leading(broker_id, address, body, items)
        if not isinstance(resp, dict):
            log.info("WriteTxnMarkers to broker %d failed: %s; retrying", broker_id, resp)
            await trio.sleep(self.retry_backoff_s)
            self._retry_later(items)
            return
        answered = set()
        failed = []
        for result in resp["markers"]:
            job = by_pid.get(result["producer_id"])
            if job is None:
                continue
            for t in result["topics"]:
                for p in t["partitions"]:
                    tp = (t["name"], p["partition_index"])
                    answered.add((job, tp))
                    if p["error_code"] == ErrorCode.NONE:
                        self._written(job, tp)
                    else:
                        failed.append((job, tp, p["error_code"]))
        for job, tp, code in failed:
            log.info("marker for %s (producer %d) on %s-%d: %s; retrying", job.transactional_id,
                     job.producer_id, tp[0], tp[1], ErrorCode(code).name)
        unanswered = [(job, tp) for job, tp in items if (job, tp) not in answered]
        retry = [(job, tp) for job, tp, _ in failed] + unanswered
        if retry:
            await trio.sleep(self.retry_backoff_s)
            self._retry_later(retry)


    async def _request_while_leading(self, broker_id: int, address: tuple[str, int], body: dict,
                                     items) -> dict | str:
        """The WriteTxnMarkers answer, or why there is none (the request failed, or was
        abandoned because ``broker_id`` leads none of ``items`` any more)."""
        outcome: dict | str = "abandoned"
        async with trio.open_nursery() as nursery:
            async def request() -> None:
                nonlocal outcome
                try:
                    outcome = await self.client.request(address[0], address[1], "WriteTxnMarkers",
                                                        WRITE_TXN_MARKERS_VERSION, body, timeout_s=REQUEST_TIMEOUT_S)
                except NodeUnavailable as exc:
                    outcome = str(exc)
                nursery.cancel_scope.cancel()

            nursery.start_soon(request)
            while True:
                await trio.sleep(LEADERSHIP_CHECK_S)
                if not self._leads_any(broker_id, items):
                    outcome = "abandoned: the broker no longer leads any of its partitions"
                    nursery.cancel_scope.cancel()
                    # a frame may be half sent, and the answer is of no use: a new connection
                    self.client.disconnect(*address)
                    break
        return outcome

    def _leads_any(self, broker_id: int, items) -> bool:
        image = self.image()
        broker = image.broker(broker_id)
        if broker is None or broker.fenced:
            return False
        return any((reg := _registration(image, tp)) is not None and reg.leader == broker_id for _job, tp in items)


def _registration(image, tp: tuple[str, int]):
    """The partition's registration in ``image``; None when its topic or it is gone."""
    topic = image.topic(tp[0])
    return topic.partitions.get(tp[1]) if topic is not None else None


def _marker(job: MarkerJob, tps: list[tuple[str, int]]) -> dict:
    topics: dict[str, list[int]] = {}
    for topic, index in tps:
        topics.setdefault(topic, []).append(index)
    return {"producer_id": job.producer_id, "producer_epoch": job.producer_epoch,
            "transaction_result": job.committed, "coordinator_epoch": job.coordinator_epoch,
            "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}
