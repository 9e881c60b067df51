"""Replication quotas (Kafka's ReplicationQuotaManager, sans I/O): a bound on the bytes per
second that replication of *throttled* replicas may move, one quota for this broker as a
leader answering followers and one for it as a follower fetching.

Which replicas are throttled is a topic config, ``leader.replication.throttled.replicas`` /
``follower.replication.throttled.replicas``: ``partition:broker,...`` pairs or ``*`` (every
replica of the topic); a broker throttles the partitions whose pair names *it*.  The bound is
a broker config, ``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate``
(bytes/s; unset or Long.MAX_VALUE: unbounded).  ``kafka-reassign-partitions --throttle`` sets
both around a reassignment.

As in Kafka the measure is a ``SimpleRate`` over ``replication.quota.window.num`` windows of
``replication.quota.window.size.seconds``; every byte moved for a throttled partition is
recorded, whether its follower is in the ISR or not, so the total stays under the bound; but
only a follower *outside* the ISR is ever held back while the quota is exceeded (a leader
answers it no records, a follower leaves it out of its fetch), so acks=all writes, which wait
for the ISR alone, are never slowed and the ISR does not thrash.
"""

from __future__ import annotations

import re
from typing import Mapping

from kraft.quotas.rate import SimpleRate

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
UNBOUNDED = 2**63 - 1  # Kafka's default rate, Long.MAX_VALUE: no throttle
ALL_REPLICAS = "*"
THROTTLED_REPLICAS_FORMAT = ("the literal '*' or a list of replicas in the form "
                             "[partitionId]:[brokerId],[partitionId]:[brokerId],...")

_PAIR = re.compile(r"[0-9]+:[0-9]+")

Throttled = frozenset[int] | str  # partition ids, or ALL_REPLICAS


def valid_throttled_replicas(items: list[str]) -> bool:
    """Whether the (comma-split, trimmed) items of a throttled-replicas config are valid."""
    items = [i for i in items if i]
    return items == [ALL_REPLICAS] or all(_PAIR.fullmatch(i) for i in items)


def throttled_partitions(value: str, broker_id: int) -> Throttled:
    """The partitions a throttled-replicas config throttles on ``broker_id``.  A value the
    controller let through is valid; anything else throttles nothing."""
    items = [i.strip() for i in value.split(",") if i.strip()]
    if items == [ALL_REPLICAS]:
        return ALL_REPLICAS
    out = set()
    for item in items:
        if not _PAIR.fullmatch(item):
            return frozenset()
        partition, broker = item.split(":")
        if int(broker) == broker_id:
            out.add(int(partition))
    return frozenset(out)


def parse_rate(value: str | None) -> int | None:
    """A throttled-rate config as a bound in bytes/s, None for unbounded."""
    try:
        bound = int(value) if value is not None else UNBOUNDED
    except ValueError:
        return None
    return None if bound >= UNBOUNDED or bound < 0 else bound


class ReplicationQuota:
    """One side's quota: which partitions are throttled, the bound, the measured rate."""

    def __init__(self, samples: int = 11, window_ms: float = 1000.0):
        self._rate = SimpleRate(samples, window_ms)
        self.bound: int | None = None  # bytes/s; None: unbounded
        self._throttled: Mapping[str, Throttled] = {}

    def update(self, bound: int | None, throttled: Mapping[str, Throttled]) -> None:
        """A new bound and throttled partitions (topic -> partition ids or ALL_REPLICAS);
        the rate measured so far is kept, as Kafka changes a sensor's quota."""
        self.bound = bound
        self._throttled = {t: p for t, p in throttled.items() if p}

    @property
    def active(self) -> bool:
        """Whether any partition is throttled (else nothing is checked or recorded)."""
        return bool(self._throttled)

    def is_throttled(self, topic: str, partition: int) -> bool:
        throttled = self._throttled.get(topic)
        return throttled is not None and (throttled == ALL_REPLICAS or partition in throttled)

    def is_quota_exceeded(self, now_ms: float) -> bool:
        return self.bound is not None and self._rate.rate(now_ms) > self.bound

    def record(self, value: int, now_ms: float) -> None:
        """Bytes moved for a throttled partition, in or out of the ISR."""
        self._rate.record(value, now_ms)

    def byte_rate(self, now_ms: float) -> float:
        """The measured bytes/s, read without changing anything (metrics, another thread)."""
        return self._rate.peek(now_ms)
