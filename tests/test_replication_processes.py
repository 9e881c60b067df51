"""Acknowledged writes survive broker crashes: idempotent acks=all producers (librdkafka and
kafka-python) while brokers are SIGKILLed and restarted; then every acknowledged message is
read exactly once, in order, and the replicas' logs are byte-identical up to the HW."""

import os
import random
import threading
import time

import pytest

from cluster_helpers import fast_overrides, request, start_cluster, wait_until

TOPIC = "acked"
PARTITIONS = 3


def run_scenario(make_cluster, messages_per_client: int, kill_every_s: float, duration_s: float, seed: int = 7):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = start_cluster(make_cluster(controllers=3, brokers=3, overrides=fast_overrides(min_insync_replicas=2)))
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=3,
                                  config={"min.insync.replicas": "2"})])[TOPIC].result(30)
    wait_until(lambda: _all_led(cluster), what="partition leaders")

    acked: list[tuple[int, int, bytes]] = []  # (partition, offset, value)
    lock = threading.Lock()
    stop = threading.Event()
    pause_every = 100
    pause_s = duration_s / messages_per_client * pause_every  # spread sends over the run


    def librdkafka_producer():
        p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                      "linger.ms": 5, "message.timeout.ms": 120000, "retry.backoff.ms": 100})

        def cb(err, msg):
            if err is None:
                with lock:
                    acked.append((msg.partition(), msg.offset(), msg.value()))

        for i in range(messages_per_client):
            while True:
                try:
                    p.produce(TOPIC, key=b"%d" % i, value=b"c-%d" % i, on_delivery=cb)
                    break
                except BufferError:
                    p.poll(0.05)
            if i % pause_every == 0:
                p.poll(0)
                time.sleep(pause_s)
        p.flush(180)

    def kafka_python_producer():
        from kafka import KafkaProducer

        p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True,
                          linger_ms=5, retries=1000000, request_timeout_ms=10000,
                          delivery_timeout_ms=120000, max_in_flight_requests_per_connection=5)
        futures = []
        for i in range(messages_per_client):
            value = b"p-%d" % i
            futures.append((value, p.send(TOPIC, key=b"%d" % i, value=value)))
            if i % pause_every == 0:
                time.sleep(pause_s)
        p.flush(180)
        for value, f in futures:
            try:
                md = f.get(timeout=1)
            except Exception:  # noqa: BLE001 - not acknowledged: allowed to be lost
                continue
            with lock:
                acked.append((md.partition, md.offset, value))

    def chaos():
        rng = random.Random(seed)
        time.sleep(1.0)
        while not stop.is_set():
            if stop.is_set():
                break
            victim = rng.choice(cluster.brokers).node_id
            cluster.kill(victim)
            kills.append(victim)
            time.sleep(kill_every_s / 2)
            cluster.start(victim)
            time.sleep(kill_every_s / 2)

    kills = []
    threads = [threading.Thread(target=librdkafka_producer), threading.Thread(target=kafka_python_producer)]
    chaos_thread = threading.Thread(target=chaos)
    for t in threads:
        t.start()
    chaos_thread.start()
    for t in threads:
        t.join(600)
    stop.set()
    chaos_thread.join()
    for b in cluster.brokers:
        cluster.start(b.node_id)
    wait_until(lambda: _all_led(cluster) and _isr_full(cluster), timeout_s=60, what="full ISRs")

    # Read everything back from the beginning.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False,
                        "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    seen: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
    ends = _high_watermarks(cluster)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any((seen[p][-1][0] + 1 if seen[p] else 0) < ends[p] for p in seen):
        msg = consumer.poll(0.5)
        if msg is None or msg.error():
            continue
        seen[msg.partition()].append((msg.offset(), msg.value()))
    consumer.close()
    cluster.stop_all()
    print(f"brokers killed: {kills}")
    assert kills, "the scenario must kill brokers while producing"
    return cluster, acked, seen


def _all_led(cluster):
    b = cluster.brokers[0]
    try:
        md = request(b.host, b.broker_port, "Metadata", 12, {"topics": [{"name": TOPIC}]})
    except Exception:  # noqa: BLE001
        return False
    parts = md["topics"][0]["partitions"]
    return len(parts) == PARTITIONS and all(p["leader_id"] >= 0 for p in parts)


