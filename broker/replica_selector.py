"""Fetching from the closest replica (KIP-392): which replica a consumer should read a
partition from, as the leader answers it in a fetch's ``preferred_read_replica``.

``replica.selector.class`` names Kafka's selector; kraft runs no Java classes, so it knows
Kafka's two by name.  With the rack-aware one, a consumer that gives its rack (librdkafka's
and Java's ``client.rack``, Fetch v11+) and whose rack does not hold the leader is sent to
an in-sync replica in its rack that has the offset it fetches, the one furthest ahead (then
the one caught up most recently), as Kafka's RackAwareReplicaSelector chooses.  Any replica
answers a Fetch v11+ consumer up to its own high watermark, whatever the selector.
"""

from __future__ import annotations

from collections.abc import Callable

RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
LEADER_ONLY = "org.apache.kafka.common.replica.LeaderSelector"  # Kafka's default behaviour
SELECTORS = (RACK_AWARE, LEADER_ONLY)


def preferred_read_replica(state, client_rack: str | None, fetch_offset: int,
                           rack_of: Callable[[int], str | None]) -> int | None:
    """The replica a consumer in ``client_rack`` should fetch from instead of this leader
    (``state``: its PartitionState), or None for the leader itself.  ``rack_of(id)``: a live
    broker's ``broker.rack`` (None for no rack, or for a broker that is not live)."""
    if not client_rack or rack_of(state.local_id) == client_rack:
        return None
    candidates = [r for rid, r in state.remote.items()
                  if rid in state.isr and r.log_start_offset <= fetch_offset <= r.log_end_offset
                  and rack_of(rid) == client_rack]
    if not candidates:
        return None
    best = max(candidates, key=lambda r: (r.log_end_offset, r.last_caught_up_time_ms, -r.replica_id))
    return best.replica_id
