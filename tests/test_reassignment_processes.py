"""Partition reassignment on real nodes under load (issue 22): a topic moved to other
brokers with its replication factor raised, every acknowledged record read back once;
a reassignment that cannot finish, listed and cancelled; the emptied broker unregistered."""

from __future__ import annotations

import json
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster_helpers import fast_overrides, kraftctl, partitions_of, start_cluster, wait_until
from kraft.local_cluster import LocalCluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # Node 1 is the controller; brokers 2-7.
    c = LocalCluster(tmp_path_factory.mktemp("reassign"), controllers=1, brokers=6,
                     overrides=fast_overrides(**{"auto.leader.rebalance.enable": "false"}))
    try:
        start_cluster(c)
        yield c
    finally:
        c.stop_all()


class Load:
    """An acks=all idempotent producer writing distinct values until stopped."""

    def __init__(self, cluster, topic, partitions):
        self.producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 5})
        self.topic, self.partitions = topic, partitions
        self.acked: list[bytes] = []
        self.failed = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def on_delivery(self, err, msg):
        if err is None:
            self.acked.append(msg.value())
        else:
            self.failed += 1

    def run(self):
        n = 0
        while not self.done.is_set():
            self.producer.produce(self.topic, value=b"%d" % n, partition=n % self.partitions,
                                  on_delivery=self.on_delivery)
            n += 1
            self.producer.poll(0.002)
        self.producer.flush(60)

    def stop(self):
        self.done.set()
        self.thread.join(90)


def read_all(cluster, topic, partitions):
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": f"read-{topic}",
                         "enable.auto.commit": False})
    ends = {}
    for p in range(partitions):
        ends[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=20)[1]
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values, positions = [], {p: 0 for p in range(partitions)}
    deadline = time.monotonic() + 120
    while any(positions[p] < ends[p] for p in ends) and time.monotonic() < deadline:
        for msg in consumer.consume(500, 1.0):
            if not msg.error():
                values.append(msg.value())
                positions[msg.partition()] = msg.offset() + 1
    consumer.close()
    return values


def test_a_topic_moves_to_other_brokers_and_gains_a_replica_under_load(cluster, tmp_path):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    old = [[2, 3], [3, 4], [4, 2], [2, 4], [3, 2], [4, 3]]
    admin.create_topics([NewTopic("moving", num_partitions=6, replica_assignment=old)])["moving"].result(60)
    del admin
    wait_until(lambda: all(p["leader_id"] >= 0 for p in partitions_of(cluster, "moving").values()),
               what="moving led")
    load = Load(cluster, "moving", 6)
    load.thread.start()
    wait_until(lambda: len(load.acked) > 500, timeout_s=60, what="load running")

    target = {p: [5 + (p + k) % 3 for k in range(3)] for p in range(6)}  # {2,3,4} x2 -> {5,6,7} x3
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "moving", "partition": p, "replicas": r} for p, r in target.items()]}))
    r = kraftctl("reassign-partitions", "--bootstrap-server", cluster.bootstrap_servers,
                 "--reassignment-json-file", str(plan), "--execute")
    assert r.returncode == 0, r.stderr
    assert "Successfully started partition reassignments for moving-0,moving-1" in r.stdout
    rollback = json.loads(r.stdout.split("Current partition replica assignment\n\n")[1].split("\n")[0])
    assert {p["partition"]: p["replicas"] for p in rollback["partitions"]} == dict(enumerate(old))

    def verified():
        return kraftctl("reassign-partitions", "--bootstrap-server", cluster.bootstrap_servers,
                        "--reassignment-json-file", str(plan), "--verify").returncode == 0
    wait_until(verified, timeout_s=120, interval_s=1, what="the reassignment completed")
    time.sleep(1)  # some load on the new replicas too
    load.stop()

    after = partitions_of(cluster, "moving")
    for p, part in after.items():
        assert part["replica_nodes"] == target[p]
        assert sorted(part["isr_nodes"]) == sorted(target[p])
        assert part["leader_id"] in target[p]
    assert load.failed == 0
    values = read_all(cluster, "moving", 6)
    assert len(load.acked) > 500
    assert sorted(values) == sorted(load.acked)  # every acknowledged record once, nothing else

    # The old brokers deleted their replicas.
    def hosted():
        r = kraftctl("log-dirs", "--describe", "--bootstrap-server", cluster.bootstrap_servers,
                     "--topic-list", "moving")
        return {b["broker"]: sum(len(d["partitions"]) for d in b["logDirs"])
                for b in json.loads(r.stdout.splitlines()[-1])["brokers"]}
    wait_until(lambda: [n for b, n in sorted(hosted().items()) if b in (2, 3, 4)] == [0, 0, 0],
               timeout_s=60, interval_s=1, what="the old replicas deleted")
    assert sum(hosted().values()) == 18

    # Broker 2 holds nothing now: decommission it.
    cluster.stop(2)
    r = kraftctl("cluster-tool", "unregister", "--bootstrap-server", cluster.bootstrap_servers, "--id", "2")
    assert r.returncode == 0, r.stderr
    assert all(p["leader_id"] >= 0 for p in partitions_of(cluster, "moving").values())


