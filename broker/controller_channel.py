"""Requests from a broker to the active controller, wherever it currently is.

The active controller is the Raft leader; brokers learn it from the metadata log they
follow.  A request goes to that controller's CONTROLLER listener; NOT_CONTROLLER, a broken
connection or an unknown leader make the channel wait for a leader change and try again
until the caller's deadline.  A leader change while a request is in flight abandons it and
sends it to the new controller at once: an old controller that was cut off never answers,
and waiting out its request timeout kept every broker's heartbeats away from the new one
for 10 s (so a cut-off leader was not fenced in time).  Controller requests are safe to
repeat (heartbeats, registrations with one incarnation id, AlterPartition with its partition
epoch; a repeated CreateTopics answers TOPIC_ALREADY_EXISTS), as Kafka's forwarding retries.
"""

from __future__ import annotations

import logging

import trio

from kraft.client import KafkaClient, NodeUnavailable
from kraft.protocol.error_codes import ErrorCode
from kraft.raft.driver import PeerAddress

log = logging.getLogger(__name__)


class ControllerUnavailable(Exception):
    pass


class ControllerChannel:
    def __init__(self, client: KafkaClient, controllers: dict[int, PeerAddress], leader_fn):
        self.client = client
        self.controllers = controllers
        self._leader_fn = leader_fn  # () -> active controller id or -1
        self._leader_changed = trio.Event()
        self.answered_by = -1  # the controller that answered the last request

    def on_leader_change(self, _leader=None) -> None:
        self._leader_changed.set()
        self._leader_changed = trio.Event()

    async def wait_leader_change(self) -> None:
        """Until the active controller changes (or stops being known)."""
        await self._leader_changed.wait()

    async def request(self, api: str, version: int, body: dict, timeout_s: float = 30.0) -> dict:
        """Send to the active controller, retrying across leader changes until ``timeout_s``.

        Raises ControllerUnavailable when no controller answered in time.
        """
        last = "no active controller is known"
        with trio.move_on_after(timeout_s):
            while True:
                leader = self._leader_fn()
                address = self.controllers.get(leader)
                if address is not None:
                    # What the caller hears if its deadline passes during this send.
                    last = f"controller {leader} did not answer within {timeout_s:g}s"
                    try:
                        response = await self._send(leader, address, api, version, body, min(timeout_s, 15.0))
                        if response is None:
                            last = f"controller {leader} stopped being active while {api} was in flight"
                            continue
                        if not _from_inactive_controller(api, response):
                            self.answered_by = leader
                            return response
                        last = f"controller {leader} is no longer active"
                    except NodeUnavailable as exc:
                        last = str(exc)
                with trio.move_on_after(0.25):
                    await self._leader_changed.wait()
        raise ControllerUnavailable(f"{api}: {last}")

    async def _send(self, leader: int, address: PeerAddress, api: str, version: int, body: dict,
                    timeout_s: float) -> dict | None:
        """The controller's answer, or None when another controller became active first."""
        answer: dict | None = None
        failure: NodeUnavailable | None = None

        async def ask(done: trio.CancelScope) -> None:
            nonlocal answer, failure
            try:  # caught here, in its task: nothing but cancellation crosses the nursery
                # A request that timed out is still queued at the controller, and a
                # connection's answers come in order: what follows goes on a new connection.
                answer = await self.client.request(address.host, address.port, api, version, body,
                                                   timeout_s=timeout_s, close_on_timeout=True)
            except NodeUnavailable as exc:
                failure = exc
            done.cancel()

        async def watch_leader(done: trio.CancelScope) -> None:
            while True:
                changed = self._leader_changed
                if self._leader_fn() != leader:
                    done.cancel()
                    return
                await changed.wait()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, nursery.cancel_scope)
            nursery.start_soon(watch_leader, nursery.cancel_scope)
        if failure is not None:
            raise failure
        return answer


# The quorum's own APIs (KIP-853) answer NOT_LEADER_OR_FOLLOWER from a controller that is not
# the Raft leader, where the controller's APIs answer NOT_CONTROLLER.
_QUORUM_APIS = frozenset({"AddRaftVoter", "RemoveRaftVoter"})


def _from_inactive_controller(api: str, response: dict) -> bool:
    """Whether a controller answered NOT_CONTROLLER: in the top-level error code, or, for
    APIs whose errors are per item (CreateTopics, AlterClientQuotas, ...), in every item
    of a list (a controller that is not active fails them all, and only it answers that)."""
    inactive = {ErrorCode.NOT_CONTROLLER}
    if api in _QUORUM_APIS:
        inactive.add(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    if response.get("error_code") in inactive:
        return True
    for value in response.values():
        if isinstance(value, list) and value and all(
                isinstance(item, dict) and item.get("error_code") == ErrorCode.NOT_CONTROLLER for item in value):
            return True
    return False
