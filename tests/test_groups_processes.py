"""Consumer groups on a real 3-broker cluster: confluent-kafka and kafka-python members share
a topic, rebalance on leave/join, and committed offsets survive a coordinator SIGKILL."""

import time

import pytest

from cluster_helpers import fast_overrides, request, start_cluster, wait_until

TOPIC = "shared"
MESSAGES = 600


@pytest.fixture
def cluster(make_cluster):
    return start_cluster(make_cluster(controllers=1, brokers=3, overrides=fast_overrides(
        group_initial_rebalance_delay_ms=0, offsets_topic_num_partitions=6,
        offsets_topic_replication_factor=3)))


def produce(bootstrap, start, count):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    for i in range(start, start + count):
        p.produce(TOPIC, key=b"%d" % i, value=b"%d" % i)
    assert p.flush(30) == 0


def coordinator_of(cluster, group):
    b = next(b for b in cluster.brokers if b.running)  # not the coordinator a test killed
    resp = request(b.host, b.broker_port, "FindCoordinator", 4,
                   {"key_type": 0, "coordinator_keys": [group]})
    c = resp["coordinators"][0]
    return c["node_id"] if c["error_code"] == 0 else None


def test_confluent_group_rebalances_and_survives_coordinator_kill(cluster):
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result
    admin.create_topics([NewTopic(TOPIC, num_partitions=6, replication_factor=3)])[TOPIC].result(30)
    produce(bootstrap, 0, MESSAGES)

    def member():
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "auto.offset.reset": "earliest",
                      "enable.auto.commit": False, "session.timeout.ms": 6000,
                      "heartbeat.interval.ms": 500})
        c.subscribe([TOPIC])
        return c

    members = [member() for _ in range(3)]
    seen = {}

    def poll_all(ms, until):
        deadline = time.monotonic() + until
        while time.monotonic() < deadline and not ms_done(ms):
            for c in ms:
                m = c.poll(0.1)
                if m is not None and not m.error():
                    seen.setdefault(int(m.value()), []).append((m.partition(), m.offset()))

    def ms_done(ms):
        return len(seen) >= MESSAGES and all(len(c.assignment()) == 6 // len(ms) for c in ms)

    poll_all(members, 60)
    assert len(seen) == MESSAGES
    assert [len(c.assignment()) for c in members] == [2, 2, 2]  # all three share the topic
    for c in members:
        c.commit(asynchronous=False)

    # A member leaves: the other two take over its partitions.
    members[2].close()
    members = members[:2]
    wait_until(lambda: (poll_all(members, 0.5), [len(c.assignment()) for c in members])[1] == [3, 3],
               timeout_s=30, what="rebalance after a leave")
    # A member joins: three again.
    members.append(member())
    wait_until(lambda: (poll_all(members, 0.5), sorted(len(c.assignment()) for c in members))[1] == [2, 2, 2],
               timeout_s=30, what="rebalance after a join")
    for c in members:
        c.close()

    # Kill the coordinator; the committed offsets survive on the other replicas.
    coordinator = coordinator_of(cluster, "g")
    assert coordinator is not None
    cluster.kill(coordinator)
    produce(bootstrap, MESSAGES, 60)  # new messages after the commit point
    wait_until(lambda: coordinator_of(cluster, "g") not in (None, coordinator), timeout_s=30,
               what="a new coordinator")
    restarted = [member() for _ in range(2)]
    before = set(seen)
    deadline = time.monotonic() + 45
    fresh = []
    while time.monotonic() < deadline and len(set(fresh)) < 60:
        for c in restarted:
            m = c.poll(0.1)
            if m is not None and not m.error():
                fresh.append(int(m.value()))
    for c in restarted:
        c.close()
    # Resumed from the committed offsets: nothing skipped, nothing committed re-read.  (Two
    # members joining one after the other may both read an uncommitted message: at least once.)
    assert sorted(set(fresh)) == list(range(MESSAGES, MESSAGES + 60))
    assert not before & set(fresh)
    cluster.stop_all()


def test_kafka_python_group_commits_and_resumes(cluster):
    from kafka import KafkaConsumer

    bootstrap = cluster.bootstrap_servers
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result
    admin.create_topics([NewTopic(TOPIC, num_partitions=6, replication_factor=3)])[TOPIC].result(30)
    produce(bootstrap, 0, 300)

    def consume(limit):
        c = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id="py", auto_offset_reset="earliest",
                          enable_auto_commit=False, consumer_timeout_ms=10000)
        got = []
        for m in c:
            got.append(int(m.value))
            if len(got) >= limit:
                break
        c.commit()
        c.close()
        return got

    first = consume(300)
    assert sorted(first) == list(range(300))
    produce(bootstrap, 300, 50)
    second = consume(50)
    assert sorted(second) == list(range(300, 350))
    cluster.stop_all()
