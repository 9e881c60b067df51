"""Deterministic simulation of one partition's data plane, driven by one 64-bit seed.

The seed chooses the cluster (2-5 brokers, every one a replica, ``min.insync.replicas`` 1 or
2), the clients (producers with acks 0, 1 or all, idempotent or not; a consumer of the
leader and one of any replica, as KIP-392 allows), the network (delays, drops, partitions)
and the faults: process crashes, power losses that cut each disk back to what it flushed
(``broker/sim/disk.py``), graceful shutdowns, and leadership moves. Each broker runs the
real ``broker.partition.Partition`` (and through it ``PartitionState``,
``ProducerStateManager`` and ``LeaderEpochCache``) over an in-memory log; what a replica
fetcher, the data path and the reconciler do around it is done here in their order (see
``_on_fetch``, ``_on_produce``). The controller is the model of
``broker/sim/controller.py``. Everything runs from one event queue ordered by (time,
sequence), so a seed replays exactly.

A run has a fault phase, then a healed phase (network whole, every broker up, producers
stopped but one that writes a marker with acks=all) that must converge within a budget:
the marker acknowledged, every replica back in the ISR, every log equal to the leader's.
Invariants (``broker/sim/oracle.py``) are checked after every event; a violation raises
:class:`SimulationFailure` with the seed, a trace and the command that replays it.
"""

from __future__ import annotations

import heapq
import logging
from dataclasses import dataclass
from random import Random

from broker.partition import Partition
from broker.partition_state_types import EpochEndOffset, Role
from broker.sim.controller import NO_LEADER, ControllerModel
from broker.sim.disk import Disk
from broker.sim.oracle import InvariantViolation, Oracle, record_ids
from kraft.log.errors import OffsetOutOfRangeError
from kraft.protocol.error_codes import ErrorCode
from kraft.records.batch import build_batch
from kraft.records.header import iter_batches
from kraft.records.payload import validate_payload
from kraft.seeds import crash_text

MASK64 = (1 << 64) - 1
READER_SALT = 0x5EED_F011_0E3E_AD00  # the replica reader's random stream: Random(seed ^ this)
# The product's own unsafe switches (server.properties keys), which Partition takes by name;
# the rest are the simulation's mutations of the cores (SIM_UNSAFE_SWITCHES).
PRODUCT_SWITCHES = frozenset({"unsafe_ack_before_replication", "unsafe_follower_read_log_end"})
CONTROLLER = 0
TOPIC = "t"
RETRIABLE = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT,
             ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.FENCED_LEADER_EPOCH,
             ErrorCode.UNKNOWN_LEADER_EPOCH}


class SimulationFailure(AssertionError):
    def __init__(self, seed: int, message: str, trace: list[str], unsafe=()) -> None:
        flags = "".join(f" --unsafe {name.removeprefix('unsafe_')}" for name in sorted(unsafe))
        tail = "\n".join(trace[-60:])
        super().__init__(f"seed {seed}: {message}\n--- last events ---\n{tail}\n"
                         f"replay: python -m broker.sim --seed {seed}{flags} --trace")
        self.seed = seed
        self.reason = message
        self.trace = trace


@dataclass(frozen=True)
class Params:
    brokers: int
    min_isr: int
    producers: tuple[tuple[int, bool], ...]  # (acks, idempotent)
    drop: float
    delay_max_ms: float
    lag_ms: int  # replica.lag.time.max.ms
    flush_every_ms: int  # 0: never (Kafka's default)
    produce_every_ms: int
    fault_every_ms: int
    fault_phase_ms: int
    delete_every_ms: int = 0  # mean time between DeleteRecords at the leader (0: none)
    heal_budget_ms: int = 20000
    request_timeout_ms: int = 200  # produce (the acks=all wait) and fetch timeouts
    session_ms: int = 450  # broker session timeout at the controller

    @staticmethod
    def from_rng(rng: Random) -> "Params":
        brokers = rng.choice([2, 3, 3, 3, 4, 5])
        producers = []
        for _ in range(rng.choice([1, 2, 2, 3])):
            idempotent = rng.random() < 0.6
            producers.append((-1 if idempotent else rng.choice([0, 1, -1, -1]), idempotent))
        return Params(
            brokers=brokers,
            min_isr=rng.choice([1, 1, 2]),
            producers=tuple(producers),
            drop=rng.choice([0.0, 0.01, 0.05]),
            delay_max_ms=rng.choice([2, 10, 40]),
            lag_ms=rng.choice([150, 400, 1000]),
            flush_every_ms=rng.choice([0, 0, 50, 400]),
            produce_every_ms=rng.choice([20, 50, 100]),
            fault_every_ms=rng.choice([100, 300, 800]),
            fault_phase_ms=rng.choice([800, 1500, 2500]),
            request_timeout_ms=rng.choice([100, 250]),
            delete_every_ms=rng.choice([0, 0, 300, 1000]),
        )


