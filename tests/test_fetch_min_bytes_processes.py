"""``fetch.min.bytes`` as Kafka honours it: a consumer's fetch that finds fewer bytes than
its minimum waits until the partition holds them (or ``fetch.wait.max.ms`` passes), and
then answers with all of them, with real clients (librdkafka and kafka-python)."""

from __future__ import annotations

import threading
import time

import pytest

from cluster_helpers import start_cluster

TOPIC = "accumulate"
VALUE = b"v" * 1000  # one batch of about 1,070 bytes per record (each produce is flushed)
MIN_BYTES = 2500  # two batches are short of it, three reach it
WAIT_MS = 20_000


def produce_spaced(producer_send, gap_s: float) -> list[float]:
    """Three records, ``gap_s`` apart; returns when each was sent (just before)."""
    sent = []
    for i in range(3):
        if i:
            time.sleep(gap_s)
        sent.append(time.monotonic())
        producer_send(b"%d" % i)
    return sent


@pytest.mark.parametrize("client", ["librdkafka", "kafka-python"])
def test_a_consumer_gets_its_records_once_they_reach_fetch_min_bytes(make_cluster, client):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = start_cluster(make_cluster(controllers=1))
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(60)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 0})

    def send(key: bytes) -> None:
        producer.produce(TOPIC, VALUE, key=key, partition=0)
        assert producer.flush(30) == 0

    send(b"warm-up")  # the topic is led and the producer connected before the timing starts
    arrived: list[float] = []
    if client == "librdkafka":
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "min-bytes",
                             "enable.auto.commit": False, "fetch.min.bytes": MIN_BYTES,
                             "fetch.wait.max.ms": WAIT_MS, "socket.timeout.ms": 60_000})
        consumer.assign([TopicPartition(TOPIC, 0, 1)])  # after the warm-up record

        def poll() -> None:
            m = consumer.poll(0.05)
            if m is not None and m.error() is None:
                arrived.append(time.monotonic())
    else:
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KafkaTopicPartition

        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, enable_auto_commit=False,
                                 fetch_min_bytes=MIN_BYTES, fetch_max_wait_ms=WAIT_MS,
                                 request_timeout_ms=WAIT_MS + 30_000)
        tp = KafkaTopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek(tp, 1)

        def poll() -> None:
            for records in consumer.poll(timeout_ms=50).values():
                arrived.extend(time.monotonic() for _ in records)
    try:
        for _ in range(20):  # the consumer's first fetch is in its long poll
            poll()
        assert arrived == []
        sent: list[float] = []
        writer = threading.Thread(target=lambda: sent.extend(produce_spaced(send, 1.5)))
        writer.start()
        deadline = time.monotonic() + 15
        while len(arrived) < 3 and time.monotonic() < deadline:
            poll()
        writer.join(60)
    finally:
        consumer.close()
    assert len(arrived) == 3, f"{len(arrived)} of 3 records arrived"
    # Nothing came while two records (short of fetch.min.bytes) were there: every record
    # arrived once the third was written, and long before fetch.wait.max.ms.
    assert arrived[0] >= sent[2], (
        f"the first record arrived {sent[2] - arrived[0]:.2f}s before the third was sent")
    assert arrived[-1] - sent[2] < 5, f"the records arrived {arrived[-1] - sent[2]:.1f}s after the third"
