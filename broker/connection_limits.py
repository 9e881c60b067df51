"""Kafka's limits on client connections, counted per server (a node's broker listeners share
one count, its controller listener has its own, as Kafka's broker and controller each have a
SocketServer).

* ``max.connections``: at the limit the server stops accepting; new connections wait in the
  kernel's backlog until one closes (Kafka's acceptor blocks the same way).
* ``max.connections.per.ip`` (and ``max.connections.per.ip.overrides``, ``host:count,...``):
  a connection over its address's limit is closed as soon as it is accepted.
* ``connections.max.idle.ms``: a connection with nothing in flight that sends nothing for
  that long is closed, so half-sent frames and forgotten sockets give their memory back.

Beyond Kafka: ``max.connections`` never exceeds what the open files limit leaves after the
segment file cache (``kraft.log.open.files.max``) and a reserve, split between the node's
two servers.  Kafka's default is unlimited, and a flood of connections then takes the
descriptors its logs need, which fails the log directory; here the flood waits in the
backlog and the logs keep their files.

``ConnectionQuotas`` only counts; ``broker.network`` applies it.
"""

from __future__ import annotations

import logging
import resource
from collections import Counter
from dataclasses import dataclass, field

import trio

from kraft.server_config import parse_per_ip_overrides

UNLIMITED = 2**31 - 1
# Descriptors kept for everything but client connections and segment files: the metadata
# log and its snapshots, checkpoints being rewritten, the node's own connections to its peers.
RESERVED_FDS = 512
MIN_CONNECTIONS = 64

log = logging.getLogger(__name__)


def connections_the_files_allow(segment_files_max: int) -> int:
    """The connections one of a node's two servers may hold within the open files limit."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return UNLIMITED
    return max(MIN_CONNECTIONS, (soft - segment_files_max - RESERVED_FDS) // 2)


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int = UNLIMITED
    max_connections_per_ip: int = UNLIMITED
    per_ip_overrides: dict[str, int] = field(default_factory=dict)
    idle_timeout_s: float = 600.0  # connections.max.idle.ms

    @classmethod
    def from_config(cls, config) -> "ConnectionLimits":
        allowed = connections_the_files_allow(config["kraft.log.open.files.max"])
        if allowed < config["max.connections"]:
            log.info("max.connections: at most %d on each listener, what the open files limit "
                     "leaves after kraft.log.open.files.max (%d) and %d in reserve",
                     allowed, config["kraft.log.open.files.max"], RESERVED_FDS)
        return cls(max_connections=min(config["max.connections"], allowed),
                   max_connections_per_ip=config["max.connections.per.ip"],
                   per_ip_overrides=parse_per_ip_overrides(config["max.connections.per.ip.overrides"]),
                   idle_timeout_s=config["connections.max.idle.ms"] / 1000)

    def limit_for(self, address: str) -> int:
        return self.per_ip_overrides.get(address, self.max_connections_per_ip)


class ConnectionQuotas:
    """Open connections of one server, in total and per peer address."""

    def __init__(self, limits: ConnectionLimits):
        self.limits = limits
        self.total = 0
        self.per_ip: Counter[str] = Counter()
        self._room = trio.Event()
        self._room.set()

    async def wait_for_room(self) -> None:
        """Return once fewer than ``max.connections`` are open."""
        while self.total >= self.limits.max_connections:
            self._room = trio.Event()
            await self._room.wait()

    def admit(self, address: str) -> bool:
        """Count a new connection from ``address``; False (nothing counted) over its limit."""
        if self.per_ip[address] >= self.limits.limit_for(address):
            return False
        self.per_ip[address] += 1
        self.total += 1
        return True

    def release(self, address: str) -> None:
        self.per_ip[address] -= 1
        if not self.per_ip[address]:
            del self.per_ip[address]
        self.total -= 1
        self._room.set()
