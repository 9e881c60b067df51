"""Producer ids for InitProducerId, idempotent and transactional alike: blocks allocated by
the active controller (AllocateProducerIds), handed out one by one."""

from __future__ import annotations

import trio

from broker.controller_channel import ControllerChannel, ControllerUnavailable
from kraft.protocol.error_codes import ErrorCode


class ProducerIdError(Exception):
    def __init__(self, error_code: int):
        super().__init__(ErrorCode(error_code).name)
        self.error_code = error_code


class ProducerIdAllocator:
    def __init__(self, channel: ControllerChannel, broker_id: int, broker_epoch):
        self.channel = channel
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._block: list[int] = []  # the rest of the current block, next id last
        self._lock = trio.Lock()

    async def ensure_available(self) -> None:
        """Make sure :meth:`take` has an id; raises ProducerIdError when the controller
        cannot give a block (COORDINATOR_NOT_AVAILABLE when it cannot be reached)."""
        async with self._lock:
            if self._block:
                return
            try:
                resp = await self.channel.request("AllocateProducerIds", 0, {
                    "broker_id": self.broker_id, "broker_epoch": self._broker_epoch()})
            except ControllerUnavailable:
                raise ProducerIdError(ErrorCode.COORDINATOR_NOT_AVAILABLE) from None
            if resp["error_code"]:
                raise ProducerIdError(resp["error_code"])
            start, length = resp["producer_id_start"], resp["producer_id_len"]
            self._block = list(range(start + length - 1, start - 1, -1))

    def take(self) -> int:
        """The next id (call :meth:`ensure_available` first, with no await between)."""
        return self._block.pop()

    async def next_id(self) -> int:
        await self.ensure_available()
        return self.take()
