"""controller.quorum.engine=pysyncobj: three engines in one process on loopback, each with
its own metadata directory, PySyncObj port and Kafka server; a RaftDriver observer (as a
broker runs) follows the committed log over Fetch."""

import functools
import itertools
import logging

import pytest
import trio

from broker.network import serve_kafka
from kraft.client import KafkaClient
from kraft.local_cluster import free_port
from kraft.raft.config import RaftConfig
from kraft.raft.disk import RaftStorage
from kraft.raft.driver import PeerAddress, RaftDriver
from kraft.raft.engine import QuorumEngine
from kraft.raft.node import NotLeaderError
from kraft.raft.pysyncobj_engine import PasswordRequiredError, PySyncObjEngine

VOTERS = (1, 2, 3)
PASSWORD = "test-quorum-secret"


class Recorder:
    def __init__(self):
        self.batches = []
        self.leaders = []
        self.snapshot = None

    def handle_load_snapshot(self, snapshot_id, records):
        self.snapshot = (snapshot_id, list(records))
        self.batches = []

    def handle_commit(self, batch):
        self.batches.append((batch.base_offset, batch.epoch, tuple(batch.records), batch.control))

    def handle_leader_change(self, leader):
        self.leaders.append(leader)

    def data(self):
        return [b for b in self.batches if not b[3]]


def raft_config(node_id):
    return RaftConfig(node_id=node_id, voters=frozenset(VOTERS), election_timeout_ms=500,
                      fetch_timeout_ms=1000, request_timeout_ms=1000)


class Member:
    def __init__(self, node_id, kafka_ports, raft_ports, base):
        self.node_id = node_id
        self.kafka_ports = kafka_ports
        self.raft_ports = raft_ports
        self.dir = base / f"node{node_id}"
        self.scope = None
        self.engine = None
        self.recorder = Recorder()

    async def run(self, task_status=trio.TASK_STATUS_IGNORED):
        voters = {i: PeerAddress("127.0.0.1", p) for i, p in self.kafka_ports.items()}
        raft = {i: PeerAddress("127.0.0.1", p) for i, p in self.raft_ports.items()}
        self.recorder = Recorder()
        self.engine = PySyncObjEngine(raft_config(self.node_id), RaftStorage(self.dir), voters,
                                      self.recorder, password=PASSWORD, raft_addresses=raft)
        with trio.CancelScope() as self.scope:
            async with trio.open_nursery() as nursery:
                async def handler(req):
                    return await self.engine.handle(req.api, req.body)

                await nursery.start(functools.partial(
                    serve_kafka, handler, "127.0.0.1", self.kafka_ports[self.node_id]))
                await nursery.start(self.engine.run)
                task_status.started()

    @property
    def alive(self):
        return self.engine is not None and not self.engine.closed


class Observer:
    def __init__(self, kafka_ports, base, node_id=100):
        self.kafka_ports = kafka_ports
        self.node_id = node_id
        self.dir = base / f"observer{node_id}"
        self.recorder = Recorder()
        self.driver = None

    async def run(self, task_status=trio.TASK_STATUS_IGNORED):
        voters = {i: PeerAddress("127.0.0.1", p) for i, p in self.kafka_ports.items()}
        config = RaftConfig(node_id=self.node_id, voters=frozenset(VOTERS), election_timeout_ms=300,
                            fetch_timeout_ms=600, request_timeout_ms=600)
        async with trio.open_nursery() as nursery:
            self.driver = RaftDriver(config, RaftStorage(self.dir), KafkaClient(nursery), voters,
                                     self.recorder)
            await nursery.start(self.driver.run)
            task_status.started()


async def wait_for(predicate, timeout=15.0):
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.02)


def follows(observer, reference):
    """The observer holds the reference's log (its snapshot standing for a prefix)."""
    if observer.snapshot is None:
        return observer.batches == reference.batches
    end = observer.snapshot[0].offset
    prefix = [r for b in reference.batches if not b[3] and b[0] < end for r in b[2]]
    return (observer.snapshot[1] == prefix
            and observer.batches == [b for b in reference.batches if b[0] >= end])


def leader_of(members):
    leaders = [m for m in members.values() if m.alive and m.engine.is_leader]
    return leaders[0] if len(leaders) == 1 else None


async def propose_and_commit(member, n, tag):
    """Propose n single-batch proposals; check the offsets are the predicted ones."""
    engine = member.engine
    last = None
    for i in range(n):
        records = [f"{tag}-{i}-a".encode(), f"{tag}-{i}-b".encode()]
        predicted = engine.node.log.end_offset
        last, epoch = engine.propose(records)
        assert last == predicted + len(records) - 1
        assert epoch == engine.leader.epoch
        assert engine.node.log.end_offset == last + 1
    with trio.fail_after(10):
        await engine.wait_committed(last)
    return last


