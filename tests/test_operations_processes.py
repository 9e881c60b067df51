"""Operators' tools against real nodes (issue 22): DeleteRecords, preferred and automatic
leader elections, unregistering a decommissioned broker, describing log directories; with
kraftctl (Kafka's tool flags and JSON) and confluent-kafka's admin client."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster_helpers import (cluster_metadata, fast_overrides, kraftctl, partitions_of, request, start_cluster,
                             wait_until)
from kraft.local_cluster import LocalCluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # One controller and three brokers; automatic rebalancing off, so that the elections
    # this module makes are the ones it sees (the automatic one has a test of its own).
    c = LocalCluster(tmp_path_factory.mktemp("ops"), controllers=1, brokers=3,
                     overrides=fast_overrides(**{"auto.leader.rebalance.enable": "false"}))
    try:
        start_cluster(c)
        yield c
    finally:
        c.stop_all()


def create(cluster, name, partitions, rf):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=rf)])[name].result(60)
    del admin  # closed now, not when the cluster stops
    wait_until(lambda: all(p["leader_id"] >= 0 for p in partitions_of(cluster, name).values()) and
               len(partitions_of(cluster, name)) == partitions, what=f"{name} led")


def produce(cluster, topic, partition, count):
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": True})
    for i in range(count):
        p.produce(topic, value=f"{i}".encode(), partition=partition)
    assert p.flush(60) == 0


def watermarks(cluster, topic, partition):
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "wm"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=20)
    finally:
        c.close()


def test_delete_records_moves_the_log_start_on_every_replica(cluster, tmp_path):
    create(cluster, "dr", 2, 3)
    produce(cluster, "dr", 0, 100)
    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "dr", "partition": 0, "offset": 40}, {"topic": "dr", "partition": 1, "offset": -1}]}))
    r = kraftctl("delete-records", "--bootstrap-server", cluster.bootstrap_servers,
                 "--offset-json-file", str(offsets))
    assert r.returncode == 0, r.stderr
    assert "partition: dr-0\tlow_watermark: 40" in r.stdout
    assert "partition: dr-1\tlow_watermark: 0" in r.stdout
    assert watermarks(cluster, "dr", 0) == (40, 100)

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "dr-read",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["dr"])
    first = None
    for _ in range(60):
        msg = consumer.poll(1.0)
        if msg is not None and not msg.error():
            first = msg
            break
    consumer.close()
    assert first is not None and first.offset() == 40 and first.value() == b"40"

    # The answer came once every live follower had moved too: the next leader starts there.
    leader = partitions_of(cluster, "dr")[0]["leader_id"]
    cluster.stop(leader)
    try:
        wait_until(lambda: partitions_of(cluster, "dr")[0]["leader_id"] not in (-1, leader), what="a new leader")
        assert watermarks(cluster, "dr", 0) == (40, 100)
        # confluent-kafka's admin client speaks the same API
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        result = admin.delete_records([TopicPartition("dr", 0, 60)])[TopicPartition("dr", 0, 60)].result(60)
        assert result.low_watermark == 60
    finally:
        cluster.start(leader)
        wait_until(lambda: len(cluster_metadata(cluster, [])["brokers"]) == 3, what="3 brokers")


def test_a_follower_catches_up_when_delete_records_left_the_log_start_inside_a_batch(cluster):
    """A follower that was down while 10 batches of 10 records were written and the log
    start moved to 45 (inside the batch 40..49): its fetch from 0 is out of range, it starts
    over at 45, the leader sends the batch 40..49, and the follower takes it (as Kafka's
    follower: the log starts at the batch's base) and rejoins the ISR.  It used to refuse
    that batch, forever (the data-plane simulator found it)."""
    from kraft.records import build_batch

    create(cluster, "dr-mid", 1, 3)
    part = partitions_of(cluster, "dr-mid")[0]
    follower = next(r for r in part["replica_nodes"] if r != part["leader_id"])
    cluster.stop(follower)
    try:
        wait_until(lambda: follower not in partitions_of(cluster, "dr-mid")[0]["isr_nodes"],
                   timeout_s=60, what="the stopped follower out of the ISR")
        leader = cluster.nodes[partitions_of(cluster, "dr-mid")[0]["leader_id"]]
        for b in range(10):
            records = build_batch([(None, b"%d" % (b * 10 + i)) for i in range(10)], timestamp=1)
            resp = request(leader.host, leader.broker_port, "Produce", 9, {
                "transactional_id": None, "acks": -1, "timeout_ms": 10000, "topic_data": [
                    {"name": "dr-mid", "partition_data": [{"index": 0, "records": records}]}]})
            answer = resp["responses"][0]["partition_responses"][0]
            assert (answer["error_code"], answer["base_offset"]) == (0, b * 10)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        deleted = admin.delete_records([TopicPartition("dr-mid", 0, 45)])[TopicPartition("dr-mid", 0, 45)]
        assert deleted.result(60).low_watermark == 45
        del admin
    finally:
        cluster.start(follower)
    wait_until(lambda: follower in partitions_of(cluster, "dr-mid")[0]["isr_nodes"], timeout_s=60,
               what="the follower back in the ISR")
    assert watermarks(cluster, "dr-mid", 0) == (45, 100)


def test_delete_records_refuses_offsets_beyond_the_high_watermark_and_bad_files(cluster, tmp_path):
    create(cluster, "dr-bad", 1, 3)
    produce(cluster, "dr-bad", 0, 5)
    offsets = tmp_path / "beyond.json"
    offsets.write_text(json.dumps({"partitions": [{"topic": "dr-bad", "partition": 0, "offset": 6},
                                                  {"topic": "missing", "partition": 0, "offset": 1}]}))
    r = kraftctl("delete-records", "--bootstrap-server", cluster.bootstrap_servers, "--offset-json-file", str(offsets))
    assert r.returncode == 1
    assert "partition: dr-bad-0\terror: OFFSET_OUT_OF_RANGE" in r.stdout
    assert "partition: missing-0\terror: UNKNOWN_TOPIC_OR_PARTITION" in r.stdout
    assert watermarks(cluster, "dr-bad", 0) == (0, 5)  # nothing deleted
    for text, complaint in [("{", "is not JSON"), ('{"partitions": []}', "non-empty"),
                            ('{"partitions": [{"topic": "dr-bad", "partition": 0}]}', '"offset"')]:
        offsets.write_text(text)
        r = kraftctl("delete-records", "--bootstrap-server", cluster.bootstrap_servers, "--offset-json-file", str(offsets))
        assert r.returncode == 1 and complaint in r.stderr, r.stderr


def test_preferred_leader_election_after_a_restart(cluster):
    create(cluster, "pl", 6, 3)
    preferred = {i: p["replica_nodes"][0] for i, p in partitions_of(cluster, "pl").items()}
    victim = preferred[0]
    cluster.stop(victim)
    wait_until(lambda: all(p["leader_id"] not in (-1, victim) for p in partitions_of(cluster, "pl").values()),
               what="leaders moved off the stopped broker")
    cluster.start(victim)
    wait_until(lambda: all(victim in p["isr_nodes"] for p in partitions_of(cluster, "pl").values()),
               timeout_s=60, what="the restarted broker back in every ISR")
    moved = [i for i, p in partitions_of(cluster, "pl").items() if p["leader_id"] != preferred[i]]
    assert moved  # without an election, leadership stays where the failure put it

    r = kraftctl("leader-election", "--bootstrap-server", cluster.bootstrap_servers,
                 "--election-type", "preferred", "--topic", "pl", "--partition", str(moved[0]))
    assert r.returncode == 0, r.stderr
    assert f"Successfully completed leader election (PREFERRED) for partitions pl-{moved[0]}" in r.stdout
    r = kraftctl("leader-election", "--bootstrap-server", cluster.bootstrap_servers,
                 "--election-type", "PREFERRED", "--all-topic-partitions")
    assert r.returncode == 0, r.stderr
    wait_until(lambda: all(p["leader_id"] == preferred[i] for i, p in partitions_of(cluster, "pl").items()),
               what="every partition led by its preferred replica")
    r = kraftctl("leader-election", "--bootstrap-server", cluster.bootstrap_servers,
                 "--election-type", "PREFERRED", "--topic", "pl", "--partition", "0")
    assert r.returncode == 0 and "Valid replica already elected for partitions pl-0" in r.stdout
    r = kraftctl("leader-election", "--bootstrap-server", cluster.bootstrap_servers,
                 "--election-type", "PREFERRED", "--topic", "pl", "--partition", "99")
    assert r.returncode == 1 and "pl-99: UNKNOWN_TOPIC_OR_PARTITION" in r.stderr
    r = kraftctl("leader-election", "--bootstrap-server", cluster.bootstrap_servers, "--election-type", "PREFERRED")
    assert r.returncode == 1 and "exactly one of" in r.stderr


def test_unregistering_a_stopped_broker_keeps_new_replicas_off_it(cluster):
    gone = cluster.brokers[-1].node_id
    cluster.stop(gone)
    wait_until(lambda: len(cluster_metadata(cluster, [])["brokers"]) == 2, what="2 live brokers")
    r = kraftctl("cluster-tool", "unregister", "--bootstrap-server", cluster.bootstrap_servers, "--id", str(gone))
    assert r.returncode == 0, r.stderr
    create(cluster, "after-unregister", 6, 2)
    assert all(gone not in p["replica_nodes"] for p in partitions_of(cluster, "after-unregister").values())
    r = kraftctl("cluster-tool", "unregister", "--bootstrap-server", cluster.bootstrap_servers, "--id", "77")
    assert r.returncode == 1 and "BROKER_ID_NOT_REGISTERED" in r.stderr
    # Started again, it registers anew and takes replicas again.
    cluster.start(gone)
    wait_until(lambda: len(cluster_metadata(cluster, [])["brokers"]) == 3, timeout_s=60, what="3 live brokers")
    r = kraftctl("log-dirs", "--describe", "--bootstrap-server", cluster.bootstrap_servers,
                 "--topic-list", "after-unregister")
    assert r.returncode == 0, r.stderr
    described = json.loads(r.stdout.splitlines()[-1])
    hosted = {b["broker"]: sum(len(d["partitions"]) for d in b["logDirs"]) for b in described["brokers"]}
    assert sum(hosted.values()) == 12 and hosted.get(gone, 0) == 0


def test_automatic_rebalance_restores_preferred_leaders_after_a_rolling_restart(tmp_path):
    c = LocalCluster(tmp_path, controllers=3,
                     overrides=fast_overrides(**{"leader.imbalance.check.interval.seconds": "3"}))
    try:
        start_cluster(c)
        create(c, "auto", 6, 3)
        preferred = {i: p["replica_nodes"][0] for i, p in partitions_of(c, "auto").items()}
        for node in list(c.nodes):  # a rolling restart: one node at a time
            c.stop(node)
            wait_until(lambda: all(p["leader_id"] not in (-1, node) for p in partitions_of(c, "auto").values()),
                       what=f"leaders off node {node}")
            c.start(node)
            wait_until(lambda: all(node in p["isr_nodes"] for p in partitions_of(c, "auto").values()),
                       timeout_s=60, what=f"node {node} back in every ISR")
        # Within the check interval (3 s) plus a little, with nobody asking:
        wait_until(lambda: all(p["leader_id"] == preferred[i] for i, p in partitions_of(c, "auto").items()),
                   timeout_s=15, what="preferred leaders restored")
    finally:
        c.stop_all()
