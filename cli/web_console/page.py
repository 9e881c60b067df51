"""The console's HTML, rendered on the server from a snapshot (``snapshot.collect``) and
the throughput series (``throughput.Throughput``): plain functions, no I/O.

The page works without JavaScript (reload it); ``static/console.js`` swaps in the panels
every few seconds.  Every element a reader or a test looks for carries a class or a
``data-`` attribute naming what it is (``tr.partition.under-replicated``,
``td[data-field=lag]``), so the markup is the console's interface as much as its look.
"""

from __future__ import annotations

import html
from collections.abc import Iterable

from cli.web_console.throughput import NODE_CHARTS, TOPIC_CHART, Throughput

#: line colours (a colour-blind-safe palette), by the line's rank in its chart
PALETTE = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000000")


def esc(v) -> str:
    return html.escape("-" if v is None else str(v))


def _table(cls: str, header: Iterable[str], rows: Iterable[str]) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join(rows)
    return f"<table class='{cls}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _td(field: str, v, cls: str = "") -> str:
    extra = f" class='{cls}'" if cls else ""
    return f"<td data-field='{field}'{extra}>{esc(v)}</td>"


def _nodes(ids) -> str:
    return ",".join(str(i) for i in ids)


def _ago(ms) -> str:
    return "-" if ms is None else f"{ms / 1000:.1f} s ago"


# ------------------------------------------------------------------ sections


def brokers_section(snap: dict) -> str:
    rows = []
    for b in snap["brokers"]:
        state = "registered" if b["registered"] else "not registered"
        cls = "broker" + ("" if b["registered"] else " down")
        rows.append(f"<tr class='{cls}' data-node='{b['node_id']}'>" + _td("node", b["node_id"])
                    + _td("address", f"{b['host']}:{b['port']}") + _td("rack", b["rack"])
                    + _td("state", state) + _td("controller", "active" if b["active_controller"] else "")
                    + "</tr>")
    return "<section id='brokers'><h2>Brokers</h2>" + _table(
        "brokers", ("node", "address", "rack", "state", "controller"), rows) + "</section>"


def quorum_section(snap: dict) -> str:
    q = snap.get("quorum")
    if not q:
        err = snap["errors"].get("quorum", "no answer")
        return f"<section id='quorum'><h2>Metadata quorum</h2><p class='error'>{esc(err)}</p></section>"
    summary = (f"<p class='quorum-summary'>leader <b data-field='leader'>{esc(q['leader_id'])}</b>, "
               f"epoch <b data-field='epoch'>{esc(q['leader_epoch'])}</b>, "
               f"high watermark <b data-field='high-watermark'>{esc(q['high_watermark'])}</b></p>")
    rows = []
    for r in q["replicas"]:
        lag_cls = "lagging" if r["lag"] else ""
        rows.append(f"<tr class='replica {r['status'].lower()}' data-node='{r['node_id']}'>"
                    + _td("node", r["node_id"]) + _td("status", r["status"])
                    + _td("log-end-offset", r["log_end_offset"]) + _td("lag", r["lag"], lag_cls)
                    + _td("last-fetch", _ago(r["last_fetch_ago_ms"]))
                    + _td("last-caught-up", _ago(r["last_caught_up_ago_ms"])) + "</tr>")
    return ("<section id='quorum'><h2>Metadata quorum</h2>" + summary + _table(
        "quorum", ("node", "status", "log end offset", "lag", "last fetch", "last caught up"), rows)
        + "</section>")


