"""Deterministic simulation of a controller quorum, driven by one 64-bit seed.

The seed chooses the cluster (1-5 voters, 0-5 observers), network behaviour (drops, delays,
duplicates, hence reordering), the workload (proposals at random times to whoever leads)
and the faults (symmetric, asymmetric and one-node partitions, crashes that lose every
unsynced write, crashes aimed at the window between a write -- any write, or one carrying
a vote or epoch -- and its fsync, graceful shutdowns, quick and slow restarts, loss of a
node's whole disk).  In some runs a request to a stopped node is refused (always, or half
the time), and its sender's core is told the peer is gone, as the driver tells it
(``RaftNode.peer_gone``); there now and then a live peer is reported gone as well.  Everything runs from one event queue
ordered by (time, sequence), calling the sans-IO cores directly, so a seed replays exactly.

A run has a fault phase, then a healed phase (partitions removed, drops stopped, every node
restarted) that must converge within a budget: a leader commits a new marker entry and
every node, observers included, applies it.

Invariants are checked after every event (see ``Simulation._check_*``); the cores' own
assertions (:class:`RaftInvariantError`) are part of the oracle.  A violation raises
:class:`SimulationFailure` carrying the seed and a readable event trace.

Disk loss: a voter that lost its disk forgot its votes and its log, so it must not vote
or count towards commits as if it had not (KIP-853 gives such a replica a new directory
id).  The simulator restarts it with ``RaftConfig(observer_only=True)``: it replicates as an
observer.  Safety then still holds for any number of lost disks (a voting majority consists
of nodes that kept their disks and intersects every commit majority); the "majority holds
every committed entry" invariant counts each lost disk as a holder it can no longer check,
and the simulator loses at most (voters - 1) // 2 disks per run so the healed phase keeps a
quorum and must stay live.

CLI::

    python -m kraft.raft.sim --seeds 100000 --jobs 2     # many seeds, prints failing seeds
    python -m kraft.raft.sim --seed 42 --trace           # replay one seed with its trace
"""

from __future__ import annotations

import heapq
import sys
from dataclasses import dataclass, replace
from random import Random

from kraft import seeds as seeds_runner
from kraft.raft.config import RaftConfig
from kraft.raft.messages import Batch, Envelope, HardState, Snapshot
from kraft.raft.node import (NotLeaderError, PlainVotersCodec, RaftInvariantError, RaftNode,
                             Ready, Role)
from kraft.raft.voters import VoterChangeError

MASK64 = (1 << 64) - 1
# Requests to a live peer that its sender is told failed as if the peer were gone.
SPURIOUS_GONE = 0.002


class SimulationFailure(AssertionError):
    def __init__(self, seed: int, message: str, trace: list[str]) -> None:
        tail = "\n".join(trace[-60:])
        super().__init__(f"seed {seed}: {message}\n--- last events ---\n{tail}\n"
                         f"replay: python -m kraft.raft.sim --seed {seed} --trace")
        self.seed = seed
        self.reason = message
        self.trace = trace


# ====================================================================== disk