async def test_three_engines_replicate_and_an_observer_follows(tmp_path):
    kafka_ports = {i: free_port() for i in VOTERS}
    raft_ports = {i: free_port() for i in VOTERS}
    members = {i: Member(i, kafka_ports, raft_ports, tmp_path) for i in VOTERS}
    observer = Observer(kafka_ports, tmp_path)
    async with trio.open_nursery() as nursery:
        for m in members.values():
            await nursery.start(m.run)
        assert isinstance(members[1].engine, QuorumEngine)
        await nursery.start(observer.run)
        assert isinstance(observer.driver, QuorumEngine)  # both engines offer the interface

        await wait_for(lambda: leader_of(members) is not None)
        leader = leader_of(members)
        followers = [m for m in members.values() if m is not leader]
        with pytest.raises(NotLeaderError):
            followers[0].engine.propose([b"x"])
        # The new leader's LeaderChange batch is applied before it reports itself leader.
        assert leader.recorder.batches and leader.recorder.batches[-1][3]
        assert leader.engine.node.log.end_offset == leader.engine.committed_offset

        last = await propose_and_commit(leader, 20, "first")
        await wait_for(lambda: all(m.engine.committed_offset > last for m in members.values()))
        reference = leader.recorder.batches
        assert len(leader.recorder.data()) == 20
        for m in members.values():
            assert m.recorder.batches == reference
        offsets = [b[0] for b in reference]
        assert offsets == sorted(offsets) and offsets[0] == 0
        for a, b in itertools.pairwise(reference):
            assert b[0] == a[0] + len(a[2])  # contiguous
        for m in followers:
            assert m.recorder.leaders[-1].leader_id == leader.node_id
        assert leader.engine.describe_quorum()["topics"][0]["partitions"][0]["leader_id"] == leader.node_id

        # The broker-side observer follows the committed log over Fetch.
        await wait_for(lambda: observer.recorder.batches == reference)
        assert observer.driver.leader.leader_id == leader.node_id
        quorum = leader.engine.describe_quorum()["topics"][0]["partitions"][0]
        assert [o["replica_id"] for o in quorum["observers"]] == [100]

        # Kill the leader: the other two elect a new one and commits continue.
        old_epoch = leader.engine.leader.epoch
        leader.scope.cancel()
        await wait_for(lambda: not leader.alive)
        survivors = {i: m for i, m in members.items() if m is not leader}
        await wait_for(lambda: leader_of(survivors) is not None)
        new_leader = leader_of(survivors)
        assert new_leader.engine.leader.epoch > old_epoch
        last = await propose_and_commit(new_leader, 10, "second")
        await wait_for(lambda: all(m.engine.committed_offset > last for m in survivors.values()))
        reference = new_leader.recorder.batches
        for m in survivors.values():
            assert m.recorder.batches == reference
        assert reference[:len(leader.recorder.batches)] == leader.recorder.batches
        assert len(new_leader.recorder.data()) == 30
        epochs = [b[1] for b in reference]
        assert epochs == sorted(epochs) and epochs[-1] > old_epoch
        await wait_for(lambda: observer.recorder.batches == reference)

        # Quorum APIs other than Fetch get an error.
        response = await new_leader.engine.handle("Vote", {"topics": []})
        assert response["error_code"] != 0

        # The committed log is on disk: a restarted member replays it, then catches up.
        restarted = Member(leader.node_id, kafka_ports, raft_ports, tmp_path)
        members[leader.node_id] = restarted
        await nursery.start(restarted.run)
        assert restarted.recorder.batches == leader.recorder.batches  # replayed from its storage
        last = await propose_and_commit(new_leader, 5, "third")
        await wait_for(lambda: restarted.engine.committed_offset > last)
        assert restarted.recorder.batches == new_leader.recorder.batches

        # A snapshot on the leader: a fresh observer installs it (FetchSnapshot), then follows.
        engine = new_leader.engine
        end = engine.committed_offset
        records = [r for b in new_leader.recorder.data() for r in b[2]]
        engine.create_snapshot(end, records)
        late = Observer(kafka_ports, tmp_path, node_id=101)
        await nursery.start(late.run)
        last = await propose_and_commit(new_leader, 3, "fourth")
        await wait_for(lambda: late.driver.committed_offset > last)
        assert late.recorder.snapshot[0].offset == end
        assert late.recorder.snapshot[1] == records
        assert late.recorder.batches == [b for b in new_leader.recorder.batches if b[0] >= end]
        # (the first observer too, by snapshot if it was behind when the log was trimmed)
        await wait_for(lambda: follows(observer.recorder, new_leader.recorder))

        # resign() hands leadership to another controller, in a higher epoch.
        epoch = engine.leader.epoch
        engine.resign()
        assert not engine.is_leader
        await wait_for(lambda: (leader_of(members) is not None and leader_of(members) is not new_leader))
        successor = leader_of(members)
        assert successor.engine.leader.epoch > epoch
        last = await propose_and_commit(successor, 3, "fifth")
        await wait_for(lambda: all(m.engine.committed_offset > last for m in members.values()))
        for m in members.values():
            assert m.recorder.batches == successor.recorder.batches

        for m in members.values():
            if m.alive:
                await m.engine.shutdown()
        nursery.cancel_scope.cancel()


