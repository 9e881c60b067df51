"""The connection shell (broker.network): pipelined requests, in-order answers, failures that
cost one connection and never the listener."""

import functools
import socket

import trio
import trio.testing

from broker.deferred import Deferred
from broker.network import PIPELINE_DEPTH, KafkaConnection, serve_kafka
from kraft.protocol import rpc
from kraft.protocol.error_codes import ErrorCode
from kraft.protocol.framing import FrameDecoder


def api_versions_request(correlation_id: int) -> bytes:
    return rpc.encode_request("ApiVersions", 0, correlation_id, {})


def answer_after(gate: trio.Event) -> Deferred:
    """An answer that waits for ``gate`` (as an acks=all produce waits for its followers)."""
    async def finish():
        await gate.wait()
        return {"api_keys": []}
    return Deferred(finish)


async def read_correlation_ids(stream, count: int) -> list[int]:
    decoder, ids = FrameDecoder(), []
    while len(ids) < count:
        data = await stream.receive_some(65536)
        assert data, "connection closed early"
        decoder.receive_data(data)
        while (payload := decoder.next_frame()) is not None:
            ids.append(rpc.decode_response("ApiVersions", 0, payload)[0])
    return ids


async def test_a_waiting_response_lets_later_requests_run_and_answers_stay_in_order():
    gate = trio.Event()
    handled = []

    async def handler(request):
        cid = request.header.correlation_id
        handled.append(cid)
        if cid == 1:
            return answer_after(gate)
        return {"api_keys": []}

    client, server = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(KafkaConnection(server, handler).serve)
        await client.send_all(api_versions_request(1) + api_versions_request(2) + api_versions_request(3))
        await trio.testing.wait_all_tasks_blocked()
        assert handled == [1, 2, 3]  # the reader did not wait for request 1's answer
        with trio.move_on_after(0.05):
            assert not await client.receive_some(1), "an answer overtook request 1's"
        gate.set()
        assert await read_correlation_ids(client, 3) == [1, 2, 3]
        await client.aclose()


async def test_at_most_pipeline_depth_answers_wait():
    handled = []
    gate = trio.Event()

    async def handler(request):
        handled.append(request.header.correlation_id)
        return answer_after(gate)

    client, server = trio.testing.memory_stream_pair()
    total = PIPELINE_DEPTH + 10
    async with trio.open_nursery() as nursery:
        nursery.start_soon(KafkaConnection(server, handler).serve)
        await client.send_all(b"".join(api_versions_request(i) for i in range(total)))
        await trio.testing.wait_all_tasks_blocked()
        # One being awaited by the writer, PIPELINE_DEPTH queued, one waiting to be queued.
        assert len(handled) == PIPELINE_DEPTH + 2
        gate.set()
        assert await read_correlation_ids(client, total) == list(range(total))
        await client.aclose()


async def test_a_failing_handler_costs_its_request_and_the_listener_serves_on():
    """A handler's exception is answered with UNKNOWN_SERVER_ERROR where the response has a
    top-level error code (ApiVersions), and closes the connection where it has none
    (Metadata); either way the listener goes on serving."""
    async def handler(request):
        if request.header.correlation_id in (13, 14):
            raise KeyError("a bug")
        return {"api_keys": []}

    async with trio.open_nursery() as nursery:
        port = await nursery.start(functools.partial(serve_kafka, handler, "127.0.0.1", 0))

        def talk():
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(api_versions_request(13))
                error = rpc.decode_response("ApiVersions", 0, read_frame(s))[1]["error_code"]
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(rpc.encode_request("Metadata", 1, 14, {"topics": []}))
                closed = s.recv(10) == b""
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(api_versions_request(15))
                answered = rpc.decode_response("ApiVersions", 0, read_frame(s))[0]
            return error, closed, answered

        error, closed, answered = await trio.to_thread.run_sync(talk)
        nursery.cancel_scope.cancel()
    assert (error, closed, answered) == (ErrorCode.UNKNOWN_SERVER_ERROR, True, 15)


def read_frame(sock) -> bytes:
    decoder = FrameDecoder()
    while (payload := decoder.next_frame()) is None:
        data = sock.recv(65536)
        assert data, "connection closed early"
        decoder.receive_data(data)
    return payload


async def test_a_failing_deferred_answer_costs_its_request():
    """UNKNOWN_SERVER_ERROR where the response has a top-level error code (ApiVersions); the
    connection closes where it has none (Metadata)."""
    async def handler(request):
        async def finish():
            raise RuntimeError("a bug")
        return Deferred(finish)

    client, server = trio.testing.memory_stream_pair()
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(KafkaConnection(server, handler).serve)
            await client.send_all(api_versions_request(1) + rpc.encode_request("Metadata", 1, 2, {"topics": []}))
            decoder = FrameDecoder()
            while (payload := decoder.next_frame()) is None:
                decoder.receive_data(await client.receive_some(1000))
            cid, body = rpc.decode_response("ApiVersions", 0, payload)
            assert (cid, body["error_code"]) == (1, ErrorCode.UNKNOWN_SERVER_ERROR)
            assert await client.receive_some(10) == b""


class CountingStream(trio.abc.Stream):
    """A stream that counts its sends (the server side of a memory stream pair)."""

    def __init__(self, inner):
        self.inner, self.sends = inner, 0

    async def send_all(self, data):
        self.sends += 1
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self):
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes=None):
        return await self.inner.receive_some(max_bytes)

    async def aclose(self):
        await self.inner.aclose()


def produce_request(correlation_id: int) -> bytes:
    return rpc.encode_request("Produce", 9, correlation_id, {
        "transactional_id": None, "acks": 1, "timeout_ms": 100, "topic_data": []})


async def read_answers(stream, apis: list[str]) -> list[int]:
    decoder, ids = FrameDecoder(), []
    while len(ids) < len(apis):
        data = await stream.receive_some(65536)
        assert data, "connection closed early"
        decoder.receive_data(data)
        while (payload := decoder.next_frame()) is not None:
            ids.append(rpc.decode_response(apis[len(ids)], 9 if apis[len(ids)] == "Produce" else 0, payload)[0])
    return ids


async def test_a_burst_of_produce_requests_is_answered_in_one_send():
    """A producer that sends one record per request pipelines many in one read: their
    answers leave together, in order, not one send each."""
    async def handler(request):
        return {"responses": [], "throttle_time_ms": 0}

    client, server = trio.testing.memory_stream_pair()
    counting = CountingStream(server)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(KafkaConnection(counting, handler).serve)
        await client.send_all(b"".join(produce_request(i) for i in range(40)))
        assert await read_answers(client, ["Produce"] * 40) == list(range(40))
        assert counting.sends == 1, f"40 pipelined answers took {counting.sends} sends"
        await client.aclose()


async def test_held_produce_answers_do_not_wait_behind_a_long_poll():
    """Answers held for the rest of a burst leave before a request that may wait (a fetch's
    long poll): a client's produce answers must not wait for its fetch."""
    gate = trio.Event()

    async def handler(request):
        if request.api == "ApiVersions":
            await gate.wait()  # as a fetch waits for data
            return {"api_keys": []}
        return {"responses": [], "throttle_time_ms": 0}

    client, server = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(KafkaConnection(server, handler).serve)
        await client.send_all(produce_request(1) + produce_request(2) + api_versions_request(3))
        with trio.fail_after(5):
            assert await read_answers(client, ["Produce", "Produce"]) == [1, 2]
        gate.set()
        assert await read_answers(client, ["ApiVersions"]) == [3]
        await client.aclose()
