"""Fetched records leave a real node by sendfile (zero copy, broker.file_records), and what
clients get is the same, byte for byte, as with ``kraft.fetch.sendfile.enable=false``.

One node holds a topic per codec (several small segments each) and a topic with committed
and aborted transactions.  confluent-kafka and kafka-python consume everything while the
node's counters show the record bytes went by sendfile and none were copied; then raw
Fetch requests at several versions, offsets and ``max_bytes`` / ``partition_max_bytes``
limits (down to one byte: one whole batch) are answered identically before and after the
node restarts with sendfile off (when the counters show the copy path).  kraft stores only
magic 2 batches (Produce v3+), so there are no legacy message sets to fetch.
"""

from __future__ import annotations

import urllib.request

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from cluster_helpers import fast_overrides, start_cluster, wait_cluster_ready, wait_until
from kraft.client import KafkaClient
from kraft.protocol import codec
from kraft.records.header import iter_batches
from kraft.trio_run import run_trio

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
TXN_TOPIC = "sendfile-txn"
PARTITIONS = 2
RECORDS = 400
SENDFILE_BYTES = "kraft_network_fetchrecords_sendfilebytes_total"
COPIED_BYTES = "kraft_network_fetchrecords_copiedbytes_total"
LOG_SIZE = "kafka_log_log_size"
# (max_bytes, partition_max_bytes): defaults, one batch at a time, cuts inside batches
LIMITS = ((52428800, 1048576), (1, 1), (900, 400), (6000, 2500))


def topic_of(codec_name: str) -> str:
    return f"sendfile-{codec_name}"


def value_of(i: int) -> bytes:
    return (b"%d:" % i) + bytes((i * 7 + j) % 251 for j in range(i % 300))


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from kraft.local_cluster import LocalCluster

    cluster = LocalCluster(tmp_path_factory.mktemp("sendfile"), controllers=1, overrides=fast_overrides())
    try:
        start_cluster(cluster)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        topics = [topic_of(c) for c in CODECS] + [TXN_TOPIC]
        for future in admin.create_topics([NewTopic(t, PARTITIONS, 1, config={"segment.bytes": "8192"})
                                           for t in topics]).values():
            future.result(60)
        for c in CODECS:
            producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "compression.type": c,
                                 "linger.ms": 5, "batch.num.messages": 23})
            for i in range(RECORDS):
                producer.produce(topic_of(c), value_of(i), key=b"k%d" % i, partition=i % PARTITIONS,
                                 headers=[("h", b"%d" % i)] if i % 3 == 0 else None)
            assert producer.flush(60) == 0
        txn = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": "sendfile-t",
                        "linger.ms": 5})
        txn.init_transactions(30)
        for n, commit in ((40, True), (30, False), (20, True)):
            txn.begin_transaction()
            for i in range(n):
                txn.produce(TXN_TOPIC, value_of(i), partition=i % PARTITIONS)
            txn.commit_transaction(30) if commit else txn.abort_transaction(30)
        yield cluster
    finally:
        cluster.stop_all(timeout_s=10)


def scrape(cluster) -> dict:
    with urllib.request.urlopen(cluster.nodes[1].metrics_url, timeout=10) as resp:
        text = resp.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def log_bytes(samples: dict, topic: str) -> float:
    return sum(v for (name, labels), v in samples.items() if name == LOG_SIZE and ("topic", topic) in labels)


