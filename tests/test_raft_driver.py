"""The Raft trio shell: three quorum members in one process over real loopback TCP,
each with its own disk directory and Kafka server."""

import functools

import trio

from broker.network import serve_kafka
from kraft.client import KafkaClient
from kraft.local_cluster import free_port
from kraft.raft.config import RaftConfig
from kraft.raft.disk import RaftStorage
from kraft.raft.driver import PeerAddress, RaftDriver

QUORUM_APIS = {"Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "Fetch", "FetchSnapshot"}


class Recorder:
    def __init__(self):
        self.records = []
        self.leaders = []

    def handle_load_snapshot(self, snapshot_id, records):
        self.records = list(records)

    def handle_commit(self, batch):
        if not batch.control:
            self.records.extend(batch.records)

    def handle_leader_change(self, leader):
        self.leaders.append(leader)


class Member:
    def __init__(self, node_id, ports, base):
        self.node_id = node_id
        self.ports = ports
        self.dir = base / f"node{node_id}"
        self.scope = None
        self.driver = None
        self.recorder = Recorder()

    async def run(self, task_status=trio.TASK_STATUS_IGNORED):
        voters = {i: PeerAddress("127.0.0.1", p) for i, p in self.ports.items()}
        config = RaftConfig(node_id=self.node_id, voters=frozenset(voters),
                            election_timeout_ms=300, fetch_timeout_ms=600, request_timeout_ms=600)
        with trio.CancelScope() as self.scope:
            async with trio.open_nursery() as nursery:
                client = KafkaClient(nursery)
                self.recorder = Recorder()
                self.driver = RaftDriver(config, RaftStorage(self.dir), client, voters, self.recorder)

                async def handler(req):
                    if req.api in QUORUM_APIS:
                        return await self.driver.handle(req.api, req.body)
                    raise AssertionError(req.api)

                await nursery.start(functools.partial(serve_kafka, handler, "127.0.0.1", self.ports[self.node_id]))
                await nursery.start(self.driver.run)
                task_status.started()
        self.driver.closed = True
        self.driver.storage.close()


async def wait_for(predicate, timeout=10.0):
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.02)


def leader_of(members):
    leaders = [m for m in members.values() if m.driver and not m.driver.closed and m.driver.is_leader]
    return leaders[0] if len(leaders) == 1 else None


async def test_three_voters_elect_replicate_and_survive_leader_loss(tmp_path):
    ports = {i: free_port() for i in (1, 2, 3)}
    members = {i: Member(i, ports, tmp_path) for i in ports}
    async with trio.open_nursery() as nursery:
        for m in members.values():
            await nursery.start(m.run)
        await wait_for(lambda: leader_of(members) is not None)
        leader = leader_of(members)
        offsets = [leader.driver.propose([f"r{i}".encode()])[0] for i in range(20)]
        await leader.driver.wait_committed(offsets[-1])
        want = [f"r{i}".encode() for i in range(20)]
        await wait_for(lambda: all(m.recorder.records == want for m in members.values()))

        # The leader dies; the others elect a new one that keeps committing.
        old = leader
        old.scope.cancel()
        await wait_for(lambda: (lambda l: l is not None and l is not old)(leader_of(members)))
        new = leader_of(members)
        assert new.driver.leader.epoch > old.driver.leader.epoch
        offset, _ = new.driver.propose([b"after"])
        await new.driver.wait_committed(offset)

        # The old leader restarts from its disk and catches up as a follower.
        await nursery.start(old.run)
        await wait_for(lambda: old.recorder.records == want + [b"after"])
        assert not old.driver.is_leader
        nursery.cancel_scope.cancel()


async def test_an_idle_driver_sleeps_until_its_next_deadline(tmp_path):
    """Between inputs the driver's loop waits for its core's next deadline: an elected,
    idle quorum leaves every task blocked.  (Its loop once re-armed its own wakeup on
    every pass and spun a whole core, starving the other threads of the process.)"""
    ports = {i: free_port() for i in (1, 2, 3)}
    members = {i: Member(i, ports, tmp_path) for i in ports}
    async with trio.open_nursery() as nursery:
        for m in members.values():
            await nursery.start(m.run)
        await wait_for(lambda: leader_of(members) is not None)
        ticks = 0
        for m in members.values():
            original = m.driver._tick

            def counting(original=original):
                nonlocal ticks
                ticks += 1
                original()

            m.driver._tick = counting
        await trio.sleep(1.0)
        # 3 nodes for a second: fetches and their answers, a few timers -- not thousands.
        assert ticks < 300, f"{ticks} driver passes in one idle second"
        nursery.cancel_scope.cancel()
