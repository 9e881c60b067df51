"""KIP-848 consumer groups (``group.protocol=consumer``) with librdkafka on a 3-node cluster:
two members split a topic, every record is read, committed offsets carry over to the member
left when the other leaves, and no partition is owned by both members at once, timed from the
clients' own assign and revoke callbacks.  With
``kraft.unsafe.consumer.group.assign.before.revocation`` the same run must see a partition
owned twice (``-m slow``)."""

import threading
import time

import pytest

from cluster_helpers import fast_overrides, request, start_cluster, wait_until

TOPIC, GROUP, PARTITIONS, RECORDS = "kip848", "kip848-group", 6, 600


def consume(bootstrap: str, name: str, log: list, got: dict, stop: threading.Event, done: threading.Event):
    from confluent_kafka import Consumer, KafkaError, KafkaException

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})

    def callback(kind):
        def record(c, partitions):
            log.append((time.monotonic(), name, kind, {p.partition for p in partitions}))
        return record

    # "lost": the member was fenced or removed and dropped its partitions without revoking
    consumer.subscribe([TOPIC], on_assign=callback("assign"), on_revoke=callback("revoke"),
                       on_lost=callback("lost"))
    try:
        while not stop.is_set():
            m = consumer.poll(0.2)
            if m is not None and not m.error():
                got.setdefault(int(m.value()), set()).add(name)
                try:
                    consumer.commit(message=m, asynchronous=False)
                except KafkaException as exc:
                    # STALE_MEMBER_EPOCH: the commit crossed a heartbeat that moved the member
                    # to a new epoch (Kafka 4.1 takes only the current one); a later commit covers it
                    if exc.args[0].code() != KafkaError.STALE_MEMBER_EPOCH:
                        raise
    finally:
        consumer.close()  # leaves the group: its partitions are revoked first
        log.append((time.monotonic(), name, "closed", set()))
        done.set()


def owned_now(log: list) -> dict[str, set[int]]:
    owned: dict[str, set[int]] = {}
    for _, name, kind, partitions in sorted(log, key=lambda e: e[0]):
        if kind == "assign":
            owned.setdefault(name, set()).update(partitions)
        else:
            owned.get(name, set()).difference_update(partitions)
    return owned


def overlaps(log: list) -> list[str]:
    """Moments a partition was owned by two members, from the callbacks' timeline."""
    owned: dict[str, set[int]] = {}
    found = []
    for at, name, kind, partitions in sorted(log, key=lambda e: e[0]):
        if kind == "assign":
            for p in partitions:
                others = [n for n, ps in owned.items() if n != name and p in ps]
                if others:
                    found.append(f"partition {p} assigned to {name} while {others} owned it")
            owned.setdefault(name, set()).update(partitions)
        elif kind in ("revoke", "lost"):
            owned.get(name, set()).difference_update(partitions)
        else:
            owned.pop(name, None)
    return found


# The unsafe run is outside the default run (-m slow): test_consumer_group_protocol.py's seeded
# simulation catches the same switch in a fraction of a second.
@pytest.mark.parametrize("unsafe", [False, pytest.param(True, marks=pytest.mark.slow)],
                         ids=["safe", "unsafe-assign-before-revocation"])
