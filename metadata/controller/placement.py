"""Replica placement: rack-aware round robin, after Kafka's classic assignment.

Brokers are lined up alternating racks (rack A's first broker, rack B's first, ..., rack
A's second, ...).  Partition p's first replica -- its preferred leader -- is the broker at
``(p + start) % n`` of that line, so leaders go round the brokers evenly.  Each further
replica steps from the first by a shift that grows once per full round of partitions, and
skips brokers whose rack already holds a replica (until every rack holds one) and brokers
already chosen.  ``start`` and the initial shift come from the injected random generator,
so successive topics do not all start on the same broker.

A broker without a rack counts as a rack of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from random import Random


class PlacementError(ValueError):
    """Not enough usable brokers for the replication factor (INVALID_REPLICATION_FACTOR)."""


@dataclass(frozen=True, slots=True)
class UsableBroker:
    id: int
    rack: str | None


def _rack_of(b: UsableBroker):
    return ("rack", b.rack) if b.rack is not None else ("norack", b.id)


def rack_alternated(brokers: list[UsableBroker]) -> list[int]:
    by_rack: dict = {}
    for b in sorted(brokers, key=lambda b: b.id):
        by_rack.setdefault(_rack_of(b), []).append(b.id)
    racks = sorted(by_rack)
    out: list[int] = []
    depth = 0
    while len(out) < len(brokers):
        for rack in racks:
            ids = by_rack[rack]
            if depth < len(ids):
                out.append(ids[depth])
        depth += 1
    return out


def place(
    brokers: list[UsableBroker],
    num_partitions: int,
    replication_factor: int,
    rng: Random,
    *,
    start_partition: int = 0,
) -> list[list[int]]:
    """Replica lists for partitions ``start_partition .. start_partition + num_partitions - 1``."""
    if replication_factor <= 0:
        raise PlacementError(f"replication factor must be larger than 0, got {replication_factor}")
    if replication_factor > len(brokers):
        raise PlacementError(
            f"unable to replicate the partition {replication_factor} time(s): the number of "
            f"usable brokers is only {len(brokers)}"
        )
    rack = {b.id: _rack_of(b) for b in brokers}
    num_racks = len(set(rack.values()))
    line = rack_alternated(brokers)
    n = len(line)
    start = rng.randrange(n)
    shift = rng.randrange(n)
    out = []
    for p in range(start_partition, start_partition + num_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        chosen = [line[first]]
        racks_used = {rack[line[first]]}
        k = 0
        while len(chosen) < replication_factor:
            step = 1 + (shift * num_racks + k) % (n - 1)
            broker = line[(first + step) % n]
            k += 1
            if rack[broker] in racks_used and len(racks_used) < num_racks:
                continue
            if broker in chosen:
                continue
            chosen.append(broker)
            racks_used.add(rack[broker])
        out.append(chosen)
    return out
