"""A client that connects the moment a freshly started node accepts connections is served
correctly: no sleep, no readiness helper between ``kraftctl start`` and the first request.

Each start formats a new 1-node or 3-node (combined controller+broker) cluster, starts every
process, waits only until each client port accepts a TCP connection, and then, at the same
time, confluent-kafka and kafka-python each create a topic with their admin client, produce
to it and consume it back in a consumer group.  Before brokers gated requests on readiness,
librdkafka's create_topics failed after 30 s ("Failed while waiting for controller") and
list_topics() with _PARTIAL: the broker answered Metadata before it was registered, caught
up and unfenced, with no brokers and no controller in it.
"""

from __future__ import annotations

import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

MESSAGES = 20
DEADLINE_S = 60  # for one client's whole create + produce + consume


def wait_until_accepting(cluster, timeout_s: float = 60.0) -> None:
    """Until every broker's client port accepts a TCP connection: the moment a user's client
    could first connect, and nothing later."""
    deadline = time.monotonic() + timeout_s
    for node in cluster.brokers:
        while True:
            try:
                socket.create_connection((node.host, node.broker_port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or not node.running:
                    raise AssertionError(f"node {node.node_id} never accepted connections "
                                         f"(see {node.log_path})") from None
                time.sleep(0.01)  # a refused connect returns at once: poll the port closely


def confluent_round_trip(bootstrap: str, topic: str, replication: int) -> float:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    started = time.monotonic()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=replication)],
                        request_timeout=DEADLINE_S)[topic].result(DEADLINE_S)
    created = time.monotonic() - started
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    for i in range(MESSAGES):
        producer.produce(topic, key=b"%d" % i, value=b"%d" % i)
    assert producer.flush(DEADLINE_S) == 0, "confluent-kafka: messages left unsent"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-readers",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        seen = set()
        deadline = time.monotonic() + DEADLINE_S
        while len(seen) < MESSAGES and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.add(int(msg.value()))
        assert seen == set(range(MESSAGES)), f"confluent-kafka consumed {sorted(seen)}"
    finally:
        consumer.close()
    return created


def kafka_python_round_trip(bootstrap: str, topic: str, replication: int) -> float:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import NewTopic

    servers = bootstrap.split(",")
    started = time.monotonic()
    admin = KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=DEADLINE_S * 1000)
    try:
        admin.create_topics([NewTopic(topic, 3, replication)])
    finally:
        admin.close()
    created = time.monotonic() - started
    producer = KafkaProducer(bootstrap_servers=servers, acks="all")
    try:
        for i in range(MESSAGES):
            producer.send(topic, key=b"%d" % i, value=b"%d" % i)
        producer.flush(DEADLINE_S)
    finally:
        producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=servers, group_id=f"{topic}-readers",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        seen = set()
        deadline = time.monotonic() + DEADLINE_S
        while len(seen) < MESSAGES and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                seen.update(int(r.value) for r in records)
        assert seen == set(range(MESSAGES)), f"kafka-python consumed {sorted(seen)}"
    finally:
        consumer.close()
    return created


def start_and_use_at_once(make_cluster, nodes: int) -> dict[str, float]:
    """One cold start; seconds from the client port accepting to each client's topic created."""
    cluster = make_cluster(controllers=nodes, brokers=0)
    try:
        cluster.format()
        cluster.start_all()
        wait_until_accepting(cluster)
        # One replica: the broker that answers first may be the only one registered yet (the
        # others register a moment later), and the controller places replicas on unfenced
        # brokers only, so three replicas could be refused with INVALID_REPLICATION_FACTOR at
        # that instant -- a correct answer about the cluster, not about this broker's readiness.
        replication = 1
        with ThreadPoolExecutor(2) as pool:
            confluent = pool.submit(confluent_round_trip, cluster.bootstrap_servers, "from-librdkafka", replication)
            python = pool.submit(kafka_python_round_trip, cluster.bootstrap_servers, "from-kafka-python", replication)
            return {"confluent-kafka": confluent.result(), "kafka-python": python.result()}
    finally:
        cluster.stop_all()


def repeated_starts(make_cluster, nodes: int, starts: int) -> None:
    failures, times = [], []
    for i in range(starts):
        try:
            times.append(start_and_use_at_once(make_cluster, nodes))
        except Exception as exc:  # noqa: BLE001 - count every kind of failure, report them all
            failures.append(f"start {i}: {type(exc).__name__}: {exc}")
    firsts = [min(t.values()) for t in times]
    print(f"\n{nodes} node(s): {starts} starts, {len(failures)} failed; first topic created after "
          f"{min(firsts, default=0):.2f}-{max(firsts, default=0):.2f} s "
          f"(mean {sum(firsts) / max(1, len(firsts)):.2f} s); per start: {times}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("nodes", [1, 3])
def test_clients_served_right_after_start(make_cluster, nodes):
    repeated_starts(make_cluster, nodes, starts=2)


@pytest.mark.slow
@pytest.mark.parametrize("nodes", [1, 3])
def test_twenty_starts_in_a_row(make_cluster, nodes):
    repeated_starts(make_cluster, nodes, starts=20)
