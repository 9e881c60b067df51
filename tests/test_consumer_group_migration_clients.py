"""A rolling upgrade of a consumer group from the classic protocol to KIP-848's and back, with
librdkafka on a 3-node cluster (Kafka 4's ``group.consumer.migration.policy=bidirectional``).

Two classic consumers (``group.protocol=classic``, the eager range assignor) share a topic;
each is restarted in turn with ``group.protocol=consumer``, so the group is first upgraded
online (a consumer member joins a classic group) and then holds members of both protocols;
then the way back: a classic consumer joins the consumer group, and when the last
consumer-protocol member leaves the group is downgraded to a classic one.  Through every step
each record produced is read, and no partition is owned by two consumers at once, timed from
the clients' own assign / revoke callbacks."""

import threading
import time

from cluster_helpers import fast_overrides, start_cluster, wait_until
from test_consumer_group_protocol_clients import overlaps, owned_now

TOPIC, GROUP, PARTITIONS, BATCH = "rolling", "rolling-group", 6, 120
# commit errors a member may see while its group moves under it; a later commit covers them
RETRY_COMMIT = {"STALE_MEMBER_EPOCH", "REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID",
                "_NO_OFFSET", "_STATE", "_ASSIGNMENT_LOST", "FENCED_MEMBER_EPOCH", "_DESTROY"}


class Member:
    """One consumer in its own thread; ``stop()`` closes it (leaving the group)."""

    def __init__(self, bootstrap: str, name: str, protocol: str, log: list, got: dict):
        self.name, self.protocol, self.log, self.got = name, protocol, log, got
        self.config = {"bootstrap.servers": bootstrap, "group.id": GROUP, "group.protocol": protocol,
                       "auto.offset.reset": "earliest", "enable.auto.commit": False}
        if protocol == "classic":
            self.config.update({"heartbeat.interval.ms": 500, "session.timeout.ms": 10000})
        self._stop, self.done = threading.Event(), threading.Event()
        self.errors: list[str] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        from confluent_kafka import Consumer, KafkaException

        consumer = Consumer(self.config)

        def callback(kind):
            def record(c, partitions):
                self.log.append((time.monotonic(), self.name, kind, {p.partition for p in partitions}))
            return record

        consumer.subscribe([TOPIC], on_assign=callback("assign"), on_revoke=callback("revoke"),
                           on_lost=callback("lost"))
        try:
            while not self._stop.is_set():
                m = consumer.poll(0.2)
                if m is None:
                    continue
                if m.error():
                    self.errors.append(str(m.error()))
                    continue
                self.got.setdefault(int(m.value()), set()).add(self.name)
                try:
                    consumer.commit(message=m, asynchronous=False)
                except KafkaException as exc:
                    if exc.args[0].name() not in RETRY_COMMIT:
                        raise
        except Exception as exc:  # noqa: BLE001 - reported by the test
            self.errors.append(repr(exc))
        finally:
            consumer.close()
            self.log.append((time.monotonic(), self.name, "closed", set()))
            self.done.set()

    def stop(self):
        self._stop.set()
        assert self.done.wait(30), f"{self.name} did not close"


def offsets_records_read_by_kafka(cluster):
    """Kafka 4.1's own ``kafka-dump-log --offsets-decoder`` reads every ``__consumer_offsets``
    record kraft wrote for the group, the classic members' metadata in the consumer group's
    member records (tagged field 0) among them."""
    from kafka_helpers import kafka_libs, run_tool

    kafka_libs()
    segments = sorted(str(f) for node in cluster.nodes.values()
                      for f in node.data_dir.glob("__consumer_offsets-*/*.log") if f.stat().st_size)
    assert segments
    result = run_tool("kafka-dump-log", "--offsets-decoder", "--files", ",".join(segments))
    assert result.returncode == 0, result.stderr[-2000:]
    text = result.stdout
    # key 5: ConsumerGroupMemberMetadata; a classic member's with its JoinGroup protocols
    assert '"classicMemberMetadata":{"sessionTimeoutMs":10000,"supportedProtocols":[{"name":"range"' in text, \
        text[-3000:]
    assert "Error" not in text and "Exception" not in text, text[-3000:]


def test_rolling_upgrade_to_the_consumer_protocol_and_back(make_cluster):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = start_cluster(make_cluster(controllers=3, brokers=0, overrides=fast_overrides(
        group_consumer_heartbeat_interval_ms=1000, offsets_topic_num_partitions=3,
        group_initial_rebalance_delay_ms=0)))
    bs = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result()
    producer = Producer({"bootstrap.servers": bs, "acks": "all"})
    produced = 0

    def produce():
        nonlocal produced
        for i in range(produced, produced + BATCH):
            producer.produce(TOPIC, value=b"%d" % i, partition=i % PARTITIONS)
        assert producer.flush(30) == 0
        produced += BATCH

    log, got = [], {}
    members: dict[str, Member] = {}

    def start(name, protocol):
        members[name] = Member(bs, name, protocol, log, got)

    def settled(names, what):
        """Every record produced so far read, and the partitions split evenly over ``names``."""
        def check():
            owned = owned_now(log)
            counts = sorted(len(owned.get(n, ())) for n in names)
            return len(got) == produced and counts == [PARTITIONS // len(names)] * len(names) \
                and set().union(*(owned.get(n, set()) for n in names)) == set(range(PARTITIONS))
        wait_until(check, timeout_s=60, what=f"{what}: {len(got)}/{produced} read, owned {owned_now(log)}")

    def group_type():
        return admin.describe_consumer_groups([GROUP])[GROUP].result().type.name

    phases = []

    def restart(old, new, protocol, other, what):
        """``old`` closes and ``new`` takes its place with ``protocol``; more records are
        produced, and read by ``new`` and ``other`` sharing the partitions."""
        t0 = time.monotonic()
        members[old].stop()
        start(new, protocol)
        produce()
        settled([new, other], what)
        phases.append((what, time.monotonic() - t0))

    try:
        produce()
        start("a", "classic")
        start("b", "classic")
        settled("ab", "two classic members")
        assert group_type() == "CLASSIC"
        # the upgrade: a restarts with the consumer protocol and joins the classic group
        restart("a", "a2", "consumer", "b", "upgrade (a -> a2)")
        assert group_type() == "CONSUMER"
        restart("b", "b2", "consumer", "a2", "b -> b2")
        # the way back: a classic member joins the consumer group ...
        restart("a2", "a3", "classic", "b2", "a2 -> a3 (classic)")
        # ... and the last consumer member's leave downgrades the group
        t0 = time.monotonic()
        members["b2"].stop()
        produce()
        wait_until(lambda: group_type() == "CLASSIC", timeout_s=30, what="the downgraded group")
        start("b3", "classic")
        produce()
        settled(["a3", "b3"], "two classic members after the downgrade")
        phases.append(("downgrade (b2 leaves, b3 classic)", time.monotonic() - t0))
    finally:
        for m in members.values():
            if not m.done.is_set():
                m.stop()
    assert len(got) == produced, f"{produced - len(got)} records never read"
    assert [e for e in log if e[2] == "lost"] == [], "a member lost its partitions"
    assert overlaps(log) == []
    errors = {n: m.errors for n, m in members.items() if m.errors}
    assert not errors, errors
    offsets_records_read_by_kafka(cluster)
    print("phases:", ", ".join(f"{what} {took:.1f} s" for what, took in phases),
          f"; {sum(len(v) > 1 for v in got.values())} of {produced} records read twice")
