"""What the cluster's own metrics said during a run: every node's metrics endpoint
(``kraft.metrics.port``, Kafka's MBeans in the Prometheus format: docs/METRICS.md) scraped
every ``interval_s`` while the workload and the nemesis run, one JSON line per node and
scrape in ``<run>/metrics.jsonl``.

A line holds ``time`` (``time.monotonic_ns``, the clock of the history's ops, so the report
lays both on one axis), ``node``, ``up`` and, when up, the few series the report plots (see
``FIELDS``).  A node that is killed or paused shows as ``up: false`` for the scrapes it
misses.  ``summarize`` reads the lines back into per-node series.
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path

log = logging.getLogger("jepsen.metrics")

FILE = "metrics.jsonl"

#: field -> (sample name, labels): one value per node and scrape
FIELDS = {
    "urp": ("kafka_server_replicamanager_underreplicatedpartitions", {}),
    "leaders": ("kafka_server_replicamanager_leadercount", {}),
    "isr_shrinks": ("kafka_server_replicamanager_isrshrinks_total", {}),
    "isr_expands": ("kafka_server_replicamanager_isrexpands_total", {}),
    "active_controller": ("kafka_controller_kafkacontroller_activecontrollercount", {}),
    "offline_partitions": ("kafka_controller_kafkacontroller_offlinepartitionscount", {}),
    "raft_leader": ("kafka_server_raft_metrics_current_leader", {}),
    "raft_epoch": ("kafka_server_raft_metrics_current_epoch", {}),
    "messages_in": ("kafka_server_brokertopicmetrics_messagesin_total", {}),
    # bytes consumers fetched from the node: a follower's too with --client-rack (KIP-392)
    "bytes_out": ("kafka_server_brokertopicmetrics_bytesout_total", {}),
    "produce_p50_ms": ("kafka_network_requestmetrics_totaltimems", {"request": "Produce", "quantile": "0.5"}),
    "produce_p99_ms": ("kafka_network_requestmetrics_totaltimems", {"request": "Produce", "quantile": "0.99"}),
    "fetch_p99_ms": ("kafka_network_requestmetrics_totaltimems", {"request": "FetchConsumer", "quantile": "0.99"}),
}


def extract(samples: dict[str, list[tuple[dict, float]]]) -> dict[str, float]:
    """``FIELDS`` from one scrape (``cli.top.scrape``'s form); absent series are left out,
    and NaN (a summary with no observations) is written as absent too."""
    from cli.top import value

    out = {}
    for field, (name, labels) in FIELDS.items():
        v = value(samples, name, **labels)
        if v is not None and not math.isnan(v):
            out[field] = v
    return out


class Scraper:
    """Scrapes ``urls`` (node id -> metrics URL) every ``interval_s`` into ``path``."""

    def __init__(self, urls: dict[int, str], path: Path, interval_s: float = 1.0):
        self.urls = urls
        self.path = Path(path)
        self.interval_s = interval_s

    def _one(self, node: int, url: str) -> dict:
        from cli.top import scrape

        started = time.monotonic_ns()
        try:
            fields = extract(scrape(url, timeout_s=max(0.5, self.interval_s)))
        except (OSError, ValueError) as exc:
            return {"time": started, "node": node, "up": False, "error": str(getattr(exc, "reason", exc))[:200]}
        return {"time": started, "node": node, "up": True, **fields}

    async def run(self) -> None:
        """Until cancelled; each line is flushed as it is written."""
        import trio

        with self.path.open("a") as out:
            while True:
                started = trio.current_time()
                lines: list[dict] = []

                async def one(node, url):
                    lines.append(await trio.to_thread.run_sync(self._one, node, url, abandon_on_cancel=True))

                async with trio.open_nursery() as nursery:
                    for node, url in self.urls.items():
                        nursery.start_soon(one, node, url)
                for line in sorted(lines, key=lambda d: d["node"]):
                    out.write(json.dumps(line) + "\n")
                out.flush()
                await trio.sleep_until(started + self.interval_s)


def read(run_dir: Path) -> list[dict]:
    p = Path(run_dir) / FILE
    if not p.exists():
        return []
    out = []
    for line in p.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut short when the run was killed
            continue
    return out


def summarize(records: list[dict], t0_ns: int) -> dict[int, dict[str, list[tuple[float, float]]]]:
    """node -> field -> [(seconds since ``t0_ns``, value)], scrapes where the node was up;
    plus the field ``up`` (1 or 0) for every scrape."""
    out: dict[int, dict[str, list[tuple[float, float]]]] = {}
    for r in sorted(records, key=lambda r: r["time"]):
        series = out.setdefault(r["node"], {})
        t = (r["time"] - t0_ns) / 1e9
        series.setdefault("up", []).append((t, 1.0 if r.get("up") else 0.0))
        for field in FIELDS:
            if field in r:
                series.setdefault(field, []).append((t, r[field]))
    return out


__all__ = ["FIELDS", "FILE", "Scraper", "extract", "read", "summarize"]
