"""Three nodes, RF 3: acks=all produces complete (the followers replicate) and consumers
read everything, with fetch responses sent by sendfile, with and without fetch sessions
(``max.incremental.fetch.session.cache.slots=0``: every fetch full, session id 0, as Kafka
with no slot)."""

from __future__ import annotations

import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cluster_helpers import fast_overrides, start_cluster, wait_until

TOPIC = "replicated"
PARTITIONS = 3
RECORDS = 3000
SESSIONS = "kafka_server_fetchsessioncache_numincrementalfetchsessions"
SENDFILE_BYTES = "kraft_network_fetchrecords_sendfilebytes_total"
COPIED_BYTES = "kraft_network_fetchrecords_copiedbytes_total"


def scrape(node) -> dict:
    with urllib.request.urlopen(node.metrics_url, timeout=10) as resp:
        text = resp.read().decode()
    return {s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples
            if not s.labels}


@pytest.mark.parametrize("slots", [1000, 0])
def test_rf3_produce_and_consume_with_sendfile(make_cluster, slots):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaConsumer

    cluster = start_cluster(make_cluster(controllers=3, overrides=fast_overrides(
        **{"max.incremental.fetch.session.cache.slots": slots})))
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "3"})])[TOPIC].result(60)

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5})
    failed = []
    for i in range(RECORDS):
        producer.produce(TOPIC, b"%d" % i, partition=i % PARTITIONS,
                         on_delivery=lambda err, msg: err and failed.append(err))
        producer.poll(0)
    assert producer.flush(90) == 0 and failed == []  # min.insync.replicas=3: every follower has it
    expected = sorted(b"%d" % i for i in range(RECORDS))

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "rf3",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    got = []
    try:
        wait_until(lambda: got.extend(m.value() for m in consumer.consume(1000, timeout=1)
                                      if m.error() is None) or len(got) >= RECORDS,
                   timeout_s=90, what="confluent-kafka reading everything")
    finally:
        consumer.close()
    assert sorted(got) == expected

    consumer = KafkaConsumer(TOPIC, bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=60000)
    got = []
    try:
        for m in consumer:
            got.append(m.value)
            if len(got) == RECORDS:
                break
        samples = [scrape(node) for node in cluster.nodes.values()]  # while kafka-python's fetches last
    finally:
        consumer.close()
    assert sorted(got) == expected

    assert all(s[SENDFILE_BYTES] > 0 and s[COPIED_BYTES] == 0 for s in samples)
    if slots == 0:
        assert all(s[SESSIONS] == 0 for s in samples)
    else:  # the followers (and kafka-python) hold sessions
        assert sum(s[SESSIONS] for s in samples) >= 2