class _TraceHandler(logging.Handler):
    def __init__(self, sim: "Simulation") -> None:
        super().__init__(logging.INFO)
        self.sim = sim

    def emit(self, record: logging.LogRecord) -> None:
        self.sim.log(f"partition {record.levelname.lower()}: {record.getMessage()}")


class SimBroker:
    def __init__(self, broker_id: int) -> None:
        self.id = broker_id
        self.disk = Disk()
        self.up = False
        self.incarnation = 0
        self.power_losses = 0
        self.lost_power_at = -1.0
        self.partition: Partition | None = None
        self.seen = (-1, -1)  # (leader epoch, partition epoch) of the registration applied
        self.fetching: int | None = None  # the request id of the fetch in flight
        self.waits: dict[int, tuple] = {}  # waiter id -> (client, request, first, last, slot)
        self.checked: tuple = ()  # (HW, log end, truth length) at the last replica check


class Client:
    def __init__(self, client_id: int, acks: int, idempotent: bool) -> None:
        self.id = client_id
        self.acks = acks
        self.idempotent = idempotent
        self.producer_id = client_id if idempotent else -1
        self.epoch = 0 if idempotent else -1
        self.seq = 0
        self.write: tuple[int, int, bytes] | None = None  # (write id, records, batch)
        self.attempts = 0
        self.request: int | None = None
        self.leader: int | None = None
        self.stopped = False
        self.offset = 0  # a consumer's position


