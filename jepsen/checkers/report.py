"""Checking a whole history: choosing checkers, results.json, and an HTML fragment."""

from __future__ import annotations

import html
import json
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from jepsen.checkers import linear, queue
from jepsen.checkers._common import basic_stats, flatten, grid_of, merge_valid
from jepsen.history import Op, read_history

RESULTS_FILE = "results.json"
QUEUE_FS = frozenset({"send", "poll"})


def _workloads(fs: set[str], workload: str, model: linear.Model) -> list[str]:
    if workload != "auto":
        return [workload]
    out = []
    if "txn" in fs:
        out.append("txn")
    elif fs & QUEUE_FS:
        out.append("queue")
    if fs & (model.fs - {"read"}) or (not out and "read" in fs):
        out.append("linearizable")
    return out


def check(source: str | os.PathLike[str] | Iterable[Op], *, spark: Any = None,
          workload: str = "auto", model: str | linear.Model = "cas-register",
          keyed: bool = True, sub_via: str | None = None,
          budget: int = linear.DEFAULT_BUDGET, progress: bool = False) -> dict[str, Any]:
    """Checks a history and returns the results.json document.

    Args:
        source: a run folder, a history file, or ops in memory.
        spark: a SparkSession to run on; ``None`` runs the single-process path.
        workload: ``auto`` (by the functions present), ``queue``, ``txn`` or
            ``linearizable``.
        model: the linearizability model (see ``jepsen.checkers.linear.MODELS``).
        keyed: register values are ``[key, payload]`` over independent keys.
        sub_via: ``assign`` or ``subscribe`` for the queue checker (inferred if None).
        budget: per-key linearizability search budget.
        progress: print a line per phase (and per Spark stage) to stderr.

    Returns:
        ``{"valid", "checkers": {name: result}, "stats", "elapsed-s", "engine"}``.
    """
    started = time.monotonic()
    m = linear.model_named(model)

    def say(msg: str) -> None:
        if progress:
            print(f"[check] {msg} ({time.monotonic() - started:.1f}s)", file=sys.stderr,
                  flush=True)

    results: dict[str, Any] = {}
    if spark is None:
        ops = list(source) if not isinstance(source, (str, os.PathLike)) \
            else read_history(source)
        say(f"read {len(ops)} records")
        flats = flatten(ops)
        for w in _workloads({fl.f for fl in flats}, workload, m):
            if w == "queue":
                results[w] = queue.check_queue(ops, sub_via=sub_via)
            elif w == "txn":
                from jepsen.checkers.txn import check_txn
                results[w] = check_txn(ops, sub_via=sub_via)
            else:
                results[w] = linear.check_linearizable(ops, m, keyed, budget)
            say(f"{w} checked")
        with_stats = [w for w in ("queue", "txn") if w in results]
        stats = results[with_stats[0]].pop("stats") if with_stats \
            else basic_stats(flats, *grid_of(flats))
        records = len(ops)
    else:
        from jepsen.checkers import spark as sp

        source = sp.parquet_source(source)
        with (sp.StageProgress(spark) if progress else _Null()):
            with sp.phase(spark, "read history"):
                by_f = sp.f_counts(spark, source)
            records, fs = sum(by_f.values()), set(by_f)
            say(f"read {records} records")
            for w in _workloads(fs, workload, m):
                if w == "queue":
                    results[w] = sp.spark_check_queue(spark, source, sub_via=sub_via)
                elif w == "txn":
                    from jepsen.checkers.txn_spark import spark_check_txn
                    results[w] = spark_check_txn(spark, source, sub_via=sub_via)
                else:
                    results[w] = sp.spark_check_linearizable(spark, source, m, keyed, budget)
                say(f"{w} checked")
            with_stats = [w for w in ("queue", "txn") if w in results]
            if with_stats:
                stats = results[with_stats[0]].pop("stats")
            else:
                with sp.phase(spark, "statistics"):
                    paired = sp.paired_frame(sp.history_frame(spark, source)).persist()
                    counts, t0, bucket_ns = sp._counts_and_grid(paired)
                    stats = sp.spark_stats(paired, t0, bucket_ns, counts)
                    paired.unpersist()
    return {
        "valid": merge_valid(*(r["valid"] for r in results.values())) if results
        else "unknown",
        "engine": "spark" if spark is not None else "python",
        "records": records,
        "checkers": results,
        "stats": stats,
        "elapsed-s": round(time.monotonic() - started, 3),
    }


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def write_results(results: dict[str, Any], directory: str | os.PathLike[str]) -> Path:
    """Writes ``results.json`` into a run folder; returns its path."""
    p = Path(directory) / RESULTS_FILE
    tmp = p.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results, indent=2, sort_keys=False, default=str) + "\n")
    os.replace(tmp, p)
    return p


