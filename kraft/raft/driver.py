"""The trio shell of the Raft core: clock, disk and network around one ``RaftNode``.

The loop is etcd's: after every input (a tick, a message, a proposal) the driver drains the
core's Ready batches — persist and fsync (``RaftStorage``), then send, then apply to the
listener, then ``advance``.  Persisting happens synchronously in the task that produced the
input, so no message that depends on a durable write can leave before the write.

Requests from peers arrive through ``handle`` (called by the node's Kafka server for Vote,
BeginQuorumEpoch, EndQuorumEpoch, Fetch on ``__cluster_metadata`` and FetchSnapshot): the
request is stepped into the core under a fresh correlation id and the handler waits for the
core's response with that id (a parked Fetch waits until data arrives or its wait expires).
Requests the core sends go out through ``KafkaClient``; their responses are stepped back in.
A request that fails on the network is simply dropped: the core's own request timeout
covers it, exactly as it covers a message lost in the simulator.
"""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from dataclasses import dataclass
from random import Random
from typing import Protocol

import trio

from kraft import clock
from kraft.client import KafkaClient, NodeUnavailable, PeerGone
from kraft.metrics.stats import RaftMetrics
from kraft.raft import wire
from kraft.raft.config import RaftConfig
from kraft.raft.disk import RaftStorage
from kraft.raft.messages import VOTERS, Batch, Envelope, Errors, LeaderAndEpoch, OffsetAndEpoch
from kraft.raft.node import NotLeaderError, RaftNode
from kraft.raft.record_codec import (
    ZERO_UUID, KafkaVotersCodec, Voter, decode_snapshot, decode_voters_record, encode_voters_record,
    leader_change_record, snapshot_voters_record,
)
from kraft.raft.voters import VoterChangeError

log = logging.getLogger(__name__)


class RaftListener(Protocol):
    """What the state machine (the controller, or a broker's metadata image) implements."""

    def handle_load_snapshot(self, snapshot_id: OffsetAndEpoch, records: list[bytes]) -> None: ...

    def handle_commit(self, batch: Batch) -> None: ...

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None: ...


@dataclass(frozen=True, slots=True)
class PeerAddress:
    host: str
    port: int


