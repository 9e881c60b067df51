"""Replication throttles on real nodes (issue 22): ``kraftctl reassign-partitions --execute
--throttle`` holds a new replica's catch-up to the rate while acks=all writes to the same
partition, whose ISR is exempt, stay quick; ``--verify`` removes the throttle once the move is
done; bad throttled-replicas values are refused; broker-level rates are described per broker
and as the cluster default."""

from __future__ import annotations

import json
import os
import statistics
import time
import urllib.request

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from cluster_helpers import fast_overrides, kraftctl, partitions_of, start_cluster, wait_until
from kraft.local_cluster import LocalCluster

RATE = 1_000_000  # bytes/s
FILL_BYTES = 6_000_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # Node 1 is the controller; brokers 2-4.
    c = LocalCluster(tmp_path_factory.mktemp("throttle"), controllers=1, brokers=3,
                     overrides=fast_overrides(**{"auto.leader.rebalance.enable": "false"}))
    try:
        start_cluster(c)
        yield c
    finally:
        c.stop_all()


def fill(cluster, topic: str, partition: int, size: int) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 20,
                  "batch.size": 512 * 1024, "enable.idempotence": True})
    value = os.urandom(10_000)
    for _ in range(size // len(value)):
        while True:
            try:
                p.produce(topic, value=value, partition=partition)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(60) == 0


def log_size(cluster, broker: int, topic: str, partition: int) -> int:
    r = kraftctl("log-dirs", "--describe", "--bootstrap-server", cluster.bootstrap_servers,
                 "--topic-list", topic, "--broker-list", str(broker))
    assert r.returncode == 0, r.stderr
    for b in json.loads(r.stdout.splitlines()[-1])["brokers"]:
        for d in b["logDirs"]:
            for p in d["partitions"]:
                if p["partition"] == f"{topic}-{partition}":
                    return p["size"]
    return -1


def dynamic_configs(cluster, entity_type: str, *name: str) -> dict:
    r = kraftctl("configs", "--bootstrap-server", cluster.bootstrap_servers, "--entity-type", entity_type,
                 *name, "--describe", "--output", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def reassign(cluster, tmp_path, name: str, moves: dict, *flags: str):
    plan = tmp_path / f"{name}.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r} for (t, p), r in moves.items()]}))
    r = kraftctl("reassign-partitions", "--bootstrap-server", cluster.bootstrap_servers,
                 "--reassignment-json-file", str(plan), *flags)
    return plan, r


def byte_rate(node, side: str) -> float:
    """kafka.server:type=LeaderReplication|FollowerReplication,name=byte-rate from the node."""
    with urllib.request.urlopen(node.metrics_url, timeout=10) as resp:
        text = resp.read().decode()
    return next(s.value for f in text_string_to_metric_families(text) for s in f.samples
                if s.name == f"kafka_server_{side}replication_byte_rate")


def moved(cluster, topic: str, partition: int, replicas: list[int]) -> bool:
    p = partitions_of(cluster, topic).get(partition, {})
    return p.get("replica_nodes") == replicas and sorted(p.get("isr_nodes", [])) == sorted(replicas)


def test_a_throttled_catch_up_keeps_to_the_rate_and_verify_removes_the_throttle(cluster, tmp_path):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("big", num_partitions=2, replica_assignment=[[2, 3], [2, 3]])])["big"].result(60)
    del admin
    wait_until(lambda: all(p["leader_id"] == 2 for p in partitions_of(cluster, "big").values())
               and len(partitions_of(cluster, "big")) == 2, what="big led by 2")
    fill(cluster, "big", 0, FILL_BYTES)
    fill(cluster, "big", 1, FILL_BYTES)

    # Unthrottled, for comparison: partition 1 gains a replica on broker 4.
    _, r = reassign(cluster, tmp_path, "fast", {("big", 1): [2, 3, 4]}, "--execute")
    assert r.returncode == 0, r.stderr
    started = time.monotonic()
    wait_until(lambda: moved(cluster, "big", 1, [2, 3, 4]), timeout_s=60, interval_s=0.05, what="big-1 moved")
    unthrottled_s = time.monotonic() - started

    # Throttled: partition 0 gains a replica on broker 4 at RATE.
    size = log_size(cluster, 2, "big", 0)
    assert size >= FILL_BYTES
    plan, r = reassign(cluster, tmp_path, "slow", {("big", 0): [2, 3, 4]}, "--execute", "--throttle", str(RATE))
    assert r.returncode == 0, r.stderr
    started = time.monotonic()
    assert f"The inter-broker throttle limit was set to {RATE} B/s" in r.stdout
    assert "the throttle stays until --verify finds the reassignment complete" in r.stdout
    assert dynamic_configs(cluster, "topics", "--entity-name", "big") == {
        "follower.replication.throttled.replicas": "0:4", "leader.replication.throttled.replicas": "0:2,0:3"}
    for broker in (2, 3, 4):
        assert dynamic_configs(cluster, "brokers", "--entity-name", str(broker)) == {
            "follower.replication.throttled.rate": str(RATE), "leader.replication.throttled.rate": str(RATE)}

    # The replication quotas' rates, as the brokers' metrics show them: near RATE.
    assert 0 < byte_rate(cluster.nodes[2], "leader") <= 2 * RATE
    assert 0 < byte_rate(cluster.nodes[4], "follower") <= 2 * RATE
    wait_until(lambda: moved(cluster, "big", 0, [2, 3, 4]), timeout_s=60, interval_s=0.05, what="big-0 moved")
    throttled_s = time.monotonic() - started
    # The catch-up took about size / RATE; without the throttle it is as quick as partition 1's.
    assert throttled_s >= 0.7 * size / RATE, (throttled_s, size)
    assert unthrottled_s < throttled_s / 2, (unthrottled_s, throttled_s)
    print(f"catch-up of {size} bytes: {throttled_s:.1f} s at {RATE} B/s, {unthrottled_s:.1f} s unthrottled")

    r = kraftctl("reassign-partitions", "--bootstrap-server", cluster.bootstrap_servers,
                 "--reassignment-json-file", str(plan), "--verify")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Reassignment of partition big-0 is completed." in r.stdout
    assert "Clearing broker-level throttles on brokers 2,3,4" in r.stdout
    assert "Clearing topic-level throttles on topic big" in r.stdout
    # Each describe asks a broker, whose metadata may be a moment behind the controller's
    # commit of the clearing (in Kafka too): cleared soon, on every broker.
    wait_until(lambda: dynamic_configs(cluster, "topics", "--entity-name", "big") == {}, timeout_s=10,
               what="topic throttles cleared")
    for broker in (2, 3, 4):
        wait_until(lambda: dynamic_configs(cluster, "brokers", "--entity-name", str(broker)) == {}, timeout_s=10,
                   what=f"broker {broker}'s throttles cleared")


