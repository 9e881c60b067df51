"""``__consumer_offsets`` for the group coordinator: its store over the replica manager,
on-demand creation of the topic, and FindCoordinator.

The coordinator of a group is the leader of ``__consumer_offsets-<partition_for(group)>``.
Writes are appended as the partition leader and acknowledged like acks=all (every ISR
member has them and the ISR is at least ``min.insync.replicas``), so a committed offset
survives the loss of the coordinator.
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
COMMIT_TIMEOUT_MS = 5000  # offsets.commit.timeout.ms


class StoreError(Exception):
    def __init__(self, error_code: int, message: str = ""):
        super().__init__(message or ErrorCode(error_code).name)
        self.error_code = error_code


class OffsetsStore:
    def __init__(self, replicas: ReplicaManager):
        self.replicas = replicas

    def is_leader(self, partition: int) -> bool:
        p = self.replicas.get(OFFSETS_TOPIC, partition)
        return p is not None and p.state.is_leader

    async def append(self, partition: int, batch: bytes) -> None:
        p = self.replicas.get(OFFSETS_TOPIC, partition)
        if p is None or not p.state.is_leader:
            raise StoreError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        min_isr = self.replicas.min_insync_replicas(OFFSETS_TOPIC)
        error = p.state.check_produce(-1, min_isr)
        if error != ErrorCode.NONE:
            raise StoreError(error)
        _, last, completions = p.append_as_leader(bytearray(batch))
        p.complete(completions)
        reg = p.state.register_produce_waiter(last + 1, clock.monotonic_ms() + COMMIT_TIMEOUT_MS, min_isr)
        if reg.completion is not None:
            error = reg.completion.error
        else:
            slot = p.add_waiter(reg.waiter_id)
            with trio.move_on_after(COMMIT_TIMEOUT_MS / 1000 + 0.5):
                await slot[0].wait()
            p.drop_waiter(reg.waiter_id)
            error = slot[1] if slot[1] is not None else ErrorCode.REQUEST_TIMED_OUT
        if error != ErrorCode.NONE:
            raise StoreError(error)

    def read_all(self, partition: int):
        p = self.replicas.get(OFFSETS_TOPIC, partition)
        if p is None:
            return []
        return [data for _, data in p.log.iter_batches(with_data=True)]


class CoordinatorLocator:
    """FindCoordinator: which broker coordinates a group; creates ``__consumer_offsets``
    on first use."""

    def __init__(self, config, replicas: ReplicaManager, channel: ControllerChannel, nursery: trio.Nursery,
                 partition_for):
        self.config = config
        self.replicas = replicas
        self.channel = channel
        self.nursery = nursery
        self.partition_for = partition_for
        self._creating = False

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
        if key_type != 0:
            out.update(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                       error_message="transactions are not supported")
            return out
        image = self.replicas.image
        topic = image.topic(OFFSETS_TOPIC)
        if topic is None:
            self.create_offsets_topic()
            out["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
            return out
        reg = topic.partitions.get(self.partition_for(key))
        broker = image.broker(reg.leader) if reg is not None and reg.leader >= 0 else None
        endpoint = endpoint_of(broker) if broker is not None and broker.is_active else None
        if endpoint is None:
            out["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
            return out
        out.update(node_id=broker.id, host=endpoint.host, port=endpoint.port)
        return out

    def create_offsets_topic(self) -> None:
        """Ask the controller for ``__consumer_offsets`` as Kafka makes it: compacted, with the
        ``offsets.topic.*`` partition count and replication factor."""
        if self._creating:
            return
        self._creating = True
        alive = len(self.replicas.image.active_brokers())
        rf = max(1, min(self.config["offsets.topic.replication.factor"], alive))

        async def create():
            body = {"topics": [{"name": OFFSETS_TOPIC, "num_partitions": self.config["offsets.topic.num.partitions"],
                                "replication_factor": rf, "assignments": [],
                                "configs": [{"name": "cleanup.policy", "value": "compact"},
                                            {"name": "segment.bytes", "value": str(100 << 20)}]}],
                    "timeout_ms": 30000, "validate_only": False}
            try:
                resp = await self.channel.request("CreateTopics", 7, body)
                error = resp["topics"][0]["error_code"]
                if error not in (0, ErrorCode.TOPIC_ALREADY_EXISTS):
                    log.warning("creating %s failed: %s", OFFSETS_TOPIC, ErrorCode(error).name)
            except ControllerUnavailable as exc:
                log.info("creating %s failed: %s", OFFSETS_TOPIC, exc)
            finally:
                self._creating = False

        self.nursery.start_soon(create)
