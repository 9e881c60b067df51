"""Kafka's limits for hostile or broken clients, each shown doing its job: max.connections,
max.connections.per.ip (+ overrides), connections.max.idle.ms and socket.request.max.bytes,
on real sockets against the connection server, and wired from server.properties on a node.
(The bound on answers queued per connection is tests/test_network.py's
test_at_most_pipeline_depth_answers_wait.)"""

from __future__ import annotations

import functools
import socket
import struct
import time

import pytest
import trio

from broker.connection_limits import ConnectionLimits
from broker.deferred import Deferred
from broker.network import serve_kafka
from cluster_helpers import fast_overrides, start_cluster
from kraft.protocol import rpc
from kraft.server_config import ConfigError, ServerConfig, parse_per_ip_overrides


def api_versions(correlation_id: int = 1) -> bytes:
    return rpc.encode_request("ApiVersions", 0, correlation_id, {})


async def answer(request):
    return {"api_keys": []}


def connect(port: int, source: str = "127.0.0.1", host: str = "127.0.0.1") -> socket.socket:
    s = socket.socket()
    s.bind((source, 0))
    s.settimeout(5)
    s.connect((host, port))
    return s


def answered(s: socket.socket, timeout_s: float = 5.0, correlation_id: int = 1) -> bool | None:
    """True: an ApiVersions answer came; False: the server closed; None: nothing in time."""
    s.settimeout(timeout_s)
    try:
        s.sendall(api_versions(correlation_id))
        head = s.recv(4, socket.MSG_WAITALL)
        if len(head) < 4:
            return False
        payload = s.recv(struct.unpack(">i", head)[0], socket.MSG_WAITALL)
    except socket.timeout:
        return None
    except ConnectionError:
        return False
    return struct.unpack_from(">i", payload)[0] == correlation_id


def closed_by_server(s: socket.socket, timeout_s: float) -> bool:
    s.settimeout(timeout_s)
    try:
        return s.recv(10) == b""
    except socket.timeout:
        return False
    except ConnectionError:
        return True


async def serving(nursery, limits: ConnectionLimits, handler=answer, **kwargs) -> int:
    return await nursery.start(functools.partial(serve_kafka, handler, "127.0.0.1", 0, limits=limits, **kwargs))


async def test_max_connections_holds_new_connections_until_one_closes():
    async with trio.open_nursery() as nursery:
        port = await serving(nursery, ConnectionLimits(max_connections=3))

        def talk():
            first = [connect(port) for _ in range(3)]
            served = [answered(s) for s in first]
            waiting = connect(port)  # the kernel's backlog takes it; the server does not
            held = answered(waiting, timeout_s=0.5)
            first[0].close()
            released = answered(waiting, timeout_s=5, correlation_id=1)
            for s in first[1:] + [waiting]:
                s.close()
            return served, held, released

        served, held, released = await trio.to_thread.run_sync(talk)
        nursery.cancel_scope.cancel()
    assert served == [True, True, True]
    assert held is None, "a connection over max.connections was served"
    assert released, "the waiting connection was not served once another closed"


async def test_max_connections_per_ip_closes_the_excess_and_overrides_raise_it():
    limits = ConnectionLimits(max_connections_per_ip=2, per_ip_overrides={"127.0.0.2": 4})
    async with trio.open_nursery() as nursery:
        port = await serving(nursery, limits)

        def talk():
            local = [connect(port) for _ in range(3)]
            local_results = [answered(s) for s in local]
            other = [connect(port, source="127.0.0.2") for _ in range(5)]
            other_results = [answered(s) for s in other]
            for s in local + other:
                s.close()
            time.sleep(0.2)
            again = connect(port)  # the count goes down as connections close
            again_result = answered(again)
            again.close()
            return local_results, other_results, again_result

        local_results, other_results, again_result = await trio.to_thread.run_sync(talk)
        nursery.cancel_scope.cancel()
    assert local_results == [True, True, False]
    assert other_results == [True, True, True, True, False]
    assert again_result is True


async def test_idle_connections_close_after_connections_max_idle_ms():
    async def slow_answer(request):
        if request.header.correlation_id == 7:  # an answer that takes longer than the idle limit
            async def finish():
                await trio.sleep(0.8)
                return {"api_keys": []}
            return Deferred(finish)
        return {"api_keys": []}

    async with trio.open_nursery() as nursery:
        port = await serving(nursery, ConnectionLimits(idle_timeout_s=0.3), handler=slow_answer)

        def talk():
            half = connect(port)
            half.sendall(api_versions()[:3])  # half a size prefix, then nothing
            silent = connect(port)
            busy = connect(port)
            busy_results = []
            for i in range(8):
                busy_results.append(answered(busy, correlation_id=100 + i))
                time.sleep(0.1)
            waiting = connect(port)
            waited = answered(waiting, timeout_s=5, correlation_id=7)
            results = closed_by_server(half, 2), closed_by_server(silent, 2), busy_results, waited
            for s in (half, silent, busy, waiting):
                s.close()
            return results

        half_closed, silent_closed, busy_results, waited = await trio.to_thread.run_sync(talk)
        nursery.cancel_scope.cancel()
    assert half_closed and silent_closed
    assert busy_results == [True] * 8, "a connection in use was closed as idle"
    assert waited is True, "a connection waiting for its answer was closed as idle"