def test_confluent_kafka_and_kafka_python_consume_records_sent_by_sendfile(node):
    from confluent_kafka import Consumer
    from kafka import KafkaConsumer
    from kafka import codec as kafka_codecs

    before = scrape(node)
    expected = sorted(value_of(i) for i in range(RECORDS))
    for c in CODECS:
        consumer = Consumer({"bootstrap.servers": node.bootstrap_servers, "group.id": f"g-{c}",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([topic_of(c)])
        got = []
        try:
            wait_until(lambda: got.extend(m.value() for m in consumer.consume(500, timeout=1)
                                          if m.error() is None) or len(got) >= RECORDS,
                       timeout_s=90, what=f"confluent-kafka reading {topic_of(c)}")
        finally:
            consumer.close()
        assert sorted(got) == expected

        if c == "snappy" and not kafka_codecs.has_snappy():
            continue  # kafka-python decodes snappy with python-snappy, not installed here
        consumer = KafkaConsumer(topic_of(c), bootstrap_servers=node.bootstrap_servers,
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 consumer_timeout_ms=60000)
        got = []
        try:
            for m in consumer:
                got.append(m.value)
                if len(got) == RECORDS:
                    break
        finally:
            consumer.close()
        assert sorted(got) == expected
    after = scrape(node)
    stored = sum(log_bytes(after, topic_of(c)) for c in CODECS)
    sent = after[(SENDFILE_BYTES, frozenset())] - before[(SENDFILE_BYTES, frozenset())]
    # every stored byte, to each client (kafka-python skipping snappy), by sendfile
    assert stored > 0 and sent >= 2 * stored - log_bytes(after, topic_of("snappy"))
    assert after[(COPIED_BYTES, frozenset())] == 0


def fetch_everything(cluster) -> dict:
    """(version, topic, partition, start, limits, isolation) -> the Fetch response, for
    fetches walking every partition from several offsets."""
    host, port = cluster.nodes[1].host, cluster.nodes[1].broker_port
    results = {}

    async def main():
        async with trio.open_nursery() as nursery:
            client = KafkaClient(nursery, connect_timeout_s=10)
            md = await client.request(host, port, "Metadata", 12, {"topics": None}, timeout_s=10)
            ids = {t["name"]: t["topic_id"] for t in md["topics"]}
            for topic, isolation in [(topic_of(c), 0) for c in CODECS] + [(TXN_TOPIC, 0), (TXN_TOPIC, 1)]:
                for partition in range(PARTITIONS):
                    for version in (4, 12, 16):
                        for limits in (LIMITS if version == 12 else LIMITS[:1]):
                            for start in (0, 5):  # 5: inside the first batch
                                results[(version, topic, partition, start, limits, isolation)] = await walk(
                                    client, version, topic, ids[topic], partition, start, limits, isolation)
            await client.aclose()
            nursery.cancel_scope.cancel()

    async def walk(client, version, topic, topic_id, partition, offset, limits, isolation):
        answers = []
        while True:
            body = codec.default_message("Fetch", "request")
            body.update(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=limits[0],
                        isolation_level=isolation, session_id=0, session_epoch=-1, topics=[{
                            "topic": topic, "topic_id": topic_id, "partitions": [{
                                "partition": partition, "fetch_offset": offset, "current_leader_epoch": -1,
                                "last_fetched_epoch": -1, "log_start_offset": -1,
                                "partition_max_bytes": limits[1]}]}])
            resp = await client.request(host, port, "Fetch", version, body, timeout_s=10)
            p = resp["responses"][0]["partitions"][0]
            records = bytes(p["records"] or b"")
            answers.append({**p, "records": records})
            assert p["error_code"] == 0, p
            ends = [h.next_offset for _, h in iter_batches(records, check_crc=True)]
            if not ends:
                return answers
            offset = ends[-1]

    run_trio(main)
    return results


def test_fetch_results_are_the_same_byte_for_byte_with_sendfile_off(node):
    before = scrape(node)
    by_sendfile = fetch_everything(node)
    after = scrape(node)
    assert after[(SENDFILE_BYTES, frozenset())] > before[(SENDFILE_BYTES, frozenset())]
    assert after[(COPIED_BYTES, frozenset())] == before[(COPIED_BYTES, frozenset())]

    node.stop(1)
    node.overrides["kraft.fetch.sendfile.enable"] = "false"
    node.write_configs()
    node.start(1)
    wait_cluster_ready(node)
    wait_until(lambda: scrape_or_none(node), timeout_s=60, what="the metrics endpoint")
    by_copy = wait_until(lambda: fetch_or_none(node), timeout_s=60, what="every partition led again")
    samples = scrape(node)
    assert samples[(SENDFILE_BYTES, frozenset())] == 0
    assert samples[(COPIED_BYTES, frozenset())] > 0

    assert by_copy.keys() == by_sendfile.keys()
    batches = sum(len(list(iter_batches(a["records"]))) for answers in by_copy.values() for a in answers)
    assert batches > 1000  # the walks did read record batches, small and compressed
    for key, answers in by_sendfile.items():
        assert by_copy[key] == answers, key


def scrape_or_none(cluster):
    try:
        return scrape(cluster)
    except OSError:
        return None


def fetch_or_none(cluster):
    try:
        return fetch_everything(cluster)
    except (AssertionError, Exception):
        return None