class RaftDriver:
    def __init__(self, config: RaftConfig, storage: RaftStorage, client: KafkaClient,
                 voters: dict[int, PeerAddress], listener: RaftListener, *,
                 cluster_id: str | None = None, rng: Random | None = None):
        self.config = config
        self.on_control_appended = None  # (new log end) -> None: see _own_control_appended
        self.storage = storage
        self.client = client
        self.voters = voters
        self.listener = listener
        self.cluster_id = cluster_id
        self._t0 = clock.monotonic_ms()
        snapshot = storage.latest_snapshot()
        hard_state = storage.load_hard_state()
        batches = storage.load_batches(snapshot.end_offset if snapshot else 0)
        self.node = RaftNode(config, rng or Random(), now_ms=0, hard_state=hard_state,
                             snapshot=snapshot, batches=batches,
                             leader_change_record=leader_change_record,
                             voters_codec=KafkaVotersCodec)
        # Where each controller listens, and its directory id: the static voters, then every
        # VotersRecord this node holds (KIP-853).  ``voters`` is shared with the node's
        # controller channel, so updating it in place is how brokers find new controllers.
        self.directory_ids: dict[int, uuid.UUID] = {}
        if snapshot is not None:
            self._learn_voters(snapshot_voters_record(snapshot.data))
        for batch in batches:
            if batch.control == VOTERS:
                self._learn_voters(batch.records[0])
        self._incoming_ids = itertools.count(1 << 40)
        self._waiting: dict[int, list] = {}  # correlation id -> [event, response]
        self._wakeup = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._commit_waiters: list[tuple[int, trio.Event]] = []
        self.committed_offset = 0  # end offset of everything applied
        self.observers: dict[int, tuple[int, float]] = {}  # id -> (fetch offset, when)
        self.closed = False
        # Voters found gone (PeerGone: a refused or peer-closed connection), with when, until
        # they answer again: a node that becomes the active controller starts the sessions
        # of brokers on those nodes as already disconnected (a combined node's broker died
        # with its controller; metadata.controller_server).
        self.gone_peers: dict[int, int] = {}
        self.metrics = RaftMetrics()  # kafka.server:type=raft-metrics (kraft.metrics)

    # ------------------------------------------------------------------ public API

    @property
    def leader(self) -> LeaderAndEpoch:
        return self.node.leader

    @property
    def is_leader(self) -> bool:
        return self.node.is_leader

    @property
    def high_watermark(self) -> int:
        return self.node.high_watermark

    def propose(self, records, quiet: bool = False) -> tuple[int, int]:
        """Append records on the leader: (offset of the last one, epoch).

        Raises NotLeaderError on any other node.  The records are durable and replicated
        once ``wait_committed`` for that offset returns.  ``quiet``: see ``RaftNode.propose``.
        """
        self._tick()
        result = self.node.propose(records, quiet=quiet)
        self.metrics.proposed(result[0], time.monotonic())
        self._drain()
        return result

    async def wait_committed(self, offset: int) -> None:
        """Wait until the record at ``offset`` has been applied (committed)."""
        if self.committed_offset > offset:
            return
        event = trio.Event()
        self._commit_waiters.append((offset, event))
        await event.wait()

    def create_snapshot(self, end_offset: int, records: list[bytes]) -> None:
        from kraft.raft.record_codec import encode_snapshot

        voters_record = self.node.voters_at(end_offset).record
        self.node.create_snapshot(end_offset, encode_snapshot(records, voters_record=voters_record))
        self._drain()

    # ------------------------------------------------------------------ voters (KIP-853)

    def current_voters(self) -> dict[int, PeerAddress]:
        """The voter set in force, with each voter's controller endpoint."""
        return {v: self.voters[v] for v in sorted(self.node.voters) if v in self.voters}

    def _learn_voters(self, record: bytes | None) -> None:
        if record is None:
            return
        for voter in decode_voters_record(record):
            self.voters[voter.node_id] = PeerAddress(voter.host, voter.port)
            if voter.directory_id != ZERO_UUID:
                self.directory_ids[voter.node_id] = voter.directory_id

    def _voters_record(self, ids, added: Voter | None = None, directories=None) -> bytes:
        voters = []
        for voter_id in sorted(ids):
            if added is not None and voter_id == added.node_id:
                voters.append(added)
                continue
            address = self.voters[voter_id]
            directory = (directories or {}).get(voter_id) or self.directory_ids.get(voter_id)
            voters.append(Voter(voter_id, directory or ZERO_UUID, address.host, address.port))
        return encode_voters_record(voters)

    def _own_control_appended(self) -> None:
        """The leader appended a control record of its own (a VotersRecord): the state machine
        proposing after it must count its offsets from the new log end
        (``on_control_appended``, set by the controller server)."""
        if self.on_control_appended is not None:
            self.on_control_appended(self.node.log.end_offset)

    def _maybe_record_directories(self) -> None:
        """Once the leader has seen every voter's directory id (a static voter set names
        none), it writes them into a VotersRecord: from then on a controller that comes back
        on a new disk is not taken for the voter it was (KIP-853's replica keys)."""
        directories = self.node.directories_to_record()
        if directories is None or not all(v in self.voters for v in directories):
            return
        try:
            offset = self.node.change_voters(frozenset(directories),
                                             self._voters_record(directories, directories=directories))
        except (NotLeaderError, VoterChangeError):
            return
        self._own_control_appended()
        log.info("node %d: voters' directory ids recorded at offset %d", self.config.node_id, offset)
        self._drain()

    async def add_voter(self, voter: Voter, timeout_s: float) -> tuple[Errors, str | None]:
        """AddRaftVoter on the leader: retried while refused for a retriable reason (a
        change in flight, the joining replica still catching up) until ``timeout_s``;
        answered once the new VotersRecord is committed."""
        if not self.node.is_leader:
            return Errors.NOT_LEADER_OR_FOLLOWER, "this controller is not the leader"
        if voter.node_id in self.node.voters:
            return Errors.DUPLICATE_VOTER, f"{voter.node_id} is already a voter"
        return await self._change_voters(lambda: (self.node.voters | {voter.node_id}, voter),
                                         timeout_s)

    async def remove_voter(self, voter_id: int, directory_id: uuid.UUID | None,
                           timeout_s: float) -> tuple[Errors, str | None]:
        # The voter key must match, as in Kafka: the id, and the directory id once the voter
        # set names one (the all-zero id names a voter whose directory was never recorded).
        # Only the leader's latest set is the one to match: a follower's may lag behind it.
        if not self.node.is_leader:
            return Errors.NOT_LEADER_OR_FOLLOWER, "this controller is not the leader"
        known = self.node.latest_voters.directory(voter_id)
        given = None if directory_id in (None, ZERO_UUID) else directory_id
        if voter_id not in self.node.voters or known != given:
            return Errors.VOTER_NOT_FOUND, f"no voter {voter_id} with directory id {directory_id}"
        return await self._change_voters(lambda: (self.node.voters - {voter_id}, None), timeout_s)

    async def _change_voters(self, target, timeout_s: float) -> tuple[Errors, str | None]:
        message = None
        with trio.move_on_after(timeout_s):
            while True:
                if self.closed:
                    return Errors.NOT_LEADER_OR_FOLLOWER, "the controller is shutting down"
                ids, added = target()
                self._tick()
                try:
                    if added is not None:
                        self.voters[added.node_id] = PeerAddress(added.host, added.port)
                    offset = self.node.change_voters(ids, self._voters_record(ids, added))
                    self._own_control_appended()
                except NotLeaderError:
                    return Errors.NOT_LEADER_OR_FOLLOWER, "this controller is not the leader"
                except VoterChangeError as exc:
                    if exc.error is not Errors.REQUEST_TIMED_OUT:
                        return exc.error, str(exc)
                    message = str(exc)
                    await trio.sleep(0.05)
                    continue
                self._drain()
                log.info("node %d: voters -> %s (VotersRecord at offset %d)",
                         self.config.node_id, sorted(ids), offset)
                await self.wait_committed(offset)
                return Errors.NONE, None
        return Errors.REQUEST_TIMED_OUT, message

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._tick()
            self._drain()
            task_status.started()
            while True:
                self._tick()
                self._drain()
                if self.node.is_leader:
                    self._maybe_record_directories()
                # A fresh event after our own drain (which sets the old one): from here on
                # only another task's input (a request, a response, a proposal) wakes us.
                self._wakeup = trio.Event()
                now = self._now()
                wait_ms = max(0.0, min(self.node.next_deadline_ms() - now, 1000.0))
                with trio.move_on_after(wait_ms / 1000.0):
                    await self._wakeup.wait()

    def resign(self) -> None:
        """Give up leadership now (EndQuorumEpoch); the quorum elects another leader."""
        if self.node.is_leader and not self.closed:
            self._tick()
            self.node.resign()
            self._drain()

    async def shutdown(self, timeout_s: float = 2.0) -> None:
        """Graceful stop: a leader resigns (EndQuorumEpoch) so the others elect at once."""
        if self.node.is_leader:
            self._tick()
            self.node.resign()
            self._drain()
            with trio.move_on_after(timeout_s):
                await trio.sleep(0.05)  # let the EndQuorumEpoch requests leave
        self.closed = True
        self.storage.close()

    async def handle(self, api: str, body: dict) -> dict:
        """Serve a quorum request from a peer; returns the wire response body."""
        try:
            src, request = wire.request_from_wire(api, body, self.node.voters)
        except (wire.NotRaftMessage, ValueError) as exc:  # ValueError: a message with impossible values
            return _error_response(api, Errors.INVALID_REQUEST, str(exc))
        if self.closed:
            return _error_response(api, Errors.NOT_LEADER_OR_FOLLOWER)
        if api == "Fetch" and src not in self.node.voters:
            self.observers[src] = (request.fetch_offset, self._now())
        cid = next(self._incoming_ids)
        slot = [trio.Event(), None]
        self._waiting[cid] = slot
        try:
            self._tick()
            self.node.step(Envelope(src, self.config.node_id, cid, request))
            self._drain()
            timeout = (self.config.request_timeout_ms + self.config.fetch_max_wait_ms) / 1000
            with trio.move_on_after(timeout):
                await slot[0].wait()
        finally:
            self._waiting.pop(cid, None)
        if slot[1] is None:
            return _error_response(api, Errors.REQUEST_TIMED_OUT)
        return wire.response_to_wire(slot[1])[2]

    def describe_quorum(self) -> dict:
        """The DescribeQuorum response body (as kafka-metadata-quorum.sh shows it)."""
        node = self.node
        now = clock.wall_ms()
        mono = self._now()
        replicas = getattr(node, "_replicas", {}) if node.is_leader else {}

        voter_set = node.latest_voters

        def state(replica_id, end_offset, last_fetch_ms):
            ago = mono - last_fetch_ms if last_fetch_ms > float("-inf") else None
            fetched = now - int(ago) if ago is not None else -1
            # A voter's directory is its key's (what RemoveRaftVoter must name); an
            # observer's the one it fetches with.
            directory = voter_set.directory(replica_id) if replica_id in voter_set.ids else \
                node.replica_directory(replica_id)
            return {"replica_id": replica_id, "log_end_offset": end_offset,
                    "replica_directory_id": directory or ZERO_UUID,
                    "last_fetch_timestamp": fetched, "last_caught_up_timestamp": fetched}

        voters = []
        for voter in sorted(node.voters):
            if voter == self.config.node_id:
                voters.append(state(voter, node.log.end_offset, mono))
            elif voter in replicas:
                r = replicas[voter]
                voters.append(state(voter, r.end_offset, r.last_fetch_ms))
            else:
                voters.append(state(voter, -1, float("-inf")))
        observers = [state(rid, end, last) for rid, (end, last) in sorted(self.observers.items())
                     if rid not in node.voters]  # an observer that was added since
        leader = node.leader
        return {"error_code": 0, "topics": [{"topic_name": wire.METADATA_TOPIC, "partitions": [{
            "partition_index": 0, "error_code": 0, "leader_id": leader.leader_id,
            "leader_epoch": leader.epoch, "high_watermark": node.high_watermark,
            "current_voters": voters, "observers": observers}]}],
            "nodes": [{"node_id": v, "listeners": [{"name": "CONTROLLER", "host": a.host, "port": a.port}]}
                      for v, a in self.current_voters().items()]}

    # ------------------------------------------------------------------ the loop

    def _now(self) -> int:
        return clock.monotonic_ms() - self._t0

    def _tick(self) -> None:
        now = self._now()
        if now > self.node.now_ms:
            self.node.tick(now)

    def _drain(self) -> None:
        if self.closed:
            return
        while self.node.has_ready():
            rd = self.node.ready()
            self._persist(rd)
            for batch in rd.entries:
                if batch.control == VOTERS:
                    self._learn_voters(batch.records[0])
            if rd.snapshot is not None:
                self._learn_voters(snapshot_voters_record(rd.snapshot.data))
            if rd.entries:  # records appended: by this leader, or fetched from the leader
                appended = sum(len(b.records) for b in rd.entries)
                if self.node.is_leader:
                    self.metrics.append_records += appended
                else:
                    self.metrics.fetch_records += appended
            for env in rd.messages + rd.messages_after_persist:
                self._send(env)
            if rd.load_snapshot is not None:
                records = decode_snapshot(rd.load_snapshot.data)
                self.listener.handle_load_snapshot(rd.load_snapshot.snapshot_id, records)
                self.committed_offset = max(self.committed_offset, rd.load_snapshot.end_offset)
            for batch in rd.committed:
                self.listener.handle_commit(batch)
                self.committed_offset = batch.end_offset
            if rd.committed:
                self.metrics.committed(self.committed_offset, time.monotonic(), self.node.is_leader)
            if rd.leader_change is not None:
                log.info("node %d: leader is now %s in epoch %d", self.config.node_id,
                         rd.leader_change.leader_id, rd.leader_change.epoch)
                self.listener.handle_leader_change(rd.leader_change)
            self.node.advance(rd)
            self._release_commit_waiters()
        self._wakeup.set()

    def _persist(self, rd) -> None:
        if rd.hard_state is not None:
            self.storage.save_hard_state(rd.hard_state, self.node.voters)
        if rd.snapshot is not None:
            self.storage.save_snapshot(rd.snapshot)
        if rd.truncate_to is not None:
            self.storage.truncate_to(rd.truncate_to)
        if rd.entries:
            self.storage.append(rd.entries)
        if rd.must_sync:
            self.storage.flush()

    def _release_commit_waiters(self) -> None:
        if not self._commit_waiters:
            return
        keep = []
        for offset, event in self._commit_waiters:
            if self.committed_offset > offset:
                event.set()
            else:
                keep.append((offset, event))
        self._commit_waiters = keep

    def _send(self, env: Envelope) -> None:
        if not env.is_request:
            slot = self._waiting.get(env.correlation_id)
            if slot is not None:
                slot[1] = env.message
                slot[0].set()
            return
        address = self.voters.get(env.dst)
        if address is None or self._nursery is None:
            return
        self._nursery.start_soon(self._request, env, address)

    async def _request(self, env: Envelope, address: PeerAddress) -> None:
        api, version, body = wire.request_to_wire(env.message, self.cluster_id)
        timeout = (self.config.request_timeout_ms + self.config.fetch_max_wait_ms) / 1000
        try:
            response = await self.client.request(address.host, address.port, api, version, body,
                                                  timeout_s=timeout)
            message = wire.response_from_wire(api, response)
        except PeerGone as exc:
            log.debug("node %d: %s to %d failed: %s", self.config.node_id, api, env.dst, exc)
            self.gone_peers[env.dst] = clock.monotonic_ms()
            if not self.closed:
                if env.dst == self.node.leader_id:
                    log.info("node %d: the leader %d is gone (%s): looking for a new one",
                             self.config.node_id, env.dst, exc)
                self._tick()
                self.node.peer_gone(env.dst)  # also: an observer asks another voter
                self._drain()
            return
        except (NodeUnavailable, wire.NotRaftMessage) as exc:
            log.debug("node %d: %s to %d failed: %s", self.config.node_id, api, env.dst, exc)
            return
        if self.closed:
            return
        self.gone_peers.pop(env.dst, None)  # it answers again
        self._tick()
        self.node.step(Envelope(env.dst, self.config.node_id, env.correlation_id, message))
        self._drain()


def _error_response(api: str, error: Errors, message: str = "") -> dict:
    """A top-level error body: the peer's driver drops it, its core times the request out."""
    if api == "Fetch":
        return {"error_code": int(error), "responses": []}
    return {"error_code": int(error), "topics": []}
