"""WriteTxnMarkers (API 27): the partition side of ending a transaction (KIP-98).

A transaction coordinator sends, per ended transaction, the producer id and epoch, COMMIT
or ABORT, its coordinator epoch and the partitions the transaction wrote.  For each named
partition this broker leads, the marker is a control batch appended as a leader append
and answered once it is committed (acks=all: every ISR member has it and the ISR has at
least ``min.insync.replicas`` members), as Kafka's ``handleWriteTxnMarkersRequest``.
Per-partition errors follow Kafka: UNKNOWN_TOPIC_OR_PARTITION for a partition the metadata
does not know, NOT_LEADER_OR_FOLLOWER when this broker does not lead it,
NOT_ENOUGH_REPLICAS when the ISR is too small, INVALID_PRODUCER_EPOCH for a marker older
than the producer's epoch, TRANSACTION_COORDINATOR_FENCED for an older coordinator epoch,
INVALID_RECORD for a negative producer id or epoch (no producer to end a transaction of),
REQUEST_TIMED_OUT when replication takes longer than ``request.timeout.ms``.

A committed marker on a ``__consumer_offsets`` partition is handed to the replica
manager's ``on_txn_marker`` (the group coordinator registers there to materialize or drop
transactional offset commits).
"""

from __future__ import annotations

import logging

import trio

from broker.deferred import Deferred
from broker.internal_topics import OFFSETS_TOPIC
from broker.replica_manager import ReplicaManager
from kraft import clock
from kraft.log.errors import LogError
from kraft.protocol.error_codes import ErrorCode
from kraft.records.control import make_end_txn_batch
from kraft.records.errors import CorruptRecordError

log = logging.getLogger(__name__)


class TxnMarkerWriter:
    def __init__(self, replicas: ReplicaManager, request_timeout_ms: int):
        self.replicas = replicas
        self.request_timeout_ms = request_timeout_ms

    def write(self, body: dict, version: int) -> dict | Deferred:
        """Append every marker now; answer at once when nothing waits for the ISR, else
        with a :class:`Deferred` (the connection's next request is handled meanwhile)."""
        deadline = clock.monotonic_ms() + self.request_timeout_ms
        wait_until = trio.current_time() + self.request_timeout_ms / 1000 + 0.1
        markers = []  # per marker: (producer id, [(topic, [[index, error]])])
        waits = []  # (result slot, partition, waiter slot, waiter id, marker, topic, index)
        for marker in body["markers"]:
            topics = []
            for topic in marker["topics"]:
                parts = []
                for index in topic["partition_indexes"]:
                    slot = [index, ErrorCode.NONE]
                    wait = self._append(topic["name"], index, marker, deadline, slot)
                    if wait is not None:
                        waits.append((slot, *wait, marker, topic["name"], index))
                    parts.append(slot)
                topics.append((topic["name"], parts))
            markers.append((marker["producer_id"], topics))
        if not waits:
            return _response(markers)

        async def replicated() -> dict:
            with trio.move_on_at(wait_until):
                for _, _, waiter, _, _, _, _ in waits:
                    await waiter[0].wait()
            for slot, partition, waiter, wid, marker, topic, index in waits:
                partition.drop_waiter(wid)
                slot[1] = waiter[1] if waiter[1] is not None else ErrorCode.REQUEST_TIMED_OUT
                if slot[1] == ErrorCode.NONE:
                    self._committed(topic, index, marker)
            return _response(markers)

        return Deferred(replicated)

    def _append(self, topic: str, index: int, marker: dict, deadline: int, slot: list):
        """Append one marker; sets ``slot[1]`` to an error, or returns what to wait on."""
        partition = self.replicas.get(topic, index)
        if partition is None:
            known = self.replicas.image.topic(topic)
            slot[1] = (ErrorCode.NOT_LEADER_OR_FOLLOWER if known and index in known.partitions
                       else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            return None
        pid, epoch = marker["producer_id"], marker["producer_epoch"]
        if pid < 0 or epoch < 0:  # no producer to end a transaction of
            slot[1] = ErrorCode.INVALID_RECORD
            return None
        batch = make_end_txn_batch(marker["transaction_result"], producer_id=pid, producer_epoch=epoch,
                                   coordinator_epoch=marker["coordinator_epoch"], timestamp=clock.wall_ms())
        try:
            out = partition.append_internal(batch.encode(), self.replicas.min_insync_replicas(topic), deadline,
                                            marker=(pid, epoch, marker["coordinator_epoch"]))
        except (CorruptRecordError, LogError) as exc:
            log.warning("%s: appending a transaction marker failed: %s", partition.name, exc)
            slot[1] = ErrorCode.KAFKA_STORAGE_ERROR
            return None
        except OSError as exc:
            self.replicas.fail_log_dir(f"appending a transaction marker to {partition.name}", exc)
            slot[1] = ErrorCode.KAFKA_STORAGE_ERROR
            return None
        if out.message is not None:
            log.info("%s: refused %s marker: %s", partition.name,
                     "COMMIT" if marker["transaction_result"] else "ABORT", out.message)
        if out.waiter is not None:
            return partition, out.waiter, out.waiter_id
        slot[1] = out.error
        if out.error == ErrorCode.NONE:
            self._committed(topic, index, marker)
        return None

    def _committed(self, topic: str, index: int, marker: dict) -> None:
        if topic == OFFSETS_TOPIC:
            self.replicas.on_txn_marker(topic, index, marker["producer_id"], marker["producer_epoch"],
                                        marker["transaction_result"])


def _response(markers) -> dict:
    return {"markers": [
        {"producer_id": pid, "topics": [
            {"name": name, "partitions": [{"partition_index": i, "error_code": int(e)} for i, e in parts]}
            for name, parts in topics]}
        for pid, topics in markers]}


__all__ = ["TxnMarkerWriter"]