class Disk:
    """What a node wrote; only what was fsynced survives a crash."""

    def __init__(self) -> None:
        self.hard_state: HardState | None = None
        self.snapshot: Snapshot | None = None
        self.batches: list[Batch] = []
        self.pending: list[Ready] = []

    def write(self, rd: Ready) -> None:
        if rd.must_sync:
            self.pending.append(rd)

    def sync(self) -> None:
        for rd in self.pending:
            self._apply(rd)
        self.pending.clear()

    def crash(self) -> None:
        self.pending.clear()

    def _apply(self, rd: Ready) -> None:
        if rd.hard_state is not None:
            if self.hard_state is not None and rd.hard_state.epoch < self.hard_state.epoch:
                raise RaftInvariantError(f"persisted epoch went back {self.hard_state.epoch}"
                                         f" -> {rd.hard_state.epoch}")
            self.hard_state = rd.hard_state
        if rd.snapshot is not None:
            end = rd.snapshot.end_offset
            self.snapshot = rd.snapshot
            self.batches = [b if b.base_offset >= end else _suffix(b, end)
                            for b in self.batches if b.end_offset > end]
        if rd.truncate_to is not None:
            keep = []
            for b in self.batches:
                if b.end_offset <= rd.truncate_to:
                    keep.append(b)
                elif b.base_offset < rd.truncate_to:
                    keep.append(Batch(b.base_offset, b.epoch,
                                      b.records[:rd.truncate_to - b.base_offset], b.control))
            self.batches = keep
        for b in rd.entries:
            if b.base_offset != self.end_offset:
                raise RaftInvariantError(f"disk append at {b.base_offset}, end {self.end_offset}")
            self.batches.append(b)
        start = self.snapshot.end_offset if self.snapshot else 0
        if self.batches and self.batches[0].base_offset > start:
            raise RaftInvariantError(f"log starts at {self.batches[0].base_offset} after the"
                                     f" earliest snapshot ends at {start}")

    @property
    def start_offset(self) -> int:
        return self.snapshot.end_offset if self.snapshot else 0

    @property
    def end_offset(self) -> int:
        return self.batches[-1].end_offset if self.batches else self.start_offset

    def holds(self, offset: int, epoch: int | None) -> bool:
        """Whether the durable state covers ``offset`` (with ``epoch`` when given)."""
        if offset < self.start_offset:
            return True
        if offset >= self.end_offset:
            return False
        for batch in reversed(self.batches):  # the offsets asked about are near the end
            if batch.base_offset <= offset:
                return epoch is None or batch.epoch == epoch
        return False


def _suffix(b: Batch, offset: int) -> Batch:
    return Batch(offset, b.epoch, b.records[offset - b.base_offset:], b.control)


# ====================================================================== parameters


@dataclass(frozen=True)
class Params:
    voters: int
    observers: int
    drop: float
    duplicate: float
    delay_min_ms: int
    delay_max_ms: int
    fsync_max_ms: int
    propose_every_ms: int
    fault_every_ms: int
    fault_phase_ms: int
    heal_budget_ms: int
    snapshot_every: int  # records between snapshots; 0 disables
    snapshot_chunk: int
    lose_disks: bool
    membership: bool  # the leader adds and removes voters (KIP-853) during the fault phase
    # how often a request to a stopped node is refused and its sender told the peer is
    # gone (0: never, the node is only silent, as behind a partition)
    refused: float

    @staticmethod
    def from_rng(rng: Random) -> "Params":
        voters = rng.choice([1, 2, 3, 3, 3, 4, 5, 5])
        observers = rng.choice([0, 0, 0, 1, 1, 2, 3, 5])
        membership = voters + observers >= 2 and rng.random() < 0.4
        return Params(
            voters=voters,
            observers=observers,
            drop=rng.choice([0.0, 0.01, 0.05, 0.1]),
            duplicate=rng.choice([0.0, 0.0, 0.02, 0.05]),
            delay_min_ms=rng.randint(1, 5),
            delay_max_ms=rng.choice([5, 20, 50, 200]),
            fsync_max_ms=rng.choice([1, 5, 20]),
            propose_every_ms=rng.choice([100, 300, 800]),
            fault_every_ms=rng.choice([300, 1000, 3000]),
            fault_phase_ms=rng.choice([4000, 8000, 12000]),
            heal_budget_ms=30000,
            snapshot_every=rng.choice([0, 25, 100]),
            snapshot_chunk=rng.choice([512, 4096, 1 << 16]),
            # A lost disk stays in the voter set as a member that never counts; removals
            # could leave it a majority, so a run has one fault or the other.
            lose_disks=voters >= 3 and not membership and rng.random() < 0.3,
            membership=membership,
            refused=rng.choice([0.0, 0.5, 1.0]),
        )


