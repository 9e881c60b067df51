"""Pieces every checker shares: the flat operation tuple, op references, verdicts, stats.

Both execution paths (plain Python and Spark) reduce a history to *flat operations*:
one tuple per invocation, joined with its completion.  Everything downstream consumes
flat operations, so the two paths run the same per-key code.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, NamedTuple

from jepsen.history import INFO, Op, pair

UNKNOWN = "unknown"


class Flat(NamedTuple):
    """An invocation joined with its completion (``c_*`` are None while pending)."""

    process: int | str
    f: str
    i_index: int
    i_time: int
    i_value: Any
    c_index: int | None
    c_time: int | None
    c_type: str  # ok / fail / info (info when pending)
    c_value: Any
    error: str | None


def flatten(ops: Iterable[Op]) -> list[Flat]:
    """Pairs a history's records into flat operations, in invocation order."""
    out = []
    for o in pair(ops):
        i, c = o.invoke, o.complete
        if c is None:
            out.append(Flat(i.process, i.f, i.index, i.time, i.value, None, None, INFO,
                            None, None))
        else:
            out.append(Flat(i.process, i.f, i.index, i.time, i.value, c.index, c.time,
                            c.type, c.value, c.error))
    return out


def ref(fl: Flat, value: Any = None, *, use_value: bool = False) -> dict[str, Any]:
    """A JSON reference to a flat operation, as anomalies list them."""
    v = value if use_value else (fl.c_value if fl.c_type != INFO or fl.c_value is not None
                                 else fl.i_value)
    return {
        "process": fl.process,
        "f": fl.f,
        "type": fl.c_type,
        "invoke-index": fl.i_index,
        "index": fl.c_index,
        "invoke-time": fl.i_time,
        "time": fl.c_time,
        "value": v,
    }


def merge_valid(*vs: Any) -> Any:
    """False dominates, then unknown; True only if every part is True."""
    if any(v is False for v in vs):
        return False
    if any(v == UNKNOWN for v in vs):
        return UNKNOWN
    return True


def freeze(v: Any) -> Any:
    """A hashable copy of a JSON value (lists to tuples, dicts to sorted item tuples)."""
    if isinstance(v, list | tuple):
        return tuple(freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, freeze(x)) for k, x in v.items()))
    return v


def thaw(v: Any) -> Any:
    """JSON-friendly form of a frozen value."""
    if isinstance(v, tuple | list):
        return [thaw(x) for x in v]
    if isinstance(v, frozenset | set):
        return sorted((thaw(x) for x in v), key=repr)
    return v


# ---------------------------------------------------------------- statistics

QUANTILES = (0.5, 0.9, 0.99, 1.0)


def time_buckets(t0: int, t1: int, n: int = 100) -> int:
    """A bucket width (ns) cutting [t0, t1] into at most ``n`` buckets."""
    return max(1, math.ceil((t1 - t0 + 1) / n))


def grid_of(flats: list[Flat]) -> tuple[int, int]:
    """``(t0, bucket_ns)``: the time grid over flat operations' invocations and completions."""
    if not flats:
        return 0, 1
    t0 = min(fl.i_time for fl in flats)
    t1 = max(fl.c_time if fl.c_time is not None else fl.i_time for fl in flats)
    return t0, time_buckets(t0, t1)


def quantile_rank(n: int, q: float) -> int:
    """Where the nearest-rank ``q`` quantile of ``n`` sorted values is (0-based)."""
    return max(0, min(n - 1, math.ceil(q * n) - 1))


def quantile(sorted_xs: list[int], q: float) -> int:
    """Nearest-rank quantile of a sorted list."""
    if not sorted_xs:
        return 0
    return sorted_xs[quantile_rank(len(sorted_xs), q)]


def basic_stats(flats: Iterable[Flat], t0: int, bucket_ns: int) -> dict[str, Any]:
    """ok/fail/info counts and latency quantiles per ``f``, throughput per bucket.

    Latencies are in nanoseconds over completed operations; throughput counts
    completions per time bucket and completion type.
    """
    counts: dict[str, dict[str, int]] = {}
    lats: dict[str, list[int]] = {}
    thru: dict[int, dict[str, int]] = {}
    for fl in flats:
        c = counts.setdefault(fl.f, {"ok": 0, "fail": 0, "info": 0})
        c[fl.c_type] = c.get(fl.c_type, 0) + 1
        if fl.c_time is not None:
            lats.setdefault(fl.f, []).append(fl.c_time - fl.i_time)
            b = (fl.c_time - t0) // bucket_ns
            t = thru.setdefault(b, {})
            t[fl.c_type] = t.get(fl.c_type, 0) + 1
    latency = {}
    for f, xs in lats.items():
        xs.sort()
        latency[f] = {str(q): quantile(xs, q) for q in QUANTILES}
    return stats_dict(counts, latency, thru, t0, bucket_ns)


def stats_dict(counts, latency, thru, t0, bucket_ns) -> dict[str, Any]:
    return {
        "by-f": {f: counts[f] for f in sorted(counts)},
        "latency-ns": {f: latency[f] for f in sorted(latency)},
        "throughput": {
            "t0-ns": t0,
            "bucket-ns": bucket_ns,
            "series": [{"bucket": b, **thru[b]} for b in sorted(thru)],
        },
    }
