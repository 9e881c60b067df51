"""The transactional checker: Jepsen's Kafka transaction anomalies, and Elle-style cycles.

Theory of operation
-------------------
A ``txn`` operation is a list of micro-operations (``jepsen.history`` documents the
form): ``["send", key, value]`` completing as ``["send", key, [offset, value]]`` and
``["poll"]`` completing as ``["poll", {key: [[offset, value], ...]}]``.  Keys are integers
(each one partition of some topic), values integers unique per key.

Two kinds of analysis:

* **Per key** (:func:`check_key`): each send micro-op becomes a ``queue.SendRec`` (its
  ``pos`` is the micro-op's position) and each poll of an ``ok`` transaction a
  ``queue.PollRec``, so the queue checker's partition analysis finds what it finds for
  the queue workload: inconsistent offsets, duplicates, lost and unseen writes, G1a
  (aborted read), poll skips, nonmonotonic polls and sends.  On top, per key:
  **G1b** (intermediate read): a transaction read some of another committed transaction's
  writes to the key but not another one lying between offsets it did read (so neither
  where its polls started nor where they stopped explains it); **precommitted-read**: a transaction
  polled a value it sent itself (a ``read_committed`` consumer never sees records of an
  open transaction).  These anomalies show the micro-op (``f`` ``send`` or ``poll``) with
  the ``invoke-index`` of its transaction.
* **Dependencies** (:func:`edge_rows`, also per key): the *version order* of a key is its
  known offsets, sorted (from ok sends and polls; gaps are transaction markers).  ``ww``:
  the writers of two consecutive versions; ``wr``: the writer of the highest version a
  transaction polled -> that transaction; ``rw``: that transaction -> the writer of the
  version after it.  (Highest only, as Jepsen's Kafka test does: a poll returns a range
  written by many transactions, and ``ww`` edges already order the earlier ones.)
  ``jepsen.checkers.txn_graph`` adds process and realtime edges and finds the cycles.

Fatal and allowed
-----------------
Jepsen's Kafka test allows some of what it reports, and so does this checker by default
(:data:`ALLOWED`): ``G0`` cycles (transactions' writes interleave in Kafka: the offsets
of two transactions' sends to two partitions may be in opposite orders), ``G1c`` (with
``ww`` edges inferred from offsets, ``t1 -ww-> t2 -wr-> t1`` is normal for the same
reason) *unless* a cycle has no ``ww`` edge (made of ``wr``, process and realtime edges
only, it means a poll saw a write before it was committed, or before it was sent: Jepsen
runs without ``ww`` edges by default and finds exactly these), and every cycle with an ``rw`` edge (a poll stops at ``max.poll.records`` or
the end of a fetch, so "the highest offset it read" does not mean "the next did not exist
yet"; Jepsen's test draws no ``rw`` edges at all).  They are reported, with
``fatal: false``.  ``check_txn(..., allowed=())`` makes every anomaly fatal.  With
``subscribe``, poll skips and nonmonotonic polls are allowed, as in the queue checker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from jepsen.checkers import queue, txn_graph
from jepsen.checkers._common import Flat, basic_stats, flatten, grid_of, ref
from jepsen.history import FAIL, INFO, OK, Op

TXN_FS = frozenset({"txn"})
EXTRA_ANOMALIES = ("G1b", "precommitted-read")
ANOMALIES = queue.ANOMALIES + EXTRA_ANOMALIES + txn_graph.CYCLE_TYPES
ALLOWED = frozenset({"G0", "G0-process", "G0-realtime",
                     "G1c", "G1c-process", "G1c-realtime"}
                    | {c for c in txn_graph.CYCLE_TYPES if c.startswith(("G-single", "G2"))})


# ---------------------------------------------------------------- extraction


def micro_ops(fl: Flat) -> list:
    """The micro-ops of a txn operation: the completion's when ok, else the invocation's."""
    v = fl.c_value if fl.c_type == OK and isinstance(fl.c_value, list) else fl.i_value
    return v if isinstance(v, list) else []


def records_of(fl: Flat) -> Iterator[tuple[Any, Any]]:
    """``(key, queue.SendRec | queue.PollRec)`` for each micro-op of a txn operation.

    Polls of transactions that did not complete ok are unknown (a failed transaction's
    consumer is rewound) and yield nothing.
    """
    if fl.f not in TXN_FS:
        return
    for pos, mop in enumerate(micro_ops(fl)):
        if not mop:
            continue
        if mop[0] == "send" and len(mop) == 3:
            key, v, offset = mop[1], mop[2], None
            if isinstance(v, list) and len(v) == 2:
                offset, v = v
            yield key, queue.SendRec(fl.process, fl.i_index, fl.i_time, fl.c_index, fl.c_time,
                                     fl.c_type, v, offset if fl.c_type == OK else None, pos)
        elif mop[0] == "poll" and fl.c_type == OK and len(mop) == 2 \
                and isinstance(mop[1], dict):
            for key, pairs in mop[1].items():
                if pairs:
                    yield key, queue.PollRec(fl.process, fl.i_index, fl.i_time, fl.c_index,
                                             fl.c_time, tuple((p[0], p[1]) for p in pairs))


def node_of(fl: Flat) -> txn_graph.Node:
    return txn_graph.Node(fl.i_index, fl.process, fl.i_time,
                          fl.c_time if fl.c_type == OK else None, fl.c_index)


# ---------------------------------------------------------------- per key


def version_order(sends, polls) -> list[tuple[int, Any]]:
    """``[(offset, value)]`` sorted: every offset an ok send or a poll showed (the smallest
    value where they disagree; inconsistent offsets are reported separately)."""
    at: dict[int, Any] = {}
    for s in sends:
        if s.type == OK and s.offset is not None:
            at[s.offset] = s.value if s.offset not in at else min(at[s.offset], s.value)
    for p in polls:
        for off, v in p.pairs:
            at[off] = v if off not in at else min(at[off], v)
    return sorted(at.items())


def writers(sends) -> dict[Any, int]:
    """value -> the transaction that sent it (failed ones excluded: they are no nodes)."""
    out: dict[Any, int] = {}
    for s in sends:
        if s.type != FAIL and (s.value not in out or s.i_index < out[s.value]):
            out[s.value] = s.i_index
    return out


def edge_rows(key: Any, sends, polls) -> list[tuple]:
    """This key's ``(a, b, type, key, value, value2)`` dependency rows (see the module)."""
    order = version_order(sends, polls)
    w = writers(sends)
    rows = []
    for (_o1, v1), (_o2, v2) in zip(order, order[1:]):
        a, b = w.get(v1), w.get(v2)
        if a is not None and b is not None and a != b:
            rows.append((a, b, "ww", key, v1, v2))
    nxt = {o1: v2 for (o1, _), (_, v2) in zip(order, order[1:])}
    final: dict[int, tuple[int, Any]] = {}
    for p in polls:
        top = max(p.pairs)
        if p.i_index not in final or top > final[p.i_index]:
            final[p.i_index] = top
    for r, (off, v) in final.items():
        a = w.get(v)
        if a is not None and a != r:
            rows.append((a, r, "wr", key, v, None))
        if off in nxt:
            b = w.get(nxt[off])
            if b is not None and b != r:
                rows.append((r, b, "rw", key, v, nxt[off]))
    return rows


