"""Pipelined Produce requests handled together (``DataPath.produce_burst``,
``Partition.produce_together``): a producer sending one record per request (librdkafka with
``batch.num.messages=1``) pipelines hundreds, and the broker appends a burst of them for
one partition as one log write, while every request keeps the answer it would get alone.

On the real data path and log first, then over the wire against a real node, with a raw
pipelining client and with librdkafka's idempotent producer."""

from __future__ import annotations

import os
import socket
import struct

import pytest
import trio

from broker.deferred import Deferred
from cluster_helpers import start_cluster
from kraft.protocol import rpc
from kraft.protocol.error_codes import ErrorCode
from kraft.records import build_batch, decode_batches
from test_data_path import (TOPIC, answer, follower_fetches, idempotent_batch, one_partition_path,
                            produce_body)

PRODUCE_VERSION = 9


@pytest.fixture
def data_path(tmp_path):
    path = one_partition_path(tmp_path)
    yield path
    path.replicas.close()


def one_record(i: int) -> bytes:
    return build_batch([(None, b"r%d" % i)], timestamp=1)


def log_values(data_path) -> list[bytes]:
    """Every record value in the partition's log, in offset order."""
    read = data_path.replicas.get(TOPIC, 0).log.read(0, 1 << 24)
    return [r.value for batch in decode_batches(read.records) for r in batch.records]


async def test_a_burst_for_one_partition_is_one_log_write(data_path, monkeypatch):
    writes = []
    real_pwrite = os.pwrite

    def counting_pwrite(fd, data, offset):
        writes.append(len(data))
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", counting_pwrite)
    answers = await data_path.produce_burst([produce_body(1, one_record(i)) for i in range(20)],
                                            PRODUCE_VERSION)
    monkeypatch.undo()
    assert [answer(a) for a in answers] == [(ErrorCode.NONE, i) for i in range(20)]
    assert len(writes) == 1, f"{len(writes)} writes for one burst"
    assert log_values(data_path) == [b"r%d" % i for i in range(20)]


async def test_each_request_of_a_burst_keeps_its_own_answer(data_path):
    """A corrupt batch, a partition this broker does not have and an acks=0 request in the
    middle of a burst are answered as they would be alone; the others are appended in
    order around them."""
    corrupt = bytearray(one_record(2))
    corrupt[-1] ^= 0xFF  # the CRC no longer matches
    unknown = produce_body(1, one_record(99))
    unknown["topic_data"][0]["partition_data"][0]["index"] = 5
    bodies = [produce_body(1, one_record(0)), produce_body(1, one_record(1)), produce_body(1, bytes(corrupt)),
              produce_body(1, one_record(3)), unknown, produce_body(0, one_record(5)),
              produce_body(1, one_record(6)), produce_body(1, one_record(7))]
    answers = await data_path.produce_burst(bodies, PRODUCE_VERSION)
    assert answers[5] is None  # acks=0: no answer
    got = [answer(a) if a is not None else None for a in answers]
    assert got == [(ErrorCode.NONE, 0), (ErrorCode.NONE, 1), (ErrorCode.CORRUPT_MESSAGE, -1), (ErrorCode.NONE, 2),
                   (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1), None, (ErrorCode.NONE, 4), (ErrorCode.NONE, 5)]
    assert log_values(data_path) == [b"r0", b"r1", b"r3", b"r5", b"r6", b"r7"]


async def test_idempotent_batches_of_a_burst_keep_sequence_checks(data_path):
    first = await data_path.produce_burst([produce_body(1, idempotent_batch(s)) for s in (0, 3, 6)],
                                          PRODUCE_VERSION)
    assert [answer(a) for a in first] == [(ErrorCode.NONE, 0), (ErrorCode.NONE, 3), (ErrorCode.NONE, 6)]
    # a retry of sequence 0 and a gap (sequence 30) among new batches: the retry gets the
    # original offsets, the gap its own error, the others are appended
    second = await data_path.produce_burst([produce_body(1, idempotent_batch(s)) for s in (9, 0, 30, 12)],
                                           PRODUCE_VERSION)
    assert [answer(a) for a in second] == [(ErrorCode.NONE, 9), (ErrorCode.NONE, 0),
                                           (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1), (ErrorCode.NONE, 12)]
    assert data_path.replicas.get(TOPIC, 0).log.log_end_offset == 15


async def test_acks_all_requests_of_a_burst_each_wait_for_their_own_records(data_path):
    pending = await data_path.produce_burst([produce_body(-1, idempotent_batch(s)) for s in (0, 3)],
                                            PRODUCE_VERSION)
    assert all(isinstance(p, Deferred) for p in pending)
    await follower_fetches(data_path, 3)  # the follower has the first request's records only
    assert answer(await pending[0].finish()) == (ErrorCode.NONE, 0)
    with trio.move_on_after(0.05) as waiting:
        await pending[1].finish()
    assert waiting.cancelled_caught, "the second request was answered before its records were replicated"
    await follower_fetches(data_path, 6)
    assert answer(await pending[1].finish()) == (ErrorCode.NONE, 3)