class Simulation:
    def __init__(self, seed: int, unsafe=frozenset(), record_trace: bool = True) -> None:
        self.seed = seed & MASK64
        self.unsafe = frozenset(unsafe)
        self.rng = Random(self.seed)
        self.p = Params.from_rng(self.rng)
        self.now = 0.0
        self._queue: list = []
        self._seq = 0
        self.trace: list[str] = []
        self.record_trace = record_trace
        self.events = 0
        ids = tuple(range(1, self.p.brokers + 1))
        self.brokers = {b: SimBroker(b) for b in ids}
        self.controller = ControllerModel(ids)
        self.last_heartbeat = {b: 0.0 for b in ids}
        self.known_incarnation = {b: 1 for b in ids}
        self.producers = [Client(100 + i, acks, idem) for i, (acks, idem) in enumerate(self.p.producers)]
        self.consumer = Client(99, 0, False)
        # A consumer reading from any replica (KIP-392), on a random stream of its own so the
        # other events run as they would without it (the seeds that found bugs stay the same)
        self.reader = Client(98, 0, False)
        self.reader_rng = Random(self.seed ^ READER_SALT)
        self.marker: Client | None = None
        self.oracle = Oracle(set())
        self.heard: dict[tuple[int, int], int] = {}  # (leader, follower) -> its power losses then
        self.blocked: set[tuple[int, int]] = set()
        self.drop = self.p.drop
        self.healed = False
        self.converged_at: float | None = None
        self.next_id = 0
        self.acked = 0

    # ------------------------------------------------------------------ plumbing

    def _at(self, t: float, kind: str, *args) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (t, self._seq, kind, args))

    def log(self, text: str) -> None:
        if self.record_trace:
            self.trace.append(f"{self.now:8.1f}ms {text}")

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id

    def _send(self, src: int, dst: int, kind: str, *payload) -> None:
        if (src, dst) in self.blocked or self.rng.random() < self.drop:
            return
        self._at(self.now + self.rng.uniform(0.2, self.p.delay_max_ms), "deliver", src, dst, kind, payload)

    def _ev_deliver(self, src: int, dst: int, kind: str, payload) -> None:
        if (src, dst) in self.blocked:
            return
        if 1 <= dst <= self.p.brokers:
            b = self.brokers[dst]
            if not b.up:
                return
            getattr(self, "_on_" + kind)(b, src, *payload)
            self._touch(b)
        else:
            getattr(self, "_on_" + kind)(src, dst, *payload)

    # ------------------------------------------------------------------ running

    def run(self) -> "Simulation":
        # What the partitions log (a warning: they repaired something) goes to the trace,
        # not to the terminal of a run over thousands of seeds.
        partition_log = logging.getLogger("broker.partition")
        handler = _TraceHandler(self)
        partition_log.addHandler(handler)
        propagate, partition_log.propagate = partition_log.propagate, False
        try:
            return self._run()
        finally:
            partition_log.removeHandler(handler)
            partition_log.propagate = propagate

    def _run(self) -> "Simulation":
        p = self.p
        self.log(f"params {p} unsafe={sorted(self.unsafe)}")
        for b in self.brokers.values():
            self._start(b)
        self._at(50, "controller_check")
        for c in self.producers:
            self._at(self.rng.uniform(0, p.produce_every_ms), "produce", c.id)
        self._at(self.rng.uniform(0, 50), "consume")
        self._at(self.reader_rng.uniform(0, 50), "replica_read")
        self._at(self.rng.expovariate(1 / p.fault_every_ms), "fault")
        if p.delete_every_ms:
            self._at(self.rng.expovariate(1 / p.delete_every_ms), "delete_records")
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
                if self.healed and self._converged():
                    self.converged_at = self.now
                    self.log("converged")
                    return self
        except InvariantViolation as exc:
            self.fail(str(exc))
        except Exception as exc:  # noqa: BLE001 - the core's own checks are part of the oracle
            self.fail(crash_text(exc))
        self.fail(f"no convergence {p.heal_budget_ms} ms after healing: {self._describe()}")
        return self

    def fail(self, message: str) -> None:
        raise SimulationFailure(self.seed, message, self.trace, self.unsafe)

    def _describe(self) -> str:
        parts = []
        for b in self.brokers.values():
            if not b.up:
                parts.append(f"b{b.id}:down")
                continue
            st = b.partition.state
            parts.append(f"b{b.id}:{st.role.value}/e{st.leader_epoch}/leo{st.log_end_offset}"
                         f"/hw{st.high_watermark}/isr{sorted(st.isr)}")
        return " ".join(parts) + f" controller={self.controller.reg} marker acked=" \
            f"{self.marker is not None and self.marker.write is None}"

    # ------------------------------------------------------------------ brokers

    def _start(self, b: SimBroker) -> None:
        b.up = True
        b.incarnation += 1
        b.seen = (-1, -1)
        b.fetching = None
        b.waits = {}
        b.partition = Partition(TOPIC, 0, None, b.disk.log, b.id, high_watermark=b.disk.hw_checkpoint,
                                unsafe_ack_before_replication="unsafe_ack_before_replication" in self.unsafe,
                                unsafe_follower_read_log_end="unsafe_follower_read_log_end" in self.unsafe,
                                epoch_checkpoint=b.disk.epochs, sim_unsafe=self.unsafe - PRODUCT_SWITCHES)
        self.log(f"b{b.id} starts (incarnation {b.incarnation}): log [{b.disk.log.log_start_offset}, "
                 f"{b.disk.log.log_end_offset}) hw {b.partition.state.high_watermark}")
        inc = b.incarnation
        self._at(self.now, "heartbeat", b.id, inc)
        self._at(self.now + self.p.lag_ms / 2, "isr_check", b.id, inc)
        self._at(self.now + 200, "hw_checkpoint", b.id, inc)
        if self.p.flush_every_ms:
            self._at(self.now + self.rng.uniform(0, self.p.flush_every_ms), "flush", b.id, inc)

    def _stop(self, b: SimBroker) -> None:
        b.up = False
        b.incarnation += 1
        b.partition = None
        b.waits = {}

    def _alive(self, broker_id: int, inc: int) -> SimBroker | None:
        b = self.brokers[broker_id]
        return b if b.up and b.incarnation == inc else None

    def _touch(self, b: SimBroker) -> None:
        """After anything happened at ``b``: answer completed acks=all waits, schedule
        waiter deadlines and fetches, check the invariants."""
        if not b.up:
            return
        part = b.partition
        st = part.state
        for wid in [w for w, item in b.waits.items() if item[4][0].is_set()]:
            client, request, first, last, slot = b.waits.pop(wid)
            if slot[1] == ErrorCode.NONE:
                self.oracle.check_acked(b, self.brokers, first, last)
            self._send(b.id, client, "produce_response", request, slot[1], first)
        deadline = st.next_deadline_ms()
        if deadline is not None:
            self._at(max(deadline, self.now), "waiter_tick", b.id, b.incarnation)
        if st.is_leader:
            if self.oracle.on_leader_hw(b, st.high_watermark):
                self.oracle.check_isr_holds(b, self.brokers, self.heard)
        shape = (st.high_watermark, b.disk.log.log_end_offset, len(self.oracle.truth))
        if shape != b.checked:  # only a change can break it
            b.checked = shape
            self.oracle.check_replica(b)
        if st.role is Role.FOLLOWER and b.fetching is None:
            self._fetch(b)

    def _ev_heartbeat(self, broker_id: int, inc: int) -> None:
        b = self._alive(broker_id, inc)
        if b is None:
            return
        self._send(b.id, CONTROLLER, "heartbeat", b.id, inc)
        self._at(self.now + 150, "heartbeat", b.id, inc)

    def _ev_isr_check(self, broker_id: int, inc: int) -> None:
        b = self._alive(broker_id, inc)
        if b is None:
            return
        self._propose(b, b.partition.state.maybe_shrink_isr(int(self.now), self.p.lag_ms))
        self._at(self.now + self.p.lag_ms / 2, "isr_check", b.id, inc)
        self._touch(b)

    def _ev_hw_checkpoint(self, broker_id: int, inc: int) -> None:
        b = self._alive(broker_id, inc)
        if b is not None:
            b.disk.hw_checkpoint = b.partition.state.high_watermark
            self._at(self.now + 200, "hw_checkpoint", b.id, inc)

    def _ev_flush(self, broker_id: int, inc: int) -> None:
        b = self._alive(broker_id, inc)
        if b is not None:
            b.disk.log.flush()
            self._at(self.now + self.p.flush_every_ms, "flush", b.id, inc)

    def _ev_waiter_tick(self, broker_id: int, inc: int) -> None:
        b = self._alive(broker_id, inc)
        if b is not None:
            b.partition.expire_waiters(int(self.now))
            self._touch(b)

    def _on_metadata(self, b: SimBroker, src: int, reg, registered: int) -> None:
        """The controller's registration of the partition, as of the broker's registration
        ``registered``: a broker acts on metadata only once it has caught up to its own
        registration (``Node._become_ready``), so a restarted one ignores what was sent to
        its previous incarnation."""
        if registered != b.incarnation or (reg.leader_epoch, reg.partition_epoch) <= b.seen:
            return
        b.seen = (reg.leader_epoch, reg.partition_epoch)
        st = b.partition.state
        was = (st.role, st.leader_epoch)
        b.partition.apply_registration(b.id, reg.leader, reg.leader_epoch, reg.partition_epoch,
                                       reg.replicas, reg.isr, int(self.now))
        if self.record_trace and (st.role, st.leader_epoch) != was:
            self.log(f"b{b.id} becomes {st.role.value} of epoch {st.leader_epoch} (ISR {sorted(st.isr)})")
        if st.is_leader and was != (Role.LEADER, st.leader_epoch):
            self.oracle.check_leader_complete(b, self.controller.reg.isr, self.log)

    def _propose(self, b: SimBroker, proposal) -> None:
        if proposal is None:
            return
        self.log(f"b{b.id} proposes ISR {list(proposal.new_isr)} ({proposal.kind.value})")
        self._send(b.id, CONTROLLER, "alter_partition", b.id, b.incarnation, proposal)
        self._at(self.now + self.p.request_timeout_ms, "alter_timeout", b.id, b.incarnation, proposal)

    def _ev_alter_timeout(self, broker_id: int, inc: int, proposal) -> None:
        """No answer: as ``Node._alter_partitions``, ask the core whether to send it again."""
        b = self._alive(broker_id, inc)
        if b is not None:
            self._alter_failed(b, proposal, None)

    def _alter_failed(self, b: SimBroker, proposal, error) -> None:
        if b.partition.on_alter_partition_error(proposal, error):
            self._propose(b, proposal)
        self._touch(b)

    def _on_alter_response(self, b: SimBroker, src: int, inc: int, proposal, error, reg) -> None:
        st = b.partition.state
        if inc != b.incarnation or st.pending is not proposal:
            return
        if error != ErrorCode.NONE:
            self._alter_failed(b, proposal, error)
            return
        self._on_metadata(b, src, reg, inc)
        if st.pending is proposal:  # answered with the committed state: nothing to change
            b.partition.complete(st.on_alter_partition_failed())

    # ------------------------------------------------------------------ replication

    def _fetch(self, b: SimBroker) -> None:
        st = b.partition.state
        if st.leader_id < 0:
            return
        pos = st.fetch_position()
        request = b.fetching = self._id()
        self._send(b.id, pos.leader_id, "fetch", b.incarnation, request, pos, b.power_losses)
        self._at(self.now + self.p.request_timeout_ms, "fetch_timeout", b.id, b.incarnation, request)

    def _ev_fetch_timeout(self, broker_id: int, inc: int, request: int) -> None:
        b = self._alive(broker_id, inc)
        if b is not None and b.fetching == request:
            b.fetching = None
            self._touch(b)

    def _ev_fetch_again(self, broker_id: int, inc: int, request: int) -> None:
        b = self._alive(broker_id, inc)
        if b is not None and b.fetching == request:
            b.fetching = None
            self._touch(b)

    def _on_fetch(self, leader: SimBroker, src: int, inc: int, request: int, pos, losses: int) -> None:
        """The leader side of a follower fetch: ``Partition.on_follower_fetch``, then a read."""
        part = leader.partition
        result = part.on_follower_fetch(src, pos.fetch_offset, pos.last_fetched_epoch, int(self.now),
                                        current_leader_epoch=pos.current_leader_epoch,
                                        log_start_offset=pos.log_start_offset, broker_epoch=inc)
        self._propose(leader, result.isr_proposal)
        records = b""
        if result.error == ErrorCode.NONE and result.diverging_epoch is None:
            self.heard[(leader.id, src)] = losses
            records = b"".join(part.log.read(pos.fetch_offset))
        self._send(leader.id, src, "fetch_response", inc, request, pos, result.error, records,
                   result.high_watermark, result.diverging_epoch, part.log.log_start_offset,
                   part.log.log_end_offset)

    def _on_fetch_response(self, b: SimBroker, src: int, inc: int, request: int, pos, error, records,
                           hw: int, diverging: EpochEndOffset | None, leader_start: int,
                           leader_end: int) -> None:
        """The follower side, in ``ReplicaFetcherManager._handle``'s order."""
        if inc != b.incarnation or b.fetching != request:
            return
        part = b.partition
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            before = (part.log.log_start_offset, part.log.log_end_offset)
            part.on_offset_out_of_range(leader_start, leader_end)
            if self.record_trace:
                self.log(f"b{b.id} fetch offset out of b{src}'s range [{leader_start}, {leader_end}): "
                         f"log {before} -> ({part.log.log_start_offset}, {part.log.log_end_offset})")
            appended = 0
        elif error != ErrorCode.NONE:
            appended = 0
        else:
            before = part.log.log_end_offset
            appended = part.apply_fetched(pos, records, hw, diverging, leader_start)
            if self.record_trace and (appended or part.log.log_end_offset < before):
                self.log(f"b{b.id} fetched from b{src}: log end {before} -> {part.log.log_end_offset},"
                         f" hw {part.state.high_watermark}" + (f", diverging {diverging}" if diverging else ""))
        if appended or diverging is not None:
            b.fetching = None
        else:  # the long poll found nothing: the next fetch leaves a little later
            self._at(self.now + self.rng.uniform(10, 50), "fetch_again", b.id, b.incarnation, request)

    # ------------------------------------------------------------------ controller

    def _push(self) -> None:
        reg = self.controller.reg
        self.log(f"controller: {reg}")
        for b in self.brokers:
            self._send(CONTROLLER, b, "metadata", reg, self.known_incarnation[b])

    def _on_heartbeat(self, src: int, dst: int, broker_id: int, inc: int) -> None:
        self.last_heartbeat[broker_id] = self.now
        changed = False
        if inc > self.known_incarnation[broker_id]:  # registered again: a new incarnation
            self.known_incarnation[broker_id] = inc
            changed = self.controller.fence(broker_id)
            changed = self.controller.unfence(broker_id) or changed
        elif broker_id not in self.controller.eligible and inc == self.known_incarnation[broker_id]:
            changed = self.controller.unfence(broker_id)
        if changed:
            self._push()
        self._send(CONTROLLER, broker_id, "metadata", self.controller.reg, self.known_incarnation[broker_id])

    def _on_alter_partition(self, src: int, dst: int, broker_id: int, inc: int, proposal) -> None:
        if inc != self.known_incarnation[broker_id]:
            error = ErrorCode.STALE_BROKER_EPOCH
        else:
            error = self.controller.alter_partition(broker_id, proposal.leader_epoch,
                                                    proposal.partition_epoch, proposal.new_isr,
                                                    dict(zip(proposal.new_isr, proposal.broker_epochs)),
                                                    self.known_incarnation)
        if error == ErrorCode.NONE:
            self._push()
        self._send(CONTROLLER, broker_id, "alter_response", inc, proposal, error, self.controller.reg)

    def _on_controlled_shutdown(self, src: int, dst: int, broker_id: int) -> None:
        if self.controller.fence(broker_id):
            self._push()

    def _ev_controller_check(self) -> None:
        fenced = False
        for b, last in self.last_heartbeat.items():
            if b in self.controller.eligible and self.now - last > self.p.session_ms:
                self.log(f"controller: b{b}'s session expired")
                fenced = self.controller.fence(b) or fenced
        if fenced:
            self._push()
        self._at(self.now + 150, "controller_check")

    # ------------------------------------------------------------------ clients

    def _ev_produce(self, client_id: int) -> None:
        c = self._client(client_id)
        if c.stopped:
            return
        if c.write is None:
            wid = self._id()
            count = self.rng.choice([1, 1, 2, 3])
            batch = build_batch([(None, b"v")] * count, timestamp=wid, producer_id=c.producer_id,
                                producer_epoch=c.epoch, base_sequence=c.seq if c.idempotent else -1)
            if c.idempotent:
                self.oracle.idempotent_ids.add(wid)
            c.write, c.attempts = (wid, count, batch), 0
            self._send_write(c)
        if c is not self.marker:
            self._at(self.now + self.rng.expovariate(1 / self.p.produce_every_ms), "produce", c.id)

    def _client(self, client_id: int) -> Client:
        if self.marker is not None and client_id == self.marker.id:
            return self.marker
        return self.producers[client_id - 100]

    def _send_write(self, c: Client) -> None:
        leader = c.leader if c.leader is not None else self.controller.reg.leader
        c.attempts += 1
        request = c.request = self._id()
        if leader == NO_LEADER:
            self._at(self.now + 50, "retry", c.id, request)
            return
        c.leader = leader
        self._send(c.id, leader, "produce", c.id, request, c.acks, c.write[2])
        if c.acks == 0:
            c.write, c.request = None, None
            return
        self._at(self.now + self.p.request_timeout_ms + 2 * self.p.delay_max_ms, "retry", c.id, request)

    def _ev_retry(self, client_id: int, request: int) -> None:
        c = self._client(client_id)
        if c.write is not None and c.request == request:
            self._retry(c)

    def _retry(self, c: Client) -> None:
        c.leader = None  # look the leader up again
        if c.attempts >= 12:
            self._give_up(c)
        else:
            self._send_write(c)

    def _give_up(self, c: Client) -> None:
        self.log(f"p{c.id} gives up write {c.write[0]}")
        c.write, c.request = None, None
        if c.idempotent:  # KIP-360: the next write starts a new epoch
            c.epoch, c.seq = c.epoch + 1, 0
        if c is self.marker:
            self._ev_produce(c.id)

    def _on_produce(self, b: SimBroker, src: int, client_id: int, request: int, acks: int, batch: bytes) -> None:
        """The leader side of a produce: ``Partition.produce``, as ``DataPath`` calls it."""
        part = b.partition
        out = part.produce(batch, validate_payload(batch), acks, self.p.min_isr,
                           int(self.now) + self.p.request_timeout_ms)
        if out.appended:
            write = next(iter_batches(batch, check_crc=False))[1].max_timestamp
            self.oracle.written_at.setdefault(write, self.now)
            self.log(f"b{b.id} appends write {write} from p{client_id} at {out.base_offset}..{out.last_offset}")
        if out.waiter is not None:
            b.waits[out.waiter_id] = (src, request, out.base_offset, out.last_offset, out.waiter)
            return
        if out.error == ErrorCode.NONE and acks == -1:
            self.oracle.check_acked(b, self.brokers, out.base_offset, out.last_offset)
        self._send(b.id, src, "produce_response", request, out.error, out.base_offset)

    def _on_produce_response(self, src: int, dst: int, request: int, error, base_offset: int) -> None:
        c = self._client(dst)
        if c.request != request or c.write is None:
            return
        if error == ErrorCode.NONE:
            self.acked += 1
            self.log(f"p{c.id} write {c.write[0]} acknowledged at {base_offset} (acks={c.acks})")
            if c.idempotent:
                c.seq += c.write[1]
            c.write, c.request = None, None
        elif error in RETRIABLE:
            self._at(self.now + 20, "retry", c.id, request)
        else:
            self.log(f"p{c.id} write {c.write[0]}: {ErrorCode(error).name}")
            self._give_up(c)

    def _ev_consume(self) -> None:
        c = self.consumer
        leader = self.controller.reg.leader if c.leader is None else c.leader
        if leader != NO_LEADER:
            c.leader = leader
            self._send(c.id, leader, "consume", c.offset)
        self._at(self.now + self.rng.uniform(40, 120), "consume")

    def _on_consume(self, b: SimBroker, src: int, offset: int) -> None:
        """A consumer fetch of the leader (Fetch before v11)."""
        if b.partition.state.check_leader_epoch(None) != ErrorCode.NONE:
            self.consumer.leader = None
            return
        self._read(self.consumer, b, offset)

    def _read(self, client: Client, b: SimBroker, offset: int) -> None:
        """A consumer's read of ``b``, as ``DataPath._read_partition`` serves one: up to
        ``Partition.consumer_read_bound``, the replica's own high watermark."""
        try:
            data = b.partition.log.read(offset, max_offset=b.partition.consumer_read_bound(None))
        except OffsetOutOfRangeError:  # auto.offset.reset=earliest
            client.offset = b.partition.log.log_start_offset
            return
        ids = [(h.max_timestamp, i) for d in data for _, h in iter_batches(d, check_crc=False)
               for i in range(h.last_offset_delta + 1)]
        if data:
            first = next(iter_batches(data[0], check_crc=False))[1].base_offset
            ids = ids[offset - first:]
            self.oracle.check_consumed(offset, ids, b.id)
            client.offset = offset + len(ids)

    def _ev_replica_read(self) -> None:
        """A Fetch v11+ consumer asks any replica (KIP-392); the fetch reaches it after a
        network delay, or not at all when the link drops it."""
        rng = self.reader_rng
        target = rng.choice(sorted(self.brokers))
        if rng.random() >= self.drop:
            self._at(self.now + rng.uniform(0.2, self.p.delay_max_ms), "replica_read_at", target)
        self._at(self.now + rng.uniform(40, 120), "replica_read")

    def _ev_replica_read_at(self, broker_id: int) -> None:
        b = self.brokers[broker_id]
        if b.up and b.partition.state.check_leader_epoch(None, require_leader=False) == ErrorCode.NONE:
            self._read(self.reader, b, self.reader.offset)

    def _ev_delete_records(self) -> None:
        """An admin's DeleteRecords (``broker/delete_records.py``'s checks): at the leader,
        up to its high watermark (and the committed truth, which a leader's HW from before
        an allowed loss may pass)."""
        if self.healed:
            return
        self._at(self.now + self.rng.expovariate(1 / self.p.delete_every_ms), "delete_records")
        leader = self.brokers.get(self.controller.reg.leader)
        if leader is None or not leader.up or not leader.partition.state.is_leader:
            return
        part = leader.partition
        top = min(part.state.high_watermark, len(self.oracle.truth))
        if top <= part.log.log_start_offset:
            return
        target = self.rng.randint(part.log.log_start_offset, top)
        part.delete_records_before(target)
        self.log(f"b{leader.id} deletes records before {target}")
        self._touch(leader)

    # ------------------------------------------------------------------ faults

    def _ev_fault(self) -> None:
        if self.healed:
            return
        self._at(self.now + self.rng.expovariate(1 / self.p.fault_every_ms), "fault")
        servers = list(range(0, self.p.brokers + 1))
        kind = self.rng.choices(["partition", "isolate", "heal", "kill", "power_loss", "shutdown",
                                 "move_leader"], [2, 2, 2, 1, 3, 1, 2])[0]
        victim = self.brokers[self.rng.randint(1, self.p.brokers)]
        if kind == "partition":
            side = {s for s in servers if self.rng.random() < 0.5}
            self.blocked = {(a, b) for a in servers for b in servers if (a in side) != (b in side)}
            self.log(f"fault: partition {sorted(side)} | {sorted(set(servers) - side)} (0 = controller)")
        elif kind == "isolate":
            others = servers + [c.id for c in self.producers] + [self.consumer.id]
            self.blocked = {(a, b) for a in others for b in others if a != b and victim.id in (a, b)}
            self.log(f"fault: isolate b{victim.id}")
        elif kind == "heal":
            self.blocked = set()
            self.log("fault: network healed")
        elif kind == "move_leader":
            target = self.rng.choice(self.controller.reg.replicas)
            if self.controller.move_leadership(target):
                self.log(f"fault: leadership moves to b{target}")
                self._push()
        elif victim.up:
            if kind == "power_loss":
                victim.disk.power_loss(self.rng)
                victim.power_losses += 1
                victim.lost_power_at = self.now
                self.oracle.on_power_loss(victim.id)
            elif kind == "shutdown":
                victim.disk.log.flush()
                victim.partition.checkpoint_epochs(sync=True)
                victim.disk.hw_checkpoint = victim.partition.state.high_watermark
                victim.partition.close()
                self._send(victim.id, CONTROLLER, "controlled_shutdown", victim.id)
            self.log(f"fault: {kind} of b{victim.id}")
            self._stop(victim)
            self._at(self.now + self.rng.choice([self.rng.uniform(5, 100), self.rng.uniform(100, 1500)]),
                     "restart", victim.id)

    def _ev_restart(self, broker_id: int) -> None:
        b = self.brokers[broker_id]
        if not b.up:
            self._start(b)

    def _ev_heal(self) -> None:
        self.healed = True
        self.blocked = set()
        self.drop = 0.0
        self.log("heal: network whole, every broker up, producers stop, a marker write follows")
        for c in self.producers:
            c.stopped = True
        for b in self.brokers.values():
            if not b.up:
                self._start(b)
        self.marker = Client(200, -1, True)
        self.marker.producer_id = 200
        self._ev_produce(self.marker.id)

    def _converged(self) -> bool:
        reg = self.controller.reg
        if self.marker.write is not None or reg.leader == NO_LEADER or \
                tuple(reg.isr) != tuple(sorted(reg.replicas)):
            return False
        leader = self.brokers[reg.leader]
        if not all(b.up for b in self.brokers.values()) or not leader.partition.state.is_leader:
            return False
        end = leader.disk.log.log_end_offset
        start = max(b.disk.log.log_start_offset for b in self.brokers.values())
        want = record_ids(leader.disk.log, start, end)
        return all(b.disk.log.log_end_offset == end and record_ids(b.disk.log, start, end) == want
                   for b in self.brokers.values())