def test_a_reassignment_that_cannot_finish_is_listed_and_cancelled(cluster, tmp_path):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("stuck", num_partitions=1, replica_assignment=[[5, 6]])])["stuck"].result(60)
    del admin
    wait_until(lambda: partitions_of(cluster, "stuck").get(0, {}).get("leader_id", -1) >= 0, what="stuck led")
    cluster.stop(7)  # still registered (fenced): it can be named, but cannot catch up
    try:
        plan = tmp_path / "stuck.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "stuck", "partition": 0, "replicas": [5, 7]}]}))
        r = kraftctl("reassign-partitions", "--bootstrap-server", cluster.bootstrap_servers,
                     "--reassignment-json-file", str(plan), "--execute")
        assert r.returncode == 0, r.stderr
        r = kraftctl("reassign-partitions", "--bootstrap-server", cluster.bootstrap_servers, "--list")
        assert "stuck-0: replicas: 5,7,6. adding: 7. removing: 6." in r.stdout
        r = kraftctl("reassign-partitions", "--bootstrap-server", cluster.bootstrap_servers,
                     "--reassignment-json-file", str(plan), "--verify")
        assert r.returncode == 1 and "Reassignment of partition stuck-0 is still in progress." in r.stdout
        r = kraftctl("reassign-partitions", "--bootstrap-server", cluster.bootstrap_servers,
                     "--reassignment-json-file", str(plan), "--cancel")
        assert r.returncode == 0 and "Successfully cancelled partition reassignments for stuck-0" in r.stdout
        wait_until(lambda: partitions_of(cluster, "stuck")[0]["replica_nodes"] == [5, 6], what="reverted")
        assert partitions_of(cluster, "stuck")[0]["leader_id"] == 5
        r = kraftctl("reassign-partitions", "--bootstrap-server", cluster.bootstrap_servers, "--list")
        assert "No partition reassignments found." in r.stdout
        r = kraftctl("reassign-partitions", "--bootstrap-server", cluster.bootstrap_servers,
                     "--reassignment-json-file", str(plan), "--cancel")
        assert r.returncode == 1 and "NO_REASSIGNMENT_IN_PROGRESS" in r.stderr
    finally:
        cluster.start(7)


def test_generate_proposes_the_listed_brokers_and_bad_plans_are_refused(cluster, tmp_path):
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "stuck"}]}))
    r = kraftctl("reassign-partitions", "--bootstrap-server", cluster.bootstrap_servers,
                 "--topics-to-move-json-file", str(topics), "--broker-list", "3,4", "--generate")
    assert r.returncode == 0, r.stderr
    proposed = json.loads(r.stdout.split("Proposed partition reassignment configuration\n")[1])
    assert [sorted(p["replicas"]) for p in proposed["partitions"]] == [[3, 4]]
    plan = tmp_path / "bad.json"
    for text, complaint in [('{"partitions": [{"topic": "stuck", "partition": 0, "replicas": [5, 5]}]}', "twice"),
                            ('{"partitions": [{"topic": "stuck", "partition": 0}]}', '"replicas"'),
                            ('{"partitions": [{"topic": "stuck", "partition": 0, "replicas": [5, 99]}]}',
                             "INVALID_REPLICA_ASSIGNMENT")]:
        plan.write_text(text)
        r = kraftctl("reassign-partitions", "--bootstrap-server", cluster.bootstrap_servers,
                     "--reassignment-json-file", str(plan), "--execute")
        assert r.returncode == 1 and complaint in r.stderr, (text, r.stdout, r.stderr)
