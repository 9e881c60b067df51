"""What serving metrics costs: produce throughput with ``kraft.metrics.port`` set and every
node scraped every second, as a ratio to the same cluster with metrics off, in one run.

Rounds alternate off, on, off, on, ... (a fresh 3-node cluster, RF 3, for each, one at a
time), each producing ``--records`` records of 100 bytes with librdkafka (acks=all,
idempotent, ``cli.perf.run_produce``) to a 6-partition topic as fast as it can.  With
metrics on, a thread scrapes every node's endpoint every ``--scrape-interval`` seconds
(Prometheus' default is 15 s: this is 15 times harsher) and the time each scrape took is
reported.  Run it on a quiet machine (it prints the load average).

    python bench/metrics_bench.py                       # 2 rounds of each, 300,000 records per row
    python bench/metrics_bench.py --rounds 1 --records 100000
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "tests"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from cli.perf import run_produce  # noqa: E402

TOPIC = "metricsbench"
PARTITIONS = 6


def _scrape_loop(urls: list[str], interval_s: float, stop: threading.Event, took_ms: list[float],
                 sizes: list[int]) -> None:
    while not stop.wait(interval_s):
        for url in urls:
            started = time.perf_counter()
            try:
                with urllib.request.urlopen(url, timeout=10) as resp:
                    sizes.append(len(resp.read()))
            except OSError:
                continue
            took_ms.append((time.perf_counter() - started) * 1000)


def one_round(base: Path, metrics_on: bool, records: int, scrape_interval_s: float) -> dict:
    from cluster_helpers import start_cluster
    from confluent_kafka.admin import AdminClient, NewTopic

    from kraft.local_cluster import LocalCluster

    overrides = {} if metrics_on else {"kraft.metrics.port": "0"}
    with LocalCluster(base, controllers=3, overrides=overrides) as cluster:
        try:
            start_cluster(cluster)
            bootstrap = cluster.bootstrap_servers
            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=3)])[TOPIC].result(60)
            time.sleep(2)
            run_produce(bootstrap, TOPIC, 20_000, 100, -1, {"acks": "all"}, timeout_s=120)  # warm-up
            stop, took, sizes = threading.Event(), [], []
            scraper = None
            if metrics_on:
                urls = [n.metrics_url for n in cluster.nodes.values()]
                scraper = threading.Thread(target=_scrape_loop, args=(urls, scrape_interval_s, stop, took, sizes),
                                           daemon=True)
                scraper.start()
            r = run_produce(bootstrap, TOPIC, records, 100, -1, {"acks": "all", "enable.idempotence": "true"},
                            timeout_s=300)
            stop.set()
            if scraper is not None:
                scraper.join(15)
        finally:
            cluster.stop_all(timeout_s=60)
    return {"metrics": metrics_on, "records_per_s": r["records_per_s"], "acked": r["records_acked"],
            "errors": r["errors"], "p99_ms": r["p99_ms"], "scrapes": len(took),
            "scrape_ms_median": statistics.median(took) if took else None,
            "scrape_ms_max": max(took) if took else None,
            "scrape_bytes": int(statistics.median(sizes)) if sizes else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--scrape-interval", type=float, default=1.0)
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="kraft-metricsbench-") as tmp:
        for i in range(args.rounds):
            for on in (False, True):
                row = one_round(Path(tmp) / f"r{i}-{'on' if on else 'off'}", on, args.records, args.scrape_interval)
                rows.append(row)
                extra = (f" | {row['scrapes']} scrapes, median {row['scrape_ms_median']:.1f} ms, max "
                         f"{row['scrape_ms_max']:.1f} ms, {row['scrape_bytes']:,} bytes" if on and row["scrapes"] else "")
                print(f"metrics {'on ' if on else 'off'} | {row['records_per_s']:>10,.0f} rec/s | acked "
                      f"{row['acked']} | p99 {row['p99_ms']:.1f} ms{extra}", flush=True)
    on = statistics.mean(r["records_per_s"] for r in rows if r["metrics"])
    off = statistics.mean(r["records_per_s"] for r in rows if not r["metrics"])
    print(f"throughput with metrics on / off: {on / off:.3f} ({on:,.0f} / {off:,.0f} records/s, "
          f"mean of {args.rounds} rounds); load average after: {os.getloadavg()[0]:.2f}")
    bad = [r for r in rows if r["acked"] < args.records or r["errors"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
