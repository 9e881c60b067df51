"""The coordinators' internal topics, ``__consumer_offsets`` (groups) and
``__transaction_state`` (transactions): their store over the replica manager, on-demand
creation of the topics, and FindCoordinator.

The coordinator of a group (a transactional id) is the leader of
``__consumer_offsets-<partition_for(group)>`` (``__transaction_state-<partition_for(id)>``).
Writes are appended as the partition leader and acknowledged like acks=all (every ISR
member has them and the ISR is at least ``min.insync.replicas``), so a committed offset or
transaction state survives the loss of the coordinator.
"""

from __future__ import annotations

import logging

import trio

from broker.controller_channel import ControllerChannel, ControllerUnavailable
from broker.replica_manager import ReplicaManager
from kraft import clock
from kraft.protocol.error_codes import ErrorCode

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
TXN_STATE_TOPIC = "__transaction_state"
COMMIT_TIMEOUT_MS = 5000  # offsets.commit.timeout.ms (transaction.state.log's is the same)
GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE = 0, 1  # FindCoordinator key types


class StoreError(Exception):
    def __init__(self, error_code: int, message: str = ""):
        super().__init__(message or ErrorCode(error_code).name)
        self.error_code = error_code


class InternalTopicStore:
    """One internal topic's partitions as a coordinator's store (see broker.group.service)."""

    def __init__(self, replicas: ReplicaManager, topic: str = OFFSETS_TOPIC):
        self.replicas = replicas
        self.topic = topic

    def is_leader(self, partition: int) -> bool:
        p = self.replicas.get(self.topic, partition)
        return p is not None and p.state.is_leader

    def leader_epoch(self, partition: int) -> int:
        """The partition's leader epoch: the transaction coordinator's epoch."""
        p = self.replicas.get(self.topic, partition)
        return p.state.leader_epoch if p is not None else -1

    async def append(self, partition: int, batch: bytes) -> None:
        p = self.replicas.get(self.topic, partition)
        if p is None or not p.state.is_leader:
            raise StoreError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        out = p.append_internal(batch, self.replicas.min_insync_replicas(self.topic),
                                clock.monotonic_ms() + COMMIT_TIMEOUT_MS)
        error = out.error
        if out.waiter is not None:
            with trio.move_on_after(COMMIT_TIMEOUT_MS / 1000 + 0.5):
                await out.waiter[0].wait()
            p.drop_waiter(out.waiter_id)
            error = out.waiter[1] if out.waiter[1] is not None else ErrorCode.REQUEST_TIMED_OUT
        if error != ErrorCode.NONE:
            raise StoreError(error)

    def read_all(self, partition: int):
        p = self.replicas.get(self.topic, partition)
        if p is None:
            return []
        return [data for _, data in p.log.iter_batches(with_data=True)]


def internal_topic_spec(config, topic: str) -> tuple[int, int, dict[str, str]]:
    """(partitions, replication factor, topic configs) of an internal topic, from Kafka's
    ``offsets.topic.*`` and ``transaction.state.log.*`` keys.  ``__consumer_offsets`` keeps
    kraft's cap of its replication factor at the live brokers; Kafka caps neither (creation
    fails until enough brokers are up), and ``__transaction_state`` is created as Kafka does."""
    if topic == TXN_STATE_TOPIC:
        return (config["transaction.state.log.num.partitions"], config["transaction.state.log.replication.factor"],
                {"cleanup.policy": "compact", "compression.type": "uncompressed",
                 "min.insync.replicas": str(config["transaction.state.log.min.isr"]),
                 "segment.bytes": str(config["transaction.state.log.segment.bytes"]),
                 "unclean.leader.election.enable": "false"})
    return (config["offsets.topic.num.partitions"], config["offsets.topic.replication.factor"],
            {"cleanup.policy": "compact", "segment.bytes": str(100 << 20)})


class CoordinatorLocator:
    """FindCoordinator: which broker coordinates a group (key type 0) or a transactional id
    (key type 1); creates the internal topic on first use.

    Args:
        partition_for: key type -> (internal topic, ``key -> partition``).
    """

    def __init__(self, config, replicas: ReplicaManager, channel: ControllerChannel, nursery: trio.Nursery,
                 partition_for: dict[int, tuple[str, object]]):
        self.config = config
        self.replicas = replicas
        self.channel = channel
        self.nursery = nursery
        self.partition_for = partition_for
        self._creating: set[str] = set()

    def find(self, body: dict, version: int, endpoint_of) -> dict:
        keys = body["coordinator_keys"] if version >= 4 else [body["key"]]
        results = [self._find_one(k, body["key_type"], endpoint_of) for k in keys]
        if version >= 4:
            return {"coordinators": results}
        r = results[0]
        return {"error_code": r["error_code"], "error_message": r["error_message"], "node_id": r["node_id"],
                "host": r["host"], "port": r["port"]}

    def _find_one(self, key: str, key_type: int, endpoint_of) -> dict:
        out = {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": 0, "error_message": None}
        if key_type not in self.partition_for:
            out.update(error_code=ErrorCode.INVALID_REQUEST, error_message=f"unknown key type {key_type}")
            return out
        if key_type == TRANSACTION_KEY_TYPE and not key:
            out.update(error_code=ErrorCode.INVALID_REQUEST, error_message="an empty transactional id")
            return out
        name, partition_for = self.partition_for[key_type]
        image = self.replicas.image
        topic = image.topic(name)
        if topic is None:
            self.create_internal_topic(name)
            out["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
            return out
        reg = topic.partitions.get(partition_for(key))
        broker = image.broker(reg.leader) if reg is not None and reg.leader >= 0 else None
        endpoint = endpoint_of(broker) if broker is not None and broker.is_active else None
        if endpoint is None:
            out["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
            return out
        out.update(node_id=broker.id, host=endpoint.host, port=endpoint.port)
        return out

    def create_offsets_topic(self) -> None:
        self.create_internal_topic(OFFSETS_TOPIC)

    def create_internal_topic(self, name: str) -> None:
        """Ask the controller for an internal topic as Kafka makes it (internal_topic_spec)."""
        if name in self._creating:
            return
        self._creating.add(name)
        partitions, rf, configs = internal_topic_spec(self.config, name)
        if name == OFFSETS_TOPIC:
            rf = max(1, min(rf, len(self.replicas.image.active_brokers())))

        async def create():
            body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": rf,
                                "assignments": [],
                                "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
                    "timeout_ms": 30000, "validate_only": False}
            try:
                resp = await self.channel.request("CreateTopics", 7, body)
                error = resp["topics"][0]["error_code"]
                if error not in (0, ErrorCode.TOPIC_ALREADY_EXISTS):
                    log.warning("creating %s failed: %s", name, ErrorCode(error).name)
            except ControllerUnavailable as exc:
                log.info("creating %s failed: %s", name, exc)
            finally:
                self._creating.discard(name)

        self.nursery.start_soon(create)