class SimVotersCodec(PlainVotersCodec):
    """The simulator's snapshots are records joined by NUL; the newest ``voters=`` one is
    the voter set the snapshot carries."""

    @staticmethod
    def snapshot_voters(data: bytes) -> bytes | None:
        found = [r for r in data.split(b"\x00") if r.startswith(b"voters=")]
        return found[-1] if found else None


# ====================================================================== nodes


class SimNode:
    def __init__(self, sim: "Simulation", node_id: int, config: RaftConfig) -> None:
        self.sim = sim
        self.id = node_id
        self.config = config
        self.disk = Disk()
        self.incarnation = 0
        self.up = False
        self.busy: Ready | None = None
        self.timer_at = float("inf")
        self.crash_on_write: str | None = None  # "any" or "hard_state": crash before fsync
        self.lost_disk = False
        self.records: list[bytes] = []  # the state machine: every committed record
        self.core: RaftNode | None = None
        self.log_shape: tuple = ()

    def start(self) -> None:
        d = self.disk
        self.incarnation += 1
        self.up = True
        self.busy = None
        self.timer_at = float("inf")
        self.crash_on_write = None
        self.records = []
        rng = Random(self.sim.rng.getrandbits(64))
        self.core = RaftNode(self.config, rng, now_ms=self.sim.now, hard_state=d.hard_state,
                             snapshot=d.snapshot, batches=d.batches,
                             voters_codec=SimVotersCodec)

    def stop(self) -> None:
        self.up = False
        self.incarnation += 1
        self.busy = None


# ====================================================================== simulation


