"""Plots and the index.html of a run (or of a campaign).

``write_report(run_dir, ops, results, summary)`` writes:

* ``latency-raw.png`` -- every completed client operation: latency over invocation time,
  by function and completion type;
* ``latency-quantiles.png`` -- per function, latency quantiles (0.5, 0.95, 0.99, max) per
  time bucket;
* ``rate.png`` -- completions per second, by function and type;
* ``cluster-metrics.png`` -- when the run scraped the nodes (``jepsen.metrics``): what the
  cluster said of itself over time: under-replicated partitions per node, partition leaders
  per node with the metadata quorum's leader changes marked, and Produce/Fetch latency
  quantiles per node (Kafka's TotalTimeMs);
* ``index.html`` -- verdict, options, the checkers' results (``render_html``), the plots
  and links to the history, results, logs and node folders.

Every plot shades the nemesis's fault windows (``jepsen.nemesis.fault_windows`` over the
nemesis ops of the history), one colour per fault.
"""

from __future__ import annotations

import html
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jepsen.history import INVOKE, NEMESIS, Op

PLOTS = ("latency-raw.png", "latency-quantiles.png", "rate.png")
FAULT_COLORS = {"kill": "#e41a1c", "pause": "#984ea3", "partition": "#377eb8",
                "packet": "#4daf4a", "clock": "#ff7f00", "file": "#a65628"}
TYPE_COLORS = {"ok": "#1b9e77", "info": "#e6ab02", "fail": "#d95f02"}
MARKERS = "o^sDvP*X<>"

_CSS = """
body{font-family:sans-serif;margin:2em;max-width:1200px}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;
text-align:left;font-size:90%}.verdict.valid{color:#1a7f37}.verdict.invalid{color:#cf222e}
.verdict.unknown{color:#9a6700}img{max-width:100%;border:1px solid #eee;margin:.5em 0}
pre{background:#f6f8fa;padding:1em;overflow:auto;max-height:30em}
"""


def t0_of(ops: Sequence[Op]) -> int:
    return min((o.time for o in ops), default=0)


def nemesis_windows(ops: Sequence[Op], t0: int | None = None) -> list[tuple[str, float, float]]:
    """(fault, start_s, stop_s) from the nemesis's invocations in a history."""
    from jepsen.nemesis import Step, fault_windows

    t0 = t0_of(ops) if t0 is None else t0
    steps = [Step((o.time - t0) / 1e9, {"f": o.f, "value": o.value}) for o in ops
             if o.process == NEMESIS and o.type == INVOKE]
    return fault_windows(steps)


def _completed(ops: Sequence[Op]):
    """(f, type, invoke_s, complete_s, latency_ms) of client operations."""
    from jepsen.checkers._common import flatten

    t0 = t0_of(ops)
    out = []
    for fl in flatten(o for o in ops if isinstance(o.process, int)):
        if fl.c_time is None:
            continue
        out.append((fl.f, fl.c_type, (fl.i_time - t0) / 1e9, (fl.c_time - t0) / 1e9,
                    (fl.c_time - fl.i_time) / 1e6))
    return out


def _shade(ax, windows, xmax: float) -> None:
    seen = set()
    for fault, a, b in windows:
        b = xmax if math.isinf(b) else b
        ax.axvspan(a, b, color=FAULT_COLORS.get(fault, "#999999"), alpha=0.15, lw=0,
                   label=None if fault in seen else f"{fault}")
        seen.add(fault)