async def test_a_batch_larger_than_a_segment_is_refused_as_kafka_refuses_it(tmp_path):
    """More bytes than ``segment.bytes`` in one append: RECORD_LIST_TOO_LARGE (not a
    retriable storage error), alone and in a burst, where the others are appended."""
    path = one_partition_path(tmp_path, segment_bytes=600)
    try:
        big = build_batch([(None, b"x" * 700)], timestamp=1)
        assert answer(await path.produce(produce_body(1, big), PRODUCE_VERSION)) == \
            (ErrorCode.RECORD_LIST_TOO_LARGE, -1)
        answers = await path.produce_burst([produce_body(1, one_record(0)), produce_body(1, big),
                                            produce_body(1, one_record(2))], PRODUCE_VERSION)
        assert [answer(a) for a in answers] == [(ErrorCode.NONE, 0), (ErrorCode.RECORD_LIST_TOO_LARGE, -1),
                                                (ErrorCode.NONE, 1)]
    finally:
        path.replicas.close()


# -- over the wire: a real node ----------------------------------------------------------


def produce_request(correlation_id: int, topic: str, records: bytes, acks: int = 1) -> bytes:
    return rpc.encode_request("Produce", PRODUCE_VERSION, correlation_id, {
        "transactional_id": None, "acks": acks, "timeout_ms": 30000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]})


def read_frames(sock: socket.socket, count: int) -> list[bytes]:
    """Up to ``count`` response frames, fewer when the broker closes the connection."""
    buf, frames = b"", []
    while len(frames) < count:
        while len(buf) >= 4 and len(buf) - 4 >= struct.unpack_from(">i", buf)[0]:
            size = struct.unpack_from(">i", buf)[0]
            frames.append(buf[4:4 + size])
            buf = buf[4 + size:]
        if len(frames) == count:
            break
        data = sock.recv(1 << 16)
        if not data:
            break
        buf += data
    return frames


def test_a_pipelined_burst_over_the_wire_is_answered_in_order(make_cluster):
    """200 one-record requests in one write, a corrupt batch among them: every request is
    answered, in order, with consecutive offsets for the good ones; then a malformed frame
    after 10 more: those 10 are answered before the connection closes."""
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = start_cluster(make_cluster(controllers=1))
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("burst", 1, 1)])["burst"].result(60)
    node = cluster.brokers[0]
    bad = 57
    corrupt = bytearray(one_record(bad))
    corrupt[-1] ^= 0xFF
    with socket.create_connection((node.host, node.broker_port), timeout=30) as sock:
        # the topic is led before the burst: one request and its answer first
        for _ in range(300):
            sock.sendall(produce_request(0, "burst", one_record(-1)))
            (payload,) = read_frames(sock, 1)
            _, body = rpc.decode_response("Produce", PRODUCE_VERSION, payload)
            if body["responses"][0]["partition_responses"][0]["error_code"] == 0:
                break
        sock.sendall(b"".join(produce_request(1 + i, "burst", bytes(corrupt) if i == bad else one_record(i))
                              for i in range(200)))
        answers = [rpc.decode_response("Produce", PRODUCE_VERSION, p) for p in read_frames(sock, 200)]
        assert [c for c, _ in answers] == list(range(1, 201))
        results = [b["responses"][0]["partition_responses"][0] for _, b in answers]
        assert results[bad]["error_code"] == ErrorCode.CORRUPT_MESSAGE
        good = [r for i, r in enumerate(results) if i != bad]
        assert all(r["error_code"] == 0 for r in good)
        assert [r["base_offset"] for r in good] == list(range(1, 200))

        malformed = produce_request(300, "burst", one_record(300))
        malformed = struct.pack(">i", 30) + malformed[4:34]  # a Produce header, then a cut body
        sock.sendall(b"".join(produce_request(201 + i, "burst", one_record(i)) for i in range(10)) + malformed)
        frames = read_frames(sock, 11)
        assert len(frames) == 10, "the requests before the malformed one were not all answered"
        offsets = [rpc.decode_response("Produce", PRODUCE_VERSION, p)[1]["responses"][0]["partition_responses"][0]
                   ["base_offset"] for p in frames]
        assert offsets == list(range(200, 210))
        assert sock.recv(1) == b""  # then the connection is closed


def test_an_idempotent_one_record_per_request_producer_keeps_its_order(make_cluster):
    """librdkafka's idempotent producer, one record per request, thousands pipelined: every
    record acknowledged once, at consecutive offsets, and read back in the order sent."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = start_cluster(make_cluster(controllers=1))
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("burst-idem", 1, 1)])["burst-idem"].result(60)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "enable.idempotence": True,
                         "batch.num.messages": 1, "linger.ms": 0})
    count = 5000
    delivered = []

    def on_delivery(err, msg):
        assert err is None, err
        delivered.append((msg.offset(), msg.value()))

    for i in range(count):
        producer.produce("burst-idem", b"%d" % i, partition=0, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert sorted(delivered) == [(i, b"%d" % i) for i in range(count)]

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "burst",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("burst-idem", 0, 0)])
    values = []
    try:
        while len(values) < count:
            m = consumer.poll(10)
            assert m is not None, f"only {len(values)} of {count} records read back"
            assert m.error() is None, m.error()
            values.append(m.value())
    finally:
        consumer.close()
    assert values == [b"%d" % i for i in range(count)]
