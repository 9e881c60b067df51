"""A real librdkafka consumer (confluent-kafka) against a tiny test server: the network
shell answers ApiVersions, Metadata, FindCoordinator, ListOffsets and Fetch for one empty
topic, and the group coordinator service answers the group APIs.  This checks the shapes of
a real client's JoinGroup / SyncGroup / Heartbeat / OffsetCommit / OffsetFetch / LeaveGroup."""

from __future__ import annotations

import time

import pytest
import trio
from test_group_service import MemStore

from broker.group.service import GROUP_API_VERSIONS, GroupCoordinatorService
from broker.network import serve_kafka
from kraft.protocol import rpc
from kraft.protocol.schema import Versions

confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC, PARTITIONS, NODE = "t", 2, 1
OTHER_APIS = {"ApiVersions": (0, 3), "Metadata": (1, 9), "FindCoordinator": (0, 4), "ListOffsets": (1, 5),
              "Fetch": (4, 11)}
APIS = {**OTHER_APIS, **GROUP_API_VERSIONS}
SUPPORTED = {rpc.API_KEYS[name]: Versions(lo, hi) for name, (lo, hi) in APIS.items()}


class TinyBroker:
    def __init__(self, service: GroupCoordinatorService):
        self.service = service
        self.port = 0
        self.seen: dict[str, set[int]] = {}

    async def handle(self, request: rpc.Request) -> dict:
        api, version, body = request.api, request.version, request.body
        self.seen.setdefault(api, set()).add(version)
        if api in GROUP_API_VERSIONS:
            return await self.service.handle(api, version, body, client_id=request.header.client_id,
                                             client_host="127.0.0.1")
        if api == "ApiVersions":
            return {"error_code": 0, "throttle_time_ms": 0, "api_keys": [
                {"api_key": k, "min_version": v.lo, "max_version": v.hi} for k, v in sorted(SUPPORTED.items())]}
        if api == "Metadata":
            return {"throttle_time_ms": 0, "cluster_id": "kraft-test", "controller_id": NODE,
                    "brokers": [{"node_id": NODE, "host": "127.0.0.1", "port": self.port, "rack": None}],
                    "topics": [{"error_code": 0, "name": TOPIC, "is_internal": False, "partitions": [
                        {"error_code": 0, "partition_index": p, "leader_id": NODE, "leader_epoch": -1,
                         "replica_nodes": [NODE], "isr_nodes": [NODE], "offline_replicas": []}
                        for p in range(PARTITIONS)]}]}
        if api == "FindCoordinator":
            keys = body["coordinator_keys"] if version >= 4 else [body["key"]]
            found = [{"key": k, "node_id": NODE, "host": "127.0.0.1", "port": self.port, "error_code": 0,
                      "error_message": None} for k in keys]
            return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "node_id": NODE,
                    "host": "127.0.0.1", "port": self.port, "coordinators": found}
        if api == "ListOffsets":
            return {"throttle_time_ms": 0, "topics": [
                {"name": t["name"], "partitions": [
                    {"partition_index": p["partition_index"], "error_code": 0, "timestamp": -1, "offset": 0,
                     "leader_epoch": -1} for p in t["partitions"]]} for t in body["topics"]]}
        if api == "Fetch":
            await trio.sleep(min(body["max_wait_ms"], 100) / 1000)
            return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
                {"topic": t["topic"], "partitions": [
                    {"partition_index": p["partition"], "error_code": 0, "high_watermark": 0,
                     "last_stable_offset": 0, "log_start_offset": 0, "aborted_transactions": None,
                     "records": b""} for p in t["partitions"]]} for t in body["topics"]]}
        raise AssertionError(f"unexpected {api}")


def run_consumer(port: int) -> dict:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "real-group",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 100,
                         "broker.address.family": "v4", "topic.metadata.refresh.interval.ms": 60000})
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 15
        while not consumer.assignment():
            assert time.monotonic() < deadline, "no assignment"
            consumer.poll(0.1)
        assignment = sorted((tp.topic, tp.partition) for tp in consumer.assignment())
        for _ in range(5):  # let a few heartbeats flow
            consumer.poll(0.1)
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, 5), TopicPartition(TOPIC, 1, 9)], asynchronous=False)
        committed = consumer.committed([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)], timeout=10)
        return {"assignment": assignment, "committed": sorted((tp.partition, tp.offset) for tp in committed)}
    finally:
        consumer.close()


async def test_confluent_kafka_consumer_joins_commits_and_leaves():
    store = MemStore(leaders=range(3))
    config = {"offsets.topic.num.partitions": 3, "group.initial.rebalance.delay.ms": 0}
    service = GroupCoordinatorService(NODE, config, store)
    broker = TinyBroker(service)
    with trio.fail_after(25):
        async with trio.open_nursery() as nursery:
            await nursery.start(service.run)
            for p in range(3):
                service.on_become_leader(p)
            broker.port = await nursery.start(serve_kafka, broker.handle, "127.0.0.1", 0)
            result = await trio.to_thread.run_sync(run_consumer, broker.port)
            assert result["assignment"] == [(TOPIC, 0), (TOPIC, 1)]
            assert result["committed"] == [(0, 5), (1, 9)]
            # close() left the group: it is Empty, with its offsets kept
            with trio.fail_after(5):
                while service.core.table.groups["real-group"].members:
                    await trio.sleep(0.05)
            group = service.core.table.groups["real-group"]
            assert group.state.value == "Empty"
            assert {tp: v.offset for tp, v in group.offsets.items()} == {(TOPIC, 0): 5, (TOPIC, 1): 9}
            for api in ("JoinGroup", "SyncGroup", "OffsetCommit", "OffsetFetch", "LeaveGroup"):
                assert api in broker.seen, api
            nursery.cancel_scope.cancel()


def run_kafka_python_consumer(port: int) -> dict:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(TOPIC, bootstrap_servers=f"127.0.0.1:{port}", group_id="kp-group",
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             session_timeout_ms=6000, heartbeat_interval_ms=100, request_timeout_ms=10000)
    try:
        deadline = time.monotonic() + 15
        while not consumer.assignment():
            assert time.monotonic() < deadline, "no assignment"
            consumer.poll(timeout_ms=100)
        assignment = sorted((tp.topic, tp.partition) for tp in consumer.assignment())
        consumer.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(3, "kp", -1)})
        committed = consumer.committed(TopicPartition(TOPIC, 0))
        return {"assignment": assignment, "committed": committed}
    finally:
        consumer.close()


async def test_kafka_python_consumer_joins_and_commits():
    store = MemStore(leaders=range(3))
    service = GroupCoordinatorService(NODE, {"offsets.topic.num.partitions": 3,
                                             "group.initial.rebalance.delay.ms": 0}, store)
    broker = TinyBroker(service)
    with trio.fail_after(25):
        async with trio.open_nursery() as nursery:
            await nursery.start(service.run)
            for p in range(3):
                service.on_become_leader(p)
            broker.port = await nursery.start(serve_kafka, broker.handle, "127.0.0.1", 0)
            result = await trio.to_thread.run_sync(run_kafka_python_consumer, broker.port)
            assert result == {"assignment": [(TOPIC, 0), (TOPIC, 1)], "committed": 3}
            offsets = service.core.table.groups["kp-group"].offsets
            assert offsets[(TOPIC, 0)].metadata == "kp"
            nursery.cancel_scope.cancel()
