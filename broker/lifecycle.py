"""A broker's registration and heartbeats with the active controller (KIP-631).

Start-up: register (a new incarnation id per process start; the controller answers with the
broker epoch), then heartbeat every ``broker.heartbeat.interval.ms`` with the metadata
offset this broker has applied.  The controller unfences the broker once that offset
reaches its registration record; while fenced, the next heartbeat goes as soon as the
broker's metadata has moved on (as Kafka's does, every 10 ms until caught up), so a starting
broker is unfenced in one round trip after catching up, not one heartbeat interval later.
Shutdown: heartbeats ask for controlled shutdown until the controller has moved leadership
away and answers ``should_shut_down``.  A broker whose log directory failed names it in
``offline_log_dirs`` and asks to stay fenced, so the controller moves its leaderships away
while the node keeps running (see ``broker/replica_manager.py``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

import trio

from broker.controller_channel import ControllerChannel, ControllerUnavailable
from broker.metadata_listener import MetadataListener
from kraft.protocol.error_codes import ErrorCode
from kraft.server_config import ServerConfig
from metadata.features import registration_features

log = logging.getLogger(__name__)



# How long every other controller must have been seen gone before a controlled shutdown
# stops waiting for one (a leader that just moved is found well within it).
QUORUM_GONE_GRACE_S = 1.0


class BrokerLifecycle:
    def __init__(self, config: ServerConfig, cluster_id: str, channel: ControllerChannel,
                 metadata: MetadataListener, offline_log_dirs: Callable[[], list[uuid.UUID]] = list,
                 quorum_gone: Callable[[], bool] = lambda: False):
        self.config = config
        # True while no other controller process is running (a combined node's Raft saw every
        # other voter refuse its connections): then no controller can grant a controlled
        # shutdown, and waiting for one only delays the exit.
        self.quorum_gone = quorum_gone
        self.offline_log_dirs = offline_log_dirs
        self.cluster_id = cluster_id
        self.channel = channel
        self.metadata = metadata
        self.incarnation_id = uuid.uuid4()
        self.broker_epoch = -1
        self.fenced = True
        self.registered = trio.Event()
        self.unfenced = trio.Event()
        self._want_shutdown = False
        self._reported_offset = -1  # the metadata offset the last heartbeat carried
        self._heard_by = -1  # the controller that answered the last heartbeat
        self.shutdown_granted = trio.Event()

    def registration_body(self) -> dict:
        from kraft.security.config import PROTOCOL_IDS

        listeners = [{"name": e.listener, "host": e.host or "127.0.0.1", "port": e.port,
                      "security_protocol": PROTOCOL_IDS[self.config.security_protocol(e.listener)]}
                     for e in self.config.advertised_listeners
                     if e.listener not in self.config.controller_listener_names]
        return {
            "broker_id": self.config.node_id, "cluster_id": self.cluster_id,
            "incarnation_id": self.incarnation_id, "listeners": listeners,
            "features": registration_features(),
            "rack": self.config["broker.rack"], "is_migrating_zk_broker": False,
            "log_dirs": [], "previous_broker_epoch": -1,
        }

    async def run(self) -> None:
        interval = self.config["broker.heartbeat.interval.ms"] / 1000
        while True:
            await self._register()
            while self.broker_epoch >= 0:
                try:
                    await self._heartbeat()
                except ControllerUnavailable as exc:
                    log.info("heartbeat failed: %s", exc)
                if self.shutdown_granted.is_set():
                    return
                if self._want_shutdown:
                    await trio.sleep(interval / 4)
                elif self.fenced:
                    await self._until_metadata_passes(self._reported_offset, interval)
                else:
                    # At the interval, or at once when another controller becomes active: a
                    # new controller starts every session afresh and, until it hears from a
                    # broker, cannot tell a live one from a dead one (issue 19: every broker
                    # heartbeating within 3 s of the active controller's SIGKILL).
                    with trio.move_on_after(interval):
                        await self.channel.wait_leader_change()

    async def _until_metadata_passes(self, offset: int, timeout_s: float) -> None:
        """Until the applied metadata is past ``offset`` and at the registration record, or
        ``timeout_s``: a fenced broker's heartbeat is worth sending only when it reports more."""
        with trio.move_on_after(timeout_s):
            await self.metadata.wait_for(lambda img: img.offset > offset and img.offset >= self.broker_epoch)

    def ready_to_serve(self) -> bool:
        """Whether clients may be served, as Kafka's broker enables request processing only
        after its initial catch-up and unfencing: this incarnation is registered, its metadata
        has reached the registration record, the image shows it unfenced (so its Metadata
        answers name it), and an active controller is known (to forward CreateTopics to)."""
        image = self.metadata.image
        me = image.broker(self.config.node_id)
        return (self.broker_epoch >= 0 and image.offset >= self.broker_epoch and me is not None
                and me.epoch == self.broker_epoch and me.is_active and self.metadata.leader.leader_id >= 0)

    async def _register(self) -> None:
        while True:
            try:
                response = await self.channel.request("BrokerRegistration", 4, self.registration_body())
            except ControllerUnavailable as exc:
                log.info("registration failed: %s", exc)
                await trio.sleep(0.5)
                continue
            error = response["error_code"]
            if error == ErrorCode.NONE:
                self.broker_epoch = response["broker_epoch"]
                log.info("registered with broker epoch %d", self.broker_epoch)
                self.registered.set()
                return
            log.warning("registration refused: %s", ErrorCode(error).name)
            if error == ErrorCode.INCONSISTENT_CLUSTER_ID:
                raise RuntimeError("the controller quorum belongs to a different cluster id")
            await trio.sleep(1.0)

    async def _heartbeat(self) -> None:
        offline = self.offline_log_dirs()
        self._reported_offset = self.metadata.image.offset
        body = {"broker_id": self.config.node_id, "broker_epoch": self.broker_epoch,
                "current_metadata_offset": self._reported_offset,
                "want_fence": bool(offline), "want_shut_down": self._want_shutdown,
                "offline_log_dirs": offline}
        response = await self.channel.request("BrokerHeartbeat", 1, body, timeout_s=10)
        error = response["error_code"]
        if error == ErrorCode.STALE_BROKER_EPOCH:
            log.warning("heartbeat refused as stale: registering again")
            self.broker_epoch = -1
            return
        if error != ErrorCode.NONE:
            log.info("heartbeat error %s", ErrorCode(error).name)
            return
        if self.channel.answered_by != self._heard_by:
            self._heard_by = self.channel.answered_by
            log.info("heartbeat answered by the active controller %d", self._heard_by)
        was_fenced, self.fenced = self.fenced, response["is_fenced"]
        if was_fenced and not self.fenced:
            log.info("unfenced")
            self.unfenced.set()
        if self._want_shutdown and response["should_shut_down"]:
            self.shutdown_granted.set()

    async def controlled_shutdown(self, timeout_s: float) -> None:
        """Ask the controller to move leadership away; wait (bounded) for its go-ahead."""
        if self.broker_epoch < 0:
            return
        self._want_shutdown = True
        async with trio.open_nursery() as nursery:
            async def ask() -> None:
                try:
                    while not self.shutdown_granted.is_set():
                        await self._heartbeat()
                        if not self.shutdown_granted.is_set():
                            await trio.sleep(0.1)
                except ControllerUnavailable:
                    pass
                nursery.cancel_scope.cancel()

            async def watch_quorum() -> None:
                # Stopping every node of a combined cluster at once left the last one
                # waiting out the whole timeout for controllers that had already exited.
                gone_since = None
                while True:
                    now = trio.current_time()
                    gone_since = (gone_since or now) if self.quorum_gone() else None
                    if gone_since is not None and now - gone_since >= QUORUM_GONE_GRACE_S:
                        log.info("no other controller is running: shutting down without the "
                                 "controller's go-ahead")
                        nursery.cancel_scope.cancel()
                        return
                    await trio.sleep(0.1)

            nursery.cancel_scope.deadline = trio.current_time() + timeout_s
            nursery.start_soon(ask)
            nursery.start_soon(watch_quorum)
