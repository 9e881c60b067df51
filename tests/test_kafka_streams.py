"""A Kafka Streams application (word count, tests/java/KraftStreamsWordCount.java) against
a 3-node kraft cluster: at least once, and exactly once (exactly_once_v2: transactions,
TxnOffsetCommit).  Its internal topics (repartition and changelog) are created by Streams
itself; the counts it writes must end at the true counts.  Skips without java / javac /
mvn, as the other Java tests."""

import collections
import re
import subprocess
import time

import pytest
from cluster_helpers import fast_overrides, start_cluster
from kafka_helpers import compile_java, kafka_libs

from kraft.apache_kafka import java_command

LINES = [f"the quick brown fox {i % 7} jumps over the lazy dog {i % 3}" for i in range(300)]


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_streams_word_count_against_kraft(make_cluster, tmp_path, guarantee):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    libs = kafka_libs()
    classes = compile_java("KraftStreamsWordCount.java", tmp_path / "classes", libs)
    cluster = start_cluster(make_cluster(controllers=3, brokers=0, overrides=fast_overrides()))
    bs = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    for name in ("lines", "counts"):
        admin.create_topics([NewTopic(name, num_partitions=3, replication_factor=3)])[name].result(60)
    producer = Producer({"bootstrap.servers": bs, "enable.idempotence": True})
    for i, line in enumerate(LINES):
        producer.produce("lines", key=str(i).encode(), value=line.encode())
    assert producer.flush(30) == 0
    expected = collections.Counter(w for line in LINES for w in re.split(r"\W+", line.lower()) if w)

    app = subprocess.Popen(
        java_command("KraftStreamsWordCount", [bs, "lines", "counts", f"wc-{guarantee.replace('_', '-')}",
                                               guarantee, "120", str(tmp_path / "state")],
                     libs=libs, extra_classpath=[str(classes)]),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    consumer = Consumer({"bootstrap.servers": bs, "group.id": "wc-check", "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})
    consumer.subscribe(["counts"])
    latest: dict[str, int] = {}
    try:
        deadline = time.monotonic() + 100
        while time.monotonic() < deadline and latest != dict(expected):
            for msg in consumer.consume(500, 0.5):
                if msg.error() is None:
                    latest[msg.key().decode()] = int.from_bytes(msg.value(), "big", signed=True)
            assert app.poll() is None, app.communicate()[0]
    finally:
        consumer.close()
        app.terminate()
        out = app.communicate(timeout=60)[0]
    assert latest == dict(expected), f"counts {latest} != {dict(expected)}\n{out[-3000:]}"
    assert "state RUNNING" in out and "state ERROR" not in out and "uncaught" not in out, out[-3000:]
