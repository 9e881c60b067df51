"""The trio group coordinator service over an in-memory ``__consumer_offsets`` store: parked
responses, persistence before answers, loading, resignation, append failures, reload."""

from __future__ import annotations

from collections import defaultdict

import pytest
import trio
from test_group_helpers import check_response, offsets_of, wire

from broker.group.records import group_record, replay
from broker.group.service import GroupCoordinatorService
from kraft.records import build_batch, decode_batches

MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS, NOT_COORDINATOR, LOADING = 79, 27, 16, 14


class StoreError(Exception):
    def __init__(self, error_code):
        super().__init__(error_code)
        self.error_code = error_code


class MemStore:
    """``__consumer_offsets`` in memory: a list of committed batches per partition."""

    def __init__(self, leaders=range(3)):
        self.logs = defaultdict(list)
        self.leaders = set(leaders)
        self.fail_with = None
        self.read_gate: trio.Event | None = None

    def is_leader(self, partition):
        return partition in self.leaders

    async def append(self, partition, batch):
        await trio.sleep(0.001)  # replication takes a moment
        if self.fail_with is not None:
            raise StoreError(self.fail_with)
        assert decode_batches(batch)  # a well-formed v2 batch
        self.logs[partition].append(batch)

    async def read_all(self, partition):
        if self.read_gate is not None:
            await self.read_gate.wait()
        return list(self.logs[partition])

    def records(self, partition):
        return [(r.key, r.value) for data in self.logs[partition] for b in decode_batches(data) for r in b.records]


CONFIG = {"offsets.topic.num.partitions": 3, "group.initial.rebalance.delay.ms": 0,
          "group.min.session.timeout.ms": 10, "offsets.retention.minutes": 60}


async def call(service, api, version, **fields):
    response = await service.handle(api, version, wire(api, version, **fields), client_id="rdkafka")
    return check_response(api, version, response)


async def started(nursery, store, **kw):
    service = GroupCoordinatorService(1, CONFIG, store, clock=lambda: int(trio.current_time() * 1000), **kw)
    await nursery.start(service.run)
    for p in range(3):
        service.on_become_leader(p)
    while service.core.table.loading:
        await trio.sleep(0.01)
    return service


def join_fields(member_id="", session_ms=6000):
    return {"group_id": "g", "member_id": member_id, "session_timeout_ms": session_ms,
            "rebalance_timeout_ms": 10000, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"sub"}]}


async def test_two_members_rebalance_through_the_service(autojump_clock):
    store = MemStore()
    async with trio.open_nursery() as nursery:
        service = await started(nursery, store)
        first = await call(service, "JoinGroup", 7, **join_fields())
        assert first["error_code"] == MEMBER_ID_REQUIRED
        a = first["member_id"]
        ja = await call(service, "JoinGroup", 7, **join_fields(a))
        assert ja["generation_id"] == 1 and ja["leader"] == a and ja["protocol_type"] == "consumer"
        sa = await call(service, "SyncGroup", 5, group_id="g", generation_id=1, member_id=a,
                        protocol_type="consumer", protocol_name="range",
                        assignments=[{"member_id": a, "assignment": b"all"}])
        assert sa["assignment"] == b"all" and sa["protocol_name"] == "range"

        b_first = await call(service, "JoinGroup", 7, **join_fields())
        b = b_first["member_id"]
        results = {}

        def request(name, api, version, **fields):
            async def run():
                results[name] = await call(service, api, version, **fields)
            return run

        nursery.start_soon(request("jb", "JoinGroup", 7, **join_fields(b)))
        await trio.sleep(1)
        assert "jb" not in results  # parked until a rejoins
        hb = await call(service, "Heartbeat", 4, group_id="g", generation_id=1, member_id=a)
        assert hb["error_code"] == REBALANCE_IN_PROGRESS
        ja2 = await call(service, "JoinGroup", 7, **join_fields(a))
        await trio.sleep(0.1)
        assert ja2["generation_id"] == results["jb"]["generation_id"] == 2
        nursery.start_soon(request("sb", "SyncGroup", 5, group_id="g", generation_id=2, member_id=b))
        await trio.sleep(1)
        assert "sb" not in results
        await call(service, "SyncGroup", 5, group_id="g", generation_id=2, member_id=a,
                   assignments=[{"member_id": a, "assignment": b"A"}, {"member_id": b, "assignment": b"B"}])
        await trio.sleep(0.1)
        assert results["sb"]["assignment"] == b"B"

        # the log holds the group as the coordinator sees it
        part = service.partition_for("g")
        loaded = replay(store.records(part))
        assert loaded.groups["g"].generation == 2
        assert {m.member_id: m.assignment for m in loaded.groups["g"].members} == {a: b"A", b: b"B"}

        # b goes silent: its session expires through run()'s ticks and a is asked to rejoin
        for _ in range(8):
            await trio.sleep(1)
            await call(service, "Heartbeat", 4, group_id="g", generation_id=2, member_id=a)
        hb = await call(service, "Heartbeat", 4, group_id="g", generation_id=2, member_id=a)
        assert hb["error_code"] == REBALANCE_IN_PROGRESS
        assert b not in service.core.table.groups["g"].members
        nursery.cancel_scope.cancel()