def test_the_isr_is_never_throttled_and_a_rate_change_applies_at_once(cluster, tmp_path):
    """Only the leader side, with a rate so low that the first bytes exceed it: a new replica
    gets nothing more, while acks=all writes, which wait for the ISR alone, stay quick (their
    bytes count against the quota too).  A higher rate, from the reassignment submitted again
    with --additional, lets the new replica catch up without a restart."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("hot", num_partitions=1, replica_assignment=[[2, 3]])])["hot"].result(60)
    del admin
    wait_until(lambda: partitions_of(cluster, "hot").get(0, {}).get("leader_id") == 2, what="hot led by 2")
    fill(cluster, "hot", 0, 3 * (1 << 20))

    def alter(entity_type, name, *args):
        r = kraftctl("configs", "--bootstrap-server", cluster.bootstrap_servers, "--entity-type", entity_type,
                     "--entity-name", name, "--alter", *args)
        assert r.returncode == 0, r.stderr

    alter("topics", "hot", "--add-config", "leader.replication.throttled.replicas=*")
    alter("brokers", "2", "--add-config", "leader.replication.throttled.rate=1000")
    plan, r = reassign(cluster, tmp_path, "hot", {("hot", 0): [2, 3, 4]}, "--execute")
    assert r.returncode == 0, r.stderr

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 0})
    latencies = []
    for i in range(30):
        sent = time.monotonic()
        producer.produce("hot", value=b"in sync %d" % i, partition=0)
        assert producer.flush(30) == 0
        latencies.append(time.monotonic() - sent)
    del producer
    # A throttled ISR follower would get nothing until the quota's windows pass (seconds).
    assert statistics.median(latencies) < 0.1 and max(latencies) < 2, latencies
    time.sleep(2)
    leader_size = log_size(cluster, 2, "hot", 0)
    assert 0 <= log_size(cluster, 4, "hot", 0) <= leader_size // 2  # at most the first fetch's worth
    assert not moved(cluster, "hot", 0, [2, 3, 4])

    _, r = reassign(cluster, tmp_path, "hot", {("hot", 0): [2, 3, 4]}, "--execute", "--throttle", "50000000")
    assert r.returncode == 1 and "Cannot execute: reassignments are under way (hot-0)" in r.stderr, r.stderr
    # Submitted again with --additional: the new rate (50 MB/s) replaces 1000 B/s at once.
    _, r = reassign(cluster, tmp_path, "hot", {("hot", 0): [2, 3, 4]}, "--execute", "--additional",
                    "--throttle", "50000000")
    assert r.returncode == 0, r.stderr
    wait_until(lambda: moved(cluster, "hot", 0, [2, 3, 4]), timeout_s=30, what="hot-0 moved once the rate rose")
    r = kraftctl("reassign-partitions", "--bootstrap-server", cluster.bootstrap_servers,
                 "--reassignment-json-file", str(plan), "--verify")
    assert r.returncode == 0, r.stdout
    wait_until(lambda: dynamic_configs(cluster, "topics", "--entity-name", "hot") == {}, timeout_s=10,
               what="topic throttles cleared")


def test_bad_throttled_replicas_and_rates_are_refused(cluster, tmp_path):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("strict", num_partitions=1, replication_factor=2)])["strict"].result(60)

    def alter(entity_type, name, config):
        return kraftctl("configs", "--bootstrap-server", cluster.bootstrap_servers, "--entity-type", entity_type,
                        *name, "--alter", "--add-config", config)

    for value in ("0-2", "*;0:2", "a:b", "0:2:3", "1:"):
        r = alter("topics", ["--entity-name", "strict"], f"leader.replication.throttled.replicas={value}")
        assert r.returncode == 1, (value, r.stdout)
        assert "INVALID_CONFIG" in r.stderr and "[partitionId]:[brokerId]" in r.stderr, (value, r.stderr)
    # "*,0:2" splits on the comma: --add-config would take 0:2 as a key, so ask the admin API.
    resource = ConfigResource("topic", "strict", incremental_configs=[ConfigEntry(
        "follower.replication.throttled.replicas", "*,0:2", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as refused:
        admin.incremental_alter_configs([resource])[resource].result(30)
    assert refused.value.args[0].name() == "INVALID_CONFIG"
    del admin
    for value in ("-1", "fast"):  # a broker's: INVALID_REQUEST, Kafka's code for it (KAFKA-13609)
        r = alter("brokers", ["--entity-name", "2"], f"leader.replication.throttled.rate={value}")
        assert r.returncode == 1 and "INVALID_REQUEST" in r.stderr, (value, r.stderr)
    assert dynamic_configs(cluster, "topics", "--entity-name", "strict") == {}

    # Good values are taken: a topic's, a broker's own rate, the cluster default.
    assert alter("topics", ["--entity-name", "strict"], "follower.replication.throttled.replicas=*").returncode == 0
    assert alter("brokers", ["--entity-name", "3"], "follower.replication.throttled.rate=5000000").returncode == 0
    assert alter("brokers", ["--entity-default"], "follower.replication.throttled.rate=7000000").returncode == 0
    assert dynamic_configs(cluster, "topics", "--entity-name", "strict") == {
        "follower.replication.throttled.replicas": "*"}
    # Broker 3 is asked itself (the bootstrap broker, 2, describes only itself).
    wait_until(lambda: dynamic_configs(cluster, "brokers", "--entity-name", "3") == {
        "follower.replication.throttled.rate": "5000000"}, what="broker 3's own rate")
    assert dynamic_configs(cluster, "brokers", "--entity-default") == {"follower.replication.throttled.rate": "7000000"}
    # A reassignment-less --verify clears them all, as Kafka's tool does.
    plan = tmp_path / "strict.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "strict", "partition": 0, "replicas": partitions_of(cluster, "strict")[0]["replica_nodes"]}]}))
    r = kraftctl("reassign-partitions", "--bootstrap-server", cluster.bootstrap_servers,
                 "--reassignment-json-file", str(plan), "--verify", "--preserve-throttles")
    assert r.returncode == 0 and "Clearing" not in r.stdout, r.stdout
    r = kraftctl("reassign-partitions", "--bootstrap-server", cluster.bootstrap_servers,
                 "--reassignment-json-file", str(plan), "--verify")
    assert r.returncode == 0 and "Clearing topic-level throttles on topic strict" in r.stdout, r.stdout
    # An alter is answered once the controller commits it; the broker asked next may not have
    # applied that record yet (as in Kafka), so each read waits for it.
    wait_until(lambda: dynamic_configs(cluster, "topics", "--entity-name", "strict") == {}, what="topic throttles cleared")
    wait_until(lambda: dynamic_configs(cluster, "brokers", "--entity-name", "3") == {}, what="broker 3's rate cleared")
    r = kraftctl("configs", "--bootstrap-server", cluster.bootstrap_servers, "--entity-type", "brokers",
                 "--entity-default", "--alter", "--delete-config", "follower.replication.throttled.rate")
    assert r.returncode == 0, r.stderr
    wait_until(lambda: dynamic_configs(cluster, "brokers", "--entity-default") == {}, what="the default rate cleared")
    r = kraftctl("reassign-partitions", "--bootstrap-server", cluster.bootstrap_servers,
                 "--reassignment-json-file", str(plan), "--execute", "--replica-alter-log-dirs-throttle", "1000")
    assert r.returncode == 1 and "one log directory per broker" in r.stderr
