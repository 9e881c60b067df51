"""Requests from a broker to the active controller, wherever it currently is.

The active controller is the Raft leader; brokers learn it from the metadata log they
follow.  A request goes to that controller's CONTROLLER listener; NOT_CONTROLLER, a broken
connection or an unknown leader make the channel wait for a leader change and try again
until the caller's deadline.
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

    def on_leader_change(self, _leader=None) -> None:
        self._leader_changed.set()
        self._leader_changed = trio.Event()

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
                    try:
                        response = await self.client.request(address.host, address.port, api, version,
                                                             body, timeout_s=min(timeout_s, 15.0))
                        if response.get("error_code") != ErrorCode.NOT_CONTROLLER:
                            return response
                        last = f"controller {leader} is no longer active"
                    except NodeUnavailable as exc:
                        last = str(exc)
                with trio.move_on_after(0.25):
                    await self._leader_changed.wait()
        raise ControllerUnavailable(f"{api}: {last}")
