"""The broker's request handler before and after the broker is ready, in process: client
requests wait for readiness (ApiVersions does not), and Metadata names the answering broker as
the controller clients send admin requests to.  tests/test_startup_processes.py shows the same
with real processes and real clients."""

from __future__ import annotations

import uuid

import trio

from broker.api import BrokerApi
from broker.metadata_listener import MetadataListener
from broker_helpers import server_config
from kraft.protocol import rpc
from metadata.delta import apply_records
from metadata.image import EMPTY_IMAGE
from metadata.serde import make


def registered(bid: int, fenced: bool = False):
    return make("RegisterBrokerRecord", broker_id=bid, broker_epoch=bid, incarnation_id=uuid.UUID(int=bid),
                fenced=fenced, end_points=[{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9090 + bid,
                                            "security_protocol": 0}])


def request(api: str, version: int, body: dict) -> rpc.Request:
    return rpc.Request(rpc.RequestHeader(rpc.API_KEYS[api], version, 7, "test"), api, body)


METADATA = request("Metadata", 12, {"topics": None, "allow_auto_topic_creation": False})


def broker_api(tmp_path, nursery, node_id: int, ready=None) -> BrokerApi:
    metadata = MetadataListener()
    metadata.image = apply_records(EMPTY_IMAGE, [registered(1), registered(2), registered(3, fenced=True)], 3)
    return BrokerApi(server_config(tmp_path, node_id=node_id), "cluster", metadata, data_path=None,
                     channel=None, nursery=nursery, ready=ready)


def test_requests_wait_until_ready_but_api_versions_does_not(tmp_path):
    async def main():
        async with trio.open_nursery() as nursery:
            ready = trio.Event()
            api = broker_api(tmp_path, nursery, node_id=2, ready=ready)
            with trio.fail_after(1):
                versions = await api.handle(request("ApiVersions", 3, {}))
            assert versions["error_code"] == 0 and versions["api_keys"]
            answers = []

            async def ask():
                answers.append(await api.handle(METADATA))

            nursery.start_soon(ask)
            await trio.sleep(5)  # trio's clock is virtual under autojump: no real wait
            assert answers == []
            ready.set()
            await trio.sleep(0)
            with trio.fail_after(1):
                while not answers:
                    await trio.sleep(0.01)
            assert sorted(b["node_id"] for b in answers[0]["brokers"]) == [1, 2]

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_a_request_held_past_its_timeout_is_answered_from_the_state_at_hand(tmp_path):
    async def main():
        async with trio.open_nursery() as nursery:
            api = broker_api(tmp_path, nursery, node_id=2, ready=trio.Event())
            start = trio.current_time()
            answer = await api.handle(METADATA)
            assert 29 <= trio.current_time() - start <= 31  # no timeout_ms in Metadata: 30 s
            assert answer["brokers"]

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_metadata_names_the_answering_broker_as_controller(tmp_path):
    async def main():
        async with trio.open_nursery() as nursery:
            # Broker 2 names itself, not broker 1: kafka-python sends its create_topics to the
            # named controller through the broker list of an earlier Metadata, which may not
            # hold a broker that became live since.
            assert (await broker_api(tmp_path, nursery, node_id=2).handle(METADATA))["controller_id"] == 2
            # A broker that is not live itself names a live one.
            assert (await broker_api(tmp_path, nursery, node_id=3).handle(METADATA))["controller_id"] == 1

    trio.run(main)


def test_a_metadata_answer_over_many_partitions_gives_the_event_loop_back(tmp_path, monkeypatch):
    """Answering for 100,000 partitions that all changed held a node's loop 2.5 s, past the
    quorum's fetch timeout (issue 19): the answer is built a step at a time."""
    from broker import api as broker_api_module

    monkeypatch.setattr(broker_api_module, "METADATA_STEP", 1000)

    async def main():
        async with trio.open_nursery() as nursery:
            api = broker_api(tmp_path, nursery, node_id=1)
            records = []
            for t in range(5):
                topic_id = uuid.UUID(int=100 + t)
                records.append(make("TopicRecord", name=f"t{t}", topic_id=topic_id))
                records += [make("PartitionRecord", partition_id=i, topic_id=topic_id, replicas=[1, 2],
                                 isr=[1, 2], leader=1) for i in range(1000)]
            api.metadata.image = apply_records(api.metadata.image, records, 10)
            turns = 0

            async def other_task():
                nonlocal turns
                while True:
                    turns += 1
                    await trio.sleep(0)

            nursery.start_soon(other_task)
            await trio.sleep(0)
            before = turns
            answer = await api.handle(METADATA)
            assert sum(len(t["partitions"]) for t in answer["topics"]) == 5000
            # Four steps give the loop back.  trio runs the two tasks of a batch in either
            # order, so at least three of the other task's turns fall between them (none
            # when the answer is built in one go).
            assert turns - before >= 3
            nursery.cancel_scope.cancel()

    trio.run(main)
