"""kraft.client against a real trio server on loopback."""

import functools

import pytest
import trio

from broker.network import serve_kafka
from kraft.client import KafkaClient, NodeUnavailable, PeerGone


async def start_server(nursery, handler):
    return await nursery.start(functools.partial(serve_kafka, handler, "127.0.0.1", 0))


async def test_pipelined_requests_get_their_own_responses():
    async def handler(req):
        # Answer later requests faster than earlier ones would if they were not ordered.
        await trio.sleep(0.001 * (20 - int(req.body["group_id"])))
        return {"error_code": int(req.body["group_id"])}

    async with trio.open_nursery() as nursery:
        port = await start_server(nursery, handler)
        client = KafkaClient(nursery)
        results = {}

        async def one(i):
            body = {"group_id": str(i), "generation_id": 1, "member_id": "m"}
            results[i] = (await client.request("127.0.0.1", port, "Heartbeat", 4, body))["error_code"]

        async with trio.open_nursery() as inner:
            for i in range(20):
                inner.start_soon(one, i)
        assert results == {i: i for i in range(20)}
        assert len(client._connections) == 1  # one pipelined connection
        await client.aclose()
        nursery.cancel_scope.cancel()


async def test_timeout_unreachable_and_reconnect():
    gate = trio.Event()

    async def handler(req):
        if req.body["group_id"] == "slow":
            await gate.wait()
        return {"error_code": 0}

    async with trio.open_nursery() as nursery:
        port = await start_server(nursery, handler)
        client = KafkaClient(nursery)
        with pytest.raises(NodeUnavailable, match="timed out"):
            await client.request("127.0.0.1", port, "Heartbeat", 4, {"group_id": "slow"}, timeout_s=0.2)
        gate.set()
        # The connection survives a timed-out request; a late response is dropped.
        assert (await client.request("127.0.0.1", port, "Heartbeat", 4, {"group_id": "x"}))["error_code"] == 0
        # A closed port: PeerGone (a NodeUnavailable), not an OSError. The Raft driver
        # looks for a new leader at once on PeerGone, and waits out timeouts otherwise.
        with trio.socket.socket() as s:
            await s.bind(("127.0.0.1", 0))
            dead = s.getsockname()[1]
        with pytest.raises(PeerGone, match="cannot connect"):
            await client.request("127.0.0.1", dead, "Heartbeat", 4, {})
        # After the peer drops the connection, the next request reconnects.
        for conn in list(client._connections.values()):
            await conn.aclose()
        assert (await client.request("127.0.0.1", port, "Heartbeat", 4, {"group_id": "y"}))["error_code"] == 0
        await client.aclose()
        nursery.cancel_scope.cancel()


async def test_in_flight_requests_fail_when_the_server_closes():
    async def handler(req):
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        server_scope = trio.CancelScope()

        async def server(task_status=trio.TASK_STATUS_IGNORED):
            with server_scope:
                await serve_kafka(handler, "127.0.0.1", 0, task_status=task_status)

        port = await nursery.start(server)
        client = KafkaClient(nursery)

        async def close_soon():
            await trio.sleep(0.2)
            server_scope.cancel()

        nursery.start_soon(close_soon)
        with pytest.raises(NodeUnavailable, match="closed"):
            await client.request("127.0.0.1", port, "Heartbeat", 4, {}, timeout_s=10)
        nursery.cancel_scope.cancel()