def topics_section(snap: dict) -> str:
    out = ["<section id='topics'><h2>Topics</h2>"]
    if "metadata" in snap["errors"]:
        out.append(f"<p class='error'>{esc(snap['errors']['metadata'])}</p>")
    urp = sum(t.get("under_replicated", 0) for t in snap["topics"])
    out.append(f"<p>{len(snap['topics'])} topics, <span data-field='under-replicated-total'>{urp}</span> "
               "under-replicated partitions</p>")
    for t in snap["topics"]:
        cls = "topic" + (" internal" if t.get("internal") else "") + (" has-urp" if t.get("under_replicated") else "")
        out.append(f"<details class='{cls}' data-topic='{esc(t['name'])}'"
                   + ("" if t.get("internal") else " open") + ">")
        flags = []
        if t.get("under_replicated"):
            flags.append(f"<span class='badge urp'>{t['under_replicated']} under-replicated</span>")
        if t.get("offline"):
            flags.append(f"<span class='badge offline'>{t['offline']} offline</span>")
        if t.get("error"):
            flags.append(f"<span class='badge offline'>{esc(t['error'])}</span>")
        out.append(f"<summary><b>{esc(t['name'])}</b> {len(t['partitions'])} partitions "
                   + " ".join(flags) + "</summary>")
        rows = []
        for p in t["partitions"]:
            pcls = "partition" + (" under-replicated" if p["under_replicated"] else "") \
                + (" offline" if p["leader"] < 0 else "")
            rows.append(f"<tr class='{pcls}' data-topic='{esc(t['name'])}' data-partition='{p['partition']}'>"
                        + _td("partition", p["partition"]) + _td("leader", p["leader"] if p["leader"] >= 0 else "none")
                        + _td("leader-epoch", p["leader_epoch"]) + _td("replicas", _nodes(p["replicas"]))
                        + _td("isr", _nodes(p["isr"])) + _td("offline-replicas", _nodes(p["offline"]))
                        + _td("status", "under-replicated" if p["under_replicated"] else "ok") + "</tr>")
        out.append(_table("partitions", ("partition", "leader", "epoch", "replicas", "ISR", "offline",
                                         "status"), rows))
        out.append("</details>")
    out.append("</section>")
    return "".join(out)


def groups_section(snap: dict) -> str:
    out = ["<section id='groups'><h2>Consumer groups</h2>"]
    if "groups" in snap["errors"]:
        out.append(f"<p class='error'>{esc(snap['errors']['groups'])}</p>")
    if not snap["groups"]:
        out.append("<p>none</p>")
    for g in snap["groups"]:
        out.append(f"<div class='group' data-group='{esc(g['group'])}'><h3>{esc(g['group'])} "
                   f"<span class='state' data-field='state'>{esc(g.get('state'))}</span> "
                   f"lag <span data-field='group-lag'>{esc(g.get('lag'))}</span></h3>")
        if g.get("error"):
            out.append(f"<p class='error'>{esc(g['error'])}</p></div>")
            continue
        out.append(f"<p>coordinator {esc(g['coordinator'])}, {len(g['members'])} members"
                   + (f", assignor {esc(g['protocol'])}" if g.get("protocol") else "") + "</p>")
        if g["members"]:
            out.append(_table("members", ("client id", "host", "partitions", "member id"), (
                f"<tr class='member'>" + _td("client-id", m["client_id"]) + _td("host", m["host"])
                + _td("partitions", " ".join(m["partitions"])) + _td("member-id", m["member_id"]) + "</tr>"
                for m in g["members"])))
        out.append(_table("offsets", ("topic", "partition", "committed", "log end", "lag", "client id"), (
            f"<tr class='offset' data-topic='{esc(r['topic'])}' data-partition='{r['partition']}'>"
            + _td("topic", r["topic"]) + _td("partition", r["partition"])
            + _td("committed", r["current_offset"]) + _td("log-end-offset", r["log_end_offset"])
            + _td("lag", r["lag"], "lagging" if r["lag"] else "") + _td("client-id", r["client_id"]) + "</tr>"
            for r in g["partitions"])))
        out.append("</div>")
    out.append("</section>")
    return "".join(out)


# ------------------------------------------------------------------ charts


def _si(v: float) -> str:
    for suffix in ("", "k", "M", "G"):
        if abs(v) < 1000 or suffix == "G":
            return f"{v:.0f}{suffix}" if suffix == "" or v >= 100 else f"{v:.1f}{suffix}"
        v /= 1000
    return str(v)


