"""A broker's requests to the active controller follow it when it moves, also mid-request.

Two controllers on real sockets: the first was cut off (it accepts, never answers), the
second is the new active one.  A heartbeat sent to the first must reach the second as soon
as the broker learns of the change, not after the first request's timeout."""

from __future__ import annotations

import functools

import trio

from broker.controller_channel import ControllerChannel
from broker.network import serve_kafka
from kraft.client import KafkaClient
from kraft.raft.driver import PeerAddress


async def test_a_request_in_flight_moves_to_the_new_controller():
    asked = []

    async def cut_off(request):
        asked.append("old")
        await trio.sleep_forever()

    async def active(request):
        asked.append("new")
        return {"error_code": 0, "is_caught_up": True, "is_fenced": False, "should_shut_down": False}

    async with trio.open_nursery() as nursery:
        old_port = await nursery.start(functools.partial(serve_kafka, cut_off, "127.0.0.1", 0))
        new_port = await nursery.start(functools.partial(serve_kafka, active, "127.0.0.1", 0))
        leader = [1]
        channel = ControllerChannel(KafkaClient(nursery), {1: PeerAddress("127.0.0.1", old_port),
                                                           2: PeerAddress("127.0.0.1", new_port)},
                                    lambda: leader[0])
        body = {"broker_id": 7, "broker_epoch": 3, "current_metadata_offset": 0,
                "want_fence": False, "want_shut_down": False}

        async def learn_of_the_new_controller():
            await trio.sleep(0.5)
            leader[0] = 2
            channel.on_leader_change()

        nursery.start_soon(learn_of_the_new_controller)
        started = trio.current_time()
        with trio.fail_after(5):  # the request's own timeout is 10 s
            response = await channel.request("BrokerHeartbeat", 1, body, timeout_s=10)
        elapsed = trio.current_time() - started
        nursery.cancel_scope.cancel()
    assert response["error_code"] == 0 and asked == ["old", "new"]
    assert 0.4 < elapsed < 2.0


async def test_an_answer_failing_every_item_with_not_controller_is_asked_again():
    """AlterClientQuotas (like CreateTopics) has no top-level error code: a controller that
    has just stopped being active fails each item with NOT_CONTROLLER, and the broker must
    ask the active one rather than hand that to the client."""
    from kraft.protocol.error_codes import ErrorCode

    entity = [{"entity_type": "client-id", "entity_name": "app"}]

    def answer(code):
        async def handler(request):
            return {"throttle_time_ms": 0, "entries": [
                {"error_code": int(code), "error_message": None, "entity": entity}]}
        return handler

    async with trio.open_nursery() as nursery:
        old_port = await nursery.start(functools.partial(serve_kafka, answer(ErrorCode.NOT_CONTROLLER),
                                                         "127.0.0.1", 0))
        new_port = await nursery.start(functools.partial(serve_kafka, answer(ErrorCode.NONE), "127.0.0.1", 0))
        leader = [1]
        channel = ControllerChannel(KafkaClient(nursery), {1: PeerAddress("127.0.0.1", old_port),
                                                           2: PeerAddress("127.0.0.1", new_port)},
                                    lambda: leader[0])

        async def learn_of_the_new_controller():
            await trio.sleep(0.5)
            leader[0] = 2
            channel.on_leader_change()

        nursery.start_soon(learn_of_the_new_controller)
        with trio.fail_after(5):
            response = await channel.request("AlterClientQuotas", 1, {"entries": [
                {"entity": entity, "ops": [{"key": "producer_byte_rate", "value": 1.0, "remove": False}]}],
                "validate_only": False}, timeout_s=10)
        nursery.cancel_scope.cancel()
    assert response["entries"][0]["error_code"] == 0