def _ref(s: queue.SendRec | queue.PollRec) -> dict[str, Any]:
    """A reference to the transaction a record belongs to (its own micro-op as value)."""
    return {"process": s.process, "f": "txn",
            "type": s.type if isinstance(s, queue.SendRec) else OK,
            "invoke-index": s.i_index, "index": s.c_index, "invoke-time": s.i_time,
            "time": s.c_time}


def txn_anomalies(key: Any, sends, polls) -> dict[str, list]:
    """G1b and precommitted reads in one key (see the module docstring)."""
    order = version_order(sends, polls)
    offset_of = {v: o for o, v in order}
    by_writer: dict[int, list] = {}
    for s in sends:
        if s.type != FAIL and s.value in offset_of:
            by_writer.setdefault(s.i_index, []).append(s)
    w = writers(sends)
    reads: dict[int, list] = {}
    for p in polls:
        reads.setdefault(p.i_index, []).append(p)
    an: dict[str, list] = {}
    for r, ps in sorted(reads.items()):
        seen = {v for p in ps for _o, v in p.pairs}
        low = min(o for p in ps for o, _v in p.pairs)
        top = max(o for p in ps for o, _v in p.pairs)
        for wid in sorted({w[v] for v in seen if v in w}):
            ws = by_writer.get(wid, [])
            if wid == r:
                mine = sorted(v for v in seen if w.get(v) == r)
                an.setdefault("precommitted-read", []).append(
                    {"key": key, "values": mine, "ops": [_ref(ps[0])]})
                continue
            missing = sorted(s.value for s in ws if s.value not in seen
                             and low < offset_of[s.value] < top)
            if missing:
                an.setdefault("G1b", []).append(
                    {"key": key, "read": sorted(v for v in seen if w.get(v) == wid),
                     "missing": missing, "ops": [_ref(ws[0]), _ref(ps[0])]})
    return an


def check_key(key: Any, sends, polls, resets, t0: int, bucket_ns: int,
              edges: bool = True) -> dict[str, Any]:
    """The per-key part: the queue checker's partition analysis plus G1b and precommitted
    reads, and (with ``edges``) this key's dependency rows."""
    sends, polls = list(sends), list(polls)
    part = queue.check_partition(key, sends, polls, resets, t0, bucket_ns)
    for k, v in txn_anomalies(key, sends, polls).items():
        part["anomalies"].setdefault(k, []).extend(v)
    if edges:
        part["edges"] = edge_rows(key, sends, polls)
    return part


# ---------------------------------------------------------------- folding


