"""Which nodes a fault hits: target specs resolved against the cluster as it is now.

A spec is one of ``TARGET_SPECS``, a ``{"leader": [topic, partition]}`` dict, or an
explicit list of node ids.  ``controller``, ``leader`` and ``primaries`` ask an ``Oracle``
(callables the harness provides) who currently leads; a spec whose answer is unknown
selects nobody, and the op's value says so.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from jepsen.net import majority, minority, minority_third

TARGET_SPECS = ("one", "minority", "majority", "minority-third", "all", "controller", "leader",
                "primaries")


@dataclass
class Oracle:
    """Who leads right now.  Each callable may return None (unknown) or raise.

    ``controller()`` -> the active controller's node id; ``leader(topic, partition)`` -> the
    partition leader's node id; ``partitions`` are the partitions whose leaders count as
    primaries (the default one for a plain ``"leader"`` spec is the first).
    """

    controller: Callable[[], int | None] | None = None
    leader: Callable[[str, int], int | None] | None = None
    partitions: Sequence[tuple[str, int]] = ()
    #: For nemeses that act through the cluster's own APIs (membership): where to reach
    #: it, and the workload's topics with their partition counts.
    bootstrap: str | None = None
    topics: Sequence[tuple[str, int]] = ()

    def active_controller(self) -> int | None:
        return _ask(self.controller)

    def leader_of(self, topic: str, partition: int) -> int | None:
        return _ask(self.leader, topic, partition) if self.leader else None

    def primaries(self) -> list[int]:
        found = {self.active_controller()}
        found |= {self.leader_of(t, p) for t, p in self.partitions}
        return sorted(n for n in found if n is not None)


def _ask(fn, *args):
    if fn is None:
        return None
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - an unreachable cluster means "unknown"
        return None


def select_targets(spec, nodes: Sequence[int], rng: random.Random,
                   oracle: Oracle | None = None) -> list[int]:
    """The nodes ``spec`` names, sorted.

    Raises:
        ValueError: an unknown spec, or an explicit list naming unknown nodes.
    """
    nodes = list(nodes)
    oracle = oracle or Oracle()
    if isinstance(spec, (list, tuple)):
        unknown = set(spec) - set(nodes)
        if unknown:
            raise ValueError(f"target names unknown nodes {sorted(unknown)}")
        return sorted(set(spec))
    if isinstance(spec, dict) and set(spec) == {"leader"}:
        topic, partition = spec["leader"]
        return _known(oracle.leader_of(topic, int(partition)), nodes)
    shuffled = nodes[:]
    rng.shuffle(shuffled)
    n = len(nodes)
    if spec == "one":
        return shuffled[:1]
    if spec == "minority":
        return sorted(shuffled[:minority(n)])
    if spec == "majority":
        return sorted(shuffled[:majority(n)])
    if spec == "minority-third":
        return sorted(shuffled[:minority_third(n)])
    if spec == "all":
        return sorted(nodes)
    if spec == "controller":
        return _known(oracle.active_controller(), nodes)
    if spec == "leader":
        if not oracle.partitions:
            return []
        return _known(oracle.leader_of(*oracle.partitions[0]), nodes)
    if spec == "primaries":
        prim = [p for p in oracle.primaries() if p in nodes]
        if not prim:
            return []
        k = rng.randint(1, len(prim))  # a random non-empty subset, as Jepsen does
        return sorted(rng.sample(prim, k))
    raise ValueError(f"unknown target spec {spec!r} (one of {', '.join(TARGET_SPECS)}, "
                     "{'leader': [topic, partition]} or a list of node ids)")


def _known(node: int | None, nodes: Sequence[int]) -> list[int]:
    return [node] if node is not None and node in nodes else []
