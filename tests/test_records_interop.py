"""Interop with independent implementations of the record formats.

* kafka-python's ``kafka.record`` (pure Python encoders and decoders for v0, v1, v2) and
  ``kafka.codec``; its snappy support needs python-snappy, which is not installed, so a
  shim backed by cramjam's raw snappy is put in its place (the xerial framing code under
  test is still kafka-python's).  Its magic 0 LZ4 writer needs ``xxhash``; the shim for that
  uses our xxh32, which test_records_compression.py checks against the lz4 library.
* librdkafka (through confluent-kafka) and its built-in mock cluster: librdkafka produces,
  we fetch the stored batches raw over loopback and decode them; we produce our batches raw
  and a librdkafka consumer (with check.crcs) reads them back.
"""

import socket
import struct
import types

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kafka.codec
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kraft.records import (
    GZIP,
    LOG_APPEND_TIME,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    Record,
    RecordBatch,
    compress,
    decode_batches,
    decode_message_set,
    decompress,
    legacy_to_batch,
    make_batch,
    make_end_txn_batch,
)
from kraft.records.compression import xxh32

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
TEXT = b"".join(b"line %d of some compressible text\n" % i for i in range(300))


@pytest.fixture(autouse=True)
def kafka_python_codecs(monkeypatch):
    """Give kafka-python a snappy backend (and xxhash for magic 0 LZ4) when it lacks one."""
    if not kafka.codec.has_snappy():
        shim = types.SimpleNamespace(
            compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
            decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data))),
        )
        monkeypatch.setattr(kafka.codec, "snappy", shim)
    if kafka.codec.xxhash is None:
        hasher = lambda data: types.SimpleNamespace(digest=lambda: xxh32(bytes(data)).to_bytes(4, "big"))
        monkeypatch.setattr(kafka.codec, "xxhash", types.SimpleNamespace(xxh32=hasher))


# ------------------------------------------------------------------ kafka-python: codecs

KP_CODECS = {
    GZIP: (kafka.codec.gzip_encode, kafka.codec.gzip_decode),
    SNAPPY: (kafka.codec.snappy_encode, kafka.codec.snappy_decode),
    LZ4: (kafka.codec.lz4_encode, kafka.codec.lz4_decode),
    ZSTD: (kafka.codec.zstd_encode, kafka.codec.zstd_decode),
}


@pytest.mark.parametrize("codec", list(KP_CODECS))
def test_codecs_both_ways_with_kafka_python(codec):
    encode, decode = KP_CODECS[codec]
    assert decompress(codec, encode(TEXT)) == TEXT
    assert decode(compress(codec, TEXT)) == TEXT


def test_snappy_raw_and_old_kafka_lz4_from_kafka_python():
    assert decompress(SNAPPY, kafka.codec.snappy_encode(TEXT, xerial_compatible=False)) == TEXT
    old = kafka.codec.lz4_encode_old_kafka(TEXT)
    assert decompress(LZ4, old, legacy_lz4=True) == TEXT
    assert kafka.codec.lz4_decode_old_kafka(compress(LZ4, TEXT)) == TEXT


# ---------------------------------------------------------------- kafka-python: v2 batches

records_st = st.lists(
    st.tuples(
        st.integers(0, 2**41),
        st.none() | st.binary(max_size=16),
        st.none() | st.binary(max_size=40).map(lambda b: b * 4),
        st.lists(st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=6)), max_size=2),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(CODECS), records_st, st.booleans())
