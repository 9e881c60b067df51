"""Log compaction in running brokers: a compacted topic on three real ``kraftctl start``
nodes is cleaned on every replica (leader and followers) while confluent-kafka produces and
reads it; tombstones go after delete.retention.ms; keyless records are refused; a topic
altered to compact is cleaned from then on; ``__consumer_offsets`` is compacted."""

import os
import subprocess
import sys
import time
import uuid

from cluster_helpers import fast_overrides, request, start_cluster, wait_until
from kraft.records import decode_batches

TOPIC = "compacted"
KEYS = [b"k%d" % i for i in range(10)]
ROUNDS = 300
TOMBSTONED = b"k0"
PLAIN = "plain"  # created with cleanup.policy=delete, altered to compact later
SEGMENT_BYTES = 16384
SEGMENT_MS = 1000
DELETE_RETENTION_MS = 2000


def log_bytes(node, topic):
    """The size of a replica's log on disk now."""
    while True:
        try:
            return sum(p.stat().st_size for p in (node.data_dir / f"{topic}-0").glob("*.log"))
        except FileNotFoundError:  # renamed away by a swap just now
            continue


def segments(node, topic=TOPIC):
    """(total bytes, [(offset, key, value, batch has a delete horizon)]) of a replica's log
    as it is on disk now; None when a file went away under us (a swap)."""
    total, records = 0, []
    try:
        for path in sorted((node.data_dir / f"{topic}-0").glob("*.log")):
            data = path.read_bytes()
            total += len(data)
            for batch in decode_batches(data):
                for offset, _, r in batch.iter_resolved():
                    records.append((offset, r.key, r.value, batch.has_delete_horizon))
    except OSError:
        return None
    return total, records