def _isr_full(cluster):
    b = cluster.brokers[0]
    md = request(b.host, b.broker_port, "Metadata", 12, {"topics": [{"name": TOPIC}]})
    return all(len(p["isr_nodes"]) == 3 for p in md["topics"][0]["partitions"])


def _high_watermarks(cluster):
    b = cluster.brokers[0]
    body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": TOPIC, "partitions": [
        {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1} for p in range(PARTITIONS)]}]}
    out = {}
    for p in range(PARTITIONS):
        md = request(b.host, b.broker_port, "Metadata", 12, {"topics": [{"name": TOPIC}]})
        leader = next(x["leader_id"] for x in md["topics"][0]["partitions"] if x["partition_index"] == p)
        node = cluster.nodes[leader]
        resp = request(node.host, node.broker_port, "ListOffsets", 4, body)
        out[p] = next(x["offset"] for x in resp["topics"][0]["partitions"] if x["partition_index"] == p)
    return out


def check(cluster, acked, seen):
    # Exactly once, in per-partition order: offsets strictly increase with no duplicates.
    all_values = [v for msgs in seen.values() for _, v in msgs]
    assert len(all_values) == len(set(all_values)), "a value was read twice"
    for p, msgs in seen.items():
        offsets = [o for o, _ in msgs]
        assert offsets == sorted(set(offsets))
    at = {(p, o): v for p, msgs in seen.items() for o, v in msgs}
    # librdkafka acknowledges some messages with no offset: a request that failed with an
    # uncertain outcome (the connection died) whose later request succeeded is "implicitly
    # acked", and so is a batch answered DUPLICATE_SEQUENCE_NUMBER.  Those must still be in
    # their partition, once; only their offset is unknown.
    values_in = {p: {v for _, v in msgs} for p, msgs in seen.items()}
    missing = [(p, o, v) for p, o, v in acked
               if (v not in values_in[p] if o is None else at.get((p, o)) != v)]
    assert not missing, f"{len(missing)} acknowledged messages lost or moved, e.g. {missing[:5]}"
    # Replicas byte-identical up to the high watermark.
    for p in range(PARTITIONS):
        logs = []
        for b in cluster.brokers:
            d = b.data_dir / f"{TOPIC}-{p}"
            segs = sorted(x for x in os.listdir(d) if x.endswith(".log"))
            logs.append(b"".join((d / s).read_bytes() for s in segs))
        n = min(len(x) for x in logs)
        assert all(x[:n] == logs[0][:n] for x in logs), f"partition {p} replicas differ"


def test_acked_writes_survive_broker_kills(make_cluster):
    cluster, acked, seen = run_scenario(make_cluster, messages_per_client=15000, kill_every_s=3.0,
                                       duration_s=12.0)
    print(f"acked {len(acked)}, read {sum(len(v) for v in seen.values())}")
    assert len(acked) > 20000
    check(cluster, acked, seen)


@pytest.mark.slow
def test_200k_per_client_with_broker_kills(make_cluster):
    cluster, acked, seen = run_scenario(make_cluster, messages_per_client=200000, kill_every_s=4.0,
                                       duration_s=60.0)
    print(f"acked {len(acked)}, read {sum(len(v) for v in seen.values())}")
    check(cluster, acked, seen)


def test_acked_writes_survive_a_whole_cluster_crash(make_cluster):
    """Every node SIGKILLed at once, then restarted: a consumer that starts while leaders
    are still settling (its fetches meet NOT_LEADER_OR_FOLLOWER) reads every acknowledged
    message exactly once."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = start_cluster(make_cluster(controllers=3, overrides=fast_overrides()))
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: its futures die with it
    admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=3)])[TOPIC].result(30)
    wait_until(lambda: _all_led(cluster), what="partition leaders")
    acked = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5})
    for i in range(10000):
        producer.produce(TOPIC, value=b"v%d" % i,
                         on_delivery=lambda err, msg: err is None and acked.append(msg.value()))
        if i % 500 == 0:
            producer.poll(0)
    producer.flush(60)
    assert len(acked) == 10000

    for node_id in list(cluster.nodes):
        cluster.kill(node_id)
    for node_id in list(cluster.nodes):
        cluster.start(node_id)

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "after-crash",
                         "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 60000})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    seen = []
    deadline = time.monotonic() + 60
    while len(seen) < len(acked) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            seen.append(msg.value())
    consumer.close()
    assert len(seen) == len(set(seen)) == len(acked) and set(seen) == set(acked)
    cluster.stop_all()