def plot_all(run_dir: Path, ops: Sequence[Op], title: str = "") -> list[str]:
    """Writes the three plots; returns the file names written."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = _completed(ops)
    windows = nemesis_windows(ops)
    xmax = max([d[3] for d in done] + [(max((o.time for o in ops), default=0)
                                        - t0_of(ops)) / 1e9, 1.0])
    fs = sorted({d[0] for d in done})
    written = []

    # latency-raw
    fig, ax = plt.subplots(figsize=(11, 5))
    _shade(ax, windows, xmax)
    for i, f in enumerate(fs):
        for t in ("ok", "info", "fail"):
            pts = [(d[2], max(d[4], 1e-3)) for d in done if d[0] == f and d[1] == t]
            if pts:
                ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=4,
                           marker=MARKERS[i % len(MARKERS)], color=TYPE_COLORS[t],
                           alpha=0.6, label=f"{f} {t}")
    ax.set_yscale("log")
    ax.set_xlim(0, xmax)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("latency (ms)")
    ax.set_title(f"{title} latency (raw)")
    ax.legend(loc="upper left", fontsize=7, ncol=4, markerscale=3)
    fig.tight_layout()
    fig.savefig(run_dir / "latency-raw.png", dpi=90)
    plt.close(fig)
    written.append("latency-raw.png")

    # latency-quantiles
    bucket = max(0.5, xmax / 60)
    fig, ax = plt.subplots(figsize=(11, 5))
    _shade(ax, windows, xmax)
    for i, f in enumerate(fs):
        by: dict[int, list[float]] = {}
        for d in done:
            if d[0] == f and d[1] == "ok":
                by.setdefault(int(d[3] // bucket), []).append(d[4])
        if not by:
            continue
        xs = sorted(by)
        for q, style in ((0.5, "-"), (0.95, "--"), (0.99, ":"), (1.0, "-.")):
            ys = []
            for b in xs:
                v = sorted(by[b])
                ys.append(max(v[max(0, math.ceil(q * len(v)) - 1)], 1e-3))
            ax.plot([(b + 0.5) * bucket for b in xs], ys, style,
                    color=f"C{i}", label=f"{f} {'max' if q == 1.0 else f'p{int(q * 100)}'}")
    ax.set_yscale("log")
    ax.set_xlim(0, xmax)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("latency (ms), ok ops")
    ax.set_title(f"{title} latency quantiles ({bucket:.1f}s buckets)")
    ax.legend(loc="upper left", fontsize=7, ncol=4)
    fig.tight_layout()
    fig.savefig(run_dir / "latency-quantiles.png", dpi=90)
    plt.close(fig)
    written.append("latency-quantiles.png")

    # rate
    bucket = max(1.0, xmax / 60)
    fig, ax = plt.subplots(figsize=(11, 5))
    _shade(ax, windows, xmax)
    for i, f in enumerate(fs):
        for t, style in (("ok", "-"), ("info", "--"), ("fail", ":")):
            by: dict[int, int] = {}
            for d in done:
                if d[0] == f and d[1] == t:
                    b = int(d[3] // bucket)
                    by[b] = by.get(b, 0) + 1
            if by:
                xs = list(range(0, max(by) + 1))
                ax.plot([(b + 0.5) * bucket for b in xs], [by.get(b, 0) / bucket for b in xs],
                        style, color=f"C{i}", label=f"{f} {t}")
    ax.set_xlim(0, xmax)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("completions / s")
    ax.set_title(f"{title} throughput")
    ax.legend(loc="upper left", fontsize=7, ncol=4)
    fig.tight_layout()
    fig.savefig(run_dir / "rate.png", dpi=90)
    plt.close(fig)
    written.append("rate.png")
    return written


METRICS_PLOT = "cluster-metrics.png"


def quorum_leader_changes(records: Sequence[dict], t0: int) -> list[tuple[float, int, int]]:
    """(seconds, leader, epoch) each time a node's Raft metrics first show a leader of a
    higher epoch than any seen before (an epoch has at most one leader)."""
    out = []
    newest = -1
    for r in sorted(records, key=lambda r: r["time"]):
        epoch, leader = int(r.get("raft_epoch", -1)), int(r.get("raft_leader", -1))
        if leader >= 0 and epoch > newest:
            newest = epoch
            out.append(((r["time"] - t0) / 1e9, leader, epoch))
    return out


def _broken(points: Sequence[tuple[float, float]], gap_s: float):
    """xs, ys with a NaN wherever consecutive points are more than ``gap_s`` apart, so
    that a line is not drawn across the scrapes a node missed."""
    xs, ys = [], []
    for i, (t, v) in enumerate(points):
        if i and t - points[i - 1][0] > gap_s:
            xs.append(t)
            ys.append(math.nan)
        xs.append(t)
        ys.append(v)
    return xs, ys


def plot_metrics(run_dir: Path, ops: Sequence[Op], title: str = "", interval_s: float = 1.0) -> list[str]:
    """``METRICS_PLOT`` from ``<run>/metrics.jsonl``; [] when the run has no scrapes."""
    from jepsen import metrics

    records = metrics.read(run_dir)
    if not records:
        return []
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t0 = t0_of(ops) if ops else min(r["time"] for r in records)
    series = metrics.summarize(records, t0)
    nodes = sorted(series)
    windows = nemesis_windows(ops, t0) if ops else []
    xmax = max([pts[-1][0] for s in series.values() for pts in s.values() if pts] + [1.0])
    gap = 2.5 * interval_s
    fig, (up, urp, leaders, latency) = plt.subplots(
        4, 1, figsize=(11, 11), sharex=True, gridspec_kw={"height_ratios": [0.6, 1.5, 1.5, 2]})
    for ax in (up, urp, leaders, latency):
        _shade(ax, windows, xmax)
    for i, node in enumerate(nodes):
        s, color = series[node], f"C{i}"
        # one row per node: a bar over each scrape interval in which the node answered
        answered = [(t, interval_s) for t, ok in s.get("up", []) if ok]
        up.broken_barh(answered, (i - 0.35, 0.7), color=color)
        if s.get("urp"):
            urp.step(*_broken(s["urp"], gap), where="post", color=color, label=f"node {node}")
        if s.get("leaders"):
            leaders.step(*_broken(s["leaders"], gap), where="post", color=color, label=f"node {node}")
        for field, style in (("produce_p99_ms", "-"), ("produce_p50_ms", "--"), ("fetch_p99_ms", ":")):
            # 0: no request in the summary's window; left out rather than drawn at 0
            pts = [(t, v) for t, v in s.get(field, []) if v > 0]
            if pts:
                request, q = field.split("_")[:2]
                latency.plot(*_broken(pts, gap), style, color=color, marker=".", ms=3,
                             label=f"node {node} {request} {q}")
    for t, leader, epoch in quorum_leader_changes(records, t0):
        leaders.axvline(t, color="black", lw=0.8, ls=":")
        leaders.annotate(f"quorum leader {leader}, epoch {epoch}", (t, 0.98),
                         xycoords=("data", "axes fraction"), rotation=90, va="top", ha="right",
                         fontsize=7)
    up.set_yticks(range(len(nodes)), [f"node {n}" for n in nodes], fontsize=8)
    up.set_ylim(-0.6, len(nodes) - 0.4)
    up.set_title(f"{title} cluster metrics (every node scraped each {interval_s:g} s)")
    up.set_ylabel("answered\nscrapes")
    urp.set_ylabel("under-replicated\npartitions")
    leaders.set_ylabel("partition leaders\n(dotted: quorum leader\nchanges)")
    latency.set_yscale("log")
    latency.set_ylabel("request TotalTimeMs\nquantiles (ms)")
    latency.set_xlabel("time (s)")
    latency.set_xlim(0, xmax)
    for ax in (urp, leaders, latency):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper left", fontsize=7, ncol=5)
    fig.tight_layout()
    fig.savefig(run_dir / METRICS_PLOT, dpi=90)
    plt.close(fig)
    return [METRICS_PLOT]


def _verdict(v: Any) -> str:
    cls = "valid" if v is True else "invalid" if v is False else "unknown"
    text = "valid" if v is True else "INVALID" if v is False else "unknown"
    return f'<span class="verdict {cls}">{text}</span>'


def _kv_table(d: dict[str, Any]) -> str:
    e = html.escape
    rows = "".join(f"<tr><th>{e(str(k))}</th><td>{e(json.dumps(v, default=str))}</td></tr>"
                   for k, v in d.items())
    return f"<table>{rows}</table>"


def index_html(run_dir: Path, results: dict[str, Any], summary: dict[str, Any],
               plots: Sequence[str]) -> str:
    from jepsen.checkers import render_html

    e = html.escape
    name = summary.get("test", run_dir.name)
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>{e(name)}</title>"
           f"<style>{_CSS}</style></head><body>",
           f"<h1>{e(name)} &mdash; {_verdict(results.get('valid'))}</h1>",
           f"<p>{e(str(run_dir))}</p>"]
    if summary.get("error") or results.get("error"):
        out.append(f"<h2>Error</h2><pre>{e(summary.get('error') or results.get('error'))}</pre>")
    facts = {k: summary[k] for k in ("records", "ops-per-s", "run-s", "total-s", "startup",
                                     "drain", "anomalies") if k in summary}
    out.append("<h2>Run</h2>" + _kv_table(facts))
    if summary.get("options"):
        out.append("<details><summary>Options</summary>" + _kv_table(summary["options"])
                   + "</details>")
    out.append(render_html(results))
    for p in plots:
        out.append(f"<h3>{e(p)}</h3><img src='{e(p)}' alt='{e(p)}'>")
    links = [f for f in ("history.jsonl", "history.parquet", "results.json", "metrics.jsonl",
                         "jepsen.log", "test.json") if (run_dir / f).exists()]
    nodes = sorted(p.name for p in run_dir.iterdir() if p.is_dir() and p.name.startswith("node"))
    out.append("<h2>Files</h2><ul>" + "".join(f"<li><a href='{e(f)}'>{e(f)}</a></li>"
                                              for f in links))
    for n in nodes:
        extra = " (+ data)" if (run_dir / n / "data").exists() else ""
        out.append(f"<li><a href='{e(n)}/node.log'>{e(n)}/node.log</a>{extra}</li>")
    out.append("</ul></body></html>")
    return "\n".join(out)


def write_report(run_dir: str | os.PathLike, ops: Sequence[Op], results: dict[str, Any],
                 summary: dict[str, Any]) -> Path:
    """Writes the plots and index.html of a run; returns the index path."""
    run_dir = Path(run_dir)
    plots = plot_all(run_dir, ops, summary.get("test", "")) if ops else []
    plots += plot_metrics(run_dir, ops, summary.get("test", ""),
                          summary.get("options", {}).get("metrics_interval_s") or 1.0)
    p = run_dir / "index.html"
    p.write_text(index_html(run_dir, results, summary, plots))
    return p


# ---------------------------------------------------------------- campaigns


def campaign_html(rows: list[dict[str, Any]], title: str, by_engine: dict[str, Any],
                  base: Path) -> str:
    e = html.escape
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>{e(title)}</title>"
           f"<style>{_CSS}</style></head><body><h1>{e(title)}</h1>",
           "<h2>By engine</h2><table><tr><th>engine</th><th>runs</th><th>valid</th>"
           "<th>invalid</th><th>unknown</th><th>ops/s (mean)</th><th>send/write p50 ms</th>"
           "<th>p99 ms</th></tr>"]
    for eng, s in by_engine.items():
        out.append(f"<tr><td>{e(eng)}</td><td>{s['runs']}</td><td>{s['valid']}</td>"
                   f"<td>{s['invalid']}</td><td>{s['unknown']}</td><td>{s['ops-per-s']}</td>"
                   f"<td>{s['p50-ms']}</td><td>{s['p99-ms']}</td></tr>")
    out.append("</table><h2>Runs</h2><table><tr><th>#</th><th>engine</th><th>nemesis</th>"
               "<th>seed</th><th>verdict</th><th>anomalies</th><th>ops/s</th><th>p50 ms</th>"
               "<th>p99 ms</th><th>run s</th><th>report</th></tr>")
    for r in rows:
        d = Path(r["directory"])
        try:
            rel = os.path.relpath(d / "index.html", base)
        except ValueError:
            rel = str(d / "index.html")
        out.append(f"<tr><td>{r['run']}</td><td>{e(r['engine'])}</td><td>{e(r['nemesis'])}</td>"
                   f"<td>{r['seed']}</td><td>{_verdict(r['valid'])}</td>"
                   f"<td>{e(json.dumps(r['anomalies']))}{' ' + e(r['error'][:80]) if r.get('error') else ''}</td>"
                   f"<td>{r['ops-per-s']}</td><td>{r['p50-ms']}</td><td>{r['p99-ms']}</td>"
                   f"<td>{r['run-s']}</td><td><a href='{e(rel)}'>index</a></td></tr>")
    out.append("</table></body></html>")
    return "\n".join(out)


__all__ = ["METRICS_PLOT", "PLOTS", "campaign_html", "index_html", "nemesis_windows", "plot_all",
           "plot_metrics", "quorum_leader_changes", "write_report"]