def test_kafka_python_batches_decode_with_ours(codec, records, transactional):
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=transactional,
        producer_id=77 if transactional else -1, producer_epoch=3 if transactional else -1,
        base_sequence=12 if transactional else -1, batch_size=1 << 20,
    )
    for i, (ts, key, value, headers) in enumerate(records):
        assert builder.append(i, timestamp=ts, key=key, value=value, headers=headers) is not None
    data = bytes(builder.build())
    batch = RecordBatch.decode(data)
    theirs = DefaultRecordBatch(data)
    assert batch.compression == theirs.compression_type  # kafka-python skips useless compression
    assert batch.is_transactional == transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
        theirs.producer_id, theirs.producer_epoch, theirs.base_sequence)
    assert [(o, ts, r.key, r.value, list(r.headers)) for o, ts, r in batch.iter_resolved()] == [
        (i, ts, key, value, headers) for i, (ts, key, value, headers) in enumerate(records)
    ]
    assert batch.encode() == data or batch.compression != NONE  # codecs' byte output may differ


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(CODECS), records_st, st.integers(0, 2**40), st.booleans())
def test_our_batches_decode_with_kafka_python(codec, records, base_offset, log_append):
    batch = make_batch(
        [Record(0, ts, key, value, tuple(headers)) for ts, key, value, headers in records],
        base_offset=base_offset, compression=codec, producer_id=5, producer_epoch=1,
        base_sequence=100, partition_leader_epoch=9,
        timestamp_type=LOG_APPEND_TIME if log_append else 0,
        log_append_time=123456 if log_append else None,
    )
    theirs = DefaultRecordBatch(batch.encode())
    assert theirs.validate_crc()
    assert (theirs.base_offset, theirs.leader_epoch, theirs.compression_type) == (base_offset, 9, codec)
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (5, 1, 100)
    assert theirs.last_sequence == 100 + len(records) - 1
    assert theirs.timestamp_type == (1 if log_append else 0)
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in theirs] == [
        (base_offset + i, 123456 if log_append else ts, key, value, headers)
        for i, (ts, key, value, headers) in enumerate(records)
    ]


@pytest.mark.parametrize("commit", [True, False])
def test_our_transaction_markers_decode_with_kafka_python(commit):
    data = make_end_txn_batch(commit, producer_id=8, producer_epoch=2, coordinator_epoch=4,
                              timestamp=77).encode()
    theirs = DefaultRecordBatch(data)
    assert theirs.validate_crc() and theirs.is_control_batch and theirs.is_transactional
    (marker,) = list(theirs)
    assert (marker.commit, marker.abort, marker.version) == (commit, not commit, 0)


# ----------------------------------------------------------- kafka-python: legacy formats

LEGACY = [(magic, codec) for magic in (0, 1) for codec in (NONE, GZIP, SNAPPY, LZ4)]