def consume_all(bootstrap, topic=TOPIC):
    """Every record of partition 0 from the start, read by confluent-kafka."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    out = []
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    return out
                raise AssertionError(m.error())
            out.append((m.offset(), m.key(), m.value()))
    finally:
        c.close()
    raise AssertionError(f"no end of partition after {len(out)} records")


def offsets_topic_config(node):
    """Auto-create ``__consumer_offsets`` with a Metadata request; its topic configs."""
    def metadata(auto_create):
        body = {"topics": [{"name": "__consumer_offsets", "topic_id": uuid.UUID(int=0)}],
                "allow_auto_topic_creation": auto_create, "include_topic_authorized_operations": False}
        return request(node.host, node.broker_port, "Metadata", 12, body)["topics"][0]

    metadata(True)
    wait_until(lambda: metadata(False)["error_code"] == 0, timeout_s=10, what="__consumer_offsets")
    body = {"resources": [{"resource_type": 2, "resource_name": "__consumer_offsets",
                           "configuration_keys": None}], "include_synonyms": False,
            "include_documentation": False}
    resp = request(node.host, node.broker_port, "DescribeConfigs", 4, body)
    return {c["name"]: c["value"] for c in resp["results"][0]["configs"]}


def keyless_produce_error(bootstrap, topic):
    """The error confluent-kafka reports for one record without a key (None: delivered)."""
    from confluent_kafka import Producer

    errors = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    p.produce(topic, value=b"no key", on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(15) == 0
    return errors[0]


def test_compacted_topic_is_cleaned_on_every_replica(make_cluster):
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = start_cluster(make_cluster(controllers=3, brokers=0, overrides=fast_overrides(
        log_cleaner_backoff_ms=200)))
    nodes = list(cluster.nodes.values())
    bootstrap = cluster.bootstrap_servers
    # __consumer_offsets, even when a Metadata request auto-creates it, is compacted.
    assert offsets_topic_config(nodes[0])["cleanup.policy"] == "compact"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    segment_config = {"segment.bytes": str(SEGMENT_BYTES), "segment.ms": str(SEGMENT_MS)}
    created = admin.create_topics([
        NewTopic(TOPIC, 1, 3, config={"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
                                      "delete.retention.ms": str(DELETE_RETENTION_MS), **segment_config}),
        NewTopic(PLAIN, 1, 3, config=segment_config)])  # the same data, not cleaned (yet)
    for future in created.values():
        future.result(30)

    # Many values for a few keys, then a tombstone, then a last value for the other keys,
    # to both topics.
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "compression.type": "lz4", "batch.size": 4000, "linger.ms": 2})

    def produce(key, value):
        for topic in (TOPIC, PLAIN):
            producer.produce(topic, key=key, value=value)

    latest = {}
    for r in range(ROUNDS):
        for key in KEYS:
            latest[key] = b"%s=%d:" % (key, r) + os.urandom(40).hex().encode()
            produce(key, latest[key])
        producer.poll(0)
    produce(TOMBSTONED, None)
    del latest[TOMBSTONED]
    tombstoned_at = time.monotonic()
    for key in KEYS[1:]:
        latest[key] = b"%s=last" % key
        produce(key, latest[key])
    assert producer.flush(30) == 0
    produced = ROUNDS * len(KEYS) + len(KEYS)

    # Records without a key: refused by the compacted topic (Kafka's INVALID_RECORD),
    # accepted by the other.
    err = keyless_produce_error(bootstrap, TOPIC)
    assert err is not None and err.code() == KafkaError.INVALID_RECORD, err
    assert keyless_produce_error(bootstrap, PLAIN) is None

    # Rolling needs an append: one more record after segment.ms makes everything before it
    # cleanable.
    time.sleep(SEGMENT_MS / 1000 + 0.2)
    latest[b"k1"] = b"k1=after roll"
    produce(b"k1", latest[b"k1"])
    assert producer.flush(30) == 0
    produced += 1

    # Every replica (the leader and both followers) compacts its own log; the tombstone
    # first gets a delete horizon and goes delete.retention.ms later.
    horizon_seen = set()

    def all_compacted():
        done = True
        for node in nodes:
            seen = segments(node)
            if seen is None:
                return False
            size, records = seen
            keys = [k for _, k, _, _ in records]
            if any(k == TOMBSTONED and horizon for _, k, _, horizon in records):
                horizon_seen.add(node.node_id)
            done = done and size < log_bytes(node, PLAIN) / 10 and TOMBSTONED not in keys
        return done

    wait_until(all_compacted, timeout_s=20, interval_s=0.1, what="every replica to be compacted")
    assert time.monotonic() - tombstoned_at >= DELETE_RETENTION_MS / 1000
    assert horizon_seen == {n.node_id for n in nodes}, horizon_seen
    uncleaned = {n.node_id: log_bytes(n, PLAIN) for n in nodes}
    cleaned = {n.node_id: log_bytes(n, TOPIC) for n in nodes}

    # A consumer reading from the start sees the last value of every key, in offset order,
    # and little else.
    read = consume_all(bootstrap, TOPIC)
    offsets = [o for o, _, _ in read]
    assert offsets == sorted(set(offsets)) and offsets[-1] == produced - 1
    assert {key: value for _, key, value in read} == latest
    assert len(read) < 3 * len(KEYS), (len(read), produced)
    print(f"\n{TOPIC}: produced {produced} records, read back {len(read)}; bytes on disk per node: "
          f"{cleaned}, the same data uncleaned: {uncleaned}")

    # kafka-configs --alter --add-config cleanup.policy=compact: the open logs follow.
    altered = subprocess.run([sys.executable, "-m", "cli.main", "configs", f"--bootstrap-server={bootstrap}",
                              "--entity-type", "topics", "--entity-name", PLAIN, "--alter",
                              "--add-config", "cleanup.policy=compact"],
                             capture_output=True, text=True, timeout=60)
    assert altered.returncode == 0, altered.stderr
    wait_until(lambda: keyless_produce_error(bootstrap, PLAIN) is not None, timeout_s=10,
               what="the altered topic to refuse keyless records")
    assert keyless_produce_error(bootstrap, PLAIN).code() == KafkaError.INVALID_RECORD
    wait_until(lambda: all(log_bytes(n, PLAIN) < uncleaned[n.node_id] / 10 for n in nodes),
               timeout_s=15, interval_s=0.1, what=f"{PLAIN} to be compacted once altered")
    read = consume_all(bootstrap, PLAIN)
    # The keyless record written before the change stays (the cleaner keeps what it cannot
    # supersede); the tombstone stays for delete.retention.ms (a day by default).
    assert {key: value for _, key, value in read} == {**latest, TOMBSTONED: None, None: b"no key"}
    print(f"{PLAIN}: read back {len(read)}; bytes on disk per node after cleaning: "
          f"{ {n.node_id: log_bytes(n, PLAIN) for n in nodes} }")
    # A broker stops cleanly with its cleaner running (the make_cluster fixture kills the
    # rest: stopping every combined node at once waits out a controlled-shutdown timeout).
    assert cluster.stop(nodes[0].node_id, timeout_s=15) == 0
