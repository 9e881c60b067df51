"""Kafka's metrics over HTTP from every node of a real 3-node cluster, as a Prometheus
server scrapes them, moving with the load: confluent-kafka produces, a broker is killed
and restarted, and the counters and gauges must say exactly what happened."""

import subprocess
import sys
import time

import pytest

from cluster_helpers import fast_overrides, scrape, start_cluster, value, wait_until

TOPIC = "metered"
PARTITIONS = 3
RECORDS = 3000


def total(cluster, name: str, nodes=None, **labels) -> float:
    return sum(value(scrape(n), name, **labels) for n in (nodes or cluster.nodes.values()))


MESSAGES_IN = "kafka_server_brokertopicmetrics_messagesin_total"
PRODUCE_REQUESTS = "kafka_network_requestmetrics_requests_total"
URP = "kafka_server_replicamanager_underreplicatedpartitions"
LEADERS = "kafka_server_replicamanager_leadercount"
ACTIVE = "kafka_controller_kafkacontroller_activecontrollercount"


def produce_requests(samples: dict) -> float:
    return sum(v for (name, labels), v in samples.items()
               if name == PRODUCE_REQUESTS and ("request", "Produce") in labels)


def produce(cluster, count: int) -> None:
    from confluent_kafka import Producer

    delivered, failed = [], []
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "enable.idempotence": True,
                         "linger.ms": 5})
    for i in range(count):
        producer.produce(TOPIC, value=b"v" * 100, key=str(i).encode(), partition=i % PARTITIONS,
                         on_delivery=lambda err, msg: (failed if err else delivered).append(err))
        producer.poll(0)
    assert producer.flush(60) == 0
    assert failed == [] and len(delivered) == count


def consume_all_and_commit(cluster) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "metered-readers",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    seen = 0
    try:
        deadline = time.monotonic() + 90
        while seen < RECORDS and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=1):
                if msg.error() is None:
                    seen += 1
        assert seen == RECORDS
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


@pytest.fixture
def cluster(make_cluster):
    return start_cluster(make_cluster(controllers=3, overrides=fast_overrides()))


