"""Campaigns: many runs, one summary table, one report.

``run_campaign(base, runs=20, engines=["kraft", "pysyncobj"])`` runs ``runs`` tests per
engine (seeds ``base.seed + i``; with ``per_nemesis`` run ``i`` uses only the
``i mod k``-th fault of ``base.nemesis``), checks each (one SparkSession shared by all
runs when Spark is on), and writes ``<store>/campaign-<workload>/<start-time>/``
with ``summary.json`` and an ``index.html`` that puts every run's verdict, anomalies,
throughput and latency side by side, per engine.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from jepsen import report, store
from jepsen.runner import ENGINES, RunResult, TestOptions, refuse_unsupported, run_test

MAIN_F = {"queue": "send", "register": "write", "txn": "txn"}


def row_of(i: int, opts: TestOptions, r: RunResult) -> dict[str, Any]:
    """One summary-table row from a finished run."""
    lat = r.results.get("stats", {}).get("latency-ns", {}).get(MAIN_F.get(opts.workload, ""), {})
    ms = lambda q: round(lat[q] / 1e6, 1) if q in lat else None  # noqa: E731
    return {
        "run": i, "engine": opts.engine, "nemesis": "+".join(opts.nemesis) or "none",
        "seed": opts.seed, "unsafe": opts.unsafe, "valid": r.valid,
        "anomalies": r.summary.get("anomalies", {}), "ops-per-s": r.summary.get("ops-per-s"),
        "p50-ms": ms("0.5"), "p99-ms": ms("0.99"), "run-s": r.summary.get("total-s"),
        "directory": str(r.directory), "error": (r.summary.get("error") or "")[:300],
    }


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    cols = ("run", "engine", "nemesis", "seed", "valid", "ops-per-s", "p50-ms", "p99-ms",
            "run-s", "anomalies")
    cells = [[str(c) for c in cols]]
    for r in rows:
        an = ",".join(f"{k}={v}" for k, v in r["anomalies"].items()) or "-"
        if r.get("error"):
            an = "ERROR " + r["error"].splitlines()[0][:60]
        cells.append([str(r[c]) if c != "anomalies" else an for c in cols])
    width = [max(len(row[j]) for row in cells) for j in range(len(cols))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(row, width)) for row in cells)


def by_engine(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for eng in dict.fromkeys(r["engine"] for r in rows):
        rs = [r for r in rows if r["engine"] == eng]
        mean = lambda k: (round(sum(r[k] for r in rs if r[k] is not None)  # noqa: E731
                                / max(1, sum(r[k] is not None for r in rs)), 1))
        out[eng] = {"runs": len(rs), "valid": sum(r["valid"] is True for r in rs),
                    "invalid": sum(r["valid"] is False for r in rs),
                    "unknown": sum(r["valid"] not in (True, False) for r in rs),
                    "ops-per-s": mean("ops-per-s"), "p50-ms": mean("p50-ms"),
                    "p99-ms": mean("p99-ms"),
                    "lost-write-runs": sum(bool(r["anomalies"].get("lost-write"))
                                           for r in rs)}
    return out


def run_campaign(base: TestOptions, runs: int = 20, engines: Sequence[str] = ("kraft",),
                 per_nemesis: bool = False, echo: Callable[[str], None] = print,
                 spark: Any = None) -> dict[str, Any]:
    """Runs the campaign; returns ``summary.json``'s document (with ``exit-code``)."""
    engines = list(engines or ["kraft"])
    bad = [e for e in engines if e not in ENGINES]
    if bad:
        raise ValueError(f"unknown engines {bad} (choose from {', '.join(ENGINES)})")
    refuse_unsupported(base)  # before anything is created, as run_test does
    seed0 = base.seed or 0
    camp_dir = store.new_run_dir(base.store, f"campaign-{base.workload}")
    owned = False
    if base.spark and spark is None:
        from jepsen.checkers.spark import spark_session
        spark, owned = spark_session(base.spark_master), True
    rows: list[dict[str, Any]] = []
    doc: dict[str, Any] = {}
    try:
        for eng in engines:
            for i in range(runs):
                opts = copy.deepcopy(base)
                opts.engine, opts.seed, opts.name = eng, seed0 + i, None
                if per_nemesis and base.nemesis:
                    opts.nemesis = [base.nemesis[i % len(base.nemesis)]]
                echo(f"--- campaign run {i + 1}/{runs} engine={eng} "
                     f"nemesis={'+'.join(opts.nemesis) or 'none'} seed={opts.seed}")
                r = run_test(opts, spark=spark)
                rows.append(row_of(i, opts, r))
                doc = _write(camp_dir, base, rows)
                echo(format_table(rows[-1:]).splitlines()[-1])
    finally:
        if owned:
            spark.stop()
    doc = _write(camp_dir, base, rows)
    echo(format_table(rows))
    return doc


def _write(camp_dir: Path, base: TestOptions, rows: list[dict[str, Any]]) -> dict[str, Any]:
    counts = {"valid": sum(r["valid"] is True for r in rows),
              "invalid": sum(r["valid"] is False for r in rows),
              "unknown": sum(r["valid"] not in (True, False) for r in rows)}
    code = 0 if rows and counts["valid"] == len(rows) else (1 if counts["invalid"] else 2)
    engines = by_engine(rows)
    doc = {"directory": str(camp_dir), "workload": base.workload, "counts": counts,
           "exit-code": code, "by-engine": engines, "runs": rows}
    store.write_json(camp_dir / "summary.json", doc)
    (camp_dir / "index.html").write_text(report.campaign_html(
        rows, f"campaign: {base.workload}, {len(rows)} runs", engines, camp_dir))
    return doc
