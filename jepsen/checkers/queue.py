"""The queue checker: Jepsen's Kafka-workload anomalies, one partition at a time.

Theory of operation
-------------------
Every anomaly is a property of one partition (the ``key`` of send/poll values), so a
history splits into independent per-partition inputs:

* ``SendRec`` -- one per message a send operation carried to this partition, with the
  completion type and (when ok) the offset the broker assigned;
* ``PollRec`` -- one per ok poll that returned records of this partition, with those
  ``(offset, value)`` pairs in the order the consumer saw them;
* resets -- for each process, the invocation indexes of its ``assign``, ``subscribe`` and
  ``crash`` operations, after which its position legitimately starts over.

:func:`check_partition` is the whole analysis of one partition, a pure function; the
plain-Python path (:func:`check_queue`) and the Spark path (``jepsen.checkers.spark``)
both feed it the same records and fold its partial results with :func:`merge_parts`.

Offsets may have gaps (aborted sends, transaction markers), so skips are judged on the
*version order*: the sorted set of every offset known in the partition, from ok sends
and from polls.  Two offsets are adjacent when nothing known lies between them.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from jepsen.checkers._common import (
    Flat,
    basic_stats,
    flatten,
    grid_of,
)
from jepsen.history import FAIL, INFO, OK, Op

ANOMALIES = (
    "inconsistent-offsets",
    "duplicate",
    "lost-write",
    "unseen",
    "G1a",
    "unexpected",
    "poll-skip",
    "nonmonotonic-poll",
    "int-poll-skip",
    "int-nonmonotonic-poll",
    "nonmonotonic-send",
    "int-nonmonotonic-send",
    "realtime-order",
)
RESET_FS = frozenset({"assign", "subscribe", "crash"})
DEFAULT_MAX_EXAMPLES = 1000


class SendRec(NamedTuple):
    process: Any
    i_index: int
    i_time: int
    c_index: int | None
    c_time: int | None
    type: str
    value: Any
    offset: int | None
    pos: int  # position of this message within its send operation


class PollRec(NamedTuple):
    process: Any
    i_index: int
    i_time: int
    c_index: int
    c_time: int
    pairs: tuple  # ((offset, value), ...) in the order returned


# ---------------------------------------------------------------- extraction


def _messages(v: Any) -> list:
    """The [key, x] messages of a send value (single or multi-message form)."""
    if isinstance(v, (list, tuple)) and v and isinstance(v[0], (list, tuple)):
        return list(v)
    if isinstance(v, (list, tuple)) and len(v) == 2:
        return [v]
    return []


def records_of(fl: Flat) -> Iterator[tuple[Any, Any]]:
    """``(key, SendRec | PollRec)`` pairs for one flat operation (none for other fs)."""
    if fl.f == "send":
        sent = _messages(fl.i_value)
        acked = _messages(fl.c_value) if fl.c_type == OK else []
        for pos, msg in enumerate(sent):
            key, value, offset = msg[0], msg[1], None
            if pos < len(acked):
                a = acked[pos]
                if isinstance(a[1], (list, tuple)) and len(a[1]) == 2:
                    offset, value = a[1][0], a[1][1]
            yield key, SendRec(fl.process, fl.i_index, fl.i_time, fl.c_index, fl.c_time,
                               fl.c_type, value, offset, pos)
    elif fl.f == "poll" and fl.c_type == OK and isinstance(fl.c_value, dict):
        for key, pairs in fl.c_value.items():
            if pairs:
                yield key, PollRec(fl.process, fl.i_index, fl.i_time, fl.c_index,
                                   fl.c_time, tuple((p[0], p[1]) for p in pairs))


def resets_of(flats: Iterable[Flat]) -> dict[Any, list[int]]:
    """For each process, the sorted invocation indexes of its position resets."""
    out: dict[Any, list[int]] = {}
    for fl in flats:
        if fl.f in RESET_FS:
            out.setdefault(fl.process, []).append(fl.i_index)
    for v in out.values():
        v.sort()
    return out


# ---------------------------------------------------------------- references


def _send_ref(key: Any, s: SendRec) -> dict[str, Any]:
    v = [key, [s.offset, s.value]] if s.offset is not None else [key, s.value]
    return {"process": s.process, "f": "send", "type": s.type, "invoke-index": s.i_index,
            "index": s.c_index, "invoke-time": s.i_time, "time": s.c_time, "value": v}


def _poll_ref(key: Any, p: PollRec) -> dict[str, Any]:
    return {"process": p.process, "f": "poll", "type": OK, "invoke-index": p.i_index,
            "index": p.c_index, "invoke-time": p.i_time, "time": p.c_time,
            "value": {key: [list(x) for x in p.pairs]}}


def _first_index(a: dict[str, Any]) -> int:
    ops = a.get("ops") or [{}]
    return min((o.get("invoke-index") or 0) for o in ops)


# ---------------------------------------------------------------- the analysis


def check_partition(key: Any, sends: Iterable[SendRec], polls: Iterable[PollRec],
                    resets: dict[Any, list[int]], t0: int = 0,
                    bucket_ns: int = 1) -> dict[str, Any]:
    """Analyses one partition.

    Args:
        key: the partition.
        sends: every message sent to it (any completion type).
        polls: every ok poll that returned records of it.
        resets: per process, sorted invocation indexes of assign/subscribe/crash.
        t0, bucket_ns: the time grid for the unseen-over-time series.

    Returns:
        A partial result: ``anomalies`` (type -> list of anomaly dicts), ``unseen-acked`` /
        ``unseen-seen`` (bucket -> count), ``lag`` (worst realtime lag and totals).
    """
    sends = sorted(sends, key=lambda s: (s.i_index, s.pos))
    polls = sorted(polls, key=lambda p: p.i_index)
    an: dict[str, list] = {}

    def add(kind: str, **fields: Any) -> None:
        an.setdefault(kind, []).append({"key": key, **fields})

    by_value: dict[Any, list[SendRec]] = {}
    for s in sends:
        by_value.setdefault(_h(s.value), []).append(s)

    # Who shows which value at which offset: ok sends and polls.
    at_offset: dict[int, dict[Any, list]] = {}
    offsets_of: dict[Any, dict[int, list]] = {}
    first_seen: dict[Any, PollRec] = {}
    max_read = None
    for s in sends:
        if s.type == OK and s.offset is not None:
            at_offset.setdefault(s.offset, {}).setdefault(_h(s.value), []).append(("s", s))
            offsets_of.setdefault(_h(s.value), {}).setdefault(s.offset, []).append(("s", s))
    for p in polls:
        for off, val in p.pairs:
            hv = _h(val)
            at_offset.setdefault(off, {}).setdefault(hv, []).append(("p", p))
            offsets_of.setdefault(hv, {}).setdefault(off, []).append(("p", p))
            if hv not in first_seen:
                first_seen[hv] = p
            if max_read is None or off > max_read:
                max_read = off

    def refs(shows: list) -> dict[str, Any]:
        kind, r = shows[0]
        return _send_ref(key, r) if kind == "s" else _poll_ref(key, r)

    for off in sorted(at_offset):
        vals = at_offset[off]
        if len(vals) > 1:
            add("inconsistent-offsets", offset=off,
                values=sorted((_unh(v) for v in vals), key=repr),
                ops=[refs(vals[v]) for v in sorted(vals, key=lambda v: repr(_unh(v)))])
    for hv, offs in offsets_of.items():
        if len(offs) > 1:
            add("duplicate", value=_unh(hv), offsets=sorted(offs),
                ops=[refs(offs[o]) for o in sorted(offs)])

    # Writes: lost, unseen, aborted reads, unexpected values.
    for s in sends:
        hv = _h(s.value)
        seen = first_seen.get(hv)
        committed = s.type == OK or (s.type == INFO and seen is not None)
        if s.type == FAIL and seen is not None:
            add("G1a", value=s.value, ops=[_send_ref(key, s), _poll_ref(key, seen)])
        if not committed or seen is not None:
            continue
        if s.offset is not None and max_read is not None and s.offset < max_read:
            add("lost-write", value=s.value, offset=s.offset, **{"max-read-offset": max_read},
                ops=[_send_ref(key, s)])
        elif s.type == OK:
            add("unseen", value=s.value, offset=s.offset, ops=[_send_ref(key, s)])
    for hv, p in first_seen.items():
        if hv not in by_value:
            add("unexpected", value=_unh(hv), ops=[_poll_ref(key, p)])

    # Unseen over time, and realtime lag.
    acked: dict[int, int] = {}
    seen_acked: dict[int, int] = {}
    worst = None
    lag_sum = lag_n = 0
    for s in sends:
        if s.type != OK or s.c_time is None:
            continue
        b = (s.c_time - t0) // bucket_ns
        acked[b] = acked.get(b, 0) + 1
        p = first_seen.get(_h(s.value))
        if p is None:
            continue
        sb = (max(p.c_time, s.c_time) - t0) // bucket_ns
        seen_acked[sb] = seen_acked.get(sb, 0) + 1
        lag = max(0, p.i_time - s.c_time)
        lag_sum += lag
        lag_n += 1
        if worst is None or lag > worst["lag-ns"]:
            worst = {"key": key, "lag-ns": lag, "value": s.value,
                     "ops": [_send_ref(key, s), _poll_ref(key, p)]}

    # Version order: every known offset, sorted.
    order = sorted(at_offset)
    pos_of = {o: i for i, o in enumerate(order)}

    # Within one poll.
    for p in polls:
        for (o1, _), (o2, _) in zip(p.pairs, p.pairs[1:]):
            if o2 <= o1:
                add("int-nonmonotonic-poll", offsets=[o1, o2], delta=pos_of[o2] - pos_of[o1],
                    ops=[_poll_ref(key, p)])
            elif pos_of[o2] - pos_of[o1] > 1:
                add("int-poll-skip", offsets=[o1, o2], delta=pos_of[o2] - pos_of[o1],
                    skipped=order[pos_of[o1] + 1:pos_of[o2]][:16], ops=[_poll_ref(key, p)])

    # Between successive polls of one consumer, unless its position was reset between.
    last: dict[Any, PollRec] = {}
    for p in polls:
        prev = last.get(p.process)
        last[p.process] = p
        if prev is None:
            continue
        rs = resets.get(p.process, ())
        j = bisect.bisect_right(rs, prev.c_index)
        if j < len(rs) and rs[j] < p.i_index:
            continue
        o1, o2 = prev.pairs[-1][0], p.pairs[0][0]
        d = pos_of[o2] - pos_of[o1]
        if o2 <= o1:
            add("nonmonotonic-poll", offsets=[o1, o2], delta=d,
                ops=[_poll_ref(key, prev), _poll_ref(key, p)])
        elif d > 1:
            add("poll-skip", offsets=[o1, o2], delta=d,
                skipped=order[pos_of[o1] + 1:pos_of[o2]][:16],
                ops=[_poll_ref(key, prev), _poll_ref(key, p)])

    # A producer's sends: offsets must rise, across and within operations.
    oks = [s for s in sends if s.type == OK and s.offset is not None]
    last_send: dict[Any, SendRec] = {}
    for s in oks:
        prev = last_send.get(s.process)
        last_send[s.process] = s
        if prev is None or s.offset > prev.offset:
            continue
        kind = "int-nonmonotonic-send" if prev.i_index == s.i_index else "nonmonotonic-send"
        add(kind, offsets=[prev.offset, s.offset], delta=pos_of[s.offset] - pos_of[prev.offset],
            ops=[_send_ref(key, prev), _send_ref(key, s)])

    # Realtime order: a send invoked after another completed must land later.  One
    # producer's own sends are in real-time order anyway and are judged above, so the
    # sweep keeps the highest-offset completed send and the highest from another process.
    by_done = sorted((s for s in oks if s.c_time is not None), key=lambda s: s.c_time)
    j, best, other = 0, None, None
    for b in sorted(oks, key=lambda s: (s.i_time, s.i_index)):
        while j < len(by_done) and by_done[j].c_time < b.i_time:
            x = by_done[j]
            j += 1
            if best is None or x.process == best.process:
                if best is None or x.offset > best.offset:
                    best = x
            elif x.offset > best.offset:
                best, other = x, best
            elif other is None or x.offset > other.offset:
                other = x
        a = best if best is not None and best.process != b.process else other
        if a is not None and a.offset > b.offset:
            add("realtime-order", offsets=[a.offset, b.offset],
                ops=[_send_ref(key, a), _send_ref(key, b)])

    return {
        "anomalies": an,
        "unseen-acked": acked,
        "unseen-seen": seen_acked,
        "lag": {"worst": worst, "sum-ns": lag_sum, "n": lag_n},
    }


def _h(v: Any) -> Any:
    """Hashable form of a message value, equal exactly when the values are.

    Values are compared as Jepsen's EDN values are (and as the Spark path compares
    their JSON text): ``1``, ``1.0`` and ``true`` are three different values, though
    Python finds them equal (``True == 1 == 1.0``, with equal hashes).
    """
    if isinstance(v, bool):
        return ("__bool__", v)
    if isinstance(v, float):
        return ("__float__", v)
    if isinstance(v, list):
        return ("__list__", tuple(_h(x) for x in v))
    if isinstance(v, dict):  # names read back from JSON may be ints and strings
        return ("__dict__", tuple(sorted(((k, _h(x)) for k, x in v.items()),
                                         key=lambda kx: (isinstance(kx[0], str), kx[0]))))
    return v


def _unh(v: Any) -> Any:
    if isinstance(v, tuple) and len(v) == 2 and v[0] in ("__bool__", "__float__"):
        return v[1]
    if isinstance(v, tuple) and len(v) == 2 and v[0] == "__list__":
        return [_unh(x) for x in v[1]]
    if isinstance(v, tuple) and len(v) == 2 and v[0] == "__dict__":
        return {k: _unh(x) for k, x in v[1]}
    return v


# ---------------------------------------------------------------- folding


def fatal_types(sub_via: str | None) -> frozenset[str]:
    """The anomaly types that invalidate a test.

    With ``subscribe``, a consumer group may rebalance between two polls without the
    consumer seeing it, so external poll skips and backward polls are expected.
    """
    fatal = set(ANOMALIES)
    if sub_via == "subscribe":
        fatal -= {"poll-skip", "nonmonotonic-poll"}
    return frozenset(fatal)


def merge_parts(parts: Iterable[dict[str, Any]], t0: int, bucket_ns: int,
                sub_via: str | None, max_examples: int = DEFAULT_MAX_EXAMPLES
                ) -> dict[str, Any]:
    """Folds per-partition results into the queue part of results.json."""
    an: dict[str, list] = {}
    acked: dict[int, int] = {}
    seen: dict[int, int] = {}
    worst = None
    lag_sum = lag_n = 0
    partitions = 0
    for part in parts:
        partitions += 1
        for k, v in part["anomalies"].items():
            an.setdefault(k, []).extend(v)
        for b, n in part["unseen-acked"].items():
            acked[b] = acked.get(b, 0) + n
        for b, n in part["unseen-seen"].items():
            seen[b] = seen.get(b, 0) + n
        lag = part["lag"]
        lag_sum += lag["sum-ns"]
        lag_n += lag["n"]
        w = lag["worst"]
        if w is not None and (worst is None or w["lag-ns"] > worst["lag-ns"]):
            worst = w
    fatal = fatal_types(sub_via)
    anomalies = {}
    for k in sorted(an):
        xs = sorted(an[k], key=lambda a: (_first_index(a), repr(a.get("key"))))
        anomalies[k] = {"count": len(xs), "fatal": k in fatal, "examples": xs[:max_examples]}
    series, unseen_now = [], 0
    for b in sorted(set(acked) | set(seen)):
        unseen_now += acked.get(b, 0) - seen.get(b, 0)
        series.append({"bucket": b, "time-ns": t0 + b * bucket_ns, "unseen": unseen_now})
    bad = sorted(k for k in anomalies if k in fatal)
    return {
        "valid": not bad,
        "anomaly-types": sorted(anomalies),
        "bad-anomaly-types": bad,
        "sub-via": sub_via,
        "partitions": partitions,
        "anomalies": anomalies,
        "unseen-series": {"t0-ns": t0, "bucket-ns": bucket_ns, "series": series},
        "realtime-lag": {"worst": worst,
                         "mean-ns": (lag_sum // lag_n) if lag_n else None,
                         "sends-seen": lag_n},
    }


def infer_sub_via(flats: Iterable[Flat]) -> str | None:
    fs = {fl.f for fl in flats if fl.f in ("assign", "subscribe")}
    if "subscribe" in fs:
        return "subscribe"
    return "assign" if "assign" in fs else None


def check_queue(history: Iterable[Op], sub_via: str | None = None,
                max_examples: int = DEFAULT_MAX_EXAMPLES) -> dict[str, Any]:
    """Checks a queue history in this process (the single-process reference path).

    Args:
        history: the ops, in history order.
        sub_via: ``"assign"`` or ``"subscribe"``; inferred from the history when None.
        max_examples: at most this many anomalies of each type are listed (counts are
            always complete).

    Returns:
        The queue result: ``valid``, ``anomalies``, ``stats``, ``unseen-series``,
        ``realtime-lag`` (see ``jepsen.checkers`` for the format).
    """
    ops = list(history)
    flats = flatten(ops)
    t0, bucket_ns = grid_of(flats)
    if sub_via is None:
        sub_via = infer_sub_via(flats)
    resets = resets_of(flats)
    groups: dict[Any, tuple[list, list]] = {}
    for fl in flats:
        for key, rec in records_of(fl):
            g = groups.setdefault(key, ([], []))
            (g[0] if isinstance(rec, SendRec) else g[1]).append(rec)
    parts = (check_partition(k, s, p, resets, t0, bucket_ns) for k, (s, p) in groups.items())
    result = merge_parts(parts, t0, bucket_ns, sub_via, max_examples)
    result["stats"] = basic_stats(flats, t0, bucket_ns)
    return {"checker": "queue", **result}