def test_every_node_serves_metrics_that_follow_the_load(cluster):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=3)])[TOPIC].result(30)
    nodes = list(cluster.nodes.values())
    wait_until(lambda: total(cluster, LEADERS) == PARTITIONS, timeout_s=60, what="every partition led")
    produce_before = sum(produce_requests(scrape(n)) for n in nodes)

    # Messages in: counted once, by the leader that appended them (not by followers, not for
    # an idempotent retry it already held): summed over the nodes, exactly what was produced.
    produce(cluster, RECORDS)
    assert total(cluster, MESSAGES_IN, topic=TOPIC) == RECORDS
    assert total(cluster, MESSAGES_IN) >= RECORDS  # all topics: the unlabelled sample
    assert sum(produce_requests(scrape(n)) for n in nodes) > produce_before
    for n in nodes:  # every Produce answered (acks=all: most of them deferred) was timed once
        samples = scrape(n)
        if produce_requests(samples):
            assert value(samples, "kafka_network_requestmetrics_totaltimems_count", request="Produce") \
                == produce_requests(samples)
            assert value(samples, "kafka_network_requestmetrics_errors_total", request="Produce", error="NONE") > 0
    bytes_in = total(cluster, "kafka_server_brokertopicmetrics_bytesin_total", topic=TOPIC)
    assert bytes_in > RECORDS * 100  # record values alone are 100 bytes each
    # Followers replicate what the leaders took in: replication bytes in on the followers.
    wait_until(lambda: total(cluster, "kafka_server_brokertopicmetrics_replicationbytesin_total") >= 2 * bytes_in,
               timeout_s=30, what="followers to replicate every byte twice (RF 3)")
    # Each node's log gauges hold its replicas: the log end offsets add up to the records.
    wait_until(lambda: all(sum(value(scrape(n), "kafka_log_log_logendoffset", topic=TOPIC, partition=str(p))
                               for p in range(PARTITIONS)) == RECORDS for n in nodes),
               timeout_s=30, what="every replica at the log end")

    # One active controller; every node agrees on the Raft leader and epoch.
    def one_leader():
        views = [scrape(n) for n in nodes]
        actives = sum(value(v, ACTIVE) for v in views)
        leaders = {(value(v, "kafka_server_raft_metrics_current_leader"),
                    value(v, "kafka_server_raft_metrics_current_epoch")) for v in views}
        return actives == 1 and len(leaders) == 1 and next(iter(leaders))[0] >= 0 and leaders
    ((raft_leader, _),) = wait_until(one_leader, timeout_s=30, what="one active controller and one Raft view")
    states = [next(labels for (name, labels) in scrape(n) if name == "kafka_server_raft_metrics_current_state")
              for n in nodes]
    assert sorted(dict(s)["state"] for s in states) == ["follower", "follower", "leader"]
    assert total(cluster, URP) == 0

    # SIGKILL a node that is not the Raft leader: the leaders of its partitions' other
    # replicas report them under-replicated until it is back and caught up.
    victim = next(n for n in nodes if n.node_id != raft_leader)
    alive = [n for n in nodes if n is not victim]
    cluster.kill(victim.node_id)

    def under_replicated():
        views = [scrape(n) for n in alive]
        urp = [value(v, URP) for v in views]
        # every partition has a replica on the victim: each live leader counts all it leads
        return sum(urp) == PARTITIONS and all(u == value(v, LEADERS) for u, v in zip(urp, views)) and urp
    wait_until(under_replicated, timeout_s=60, what="under-replicated partitions on the live leaders")
    active = next(n for n in alive if value(scrape(n), ACTIVE) == 1)
    assert value(scrape(active), "kafka_controller_kafkacontroller_fencedbrokercount") == 1
    expands_before = total(cluster, "kafka_server_replicamanager_isrexpands_total", nodes=alive)

    cluster.start(victim.node_id)

    def none_under_replicated():
        try:
            return total(cluster, URP) == 0
        except (OSError, KeyError):  # the restarted node does not serve (all) its metrics yet
            return False
    wait_until(none_under_replicated, timeout_s=90, what="no under-replicated partitions")
    assert total(cluster, "kafka_server_replicamanager_isrexpands_total") > expands_before
    assert total(cluster, ACTIVE) == 1

    # A consumer group reads it all and commits: the coordinator counts the group and its
    # offsets, and the leaders count the bytes consumers fetched.
    consume_all_and_commit(cluster)
    wait_until(lambda: total(cluster, "kafka_coordinator_group_groupmetadatamanager_numgroups") == 1
               and total(cluster, "kafka_coordinator_group_groupmetadatamanager_numoffsets") == PARTITIONS,
               timeout_s=30, what="one group with an offset per partition")
    assert total(cluster, "kafka_server_brokertopicmetrics_bytesout_total", topic=TOPIC) >= bytes_in

    # kraftctl top finds every node through the cluster and prints a row for each.
    out = subprocess.run([sys.executable, "-m", "cli.main", "top", "--bootstrap-server",
                          cluster.bootstrap_servers, "--once", "--interval", "0.5"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines()[2:-1]]
    assert [r[0] for r in rows] == ["1", "2", "3"], out.stdout
    assert all(r[1] == "b+c" for r in rows), out.stdout
    assert sum(r[2] == "active" for r in rows) == 1, out.stdout
    assert "3/3 nodes answering" in out.stdout


def test_top_finds_separate_controllers_and_brokers(make_cluster):
    cluster = start_cluster(make_cluster(controllers=1, brokers=2, overrides=fast_overrides()))
    controller = cluster.controllers[0]
    out = subprocess.run([sys.executable, "-m", "cli.main", "top", "--bootstrap-server", cluster.bootstrap_servers,
                          "--bootstrap-controller", f"{controller.host}:{controller.controller_port}",
                          "--once", "--interval", "0.5"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    rows = {r[0]: r for r in (line.split() for line in out.stdout.splitlines()[2:-1])}
    assert sorted(rows) == ["1", "2", "3"], out.stdout
    assert rows["1"][1:4] == ["c", "active", "leader"], out.stdout
    for broker in ("2", "3"):
        # a broker-only node has no controller metrics, and follows the quorum as an observer
        assert rows[broker][1:4] == ["b", "-", "observer"], out.stdout
    # The controller-only node serves no broker families: no broker metrics to make up.
    samples = scrape(controller)
    assert value(samples, ACTIVE) == 1
    assert not any(name == URP for name, _ in samples)