async def test_offsets_survive_a_coordinator_move(autojump_clock):
    store = MemStore()
    async with trio.open_nursery() as nursery:
        service = await started(nursery, store)
        commit = await call(service, "OffsetCommit", 8, group_id="s", topics=[
            {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 17, "committed_leader_epoch": 2,
                                          "committed_metadata": "m"}]}])
        assert commit["topics"][0]["partitions"][0]["error_code"] == 0
        fetched = await call(service, "OffsetFetch", 7, group_id="s", topics=None)
        assert offsets_of(fetched) == {("t", 0): (17, "m")}
        part = service.partition_for("s")
        service.on_become_leader(part)  # a repeated notification changes nothing
        assert not service.core.table.loading and "s" in service.core.table.groups
        # leadership moves: the old coordinator answers NOT_COORDINATOR, a new one loads the log
        service.on_resign(part)
        gone = await call(service, "OffsetFetch", 7, group_id="s", topics=None)
        assert gone["error_code"] == NOT_COORDINATOR
        other = await started(nursery, store)
        fetched = await call(other, "OffsetFetch", 8, groups=[{"group_id": "s", "topics": None}])
        assert fetched["groups"][0]["topics"][0]["partitions"][0]["committed_offset"] == 17
        nursery.cancel_scope.cancel()


async def test_members_of_a_loaded_group_expire_on_time_with_no_request(autojump_clock):
    """A coordinator that takes over a group expires its silent members when their sessions
    end, though no request ever reaches it: an idle coordinator sleeps up to 10 s, so the
    load itself must wake it (its groups' members have sessions from then on)."""
    store = MemStore()
    async with trio.open_nursery() as nursery:
        first = await started(nursery, store)
        a = (await call(first, "JoinGroup", 7, **join_fields(session_ms=3000)))["member_id"]
        await call(first, "JoinGroup", 7, **join_fields(a, session_ms=3000))
        await call(first, "SyncGroup", 5, group_id="g", generation_id=1, member_id=a,
                   assignments=[{"member_id": a, "assignment": b"all"}])
        part = first.partition_for("g")
        second = GroupCoordinatorService(1, CONFIG, store, clock=lambda: int(trio.current_time() * 1000))
        await nursery.start(second.run)
        await trio.sleep(2)  # it has ticked, and found nothing to expire: it sleeps long now
        first.on_resign(part)
        second.on_become_leader(part)
        while second.core.table.loading:
            await trio.sleep(0.01)
        assert a in second.core.table.groups["g"].members  # restored, its session starting now
        await trio.sleep(4.5)  # the session (3 s) plus a tick or two
        assert a not in second.core.table.groups["g"].members
        assert not replay(store.records(part)).groups["g"].members  # and the log says so
        nursery.cancel_scope.cancel()


async def test_loading_answers_load_in_progress(autojump_clock):
    store = MemStore()
    store.logs[0].append(build_batch([group_record("x", None)]))
    store.read_gate = trio.Event()
    async with trio.open_nursery() as nursery:
        service = GroupCoordinatorService(1, CONFIG, store, clock=lambda: int(trio.current_time() * 1000))
        await nursery.start(service.run)
        service.on_become_leader(service.partition_for("g"))
        await trio.sleep(1)
        r = await call(service, "JoinGroup", 7, **join_fields())
        assert r["error_code"] == LOADING
        other = next(p for p in range(3) if p != service.partition_for("g"))
        assert service.core.coordinator_error("g") == LOADING and other not in service.core.table.owned
        store.read_gate.set()
        await trio.sleep(1)
        r = await call(service, "JoinGroup", 7, **join_fields())
        assert r["error_code"] == MEMBER_ID_REQUIRED
        # a broker that lost leadership says so even before the resign notification
        store.leaders.discard(service.partition_for("g"))
        r = await call(service, "JoinGroup", 7, **join_fields())
        assert r["error_code"] == NOT_COORDINATOR
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("store_error, expected", [(6, NOT_COORDINATOR), (19, 15), (10, 28)])
async def test_failed_appends_become_errors_and_change_nothing(autojump_clock, store_error, expected):
    store = MemStore()
    async with trio.open_nursery() as nursery:
        service = await started(nursery, store)
        store.fail_with = store_error
        commit = await call(service, "OffsetCommit", 8, group_id="s", topics=[
            {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}]}])
        assert commit["topics"][0]["partitions"][0]["error_code"] == expected
        fetched = await call(service, "OffsetFetch", 7, group_id="s",
                             topics=[{"name": "t", "partition_indexes": [0]}])
        assert offsets_of(fetched) == {("t", 0): (-1, "")}
        nursery.cancel_scope.cancel()


async def test_failed_assignment_write_sends_the_group_back_to_rebalance(autojump_clock):
    store = MemStore()
    async with trio.open_nursery() as nursery:
        service = await started(nursery, store)
        a = (await call(service, "JoinGroup", 7, **join_fields()))["member_id"]
        await call(service, "JoinGroup", 7, **join_fields(a))
        store.fail_with = 19
        sa = await call(service, "SyncGroup", 5, group_id="g", generation_id=1, member_id=a,
                        assignments=[{"member_id": a, "assignment": b"x"}])
        assert sa["error_code"] == 15
        hb = await call(service, "Heartbeat", 4, group_id="g", generation_id=1, member_id=a)
        assert hb["error_code"] == REBALANCE_IN_PROGRESS
        nursery.cancel_scope.cancel()


async def test_cancelled_waiter_is_forgotten(autojump_clock):
    store = MemStore()
    async with trio.open_nursery() as nursery:
        service = GroupCoordinatorService(1, {**CONFIG, "group.initial.rebalance.delay.ms": 3000}, store,
                                          clock=lambda: int(trio.current_time() * 1000))
        await nursery.start(service.run)
        for p in range(3):
            service.on_become_leader(p)
        await trio.sleep(0.5)
        a = (await call(service, "JoinGroup", 7, **join_fields()))["member_id"]
        with trio.move_on_after(1):
            await call(service, "JoinGroup", 7, **join_fields(a))
        assert not service._waiters
        await trio.sleep(5)  # the join completes with nobody waiting: no error
        nursery.cancel_scope.cancel()