def test_missing_password_refuses_to_start(tmp_path):
    voters = {i: PeerAddress("127.0.0.1", 9000 + i) for i in VOTERS}
    for password in (None, ""):
        with pytest.raises(PasswordRequiredError, match="controller.quorum.pysyncobj.password"):
            PySyncObjEngine(raft_config(1), RaftStorage(tmp_path / "n1"), voters, Recorder(),
                            password=password)


def test_brokers_are_not_engines(tmp_path):
    voters = {i: PeerAddress("127.0.0.1", 9000 + i) for i in VOTERS}
    config = RaftConfig(node_id=7, voters=frozenset(VOTERS))
    with pytest.raises(ValueError, match="not a voter"):
        PySyncObjEngine(config, RaftStorage(tmp_path / "n7"), voters, Recorder(), password=PASSWORD)


async def test_a_follower_behind_pysyncobj_compaction_catches_up_from_the_dump(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="kraft.raft.pysyncobj_engine")
    kafka_ports = {i: free_port() for i in VOTERS}
    raft_ports = {i: free_port() for i in VOTERS}
    members = {i: Member(i, kafka_ports, raft_ports, tmp_path) for i in VOTERS}
    async with trio.open_nursery() as nursery:
        for m in members.values():
            await nursery.start(m.run)
        await wait_for(lambda: leader_of(members) is not None)
        leader = leader_of(members)
        await propose_and_commit(leader, 5, "before")
        follower = next(m for m in members.values() if m is not leader)
        await wait_for(lambda: follower.engine.committed_offset == leader.engine.committed_offset)
        follower.scope.cancel()
        await wait_for(lambda: not follower.alive)
        await trio.sleep(0.2)
        await propose_and_commit(leader, 5, "while-down")
        # PySyncObj compacts its journal into a dump: the follower's next entries are gone.
        leader.engine._so.forceLogCompaction()
        await wait_for(lambda: leader.engine._so.getStatus()["log_len"] <= 3)
        restarted = Member(follower.node_id, kafka_ports, raft_ports, tmp_path)
        members[follower.node_id] = restarted
        await nursery.start(restarted.run)
        if not leader.engine.is_leader:  # a restart may have cost the leader its term
            await wait_for(lambda: leader_of(members) is not None)
            leader = leader_of(members)
        last = await propose_and_commit(leader, 2, "after")
        await wait_for(lambda: restarted.engine.committed_offset > last)
        assert restarted.recorder.batches == leader.recorder.batches
        assert f"node {follower.node_id}: pysyncobj installed a state dump" in caplog.text
        for m in members.values():
            if m.alive:
                await m.engine.shutdown()
        nursery.cancel_scope.cancel()


async def test_controller_server_runs_on_the_engine(tmp_path, caplog):
    """The wiring cli/node.py uses: ControllerServer as the listener, ``driver`` = the engine.
    The active controller appends NoOpRecords at the offsets it predicted."""
    from metadata.controller import ControllerConfig, QuorumController
    from metadata.controller_server import ControllerServer

    caplog.set_level(logging.WARNING)
    kafka_ports = {i: free_port() for i in VOTERS}
    raft_ports = {i: free_port() for i in VOTERS}
    servers, engines, scopes = {}, {}, {}

    async def run(node_id, task_status=trio.TASK_STATUS_IGNORED):
        server = ControllerServer(node_id, QuorumController(ControllerConfig(
            node_id=node_id, cluster_id="pysyncobj-test", max_idle_interval_ms=100)))
        engine = PySyncObjEngine(
            raft_config(node_id), RaftStorage(tmp_path / f"c{node_id}"),
            {i: PeerAddress("127.0.0.1", p) for i, p in kafka_ports.items()}, server,
            password=PASSWORD, raft_addresses={i: PeerAddress("127.0.0.1", p) for i, p in raft_ports.items()})
        server.driver = engine
        servers[node_id], engines[node_id] = server, engine
        with trio.CancelScope() as scopes[node_id]:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(server.run)
                await nursery.start(engine.run)
                task_status.started()

    def active():
        found = [i for i, s in servers.items() if not engines[i].closed and s.controller.is_active]
        return found[0] if len(found) == 1 else None

    async with trio.open_nursery() as nursery:
        for i in VOTERS:
            await nursery.start(run, i)
        await wait_for(lambda: active() is not None)
        first = active()
        start = engines[first].committed_offset
        await wait_for(lambda: engines[first].committed_offset > start + 3)  # NoOpRecords commit
        scopes[first].cancel()
        await wait_for(lambda: active() not in (None, first))
        second = active()
        start = engines[second].committed_offset
        await wait_for(lambda: engines[second].committed_offset > start + 3)
        assert "expected" not in caplog.text  # "records landed at X, expected Y"
        nursery.cancel_scope.cancel()
