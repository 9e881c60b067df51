"""A failed log directory takes its replicas offline, not the node (issue 15): real
``kraftctl start`` processes, a checkpoint write made to fail, real clients."""

from __future__ import annotations

import time

import pytest
from cluster_helpers import fast_overrides, request, start_cluster, wait_until

from kraft.log import REPLICATION_OFFSET_CHECKPOINT
from kraft.protocol.error_codes import ErrorCode

pytest.importorskip("confluent_kafka")

TOPIC = "dirfail"
PARTITIONS = 6


def _partitions(cluster, via: int):
    node = cluster.nodes[via]
    md = request(node.host, node.broker_port, "Metadata", 12, {"topics": [{"name": TOPIC}]})
    return md["topics"][0]["partitions"]


def _describe_log_dirs(cluster, node_id: int) -> dict:
    node = cluster.nodes[node_id]
    return request(node.host, node.broker_port, "DescribeLogDirs", 4, {"topics": None})


def test_a_failed_checkpoint_write_takes_the_dir_offline_not_the_node(make_cluster):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = start_cluster(make_cluster(controllers=3, overrides=fast_overrides(
        replica_high_watermark_checkpoint_interval_ms=200)))
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=3)])[TOPIC].result(30)
    wait_until(lambda: all(p["leader_id"] >= 0 for p in _partitions(cluster, 1)) and
               len(_partitions(cluster, 1)) == PARTITIONS, what="partition leaders")

    def hosted():  # a broker creates its replicas in steps after the metadata names them
        results = _describe_log_dirs(cluster, 2)["results"]
        assert results[0]["error_code"] == 0
        return {p["partition_index"] for t in results[0]["topics"] if t["name"] == TOPIC
                for p in t["partitions"]} == set(range(PARTITIONS))

    wait_until(hosted, timeout_s=20, what="broker 2 hosting every partition")

    # The checkpoint is written as <file>.tmp then renamed: a directory in the .tmp's place
    # makes the write fail with EISDIR (a read-only file would not stop root).
    victim = 2
    (cluster.nodes[victim].data_dir / (REPLICATION_OFFSET_CHECKPOINT + ".tmp")).mkdir()
    # The checkpoint is rewritten when a high watermark moved: move some.
    nudge = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for p in range(PARTITIONS):
        nudge.produce(TOPIC, value=b"nudge", partition=p)
    nudge.flush(10)

    def reported():
        results = _describe_log_dirs(cluster, victim)["results"]
        return results if results[0]["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR else None

    results = wait_until(reported, timeout_s=20, what="DescribeLogDirs reporting the failed dir")
    assert results[0]["log_dir"] == str(cluster.nodes[victim].data_dir) and results[0]["topics"] == []

    # The controller moves every leadership off the failed broker and out of the ISRs.
    def moved():
        parts = _partitions(cluster, 1)
        return all(p["leader_id"] not in (-1, victim) and victim not in p["isr_nodes"] for p in parts)

    wait_until(moved, timeout_s=30, what=f"leaders and ISRs without broker {victim}")
    log_text = cluster.nodes[victim].log_path.read_text()
    assert "failed while checkpointing" in log_text and REPLICATION_OFFSET_CHECKPOINT in log_text

    # Clients keep working on the other two brokers.
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    acked = []
    for i in range(300):
        producer.produce(TOPIC, value=b"v%d" % i, partition=i % PARTITIONS,
                         on_delivery=lambda err, msg: err is None and acked.append(msg.value()))
    producer.flush(30)
    assert len(acked) == 300
    acked += [b"nudge"]  # some of the records above, whose outcome the test does not know
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "dirfail", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    seen = set()
    deadline = time.monotonic() + 30
    while not set(acked) - {b"nudge"} <= seen and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            seen.add(msg.value())
    consumer.close()
    assert set(acked) - {b"nudge"} <= seen <= set(acked)

    # The node is alive: still a quorum member answering requests, its process running.
    assert all(node.running for node in cluster.nodes.values())
    assert _describe_log_dirs(cluster, victim)["results"][0]["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
    cluster.stop_all()
