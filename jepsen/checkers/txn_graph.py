"""Cycles in a transaction dependency graph, found and named as Elle names them.

Theory of operation
-------------------
Nodes are transactions (their invocation index); an edge ``a -> b`` carries one or more
types: ``ww``, ``wr``, ``rw`` (data dependencies, inferred from a history by
``jepsen.checkers.txn`` or ``jepsen.checkers.txn_spark``), ``process`` (``a`` is the
previous transaction of ``b``'s process) and ``realtime`` (``a`` completed before ``b``
was invoked).  Realtime edges are a transitive reduction (:func:`order_edges`): each
transaction links from the completed transactions nothing later completed "covers".

Search (:func:`find_cycles`): Tarjan's strongly connected components of the whole graph,
then, inside each component, for each anomaly class, a breadth-first search for a short
cycle that goes through one *start* edge and returns over *path* edges, meeting the
class's requirements (states are ``(node, requirements met)``).  The classes, in Adya's
and Elle's terms:

=====================  ==========  ==================  =================================
class                  start edge  path edges           the cycle must also contain
=====================  ==========  ==================  =================================
G0                     ww          ww                   --
G1c                    wr          ww, wr               --
G-single               rw          ww, wr               -- (so exactly one rw)
G2-item                rw          ww, wr, rw           a second rw
<class>-process        as above    + process            a process edge
<class>-realtime       as above    + process, realtime  a realtime edge
=====================  ==========  ==================  =================================

Each class searches the components of its own subgraph (the union of its start and path
types): a class whose edges form no cycle costs one Tarjan pass.  At most one cycle per
class and component is reported, the shortest *simple* cycle found from the first
:data:`MAX_STARTS` start edges, within :data:`MAX_STATES` search states (a component of
thousands of transactions costs a few breadth-first passes, not one per edge).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any, NamedTuple

DATA_TYPES = ("ww", "wr", "rw")
ORDER_TYPES = ("process", "realtime")
MAX_STARTS = 8
MAX_STATES = 25_000


class Node(NamedTuple):
    id: int  # the invocation index
    process: Any
    i_time: int
    c_time: int | None  # None: never completed (info)
    c_index: int | None


class CycleClass(NamedTuple):
    name: str
    start: frozenset
    path: frozenset
    needs: frozenset


def _classes() -> list[CycleClass]:
    base = [("G0", {"ww"}, {"ww"}, set()),
            ("G1c", {"wr"}, {"ww", "wr"}, set()),
            ("G-single", {"rw"}, {"ww", "wr"}, set()),
            ("G2-item", {"rw"}, {"ww", "wr", "rw"}, {"rw"})]
    out = [CycleClass(n, frozenset(s), frozenset(p), frozenset(r)) for n, s, p, r in base]
    for suffix, extra, need in (("process", {"process"}, "process"),
                                ("realtime", {"process", "realtime"}, "realtime")):
        out += [CycleClass(f"{n}-{suffix}", frozenset(s), frozenset(p | extra),
                           frozenset(r | {need})) for n, s, p, r in base]
    return out


CLASSES = _classes()
CYCLE_TYPES = tuple(c.name for c in CLASSES)


# ---------------------------------------------------------------- edges


def order_edges(nodes: Iterable[Node]) -> list[tuple[int, int, str]]:
    """Process-order and realtime edges between transactions.

    Process order: each transaction follows the previous one of its process.  Realtime:
    sweeping invocations and completions in time order, a transaction's predecessors are
    the *frontier* when it is invoked (completed transactions not yet covered); when it
    completes it replaces those predecessors in the frontier, so an edge implied by two
    others is left out.
    """
    nodes = sorted(nodes, key=lambda n: n.id)
    out: list[tuple[int, int, str]] = []
    last: dict[Any, int] = {}
    for n in nodes:
        if n.process in last:
            out.append((last[n.process], n.id, "process"))
        last[n.process] = n.id
    events = [(n.i_time, 1, n.id) for n in nodes]  # completions sort before invocations
    events += [(n.c_time, 0, n.id) for n in nodes if n.c_time is not None]
    events.sort()
    frontier: set[int] = set()
    preds: dict[int, set[int]] = {}
    for _t, kind, i in events:
        if kind == 1:
            preds[i] = set(frontier)
            out.extend((p, i, "realtime") for p in sorted(frontier))
        else:
            frontier -= preds.get(i, set())
            frontier.add(i)
    return out


def edge_details(rows: Iterable[tuple]) -> dict[tuple[int, int], dict[str, dict]]:
    """Folds edge rows ``(a, b, type, key, value, value2)`` into ``{(a, b): {type: detail}}``.

    Several rows may explain one typed edge (two keys, say); the smallest
    ``(key, value, value2)`` explains it, so every path through here picks the same one.
    """
    best: dict[tuple[int, int, str], tuple] = {}
    for a, b, t, *rest in rows:
        if a == b:
            continue
        k = (a, b, t)
        d = tuple(rest) + (None,) * (3 - len(rest))
        if k not in best or _order(d) < _order(best[k]):
            best[k] = d
    out: dict[tuple[int, int], dict[str, dict]] = {}
    for (a, b, t), (key, v, v2) in sorted(best.items(), key=lambda kv: kv[0]):
        detail: dict[str, Any] = {}
        if key is not None:
            detail["key"] = key
            detail["value"] = v
            if v2 is not None:
                detail["value'"] = v2
        out.setdefault((a, b), {})[t] = detail
    return out


def _order(d: tuple) -> tuple:
    return tuple((x is None, repr(x)) for x in d)


# ---------------------------------------------------------------- search


def sccs(adj: dict[int, list[int]]) -> list[list[int]]:
    """Tarjan's strongly connected components (iterative), those with 2+ nodes, sorted."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on: set[int] = set()
    stack: list[int] = []
    out: list[list[int]] = []
    counter = 0
    for root in sorted(adj):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on.add(v)
            succ = adj.get(v, [])
            if i < len(succ):
                work.append((v, i + 1))
                w = succ[i]
                if w not in index:
                    work.append((w, 0))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    out.sort()
    return out