def cycle_anomalies(nodes: dict[int, txn_graph.Node], data_rows: Iterable[tuple],
                    refs_of: Callable[[set[int]], dict[int, dict]]
                    ) -> tuple[dict[str, list], dict[str, Any]]:
    """Cycles over the data rows plus process/realtime edges between ``nodes``.

    ``refs_of(ids)`` returns the op references of the transactions in cycles.  Returns
    the anomalies by class, and a summary of the graph.
    """
    data_rows = list(data_rows)
    ids = set(nodes)
    for a, b, *_ in data_rows:
        ids.update((a, b))
    order = txn_graph.order_edges(n for i, n in nodes.items() if i in ids)
    edges = txn_graph.edge_details(data_rows + order)
    counts: dict[str, int] = {}
    for types in edges.values():
        for t in types:
            counts[t] = counts.get(t, 0) + 1
    found = txn_graph.find_cycles(edges)
    refs = refs_of({a for cs in found.values() for c in cs for a, *_ in c["steps"]})
    an: dict[str, list] = {}
    for name, cycles in found.items():
        for c in cycles:
            steps = [{"from": a, "to": b, "type": t, **d} for a, b, t, d in c["steps"]]
            an.setdefault(name, []).append(
                {"key": None, "cycle": [s["from"] for s in steps], "steps": steps,
                 "ops": [refs.get(s["from"], {"invoke-index": s["from"]}) for s in steps]})
    summary = {"nodes": len(ids), "edges": {t: counts[t] for t in sorted(counts)},
               "sccs": len(txn_graph.sccs({a: [] for a in ids} | _succ(edges)))}
    return an, summary


def _succ(edges) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for a, b in sorted(edges):
        out.setdefault(a, []).append(b)
    return out


def finish(parts: list[dict], nodes: dict[int, txn_graph.Node], data_rows, refs_of,
           t0: int, bucket_ns: int, sub_via: str | None, allowed: Iterable[str],
           max_examples: int) -> dict[str, Any]:
    """Folds per-key parts (``(key, part)`` pairs, any order) and the cycle search into
    the txn part of results.json."""
    cyc, graph = cycle_anomalies(nodes, data_rows, refs_of)
    parts = [{k: v for k, v in p.items() if k != "edges"}
             for _key, p in sorted(parts, key=lambda kp: repr(kp[0]))]
    parts.append({"anomalies": cyc, "unseen-acked": {}, "unseen-seen": {},
                  "lag": {"worst": None, "sum-ns": 0, "n": 0}})
    result = queue.merge_parts(parts, t0, bucket_ns, sub_via, max_examples)
    result["partitions"] -= 1  # the cycles' part is no partition
    fatal = set(queue.fatal_types(sub_via) | set(EXTRA_ANOMALIES)
                | set(txn_graph.CYCLE_TYPES)) - set(allowed)
    for k, a in result["anomalies"].items():
        if k.startswith("G1c") and any(all(st["type"] != "ww" for st in x["steps"])
                                       for x in a["examples"]):
            fatal.add(k)  # a ww-free G1c: a poll saw an uncommitted or future write
        a["fatal"] = k in fatal
    bad = sorted(k for k in result["anomalies"] if k in fatal)
    result["valid"] = not bad
    result["bad-anomaly-types"] = bad
    result["graph"] = graph
    return {"checker": "txn", **result}


def infer_sub_via(flats: Iterable[Flat]) -> str | None:
    return queue.infer_sub_via(flats)


def check_txn(history: Iterable[Op], sub_via: str | None = None,
              allowed: Iterable[str] = ALLOWED,
              max_examples: int = queue.DEFAULT_MAX_EXAMPLES) -> dict[str, Any]:
    """Checks a txn history in this process (the single-process reference path).

    Returns the txn result: the queue result's fields (``valid``, ``anomalies``,
    ``unseen-series``, ``realtime-lag``, ``stats``) plus ``graph`` (``nodes``, edge
    counts by type, ``sccs``: components of two or more transactions).
    """
    ops = list(history)
    flats = flatten(ops)
    t0, bucket_ns = grid_of(flats)
    if sub_via is None:
        sub_via = infer_sub_via(flats)
    resets = queue.resets_of(flats)
    groups: dict[Any, tuple[list, list]] = {}
    nodes: dict[int, txn_graph.Node] = {}
    refs: dict[int, dict] = {}
    for fl in flats:
        if fl.f not in TXN_FS:
            continue
        refs[fl.i_index] = ref(fl)
        if fl.c_type == OK:
            nodes[fl.i_index] = node_of(fl)
        elif fl.c_type == INFO:
            nodes.setdefault(fl.i_index, node_of(fl))
        for key, rec in records_of(fl):
            g = groups.setdefault(key, ([], []))
            (g[0] if isinstance(rec, queue.SendRec) else g[1]).append(rec)
    parts = [(k, check_key(k, s, p, resets, t0, bucket_ns)) for k, (s, p) in groups.items()]
    rows = [r for _k, p in parts for r in p["edges"]]
    nodes = {i: n for i, n in nodes.items() if n.c_time is not None} | {
        i: nodes[i] for r in rows for i in r[:2] if i in nodes}
    result = finish(parts, nodes, rows, lambda ids: {i: refs[i] for i in ids}, t0, bucket_ns,
                    sub_via, allowed, max_examples)
    result["stats"] = basic_stats(flats, t0, bucket_ns)
    return result