def kafka_python_message_set(magic, codec, n, first_offset):
    """What an old broker stores: kafka-python's builder, then the broker's offsets."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i in range(n):
        # magic 0 inner offsets are absolute; magic 1 producers write 0, 1, 2, ...
        offset = first_offset + i if (magic == 0 or codec == NONE) else i
        key = None if i % 2 else b"key-%d" % i
        builder.append(offset, timestamp=1_600_000_000_000 + i, key=key, value=TEXT[: 50 + i])
    data = bytearray(builder.build())
    if codec != NONE:
        # A magic 1 wrapper carries the absolute offset of its last inner message.
        struct.pack_into(">q", data, 0, first_offset + n - 1)
    return bytes(data)


@pytest.mark.parametrize("magic, codec", LEGACY)
def test_kafka_python_legacy_message_sets_decode_with_ours(magic, codec):
    data = kafka_python_message_set(magic, codec, 4, 200)
    ours = [(o, ts, r.key, r.value) for b in decode_message_set(data) for o, ts, r in b.iter_resolved()]
    expected_ts = [-1] * 4 if magic == 0 else [1_600_000_000_000 + i for i in range(4)]
    assert ours == [(200 + i, expected_ts[i], None if i % 2 else b"key-%d" % i, TEXT[: 50 + i])
                    for i in range(4)]
    theirs = [(r.offset, r.key, r.value) for b in MemoryRecords(data) for r in b]
    assert theirs == [(o, k, v) for o, _, k, v in ours]
    assert {b.compression for b in decode_message_set(data)} == {codec}


@pytest.mark.parametrize("magic, codec", LEGACY)
def test_converted_legacy_sets_decode_with_kafka_python(magic, codec):
    data = kafka_python_message_set(magic, codec, 3, 10)
    converted = DefaultRecordBatch(legacy_to_batch(data).encode())
    assert converted.validate_crc() and converted.compression_type == codec
    old = [(r.offset, r.key, r.value) for b in MemoryRecords(data) for r in b]
    assert [(r.offset, r.key, r.value) for r in converted] == old


# -------------------------------------------------------------- librdkafka (mock cluster)

def _request(address, api_key, version, body):
    header = struct.pack(">hhih", api_key, version, 1, 5) + b"kraft"
    frame = header + body
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack_from(">i", buf)[0]:
            chunk = sock.recv(65536)
            assert chunk, "connection closed"
            buf += chunk
    return buf[8:]  # size, correlation id


def _topic_partition(topic, partition):
    name = topic.encode()
    return struct.pack(">ih", 1, len(name)) + name + struct.pack(">ii", 1, partition)


def fetch_raw(address, topic, offset):
    """Fetch v4 of one partition; returns its records bytes."""
    body = struct.pack(">iiiib", -1, 100, 1, 1 << 20, 0) + _topic_partition(topic, 0)
    body += struct.pack(">qi", offset, 1 << 20)
    resp = _request(address, 1, 4, body)
    pos = 8  # throttle time, topic count
    (name_len,) = struct.unpack_from(">h", resp, pos)
    pos += 2 + name_len + 4  # name, partition count
    _, error, _, _, aborted = struct.unpack_from(">ihqqi", resp, pos)
    assert error == 0 and aborted <= 0
    pos += 26
    (size,) = struct.unpack_from(">i", resp, pos)
    return resp[pos + 4 : pos + 4 + size]


def produce_raw(address, topic, records):
    """Produce v3 of one batch to partition 0; returns (error code, base offset)."""
    body = struct.pack(">hhi", -1, -1, 10_000) + _topic_partition(topic, 0)
    body += struct.pack(">i", len(records)) + records
    resp = _request(address, 0, 3, body)
    pos = 4
    (name_len,) = struct.unpack_from(">h", resp, pos)
    pos += 2 + name_len + 4
    _, error, base_offset = struct.unpack_from(">ihq", resp, pos)
    return error, base_offset


@pytest.fixture(scope="module")
def mock_cluster():
    confluent_kafka = pytest.importorskip("confluent_kafka")
    config = {"test.mock.num.brokers": 1, "log_level": 0}
    anchor = confluent_kafka.Producer(config)  # owns the mock cluster for the module
    brokers = anchor.list_topics(timeout=10).brokers
    if not brokers:
        pytest.skip("librdkafka mock cluster did not start")
    broker = next(iter(brokers.values()))
    yield confluent_kafka, anchor, (broker.host, broker.port)
    anchor.flush(5)


@pytest.mark.parametrize("codec_name", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_librdkafka_batches_decode_with_ours(mock_cluster, codec_name):
    confluent_kafka, _, address = mock_cluster
    topic = f"from-librdkafka-{codec_name}"
    producer = confluent_kafka.Producer({
        "bootstrap.servers": "%s:%d" % address, "compression.type": codec_name,
        "enable.idempotence": True, "linger.ms": 20, "log_level": 0,
    })
    sent = [(b"k%d" % i if i % 3 else None, TEXT[i : i + 200], [("n", b"%d" % i)]) for i in range(40)]
    for key, value, headers in sent:
        producer.produce(topic, value, key, partition=0, headers=headers)
    assert producer.flush(10) == 0
    got, offset = [], 0
    while len(got) < len(sent):
        batches = decode_batches(fetch_raw(address, topic, offset))
        assert batches, "fetch returned nothing"
        for batch in batches:
            assert batch.producer_id >= 0 and batch.base_sequence >= 0  # idempotent producer
            if codec_name != "none":
                assert batch.compression == ["none", "gzip", "snappy", "lz4", "zstd"].index(codec_name)
            got += [(o, r.key, r.value, list(r.headers)) for o, _, r in batch.iter_resolved()]
            offset = batch.next_offset
    assert got == [(i, k, v, h) for i, (k, v, h) in enumerate(sent)]


@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_decode_with_librdkafka(mock_cluster, codec):
    confluent_kafka, anchor, address = mock_cluster
    topic = f"from-kraft-{int(codec)}"
    anchor.produce(topic, b"first", partition=0)  # auto-creates the topic
    assert anchor.flush(10) == 0
    records = [Record(0, 1_700_000_000_000 + i, None if i % 4 == 0 else b"k%d" % i, TEXT[i : i + 100],
                      (("h", b"x"), ("null", None))) for i in range(25)]
    error, base_offset = produce_raw(address, topic, make_batch(records, compression=codec).encode())
    assert (error, base_offset) == (0, 1)
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": "%s:%d" % address, "group.id": "kraft-test", "check.crcs": True,
        "enable.auto.commit": False, "log_level": 0,
    })
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 1)])
        got = []
        while len(got) < len(records):
            message = consumer.poll(10)
            assert message is not None, "librdkafka returned nothing"
            assert message.error() is None, message.error()
            got.append((message.offset(), message.timestamp()[1], message.key(), message.value(),
                        message.headers()))
    finally:
        consumer.close()
    assert got == [(1 + i, r.timestamp, r.key, r.value, list(r.headers)) for i, r in enumerate(records)]
