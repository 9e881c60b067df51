"""What a controller node needs from its quorum engine.

Two engines implement it: :class:`kraft.raft.driver.RaftDriver` (kraft's own KIP-595 Raft,
the default) and :class:`kraft.raft.pysyncobj_engine.PySyncObjEngine`
(``controller.quorum.engine=pysyncobj``).  The controller (``ControllerServer``), the node's
CONTROLLER listener and ``kraftctl`` only use the members listed here.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import trio

from kraft.raft.messages import LeaderAndEpoch


class _LogView(Protocol):
    @property
    def end_offset(self) -> int: ...


class _NodeView(Protocol):
    @property
    def log(self) -> _LogView: ...


@runtime_checkable
class QuorumEngine(Protocol):
    """The controller-side face of a replicated metadata log.

    Offsets are Kafka record offsets of ``__cluster_metadata-0``.  ``node.log.end_offset``
    on the leader is the offset the next ``propose`` will give its first record.
    ``handle`` serves the Kafka-wire quorum APIs arriving on the CONTROLLER listener (at
    least Fetch and FetchSnapshot from observers, i.e. brokers).  The listener
    (``handle_load_snapshot``, ``handle_commit``, ``handle_leader_change``) is called from
    the trio thread, in commit order.
    """

    closed: bool
    committed_offset: int
    node: _NodeView | Any  # only ``node.log.end_offset`` is used

    @property
    def leader(self) -> LeaderAndEpoch: ...

    @property
    def is_leader(self) -> bool: ...

    @property
    def high_watermark(self) -> int: ...

    def propose(self, records, quiet: bool = False) -> tuple[int, int]: ...

    async def wait_committed(self, offset: int) -> None: ...

    def create_snapshot(self, end_offset: int, records: list[bytes]) -> None: ...

    def resign(self) -> None: ...

    async def shutdown(self, timeout_s: float = 2.0) -> None: ...

    def describe_quorum(self) -> dict: ...

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None: ...

    async def handle(self, api: str, body: dict) -> dict: ...
