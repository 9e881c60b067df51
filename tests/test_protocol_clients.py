"""Real Kafka clients against the codec: their requests, captured on the wire, decode with
our schema table, and our encoded responses satisfy them.

A minimal server (broker.network with a handler that knows only ApiVersions and Metadata)
answers kafka-python and confluent-kafka until their ``list_topics()`` returns.
"""

import functools

import pytest
import trio

from broker.network import serve_kafka
from kraft.protocol import codec, rpc
from kraft.protocol.errors import ProtocolError
from kraft.protocol.error_codes import ErrorCode
from kraft.protocol.framing import FrameDecoder

TOPICS = {"wire-test": 3, "other-topic": 1}
NODE_ID = 1


class MetadataOnlyBroker:
    """Answers ApiVersions and Metadata for a one-node cluster; records every request."""

    def __init__(self):
        self.port = None
        self.requests: list[rpc.Request] = []
        self.supported = {rpc.API_KEYS[a]: codec.versions_of(a) for a in ("ApiVersions", "Metadata")}

    async def handle(self, request: rpc.Request):
        self.requests.append(request)
        if request.api == "ApiVersions":
            return {"api_keys": [{"api_key": k, "min_version": v.lo, "max_version": v.hi}
                                 for k, v in sorted(self.supported.items())]}
        if request.api == "Metadata":
            wanted = request.body["topics"]
            names = sorted(TOPICS) if wanted is None else [t["name"] for t in wanted]
            topics = []
            for name in names:
                if name not in TOPICS:
                    topics.append({"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "name": name})
                    continue
                topics.append({"name": name, "partitions": [
                    {"partition_index": i, "leader_id": NODE_ID, "leader_epoch": 0,
                     "replica_nodes": [NODE_ID], "isr_nodes": [NODE_ID]} for i in range(TOPICS[name])]})
            return {"brokers": [{"node_id": NODE_ID, "host": "127.0.0.1", "port": self.port}],
                    "cluster_id": "kraft-wire-test", "controller_id": NODE_ID, "topics": topics}
        raise AssertionError(f"unexpected {request.api}")


async def run_client(client_call):
    broker = MetadataOnlyBroker()
    async with trio.open_nursery() as nursery:
        broker.port = await nursery.start(functools.partial(
            serve_kafka, broker.handle, "127.0.0.1", 0, supported=broker.supported))
        with trio.fail_after(30):
            result = await trio.to_thread.run_sync(client_call, broker.port)
        nursery.cancel_scope.cancel()
    return broker, result


async def test_confluent_kafka_list_topics():
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient

    def call(port):
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "client.id": "wire-test"})
        return admin.list_topics(timeout=20)

    broker, md = await run_client(call)
    assert set(md.topics) == set(TOPICS)
    assert len(md.topics["wire-test"].partitions) == 3
    assert md.cluster_id == "kraft-wire-test"
    assert [b.port for b in md.brokers.values()] == [broker.port]
    first = broker.requests[0]
    assert first.api == "ApiVersions" and first.version >= 3
    assert first.body["client_software_name"]  # librdkafka names itself
    assert first.header.client_id == "wire-test"
    assert any(r.api == "Metadata" for r in broker.requests)
    del confluent_kafka


async def test_kafka_python_list_topics():
    pytest.importorskip("kafka")
    from kafka import KafkaAdminClient

    def call(port):
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}", client_id="wire-test-py",
                                 request_timeout_ms=20000)
        try:
            return admin.list_topics()
        finally:
            admin.close()

    broker, topics = await run_client(call)
    assert sorted(topics) == sorted(TOPICS)
    assert broker.requests[0].api == "ApiVersions"
    assert {r.header.client_id for r in broker.requests} == {"wire-test-py"}
    assert any(r.api == "Metadata" for r in broker.requests)


async def test_captured_bytes_decode_with_the_schema_table():
    """Record raw bytes from a real client with a plain socket server, then decode them
    offline: whole, byte by byte through the frame decoder, and with trailing data."""
    pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient

    captured = bytearray()
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]

    async def capture(stream):
        # Answer nothing: the client sends its ApiVersions request and waits.
        async for chunk in stream:
            captured.extend(chunk)

    def call():
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "socket.timeout.ms": 1500})
        admin.list_topics(timeout=1.5)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, capture, listeners)
        with pytest.raises(Exception):
            await trio.to_thread.run_sync(call)
        nursery.cancel_scope.cancel()

    assert captured
    decoder = FrameDecoder()
    frames = []
    for i in range(len(captured)):  # byte by byte
        decoder.receive_data(captured[i : i + 1])
        while (f := decoder.next_frame()) is not None:
            frames.append(f)
    assert frames and decoder.buffered == 0
    req = rpc.decode_request(frames[0])
    assert req.api == "ApiVersions"
    assert req.body["client_software_name"] == "confluent-kafka-python"
    # Trailing data after a request body is ignored, as Kafka does (librdkafka relies on it).
    assert rpc.decode_request(frames[0] + b"\x00\x01") == req
    # A truncated request is malformed, never a crash.
    for cut in range(len(frames[0])):
        with pytest.raises(ProtocolError):
            rpc.decode_request(frames[0][:cut])