class Simulation:
    def __init__(self, seed: int, config_overrides: dict | None = None,
                 record_trace: bool = True) -> None:
        self.seed = seed & MASK64
        self.rng = Random(self.seed)
        self.p = Params.from_rng(self.rng)
        self.now = 0.0
        self._queue: list = []
        self._seq = 0
        self.trace: list[str] = []
        self.record_trace = record_trace
        self.events = 0
        voters = frozenset(range(1, self.p.voters + 1))
        ids = list(range(1, self.p.voters + self.p.observers + 1))
        self.voter_ids = sorted(voters)
        self.nodes: dict[int, SimNode] = {}
        for i in ids:
            cfg = RaftConfig(i, voters, fetch_snapshot_max_bytes=self.p.snapshot_chunk,
                             **(config_overrides or {}))
            self.nodes[i] = SimNode(self, i, cfg)
        self.blocked: set[tuple[int, int]] = set()
        self.healed = False
        self.drop = self.p.drop
        self.leaders: dict[int, int] = {}  # epoch -> leader id
        self.truth: list[bytes] = []  # committed records by offset
        self.truth_epoch: dict[int, int] = {}  # epoch of the last committed entry we know
        self.registry: dict[tuple[int, int], tuple[bytes, ...]] = {}  # (base, epoch) -> records
        self.lost_disks = 0
        self.proposals = 0
        self.marker: bytes | None = None
        self.converged_at: float | None = None

    # ------------------------------------------------------------------ event queue

    def _at(self, t: float, kind: str, *args) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (t, self._seq, kind, args))

    def log(self, text: str) -> None:
        if self.record_trace:
            self.trace.append(f"{self.now:9.1f}ms {text}")

    def fail(self, message: str) -> None:
        raise SimulationFailure(self.seed, message, self.trace)

    # ------------------------------------------------------------------ running

    def run(self) -> "Simulation":
        p = self.p
        self.log(f"params {p}")
        for node in self.nodes.values():
            node.start()
            self._schedule_timer(node)
        self._at(self.rng.uniform(0, p.propose_every_ms), "propose")
        self._at(self.rng.expovariate(1 / p.fault_every_ms), "fault")
        self._at(p.fault_phase_ms, "heal")
        deadline = p.fault_phase_ms + p.heal_budget_ms
        try:
            while self._queue:
                t, _, kind, args = heapq.heappop(self._queue)
                if t > deadline:
                    break
                self.now = t
                self.events += 1
                getattr(self, "_ev_" + kind)(*args)
                self._check_global()
                if self.converged_at is not None:
                    return self
        except RaftInvariantError as exc:
            self.fail(f"core invariant: {exc}")
        except SimulationFailure:
            raise
        except Exception as exc:  # a crash of the core (or the simulator) fails the seed
            self.fail(f"crashed: {seeds_runner.crash_text(exc)}")
        self.fail(f"no convergence {p.heal_budget_ms} ms after healing: "
                  + self._describe())
        return self

    def _describe(self) -> str:
        parts = []
        for n in self.nodes.values():
            if n.up:
                c = n.core
                parts.append(f"n{n.id}:{c.role.value}/e{c.epoch}/leo{c.log.end_offset}"
                             f"/hw{c.high_watermark}/applied{len(n.records)}")
            else:
                parts.append(f"n{n.id}:down")
        return " ".join(parts) + f" truth={len(self.truth)}"

    # ------------------------------------------------------------------ node plumbing

    def _pump(self, node: SimNode) -> None:
        """Hand the node's Ready batches to its disk, network and state machine."""
        core = node.core
        while node.up and node.busy is None and core.has_ready():
            rd = core.ready()
            node.disk.write(rd)
            for entry in rd.entries:
                self._register(node, entry)
            for env in rd.messages:
                self._send(env)
            if rd.must_sync and (node.crash_on_write == "any" or (
                    node.crash_on_write == "hard_state" and rd.hard_state is not None)):
                self.log(f"n{node.id} crashes before fsync")
                self._crash(node)
                return
            if rd.must_sync:
                node.busy = rd
                self._at(self.now + self.rng.uniform(0.1, self.p.fsync_max_ms), "fsync",
                         node.id, node.incarnation)
                break
            self._finish(node, rd)
        self._schedule_timer(node)

    def _finish(self, node: SimNode, rd: Ready) -> None:
        for env in rd.messages_after_persist:
            self._send(env)
        if rd.load_snapshot is not None:
            self._load_snapshot(node, rd.load_snapshot)
        for batch in rd.committed:
            self._apply(node, batch)
        if rd.leader_change is not None:
            self.log(f"n{node.id} leader change {rd.leader_change}")
        node.core.advance(rd)
        self._maybe_snapshot(node)

    def _schedule_timer(self, node: SimNode) -> None:
        if not node.up:
            return
        t = node.core.next_deadline_ms()
        if t < node.timer_at:
            node.timer_at = t
            self._at(max(t, self.now), "timer", node.id, node.incarnation)

    def _touch(self, node: SimNode) -> None:
        role_before = node.core.role
        self._pump(node)
        if node.up:
            self._check_node(node, role_before)

    # ------------------------------------------------------------------ events

    def _ev_timer(self, node_id: int, incarnation: int) -> None:
        node = self.nodes[node_id]
        if not node.up or incarnation != node.incarnation or self.now < node.timer_at:
            return
        node.timer_at = float("inf")
        node.core.tick(self.now)
        self._touch(node)

    def _ev_fsync(self, node_id: int, incarnation: int) -> None:
        node = self.nodes[node_id]
        if not node.up or incarnation != node.incarnation or node.busy is None:
            return
        node.disk.sync()
        rd, node.busy = node.busy, None
        if self.record_trace:
            self.log(f"n{node.id} fsync hs={rd.hard_state} leo={rd.log_end_offset}")
        self._finish(node, rd)
        self._touch(node)

    def _send(self, env: Envelope) -> None:
        if self.rng.random() < self.drop or (env.src, env.dst) in self.blocked:
            if self.record_trace:
                self.log(f"drop {_fmt(env)}")
            return  # lost, or cut off: the sender learns nothing but a timeout
        dst = self.nodes.get(env.dst)
        if env.is_request and dst is not None and self.p.refused and (
                not dst.up and self.rng.random() < self.p.refused
                or self.rng.random() < SPURIOUS_GONE):
            # Nothing listens at a stopped node's address: the driver's connection is
            # refused and it reports the peer gone (``RaftNode.peer_gone``).  Now and then a
            # live peer is reported gone too (a connection reset by a quick restart):
            # pre-vote must keep that from disrupting a leader that is alive.
            sender = self.nodes[env.src]
            self._at(self.now + self.rng.uniform(0.1, 2), "gone", env.src, sender.incarnation,
                     env.dst)
            if not dst.up:
                return
        copies = 2 if self.rng.random() < self.p.duplicate else 1
        for _ in range(copies):
            delay = self.rng.uniform(self.p.delay_min_ms, self.p.delay_max_ms)
            self._at(self.now + delay, "deliver", env)

    def _ev_deliver(self, env: Envelope) -> None:
        node = self.nodes[env.dst]
        if not node.up or (env.src, env.dst) in self.blocked:
            return
        if self.record_trace:
            self.log(f"deliver {_fmt(env)}")
        node.core.tick(self.now)
        node.core.step(env)
        self._touch(node)

    def _ev_gone(self, node_id: int, incarnation: int, peer: int) -> None:
        node = self.nodes[node_id]
        if not node.up or incarnation != node.incarnation:
            return
        if self.record_trace:
            self.log(f"n{node.id} peer gone: n{peer}")
        node.core.tick(self.now)
        node.core.peer_gone(peer)
        self._touch(node)

    def _ev_propose(self) -> None:
        p = self.p
        self._at(self.now + self.rng.expovariate(1 / p.propose_every_ms), "propose")
        leaders = [n for n in self.nodes.values() if n.up and n.core.role is Role.LEADER]
        if not leaders:
            return
        node = self.rng.choice(leaders)
        if self.healed and self.marker is None:
            self.marker = b"marker"
        self.proposals += 1
        value = b"v%d" % self.proposals
        records = (value,) if self.rng.random() < 0.7 else (value, value + b"b")
        if self.healed:
            records = (self.marker,) + records
        node.core.tick(self.now)
        try:
            # One-record batches are quiet, as the controller's NoOpRecords: their commits
            # reach the followers only with later answers (no extra draw: seeds keep
            # their schedules of faults).
            offset, epoch = node.core.propose(records, quiet=len(records) == 1)
        except NotLeaderError:  # the tick ended its leadership (check quorum): as a driver
            self.log(f"n{node.id} propose refused: no longer the leader")
            self._touch(node)
            return
        if self.record_trace:
            self.log(f"n{node.id} propose {records} -> offset {offset} epoch {epoch}")
        self._touch(node)

    def _ev_restart(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.up:
            return
        node.start()
        self.log(f"n{node.id} restarts: {node.core.role.value} epoch {node.core.epoch} "
                 f"log [{node.core.log.start_offset}, {node.core.log.end_offset})")
        self._touch(node)

    def _ev_heal(self) -> None:
        self.healed = True
        self.blocked.clear()
        self.drop = 0.0
        self.log("heal: partitions removed, drops stopped, every node restarted")
        for node in self.nodes.values():
            node.crash_on_write = None
            if not node.up:
                self._ev_restart(node.id)

    def _ev_fault(self) -> None:
        if self.healed:
            return
        p = self.p
        self._at(self.now + self.rng.expovariate(1 / p.fault_every_ms), "fault")
        ids = sorted(self.nodes)
        kind = self.rng.choices(
            ["partition", "isolate", "asymmetric", "heal", "crash", "crash_before_fsync",
             "shutdown", "lose_disk", "membership"],
            [2, 2, 1, 2, 2, 3, 1, 1 if p.lose_disks else 0, 4 if p.membership else 0])[0]
        if kind == "membership":
            self._change_voters()
        elif kind == "heal":
            self.blocked.clear()
            self.log("fault: partitions healed")
        elif kind == "partition":
            side = {i for i in ids if self.rng.random() < 0.5}
            self.blocked = {(a, b) for a in ids for b in ids if (a in side) != (b in side)}
            self.log(f"fault: partition {sorted(side)} | {sorted(set(ids) - side)}")
        elif kind == "isolate":
            victim = self._victim(prefer_leader=True)
            self.blocked = {(a, b) for a in ids for b in ids if a != b and victim in (a, b)}
            self.log(f"fault: isolate n{victim}")
        elif kind == "asymmetric":
            victim = self._victim(prefer_leader=True)
            if self.rng.random() < 0.5:
                self.blocked = {(victim, b) for b in ids if b != victim}
                self.log(f"fault: n{victim} cannot send")
            else:
                self.blocked = {(a, victim) for a in ids if a != victim}
                self.log(f"fault: n{victim} cannot receive")
        else:
            victim = self.nodes[self._victim(prefer_leader=self.rng.random() < 0.5)]
            if not victim.up:
                return
            if kind == "crash":
                self.log(f"fault: crash n{victim.id}")
                self._crash(victim)
            elif kind == "crash_before_fsync":
                victim.crash_on_write = self.rng.choice(["any", "hard_state"])
                self.log(f"fault: n{victim.id} will crash before fsyncing its next "
                         f"{'write' if victim.crash_on_write == 'any' else 'vote or epoch'}")
                return
            elif kind == "shutdown":
                self.log(f"fault: graceful shutdown of n{victim.id}")
                victim.core.tick(self.now)
                victim.core.resign()
                self._pump(victim)
                victim.disk.sync()
                victim.stop()
                self._at(self.now + self.rng.uniform(100, 3000), "restart", victim.id)
            elif kind == "lose_disk":
                if victim.id not in self.voter_ids or victim.lost_disk or \
                        self.lost_disks >= (p.voters - 1) // 2:
                    return
                self.log(f"fault: n{victim.id} crashes and loses its disk; "
                         f"it returns as an observer")
                self._crash(victim)
                victim.disk = Disk()
                victim.lost_disk = True
                victim.config = replace(victim.config, observer_only=True)
                self.lost_disks += 1

    def _change_voters(self) -> None:
        """AddRaftVoter / RemoveRaftVoter at whoever leads: one node in or out."""
        leaders = [n for n in self.nodes.values() if n.up and n.core.role is Role.LEADER]
        if not leaders:
            return
        leader = self.rng.choice(leaders)
        current = leader.core.voters
        outside = sorted(set(self.nodes) - current)
        if outside and (len(current) == 1 or self.rng.random() < 0.5):
            ids = current | {self.rng.choice(outside)}
        else:
            ids = current - {self.rng.choice(sorted(current))}
        if not ids:
            return
        leader.core.tick(self.now)
        try:
            offset = leader.core.change_voters(ids, SimVotersCodec.encode(ids))
        except VoterChangeError as exc:
            self.log(f"n{leader.id} refuses voters {sorted(ids)}: {exc}")
            return
        self.log(f"n{leader.id} voters {sorted(current)} -> {sorted(ids)} at offset {offset}")
        self._touch(leader)

    def _victim(self, prefer_leader: bool) -> int:
        if prefer_leader:
            leaders = [n.id for n in self.nodes.values() if n.up and n.core.role is Role.LEADER]
            if leaders:
                return self.rng.choice(leaders)
        return self.rng.choice(sorted(self.nodes))

    def _crash(self, node: SimNode) -> None:
        """kill -9: every unsynced write is lost; the node restarts later."""
        node.disk.crash()
        node.stop()
        node.crash_on_write = None
        if self.healed:
            delay = 1
        else:  # a quick restart can rejoin the very election it crashed in
            delay = self.rng.choice([self.rng.uniform(1, 300), self.rng.uniform(100, 3000)])
        self._at(self.now + delay, "restart", node.id)

    # ------------------------------------------------------------------ state machine

    def _register(self, node: SimNode, batch: Batch) -> None:
        """Same (base offset, epoch) means the same records, whoever wrote it."""
        key = (batch.base_offset, batch.epoch)
        known = self.registry.get(key)
        if known is None:
            self.registry[key] = batch.records
        elif known[:len(batch.records)] != batch.records[:len(known)]:
            self.fail(f"n{node.id} wrote {batch} but ({key}) holds {known}")

    def _agree(self, node: SimNode, offset: int, record: bytes) -> None:
        if offset < len(self.truth):
            if self.truth[offset] != record:
                self.fail(f"n{node.id} committed {record!r} at {offset}, "
                          f"others committed {self.truth[offset]!r}")
        elif offset == len(self.truth):
            self.truth.append(record)
        else:
            self.fail(f"n{node.id} applied offset {offset} beyond known commits")

    def _apply(self, node: SimNode, batch: Batch) -> None:
        if batch.base_offset != len(node.records):
            self.fail(f"n{node.id} applies {batch} after {len(node.records)} records")
        for i, record in enumerate(batch.records):
            self._agree(node, batch.base_offset + i, record)
        node.records.extend(batch.records)
        self.truth_epoch[batch.end_offset - 1] = batch.epoch
        if self.marker is not None and self.marker in batch.records:
            self._check_converged()

    def _load_snapshot(self, node: SimNode, snapshot: Snapshot) -> None:
        records = snapshot.data.split(b"\x00") if snapshot.data else []
        if len(records) != snapshot.end_offset:
            self.fail(f"n{node.id} loads snapshot {snapshot.snapshot_id} of {len(records)} "
                      f"records")
        for offset, record in enumerate(records):
            self._agree(node, offset, record)
        node.records = records
        self.log(f"n{node.id} loads snapshot {snapshot.snapshot_id}")
        if self.marker is not None:
            self._check_converged()

    def _maybe_snapshot(self, node: SimNode) -> None:
        every = self.p.snapshot_every
        core = node.core
        end = len(node.records)
        if every and end - core.log.start_offset >= every and end <= core.high_watermark:
            core.create_snapshot(end, b"\x00".join(node.records))
            self.log(f"n{node.id} snapshots at {end}")

    def _check_converged(self) -> None:
        if self.marker not in self.truth:
            return
        need = self.truth.index(self.marker) + 1
        if all(n.up and len(n.records) >= need for n in self.nodes.values()):
            self.converged_at = self.now
            self.log("converged")

    # ------------------------------------------------------------------ invariants

    def _check_node(self, node: SimNode, role_before: Role) -> None:
        core = node.core
        if core.role is Role.LEADER:
            first = self.leaders.setdefault(core.epoch, node.id)
            if first != node.id:
                self.fail(f"two leaders in epoch {core.epoch}: n{first} and n{node.id}")
            if role_before is not Role.LEADER:
                self.log(f"n{node.id} becomes leader of epoch {core.epoch}")
                self._check_leader_completeness(node)
        if core.log.snapshot is not None and core.log.snapshot.end_offset < core.log.start_offset:
            self.fail(f"n{node.id}: earliest snapshot before the log start")
        shape = (core.log.start_offset, core.log.end_offset, core.log.last_epoch)
        if shape != node.log_shape:  # only a changed log can break log matching
            node.log_shape = shape
            self._check_log_matching(node)

    def _check_leader_completeness(self, node: SimNode) -> None:
        """Raft §5.4: a new leader holds every committed entry."""
        log = node.core.log
        committed = len(self.truth)
        if committed == 0:
            return
        last = committed - 1
        if log.end_offset < committed:
            self.fail(f"n{node.id} leads epoch {node.core.epoch} without committed offset "
                      f"{last} (log ends at {log.end_offset})")
        if last >= log.start_offset and log.record_at(last) != self.truth[last]:
            self.fail(f"n{node.id} leads with {log.record_at(last)!r} at committed offset "
                      f"{last}, committed was {self.truth[last]!r}")

    def _check_log_matching(self, node: SimNode) -> None:
        """Raft §5.3: logs with an entry of the same offset and epoch agree up to it."""
        mine = node.core.log
        for other in self.nodes.values():
            if other is node or not other.up:
                continue
            theirs = other.core.log
            lo = max(mine.start_offset, theirs.start_offset)
            hi = min(mine.end_offset, theirs.end_offset)
            if lo >= hi:
                continue
            # The offsets in [lo, hi) where the epochs agree must form a prefix.
            cuts = sorted({lo, hi} | {s for _, s in mine.epoch_history() if lo < s < hi}
                          | {s for _, s in theirs.epoch_history() if lo < s < hi})
            differed = False
            for start in cuts[:-1]:
                same = mine.epoch_at(start) == theirs.epoch_at(start)
                if same and differed:
                    self.fail(f"log matching: n{node.id} and n{other.id} agree at {start} "
                              f"after differing below it")
                differed = differed or not same

    def _check_global(self) -> None:
        for node in self.nodes.values():
            if not node.up or node.core.role is not Role.LEADER:
                continue
            hw = node.core.high_watermark
            if hw == 0:
                continue
            # Committed means held by a majority of the voter set the leader counted with.
            # A set counts from the moment it is appended (KIP-853, Raft's single-server
            # changes), so that is one of the sets in force from the high watermark on: the
            # one there, or one a later VotersRecord brought in (seed 9393: a removal at
            # 27 let [2] alone commit 19..26, then the leader restarted with its snapshot's
            # high watermark, 27, below [2, 3] added at 35).
            epoch = node.core.log.epoch_at(hw - 1)
            short = []
            sets = {s.ids for s in node.core.voter_sets_since(hw)}
            for voters in sets:
                holders = sum(1 for v in voters if not self.nodes[v].lost_disk
                              and self.nodes[v].disk.holds(hw - 1, epoch))
                lost = sum(1 for v in voters if self.nodes[v].lost_disk)
                if holders + lost < len(voters) // 2 + 1:
                    short.append(holders)
            if len(short) == len(sets):
                holders = max(short)
                self.fail(f"leader n{node.id} has high watermark {hw} but only {holders} "
                          f"voters hold offset {hw - 1} durably")


def _fmt(env: Envelope) -> str:
    msg = env.message
    text = repr(msg)
    if len(text) > 160:
        text = text[:157] + "..."
    return f"n{env.src}->n{env.dst} #{env.correlation_id} {text}"


# ====================================================================== running many seeds


def run_seed(seed: int, config_overrides: dict | None = None,
             record_trace: bool = True) -> tuple[int, str | None]:
    """Run one seed; returns (seed, None) or (seed, failure text)."""
    try:
        Simulation(seed, config_overrides, record_trace).run()
    except SimulationFailure as exc:
        return seed, str(exc)
    return seed, None


def run_seeds(seeds, jobs: int = 1, config_overrides: dict | None = None,
              stop_on_failure: bool = False):
    """Yield (seed, failure-or-None) for each seed, in parallel processes when jobs > 1."""
    return seeds_runner.run_seeds(run_seed, seeds, jobs, config_overrides, stop_on_failure)


def main(argv=None) -> int:
    return seeds_runner.seed_command(
        argv, prog="python -m kraft.raft.sim", description=__doc__,
        unsafe_help="enable an unsafe_* switch of RaftConfig (mutation check)",
        option=lambda names: {f"unsafe_{name.removeprefix('unsafe_')}": True for name in names},
        simulation=Simulation, failure=SimulationFailure, run_seeds=run_seeds,
        summary=lambda sim: f"{sim.events} events, converged at {sim.converged_at:.0f} ms, "
                            f"{len(sim.truth)} committed records")

if __name__ == "__main__":
    sys.exit(main())