def check_store(directory: str | os.PathLike[str], spark: Any = None,
                **kwargs: Any) -> dict[str, Any]:
    """Re-checks a stored run: reads its history, writes its ``results.json``."""
    results = check(Path(directory), spark=spark, **kwargs)
    results["history"] = str(Path(directory))
    write_results(results, directory)
    return results


# ---------------------------------------------------------------- HTML


def _verdict(v: Any) -> str:
    cls = {True: "valid", False: "invalid"}.get(v, "unknown") if isinstance(v, bool) \
        else "unknown"
    text = {True: "valid", False: "INVALID"}.get(v, "unknown") if isinstance(v, bool) \
        else "unknown"
    return f'<span class="verdict {cls}">{text}</span>'


def _op_text(o: dict[str, Any]) -> str:
    return (f"{o.get('process')} {o.get('f')} {o.get('type')} "
            f"#{o.get('invoke-index')}&rarr;#{o.get('index')} "
            f"{html.escape(json.dumps(o.get('value'), default=str))}")


def _cycle_text(x: dict[str, Any]) -> str:
    """``cycle #3 -ww-> #7 -rw-> #3: `` for a cycle anomaly (transactions by invocation)."""
    steps = x["steps"]
    path = "".join(f" -{s['type']}-> #{s['to']}" for s in steps)
    return f"cycle #{steps[0]['from']}{html.escape(path)}: "


def render_html(results: dict[str, Any], max_examples: int = 5) -> str:
    """An HTML fragment (a ``<div>``) summarising a results.json document."""
    e = html.escape
    out = ['<div class="jepsen-results">',
           f"<h2>Verdict: {_verdict(results.get('valid'))}</h2>"]
    for name, r in results.get("checkers", {}).items():
        out.append(f"<h3>{e(name)}: {_verdict(r.get('valid'))}</h3>")
        if "anomalies" in r:
            out.append("<table><tr><th>anomaly</th><th>count</th><th>fatal</th>"
                       "<th>examples (ops)</th></tr>")
            for k, a in r["anomalies"].items():
                ex = "<br>".join(
                    (_cycle_text(x) if "steps" in x else f"key {e(str(x.get('key')))}: ")
                    + "; ".join(_op_text(o) for o in x["ops"])
                    for x in a["examples"][:max_examples])
                out.append(f"<tr><td>{e(k)}</td><td>{a['count']}</td>"
                           f"<td>{'yes' if a['fatal'] else 'no'}</td><td>{ex}</td></tr>")
            out.append("</table>")
            w = r.get("realtime-lag", {}).get("worst")
            if w:
                out.append(f"<p>Worst realtime lag: {w['lag-ns'] / 1e9:.3f}s "
                           f"(key {e(str(w['key']))})</p>")
        if "failures" in r:
            out.append(f"<p>{r['keys']} keys, {r['ops']} operations, "
                       f"{r['failures']['count']} non-linearizable, "
                       f"{r['unknown-count']} unknown</p>")
            for f in r["failures"]["examples"][:max_examples]:
                out.append(f"<h4>key {e(json.dumps(f['key'], default=str))}</h4><ul>")
                for o in f["window"]:
                    mark = " <b>&larr; fails</b>" if o == f["op"] else ""
                    out.append(f"<li>{_op_text(o)}{mark}</li>")
                out.append(f"</ul><p>final states: "
                           f"{e(json.dumps(f['final-states'], default=str))}</p>")
    st = results.get("stats")
    if st:
        out.append("<h3>Operations</h3><table><tr><th>f</th><th>ok</th><th>fail</th>"
                   "<th>info</th><th>p50 ms</th><th>p99 ms</th><th>max ms</th></tr>")
        for f, c in st["by-f"].items():
            lat = st["latency-ns"].get(f, {})
            ms = [f"{lat.get(q, 0) / 1e6:.2f}" for q in ("0.5", "0.99", "1.0")]
            out.append(f"<tr><td>{e(f)}</td><td>{c.get('ok', 0)}</td><td>{c.get('fail', 0)}"
                       f"</td><td>{c.get('info', 0)}</td><td>{ms[0]}</td><td>{ms[1]}</td>"
                       f"<td>{ms[2]}</td></tr>")
        out.append("</table>")
    out.append("</div>")
    return "\n".join(out)
