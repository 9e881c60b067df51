"""The trio shell of the QuorumController on a controller node.

It is the Raft listener of the controller role: committed batches are replayed into the
controller, snapshots loaded, leader changes turned into activation or resignation.  As in
Kafka, a newly elected node becomes the *active* controller only once it has applied the
log up to the start of its own epoch (the LeaderChange record), so its working image holds
every earlier committed record.

Requests (BrokerRegistration, BrokerHeartbeat, CreateTopics, ...) are handled by the sans-IO
controller; its records are appended through Raft as one batch at exactly the offsets the
controller counted on, and the response leaves once they have committed.  Any mismatch or
loss of leadership answers NOT_CONTROLLER and the client retries elsewhere.
"""

from __future__ import annotations

import logging

import trio

from kraft import clock
from kraft.protocol.error_codes import ErrorCode
from kraft.raft.messages import Batch, LeaderAndEpoch, OffsetAndEpoch
from kraft.raft.node import NotLeaderError
from metadata import serde
from metadata.controller import HANDLERS, ControllerResult, QuorumController
from metadata.controller.common import error_response
from metadata.snapshot import SnapshotPolicy

log = logging.getLogger(__name__)

# An inactive controller wakes when a commit makes a snapshot due; this often at most, for
# one due by time alone (metadata.log.max.snapshot.interval.ms, an hour by default).
INACTIVE_TICK_S = 5.0
# The longest an active controller goes without a tick, whatever its deadlines say.
ACTIVE_TICK_MAX_S = 1.0


