"""Network fault model: grudges, packet behaviours and the rules that enforce them.

Theory of operation.  A *grudge* says who refuses to hear from whom: a mapping
``node -> set of nodes whose packets it drops``.  A partition of the nodes into
*components* becomes a grudge by letting every node drop traffic from every node outside
its own component (``complete_grudge``).  The named partition specs of Jepsen's combined
nemesis (``one``, ``majority``, ``majorities-ring``, ``minority-third``, ``primaries``), and
``leader`` (the leader of one partition the workload writes to, cut off from every other
node) are pure functions of the node list, a seeded ``random.Random`` and, for
``primaries`` and ``leader``, the nodes currently believed to lead.  Nothing here touches
the system: the host backends turn a grudge and packet behaviours into nftables rulesets
(``nft_ruleset``) and ``tc netem`` arguments (``netem_args``) and apply them.

Grudges are enforced on the *receiving* side (an input-hook drop), as in Jepsen, so an
asymmetric grudge (majorities-ring with an even majority) is an asymmetric partition.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

Node = int
Grudge = dict[Node, set[Node]]

PARTITION_SPECS = ("one", "majority", "majorities-ring", "minority-third", "primaries", "leader")


# -- sizes ---------------------------------------------------------------------------------

def majority(n: int) -> int:
    """The smallest number of nodes that is more than half of ``n``."""
    return n // 2 + 1


def minority(n: int) -> int:
    """The largest number of nodes that is not a majority of ``n``."""
    return majority(n) - 1


def minority_third(n: int) -> int:
    """The largest count strictly below a third of ``n`` (0 for ``n <= 3``)."""
    return max(0, (n - 1) // 3)


# -- grudges -------------------------------------------------------------------------------

def complete_grudge(components: Iterable[Iterable[Node]]) -> Grudge:
    """Every node drops traffic from every node outside its own component."""
    comps = [set(c) for c in components]
    everyone = set().union(*comps) if comps else set()
    grudge: Grudge = {}
    for comp in comps:
        for node in comp:
            others = everyone - comp
            if others:
                grudge[node] = others
    return grudge


def bisect(nodes: Sequence[Node]) -> list[list[Node]]:
    """Split into two halves, the first one the smaller (a minority)."""
    half = len(nodes) // 2
    return [list(nodes[:half]), list(nodes[half:])]


def split_one(nodes: Sequence[Node], rng: random.Random) -> list[list[Node]]:
    """One random node alone, the rest together."""
    lone = rng.choice(list(nodes))
    return [[lone], [n for n in nodes if n != lone]]


def majorities_ring(nodes: Sequence[Node], rng: random.Random) -> Grudge:
    """Every node sees a majority, and no two nodes see the same majority.

    The nodes are placed on a shuffled ring; each hears from the window of ``majority(n)``
    consecutive ring positions around itself and drops everything else.  With an even
    majority (3 nodes: each hears itself and its successor) the grudge is asymmetric.  With
    one or two nodes the only majority is everyone, so the grudge is empty.
    """
    ring = list(nodes)
    rng.shuffle(ring)
    n = len(ring)
    m = majority(n)
    if m >= n:
        return {}
    behind = (m - 1) // 2
    grudge: Grudge = {}
    for i, node in enumerate(ring):
        window = {ring[(i - behind + k) % n] for k in range(m)}
        grudge[node] = set(ring) - window
    return grudge


def partition_grudge(spec: str, nodes: Sequence[Node], rng: random.Random,
                     primaries: Iterable[Node] = ()) -> Grudge:
    """The grudge for one of ``PARTITION_SPECS``.

    Args:
        spec: the partition spec name.
        nodes: all nodes of the cluster.
        rng: the seeded generator every random choice comes from.
        primaries: for ``primaries``, the nodes believed to lead (the active controller,
            partition leaders); each of them ends up alone.  For ``leader``, the first of
            them (the partition leader to isolate) ends up alone.

    Raises:
        ValueError: an unknown spec, or ``primaries``/``leader`` without any primary among
            ``nodes``.
    """
    nodes = list(nodes)
    if spec == "one":
        return complete_grudge(split_one(nodes, rng))
    if spec == "majority":
        shuffled = nodes[:]
        rng.shuffle(shuffled)
        return complete_grudge(bisect(shuffled))
    if spec == "majorities-ring":
        return majorities_ring(nodes, rng)
    if spec == "minority-third":
        shuffled = nodes[:]
        rng.shuffle(shuffled)
        k = minority_third(len(nodes))
        return complete_grudge([shuffled[:k], shuffled[k:]])
    if spec == "primaries":
        prim = sorted(set(primaries) & set(nodes))
        if not prim:
            raise ValueError("partition 'primaries' needs at least one known primary")
        return complete_grudge([[n for n in nodes if n not in prim], *[[p] for p in prim]])
    if spec == "leader":
        lead = [p for p in primaries if p in nodes][:1]
        if not lead:
            raise ValueError("partition 'leader' needs a known leader")
        return complete_grudge([lead, [n for n in nodes if n not in lead]])
    raise ValueError(f"unknown partition spec {spec!r} (one of {', '.join(PARTITION_SPECS)})")


def grudge_components(grudge: Mapping[Node, set[Node]], nodes: Iterable[Node]) -> list[list[Node]]:
    """Groups of nodes that all hear each other (for readable op values); for a grudge made by
    ``complete_grudge`` these are exactly its components."""
    groups: dict[frozenset, list[Node]] = {}
    for node in sorted(nodes):
        groups.setdefault(frozenset(grudge.get(node, ())), []).append(node)
    return sorted(groups.values())


# -- packet behaviours ---------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class PacketBehavior:
    """What ``tc netem`` does to every packet leaving an interface.

    ``delay_ms`` with ``jitter_ms``; ``loss``, ``duplicate``, ``reorder`` in percent
    (reordering needs a delay: the reordered packets are the ones sent without it).
    """

    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0

    def __post_init__(self):
        for name in ("loss", "duplicate", "reorder"):
            value = getattr(self, name)
            if not 0.0 <= value <= 100.0:
                raise ValueError(f"{name} must be a percentage, got {value}")
        if self.delay_ms < 0 or self.jitter_ms < 0:
            raise ValueError("delays must not be negative")
        if self.reorder and not self.delay_ms:
            raise ValueError("reorder needs a delay (netem reorders by sending some packets early)")

    @property
    def loss_only(self) -> bool:
        return not (self.delay_ms or self.duplicate or self.reorder)

    def to_dict(self) -> dict[str, float]:
        return {k: getattr(self, k) for k in self.__slots__ if getattr(self, k)}


def netem_args(b: PacketBehavior) -> list[str]:
    """The ``tc qdisc replace dev DEV root netem ...`` arguments after ``netem``."""
    args: list[str] = []
    if b.delay_ms:
        args += ["delay", f"{b.delay_ms:g}ms"]
        if b.jitter_ms:
            args += [f"{b.jitter_ms:g}ms", "distribution", "normal"]
    if b.loss:
        args += ["loss", f"{b.loss:g}%"]
    if b.duplicate:
        args += ["duplicate", f"{b.duplicate:g}%"]
    if b.reorder:
        args += ["reorder", f"{b.reorder:g}%", "50%"]
    return args


# -- nftables ------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class DropRule:
    """Drop packets from ``src`` (to ``dst`` when given); ``percent`` < 100 drops at random."""

    src: str | None = None
    dst: str | None = None
    percent: float = 100.0

    def nft(self) -> str:
        parts = []
        if self.src:
            parts.append(f"ip saddr {self.src}")
        if self.dst:
            parts.append(f"ip daddr {self.dst}")
        if self.percent < 100.0:
            # numgen draws 0..9999: drop when below percent * 100.
            parts.append(f"numgen random mod 10000 < {int(round(self.percent * 100))}")
        parts.append("drop")
        return " ".join(parts)


def nft_ruleset(family: str, table: str, rules: Iterable[DropRule]) -> str:
    """An ``nft -f -`` script that atomically replaces ``table`` with an input-hook chain
    holding ``rules`` (declaring the table first makes the flush valid when it is new)."""
    lines = [f"table {family} {table} {{}}", f"flush table {family} {table}",
             f"table {family} {table} {{",
             "  chain input {",
             "    type filter hook input priority 0; policy accept;"]
    lines += [f"    {r.nft()}" for r in rules]
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


def grudge_rules(grudge: Mapping[Node, set[Node]], address: Callable[[Node], str],
                 with_dst: bool) -> list[DropRule]:
    """Drop rules for a grudge: node ``b`` drops what comes from each node in ``grudge[b]``.
    ``with_dst`` adds b's address to each rule (needed where all nodes share one input hook,
    as on loopback; a namespace's own hook only sees its own traffic)."""
    rules = []
    for dst, srcs in sorted(grudge.items()):
        for src in sorted(srcs):
            rules.append(DropRule(address(src), address(dst) if with_dst else None))
    return rules