def svg_chart(title: str, unit: str, lines: dict[str, list[tuple[float, float]]], now_s: float,
              window_s: float, width: int = 420, height: int = 170) -> str:
    """A line chart of ``lines`` (label -> [(time_s, value)]) over the last ``window_s``."""
    left, right, top, bottom = 46, 8, 34, 20  # the title and the legend above the plot
    w, h = width - left - right, height - top - bottom
    peak = max((v for pts in lines.values() for _, v in pts), default=0.0)
    ymax = peak * 1.1 if peak > 0 else 1.0

    def x(t):
        return left + w * (1 - (now_s - t) / window_s)

    def y(v):
        return top + h * (1 - v / ymax)

    parts = [f"<svg class='chart' data-chart='{esc(title)}' width='{width}' height='{height}' "
             f"viewBox='0 0 {width} {height}' role='img' aria-label='{esc(title)}'>",
             f"<text x='{left}' y='12' class='title'>{esc(title)} ({esc(unit)})</text>",
             f"<rect x='{left}' y='{top}' width='{w}' height='{h}' class='plot'/>"]
    for frac in (0, 0.5, 1):
        v = ymax * frac
        parts.append(f"<line x1='{left}' x2='{left + w}' y1='{y(v):.1f}' y2='{y(v):.1f}' class='grid'/>"
                     f"<text x='{left - 4}' y='{y(v) + 4:.1f}' class='axis' text-anchor='end'>{_si(v)}</text>")
    parts.append(f"<text x='{left}' y='{height - 5}' class='axis'>-{window_s:.0f} s</text>"
                 f"<text x='{left + w}' y='{height - 5}' class='axis' text-anchor='end'>now</text>")
    legend_x = left
    for i, (label, pts) in enumerate(lines.items()):
        color = PALETTE[i % len(PALETTE)]
        coords = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in pts if now_s - t <= window_s)
        parts.append(f"<polyline points='{coords}' fill='none' stroke='{color}' stroke-width='1.5' "
                     f"data-line='{esc(label)}' data-last='{pts[-1][1]:.1f}'/>")
        parts.append(f"<text x='{legend_x}' y='27' class='legend' style='fill:{color}'>"
                     f"&#9644; {esc(label)}</text>")
        legend_x += 6 * len(label) + 24  # about 6 px a character at 10 px
    if not lines:
        parts.append(f"<text x='{left + w / 2}' y='{top + h / 2}' class='axis' text-anchor='middle'>"
                     "waiting for two scrapes</text>")
    parts.append("</svg>")
    return "".join(parts)


def charts_section(throughput: Throughput, now_s: float, metrics_note: str) -> str:
    charts = [svg_chart(f"{name} by node", unit, {f"node {n}": pts for n, pts in throughput.chart(name).items()},
                        now_s, throughput.window_s)
              for name, (_, unit) in NODE_CHARTS.items()]
    charts.append(svg_chart(TOPIC_CHART, "msg/s", throughput.chart(TOPIC_CHART), now_s, throughput.window_s))
    return (f"<section id='throughput'><h2>Throughput</h2><p class='note'>{esc(metrics_note)}</p>"
            f"<div class='charts'>{''.join(charts)}</div></section>")


# ------------------------------------------------------------------ the page


def panels(snap: dict | None, throughput: Throughput, now_s: float, metrics_note: str,
           poll_error: str | None = None) -> str:
    """Everything below the page's header: what ``/panels`` answers and the page embeds."""
    banner = f"<p class='error' id='poll-error'>{esc(poll_error)}</p>" if poll_error else ""
    if snap is None:
        return banner + "<p class='error'>no answer from the cluster yet</p>"
    return banner + (f"<p class='stamp'>cluster <span data-field='cluster-id'>{esc(snap.get('cluster_id'))}</span>, "
            f"as of <span data-field='time'>{esc(snap.get('time'))}</span> "
            f"(asked in <span data-field='took-ms'>{esc(snap.get('took_ms'))}</span> ms)</p>"
            + "<div class='row'>" + brokers_section(snap) + quorum_section(snap) + "</div>"
            + charts_section(throughput, now_s, metrics_note) + topics_section(snap) + groups_section(snap))


def page(bootstrap: str, body: str, refresh_ms: int) -> str:
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>kraft console: {esc(bootstrap)}</title>"
            "<link rel='stylesheet' href='static/console.css'></head>"
            f"<body data-refresh-ms='{refresh_ms}'><header><h1>kraft console</h1>"
            f"<span class='bootstrap'>{esc(bootstrap)}</span> <span id='status'></span></header>"
            f"<main id='panels'>{body}</main><script src='static/console.js'></script></body></html>")