async def test_socket_request_max_bytes_refuses_a_frame_before_reading_it():
    async with trio.open_nursery() as nursery:
        port = await serving(nursery, ConnectionLimits(), max_frame_bytes=1024)

        def talk():
            small = connect(port)
            ok = answered(small)
            big = connect(port)
            big.sendall(struct.pack(">i", 64 * 1024 * 1024))  # announces 64 MiB, sends none of it
            refused = closed_by_server(big, 2)
            small.close()
            big.close()
            return ok, refused

        ok, refused = await trio.to_thread.run_sync(talk)
        nursery.cancel_scope.cancel()
    assert ok and refused


def test_per_ip_overrides_are_validated():
    assert parse_per_ip_overrides(["127.0.0.1:5", "[::1]:0"]) == {"127.0.0.1": 5, "::1": 0}
    base = {"process.roles": "broker,controller", "node.id": "1", "controller.quorum.voters": "1@h:1",
            "listeners": "PLAINTEXT://h:2,CONTROLLER://h:1", "controller.listener.names": "CONTROLLER"}
    with pytest.raises(ConfigError, match="max.connections.per.ip.overrides"):
        ServerConfig.from_properties({**base, "max.connections.per.ip.overrides": "127.0.0.1"})


def test_a_node_applies_the_limits_from_server_properties(make_cluster):
    """The four keys reach a node's client listener (its own connections come from
    127.0.0.1, so the per-ip limit is shown on 127.0.0.2 through an override)."""
    cluster = start_cluster(make_cluster(controllers=1, brokers=0, overrides=fast_overrides(**{
        "socket.request.max.bytes": "4096", "connections.max.idle.ms": "1000",
        "max.connections.per.ip.overrides": "127.0.0.2:2", "max.connections": "50"})))
    node = cluster.brokers[0]
    port = node.broker_port
    other = [connect(port, source="127.0.0.2") for _ in range(3)]
    assert [answered(s) for s in other] == [True, True, False]
    big = connect(port)
    big.sendall(struct.pack(">i", 5000))
    assert closed_by_server(big, 3)
    idle = connect(port)
    assert closed_by_server(idle, 5)
    for s in other + [big, idle]:
        s.close()
    log = node.log_path.read_text()
    assert "max.connections.per.ip (2) reached" in log
    assert "socket.request.max.bytes" in log and "idle for connections.max.idle.ms" in log
    cluster.stop_all()


def test_a_connection_flood_leaves_the_logs_their_descriptors(make_cluster):
    """With Kafka's default max.connections (unlimited), 2,500 idle connections against a node
    whose open files limit is 2,048 would take the descriptors its checkpoints and segments
    need, and the log directory would fail.  The node holds at most what its limit leaves
    (here (2048 - 256 - 512) / 2 = 640); the rest wait in the backlog, and the logs go on."""
    import resource

    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    flood_size = 2500
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < flood_size + 500:
        if hard != resource.RLIM_INFINITY and hard < flood_size + 500:
            pytest.skip(f"this process may open only {hard} files")
        resource.setrlimit(resource.RLIMIT_NOFILE, (flood_size + 500, hard))
    cluster = start_cluster(make_cluster(controllers=1, brokers=0, open_files_limit=2048, overrides=fast_overrides(**{
        "kraft.log.open.files.max": "256", "replica.high.watermark.checkpoint.interval.ms": "200"})))
    node = cluster.brokers[0]
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("kept", 1, 1)])["kept"].result(30)

    def produce(first: int) -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(first, first + 50):
            producer.produce("kept", b"%d" % i)
        assert producer.flush(30) == 0

    produce(0)
    flood = []
    for _ in range(flood_size):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex((node.host, node.broker_port))
        flood.append(s)
    time.sleep(3)  # checkpoints are rewritten every 200 ms meanwhile
    for s in flood:
        s.close()
    assert node.process.poll() is None
    produce(50)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False})
    consumer.assign([TopicPartition("kept", 0, 0)])
    seen = []
    deadline = time.monotonic() + 30
    while len(seen) < 100 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen.append(int(msg.value()))
    consumer.close()
    assert seen == list(range(100))
    log = node.log_path.read_text()
    assert "Too many open files" not in log
    assert "max.connections: at most 640 on each listener" in log
    cluster.stop_all()