class ControllerServer:
    def __init__(self, node_id: int, controller: QuorumController, *, tick_interval_s: float = 0.1,
                 snapshots: SnapshotPolicy | None = None):
        self.node_id = node_id
        self.controller = controller
        self.driver = None  # set by the node before the Raft driver starts
        self.tick_interval_s = tick_interval_s
        self.snapshots = snapshots if snapshots is not None else SnapshotPolicy()
        self._activate_at: tuple[int, int] | None = None  # (epoch, end offset to reach)
        self._applied_end = 0
        self._leadership = trio.Event()  # replaced at every leadership change
        # set when this controller becomes active, or a commit made a snapshot due
        self._inactive_wake = trio.Event()
        self._poked = trio.Event()  # set when the next tick may be due sooner (_until_tick_due)
        self.metadata_errors = 0  # MetadataErrorCount: records that landed where we did not count

    # ------------------------------------------------------------------ RaftListener

    def handle_load_snapshot(self, snapshot_id: OffsetAndEpoch, records: list[bytes]) -> None:
        self.controller.load_snapshot(serde.decode_all(records), snapshot_id.offset - 1)
        self._applied_end = snapshot_id.offset
        self.snapshots.loaded(snapshot_id.offset)

    def handle_commit(self, batch: Batch) -> None:
        if batch.control:
            self.controller.replay([], batch.last_offset)
        else:
            self.controller.replay_encoded(batch.records, batch.last_offset)
        self._applied_end = batch.end_offset
        now = clock.monotonic_ms()
        self.snapshots.committed(sum(len(r) for r in batch.records), now)
        self._maybe_activate()
        if self.snapshots.due(now):
            self._inactive_wake.set()

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        self._leadership.set()
        self._leadership = trio.Event()
        if leader.leader_id == self.node_id:
            # Our LeaderChange record ends the log right now; activate once it is applied.
            self._activate_at = (leader.epoch, self.driver.node.log.end_offset)
            self._maybe_activate()
        else:
            self._activate_at = None
            if self.controller.is_active:
                log.info("controller %d: no longer active", self.node_id)
            self.controller.on_leader_change(leader.leader_id if leader.leader_id >= 0 else None, leader.epoch)

    def _maybe_activate(self) -> None:
        if self._activate_at is None:
            return
        epoch, end = self._activate_at
        if self._applied_end >= end and self.driver.is_leader and self.driver.leader.epoch == epoch:
            self._activate_at = None
            self.controller.on_leader_change(self.node_id, epoch, self.driver.node.log.end_offset)
            log.info("controller %d: active in epoch %d", self.node_id, epoch)
            self._inactive_wake.set()
            now = clock.monotonic_ms()
            self.controller.start_sessions(now)
            recent = [n for n, at in getattr(self.driver, "gone_peers", {}).items()
                      if now - at < self.controller.config.broker_session_timeout_ms]
            for broker_id in self.controller.brokers_gone(recent, now):
                log.info("controller %d: broker %d's node is gone (its quorum connections "
                         "closed): fenced in %d ms unless it heartbeats", self.node_id,
                         broker_id, self.controller.config.broker_session_disconnect_timeout_ms)
            self._poke()

    # ------------------------------------------------------------------ requests

    async def handle(self, api: str, version: int, body: dict, connection_id: str = "") -> dict:
        if api not in HANDLERS:
            raise KeyError(api)
        if not self.controller.is_active:
            return error_response(api, body, ErrorCode.NOT_CONTROLLER)
        result = self.controller.handle(api, version, body, clock.monotonic_ms(), connection_id)
        self._poke()
        if not self._append(result) or not await self._wait_committed(result):
            return error_response(api, body, ErrorCode.NOT_CONTROLLER)
        return result.response

    def connection_closed(self, connection_id: str) -> None:
        """The controller listener's ``on_close``."""
        broker_id = self.controller.connection_closed(connection_id, clock.monotonic_ms())
        self._poke()
        if broker_id is not None:
            log.info("controller %d: broker %d's heartbeat connection closed; fenced in %d ms "
                     "unless it heartbeats again", self.node_id, broker_id,
                     self.controller.config.broker_session_disconnect_timeout_ms)

    def _append(self, result: ControllerResult) -> bool:
        """Propose the result's records at once: the controller counted their offsets when it
        made them, so results must reach the log in the order they were made, with no
        await in between."""
        if not result.records:
            return True
        try:
            # A tick's lone NoOpRecord: its commit need not reach the followers at once.
            quiet = all(r.name == "NoOpRecord" for r in result.records)
            last, _ = self.driver.propose(list(result.values), quiet=quiet)
        except NotLeaderError:
            self.controller.resign()
            return False
        if last != result.commit_offset:
            self.metadata_errors += 1
            log.warning("controller %d: records landed at %d, expected %d; resigning",
                        self.node_id, last, result.commit_offset)
            self.controller.resign()
            self.driver.resign()  # let a controller with a consistent view take over
            return False
        return True

    async def _wait_committed(self, result: ControllerResult, timeout_s: float = 10.0) -> bool:
        """Wait until the result's commit offset has committed (False: leadership lost or
        timed out)."""
        if result.commit_offset < 0:
            return True
        if self.driver.committed_offset > result.commit_offset:
            return True  # a heartbeat that changed nothing, its wait offset long committed
        leadership = self._leadership
        with trio.move_on_after(timeout_s):
            async with trio.open_nursery() as nursery:
                async def committed():
                    await self.driver.wait_committed(result.commit_offset)
                    nursery.cancel_scope.cancel()

                async def lost():
                    await leadership.wait()
                    nursery.cancel_scope.cancel()

                nursery.start_soon(committed)
                nursery.start_soon(lost)
        return self.driver.committed_offset > result.commit_offset

    # ------------------------------------------------------------------ background

    async def _until_tick_due(self) -> None:
        """Waits ``tick_interval_s`` at least, then on until the active controller's tick has
        something to do (``QuorumController.next_tick_ms``; ``ACTIVE_TICK_MAX_S`` at
        most), looking again whenever a request was handled or a connection closed.  An
        idle active controller wakes once per NoOpRecord (every
        ``metadata.max.idle.interval.ms``): one timed wait, not ten a second, nor a fixed
        pause and then another wait (every wake-up of an idle node is CPU it burns)."""
        start = trio.current_time()
        earliest = start + self.tick_interval_s
        latest = start + ACTIVE_TICK_MAX_S
        while self.controller.is_active:
            now = clock.monotonic_ms()
            due = trio.current_time() + (self.controller.next_tick_ms(now) - now) / 1000
            wake = min(max(due, earliest), latest)
            if wake <= trio.current_time():
                return
            with trio.move_on_at(wake):
                await self._poked.wait()
            self._poked = trio.Event()

    def _poke(self) -> None:
        self._poked.set()

    async def run(self) -> None:
        """Ticks: session expiry (fencing), NoOpRecords, leader rebalance; snapshots.

        An inactive controller only writes a snapshot once a commit made one due (and looks
        every ``INACTIVE_TICK_S`` for one due by time alone), and ticks at once when it
        becomes active (its brokers got fresh sessions at activation:
        ``QuorumController.start_sessions``).  Nothing waits for a tick's records to commit
        (their effects are in the controller's working image already)."""
        while True:
            if self.controller.is_active:
                await self._until_tick_due()
            else:
                with trio.move_on_after(INACTIVE_TICK_S):
                    await self._inactive_wake.wait()
                self._inactive_wake = trio.Event()
            if self.controller.is_active:
                result = self.controller.tick(clock.monotonic_ms())
                if result.records:
                    self._append(result)
            self._maybe_snapshot()

    def _maybe_snapshot(self) -> None:
        image = self.controller.image
        end = image.offset + 1
        if not self.snapshots.due(clock.monotonic_ms()) or end <= self.snapshots.snapshot_end \
                or end > self.driver.committed_offset:
            return
        try:
            self.driver.create_snapshot(end, serde.encode_all(image.records()))
        except ValueError as exc:
            log.debug("snapshot at %d not possible yet: %s", end, exc)
            return
        self.snapshots.taken(end, clock.monotonic_ms())
        log.info("controller %d: snapshot at offset %d", self.node_id, end)