def test_two_members_split_a_topic_and_hand_over_partitions(make_cluster, unsafe):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    overrides = fast_overrides(group_consumer_heartbeat_interval_ms=2000, offsets_topic_num_partitions=3)
    if unsafe:
        overrides["kraft.unsafe.consumer.group.assign.before.revocation"] = "true"
    cluster = start_cluster(make_cluster(controllers=3, brokers=0, overrides=overrides))
    bs = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result()
    producer = Producer({"bootstrap.servers": bs, "acks": "all"})
    for i in range(RECORDS):
        producer.produce(TOPIC, value=b"%d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0

    log, got = [], {}
    stops = {n: threading.Event() for n in ("a", "b")}
    dones = {n: threading.Event() for n in ("a", "b")}
    threads = {n: threading.Thread(target=consume, args=(bs, n, log, got, stops[n], dones[n]), daemon=True)
               for n in ("a", "b")}
    try:
        threads["a"].start()
        deadline = time.monotonic() + 60
        while len(got) < RECORDS // 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        threads["b"].start()

        while time.monotonic() < deadline:  # the group settles with 3 partitions each
            owned = owned_now(log)
            if len(got) == RECORDS and sorted(len(owned.get(n, ())) for n in "ab") == [3, 3]:
                break
            time.sleep(0.2)
        owned = owned_now(log)
        assert len(got) == RECORDS, f"{len(got)} of {RECORDS} records read"
        assert owned["a"] | owned["b"] == set(range(PARTITIONS)) and not owned["a"] & owned["b"], owned

        described = admin.describe_consumer_groups([GROUP])[GROUP].result()
        assert described.type.name == "CONSUMER" and described.state.name == "STABLE"
        assert len(described.members) == 2
        # b leaves: a takes its partitions and reads on from b's committed offsets
        stops["b"].set()
        assert dones["b"].wait(30)
        for i in range(RECORDS, RECORDS + 60):
            producer.produce(TOPIC, value=b"%d" % i, partition=i % PARTITIONS)
        assert producer.flush(30) == 0
        while time.monotonic() < deadline + 30 and len(got) < RECORDS + 60:
            time.sleep(0.2)
        assert len(got) == RECORDS + 60
        assert all(got[i] == {"a"} for i in range(RECORDS, RECORDS + 60))
    finally:
        for n in "ab":
            stops[n].set()
        for t in threads.values():
            if t.is_alive():
                t.join(30)
    found = overlaps(log)
    if unsafe:
        assert found, "the unsafe switch should let two members own a partition at once"
    else:
        assert found == [], found


def test_members_carry_on_when_the_coordinator_is_killed(make_cluster):
    """SIGKILL the broker coordinating the group: the new coordinator loads the group's
    records from ``__consumer_offsets``, so the members keep their partitions (no "lost"
    callback, no rejoin) and read what is produced after the kill."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = start_cluster(make_cluster(controllers=1, brokers=3, overrides=fast_overrides(
        group_consumer_heartbeat_interval_ms=1000, offsets_topic_num_partitions=3,
        offsets_topic_replication_factor=3)))
    bs = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result()
    producer = Producer({"bootstrap.servers": bs, "acks": "all"})

    def produce(start, count):
        for i in range(start, start + count):
            producer.produce(TOPIC, value=b"%d" % i, partition=i % PARTITIONS)
        assert producer.flush(30) == 0

    produce(0, 60)
    log, got = [], {}
    stop, dones = threading.Event(), {n: threading.Event() for n in "ab"}
    threads = [threading.Thread(target=consume, args=(bs, n, log, got, stop, dones[n]), daemon=True) for n in "ab"]
    try:
        for t in threads:
            t.start()
        wait_until(lambda: len(got) == 60 and sorted(len(owned_now(log).get(n, ())) for n in "ab") == [3, 3],
                   timeout_s=60, what="two members with 3 partitions each")
        b = next(b for b in cluster.brokers if b.running)
        coordinator = request(b.host, b.broker_port, "FindCoordinator", 4,
                              {"key_type": 0, "coordinator_keys": [GROUP]})["coordinators"][0]["node_id"]
        members_before = {m.member_id for m in admin.describe_consumer_groups([GROUP])[GROUP].result().members}
        cluster.kill(coordinator)
        killed_at = time.monotonic()
        produce(60, 60)
        wait_until(lambda: len(got) == 120, timeout_s=60, what="the records produced after the kill")
        took = time.monotonic() - killed_at
        described = admin.describe_consumer_groups([GROUP])[GROUP].result()
        assert {m.member_id for m in described.members} == members_before
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert [e for e in log if e[2] == "lost"] == [], "a member lost its partitions"
    assert overlaps(log) == []
    print(f"coordinator {coordinator} killed: the 60 new records were read {took:.1f} s later")
