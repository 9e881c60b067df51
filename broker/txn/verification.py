"""Transaction verification (KIP-890 part 1): before a partition leader appends a
transactional batch that would start a transaction on the partition, it asks the
transaction coordinator whether the partition is in that producer's ongoing transaction
(AddPartitionsToTxn v4+ with ``verify_only``), as Kafka's brokers do while
``transaction.partition.verification.enable`` is true (the default).

Without it a producer that was fenced, or a produce that outlived its transaction's abort,
starts a transaction no coordinator knows of: nothing ever ends it, and read_committed
consumers stop at it (a hanging transaction).  The leader keeps a guard per producer from
the question to the append; a transaction marker written meanwhile drops it, so an answer
about a transaction that has just ended does not let a batch start a new one.

Coordinator errors become what producers expect, as Kafka maps them: a fenced producer
INVALID_PRODUCER_EPOCH, a partition outside the transaction TRANSACTION_ABORTABLE (Produce
v11+; INVALID_TXN_STATE before), and a coordinator that cannot answer NOT_ENOUGH_REPLICAS,
which every producer retries without refreshing its metadata.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from broker.internal_topics import TXN_STATE_TOPIC
from kraft.client import KafkaClient, NodeUnavailable
from kraft.protocol.error_codes import ErrorCode

log = logging.getLogger(__name__)

VERIFY_VERSION = 4  # AddPartitionsToTxn's first version with verify_only
RETRIABLE = frozenset({ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NETWORK_EXCEPTION,
                       ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                       ErrorCode.NOT_COORDINATOR, ErrorCode.REQUEST_TIMED_OUT})


def produce_error(code: int, produce_version: int) -> ErrorCode:
    """A coordinator's verification error as a Produce answer carries it."""
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if code in (ErrorCode.INVALID_TXN_STATE, ErrorCode.TRANSACTION_ABORTABLE):
        return ErrorCode.TRANSACTION_ABORTABLE if produce_version >= 11 else ErrorCode.INVALID_TXN_STATE
    if code in RETRIABLE:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    return ErrorCode(code)


class TxnVerifier:
    """Asks the coordinator of a transactional id, here or on another broker.

    Args:
        local: ``(transactional id, producer id, epoch, [(topic, partition)]) -> {tp: error}``,
            the verification of this broker's own coordinator (``TransactionService.verify``).
        partition_for: transactional id -> its ``__transaction_state`` partition.
        image: the broker's metadata image (who leads that partition).
        client: a KafkaClient for the inter-broker listener.
        address_of: ``(image, broker id) -> (host, port)`` on that listener, or None.
    """

    def __init__(self, broker_id: int, local: Callable, partition_for: Callable[[str], int], image: Callable,
                 client: KafkaClient, address_of: Callable, timeout_s: float = 10.0):
        self.broker_id = broker_id
        self.local = local
        self.partition_for = partition_for
        self.image = image
        self.client = client
        self.address_of = address_of
        self.timeout_s = timeout_s

    async def verify(self, txn_id: str, pid: int, epoch: int, partitions: list[tuple[str, int]]) -> dict:
        """``{(topic, partition): coordinator error}`` (NONE: in the ongoing transaction)."""
        image = self.image()
        topic = image.topic(TXN_STATE_TOPIC)
        reg = topic.partitions.get(self.partition_for(txn_id)) if topic is not None else None
        if reg is None or reg.leader < 0:
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if reg.leader == self.broker_id:
            return self.local(txn_id, pid, epoch, partitions)
        address = self.address_of(image, reg.leader)
        if address is None:
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        body = {"transactions": [{"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
                                  "verify_only": True,
                                  "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}]}
        try:
            answer = await self.client.request(*address, "AddPartitionsToTxn", VERIFY_VERSION, body,
                                               timeout_s=self.timeout_s)
        except (NodeUnavailable, OSError, TimeoutError) as exc:
            log.info("broker %s: verifying %r with broker %d failed: %r", self.broker_id, txn_id, reg.leader, exc)
            return dict.fromkeys(partitions, ErrorCode.NETWORK_EXCEPTION)
        if answer["error_code"]:
            return dict.fromkeys(partitions, ErrorCode(answer["error_code"]))
        out = dict.fromkeys(partitions, ErrorCode.NONE)
        for txn in answer["results_by_transaction"]:
            for t in txn["topic_results"]:
                for r in t["results_by_partition"]:
                    out[(t["name"], r["partition_index"])] = ErrorCode(r["partition_error_code"])
        return out
