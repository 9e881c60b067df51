"""Broker sessions: what the active controller knows of each broker without writing it down.

A heartbeat (or a registration) renews a broker's session and reports the metadata offset
the broker has applied; a session older than ``broker.session.timeout.ms`` has expired and
the broker is fenced (``cluster.expire_sessions``).  A broker in controlled shutdown is
remembered with the offset of the last record that moved its leaderships away: it may go
once every active broker has reported an offset past it.

A session also ends sooner when the connection the broker's last heartbeat came on closes:
``kraft.broker.session.disconnect.timeout.ms`` after the close, unless a heartbeat arrives
first (on any connection).  A killed broker's process leaves its sockets to the kernel,
which closes them at once; waiting out the whole session timeout after that left every
partition it led without a leader for 7-9 s more than needed (issue 19).  A live broker
whose connection broke reconnects with its next heartbeat; one that does not within the
timeout is fenced, which is safe (it asks to be unfenced again once heard).  A network
partition closes nothing, so there the session timeout still decides, as in Kafka.

This is soft state: never in the log, dropped when the controller stops being active, and
started afresh for every registered broker by a newly active controller.
"""

from __future__ import annotations

import uuid
from typing import Iterable, Iterator

NO_OFFSET = -1


class BrokerSessions:
    def __init__(self, timeout_ms: int, disconnect_timeout_ms: int = -1):
        self.timeout_ms = timeout_ms
        self.disconnect_timeout_ms = disconnect_timeout_ms  # < 0: closes end no session
        self._connection_of: dict[int, str] = {}  # broker -> its last heartbeat's connection
        self._last_contact_ms: dict[int, int] = {}
        self._metadata_offsets: dict[int, int] = {}  # last reported by each broker
        self.controlled_shutdown_offset: dict[int, int] = {}  # where its leaderships moved
        # Fenced brokers whose partitions are still being moved off, a batch per tick
        # (``cluster.continue_fencing``), each with the partitions not yet looked at (None:
        # not listed yet); a newly active controller checks every fenced one.
        self.leaving: dict[int, Iterator[tuple[uuid.UUID, int]] | None] = {}
        self.leaving_checked = False

    def start(self, broker_ids: Iterable[int], now_ms: int) -> None:
        """A session from ``now_ms`` for each broker that has none (after a failover)."""
        for broker_id in broker_ids:
            self._last_contact_ms.setdefault(broker_id, now_ms)

    def touch(self, broker_id: int, now_ms: int, metadata_offset: int | None = None) -> None:
        self._last_contact_ms[broker_id] = now_ms
        if metadata_offset is not None:
            self._metadata_offsets[broker_id] = metadata_offset

    def heard_on(self, broker_id: int, connection_id: str) -> None:
        """The broker's latest heartbeat (or registration) came on this connection."""
        if connection_id:
            self._connection_of[broker_id] = connection_id

    def connection_closed(self, connection_id: str, now_ms: int) -> int | None:
        """A connection closed: the broker whose last heartbeat came on it (if any) keeps
        its session ``disconnect_timeout_ms`` more at most.  Returns that broker's id."""
        if self.disconnect_timeout_ms < 0:
            return None
        broker_id = next((b for b, c in self._connection_of.items() if c == connection_id),
                         None)
        if broker_id is None:
            return None
        del self._connection_of[broker_id]
        self.lost(broker_id, now_ms)
        return broker_id

    def lost(self, broker_id: int, now_ms: int) -> None:
        """The broker's process is gone, as far as we can tell: its session ends
        ``disconnect_timeout_ms`` from now at the latest, unless it heartbeats."""
        if self.disconnect_timeout_ms < 0:
            return
        last = self._last_contact_ms.get(broker_id)
        if last is not None:
            ends = now_ms + self.disconnect_timeout_ms
            self._last_contact_ms[broker_id] = min(last, ends - self.timeout_ms)

    def forget(self, broker_id: int) -> None:
        self._connection_of.pop(broker_id, None)
        self.leaving.pop(broker_id, None)
        self._last_contact_ms.pop(broker_id, None)
        self._metadata_offsets.pop(broker_id, None)
        self.controlled_shutdown_offset.pop(broker_id, None)

    def clear(self) -> None:
        self._connection_of.clear()
        self.leaving.clear()
        self.leaving_checked = False
        self._last_contact_ms.clear()
        self._metadata_offsets.clear()
        self.controlled_shutdown_offset.clear()

    def next_end_ms(self, broker_ids: Iterable[int]) -> int:
        """When the first of these brokers' sessions ends (now, for one without a
        session: it gets one at the next tick)."""
        ends = [self._last_contact_ms.get(b) for b in broker_ids]
        if None in ends:
            return 0
        return min(ends, default=1 << 62) + self.timeout_ms

    def has_valid_session(self, broker_id: int, now_ms: int) -> bool:
        last = self._last_contact_ms.get(broker_id)
        return last is not None and now_ms - last < self.timeout_ms

    def lowest_metadata_offset(self, broker_ids: Iterable[int]) -> int:
        """The lowest metadata offset these brokers reported (-1 for one that has not)."""
        return min((self._metadata_offsets.get(b, NO_OFFSET) for b in broker_ids), default=1 << 63)