def _bfs(adj: dict[int, list[tuple[int, str]]], start: int, goal: int, need: frozenset,
         left: list[int]):
    """Shortest path start -> goal over ``adj`` (``node -> [(next, type)]``) with an edge
    of each type in ``need``.  Returns the list of ``(a, b, type)`` steps, or None;
    ``left[0]`` is the state budget, shared by the caller's searches."""
    first = (start, frozenset())
    if start == goal and not need:
        return []
    prev: dict[tuple, tuple | None] = {first: None}
    q = deque([first])
    while q and left[0] > 0:
        left[0] -= 1
        state = q.popleft()
        v, flags = state
        for w, t in adj.get(v, ()):
            ns = (w, flags | {t} & need) if t in need else (w, flags)
            if ns in prev:
                continue
            prev[ns] = (state, t)
            if w == goal and need <= ns[1]:
                steps = []
                s = ns
                while prev[s] is not None:
                    p, et = prev[s]
                    steps.append((p[0], s[0], et))
                    s = p
                return steps[::-1]
            q.append(ns)
    return None


def find_cycles(edges: dict[tuple[int, int], dict[str, dict]],
                classes: Iterable[CycleClass] = CLASSES,
                budget: int = MAX_STATES) -> dict[str, list[dict]]:
    """Cycles by class: ``{class: [{"steps": [(a, b, type, detail), ...]}, ...]}``.

    The G1c classes look for cycles without ``ww`` edges first (a read of a value its
    writer had not yet committed, or from the future), then for the others in the
    components where none was found.
    """
    out: dict[str, list[dict]] = {}
    for c in classes:
        found = _search(edges, c, budget)
        if c.name.startswith("G1c"):
            strict = _search(edges, c._replace(path=c.path - {"ww"}), budget)
            covered = {a for cyc in strict for a, *_ in cyc}
            found = strict + [cyc for cyc in found if not {a for a, *_ in cyc} & covered]
        if found:
            out[c.name] = [{"steps": [(a, b, t, edges[(a, b)][t]) for a, b, t in cyc]}
                           for cyc in found]
    return out


def _search(edges, c: CycleClass, budget: int) -> list[list[tuple[int, int, str]]]:
    """One cycle of class ``c`` per component of its subgraph (its start and path edge
    types), so a class whose edges are acyclic costs one Tarjan pass.  A search visits at
    most ``budget`` states per component, and only simple cycles count."""
    types = c.start | c.path
    succ: dict[int, list[int]] = {}
    for (a, b), ts in edges.items():
        if not ts.keys() & types:
            continue
        succ.setdefault(a, []).append(b)
        succ.setdefault(b, [])
    for v in succ.values():
        v.sort()
    out = []
    for comp in sccs(succ):
        members = set(comp)
        adj = {a: [(b, t) for b in succ[a] if b in members
                   for t in sorted(edges[(a, b)]) if t in c.path] for a in comp}
        starts = [(a, b, t) for a in comp for b in succ[a] if b in members
                  for t in sorted(edges[(a, b)]) if t in c.start][:MAX_STARTS]
        best = None
        left = [budget]
        for a, b, t in starts:
            rest = _bfs(adj, b, a, c.needs, left)
            if rest is None:
                continue
            cycle = [(a, b, t)] + rest
            if len({x for x, _, _ in cycle}) == len(cycle) and (
                    best is None or len(cycle) < len(best)):
                best = cycle
        if best is not None:
            out.append(best)
    return out
