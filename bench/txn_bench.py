"""The transactional producer's cost: throughput with a commit every 100 ms as a ratio to
the idempotent producer (acks=all) in the same run, on kraft and on Apache Kafka.

One cluster at a time (3 combined nodes, RF 3, on loopback, temporary directories), the
same client for both (librdkafka through ``cli.perf.run_produce``, as ``kraftctl perf
produce --transaction-duration-ms 100``): first the idempotent producer, then the
transactional one, each sending ``--records`` records of 100 bytes to a 6-partition topic
as fast as it can.  Apache Kafka 4.1.1 runs when Java and its jars are there
(``kraft.apache_kafka``); otherwise its rows say why not.

Prints a table and writes ``txn.json`` and ``txn.md`` into ``--out`` (bench/results/).

    python bench/txn_bench.py                 # 3 nodes, 300,000 records per row
    python bench/txn_bench.py --records 50000 --nodes 1
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "tests"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from cli.perf import run_produce  # noqa: E402

TOPIC = "txnbench"
PARTITIONS = 6


def _create_topic(bootstrap: str, rf: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=rf)])[TOPIC].result(120)
    time.sleep(2)  # every leader known to the client's first metadata


def _rows(system: str, bootstrap: str, records: int, rf: int) -> list[dict]:
    _create_topic(bootstrap, rf)
    # Warm-up (connections, metadata, producer ids), left out of the figures.
    run_produce(bootstrap, TOPIC, 5000, 100, -1, {"acks": "all"}, timeout_s=120)
    rows = []
    for label, kwargs in (("idempotent, acks=all", {}),
                          ("transactional, commit every 100 ms",
                           {"transactional_id": f"txnbench-{system}", "transaction_duration_ms": 100})):
        r = run_produce(bootstrap, TOPIC, records, 100, -1, {"acks": "all", "enable.idempotence": "true"},
                        timeout_s=300, **kwargs)
        rows.append({"system": system, "test": label, "records_per_s": r["records_per_s"],
                     "acked": r["records_acked"], "errors": r["errors"], "p99_ms": r["p99_ms"],
                     "commits": r.get("transactions_committed"), "elapsed_s": r["elapsed_s"]})
        print(f"{system:>12} | {label:<36} | {r['records_per_s']:>10,.0f} rec/s | acked {r['records_acked']}"
              f" | p99 {r['p99_ms']:.1f} ms | commits {r.get('transactions_committed', '-')}", flush=True)
    rows[1]["ratio_to_idempotent"] = (rows[1]["records_per_s"] / rows[0]["records_per_s"]
                                      if rows[0]["records_per_s"] else None)
    return rows


def run_kraft(records: int, nodes: int, base: Path) -> list[dict]:
    from cluster_helpers import start_cluster

    from kraft.local_cluster import LocalCluster

    rf = min(3, nodes)
    overrides = {"transaction.state.log.replication.factor": str(rf),
                 "transaction.state.log.min.isr": str(min(2, rf))}
    with LocalCluster(base / "kraft", controllers=nodes, overrides=overrides) as cluster:
        try:
            start_cluster(cluster)
            return _rows("kraft", cluster.bootstrap_servers, records, rf)
        finally:
            cluster.stop_all(timeout_s=60)


def run_kafka(records: int, nodes: int, base: Path) -> list[dict]:
    from kraft.apache_kafka import ApacheKafkaCluster, KafkaUnavailable, missing_programs

    if missing_programs():
        return [{"system": "Apache Kafka", "test": "-", "note": f"not run: {', '.join(missing_programs())} missing"}]
    try:
        with ApacheKafkaCluster(base / "kafka", nodes=nodes) as cluster:
            return _rows("Apache Kafka", cluster.bootstrap_servers, records, min(3, nodes))
    except KafkaUnavailable as exc:
        return [{"system": "Apache Kafka", "test": "-", "note": f"not run: {exc}"}]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--nodes", type=int, default=3, choices=(1, 3))
    ap.add_argument("--no-kafka", action="store_true", help="kraft only")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = ap.parse_args()
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="kraft-txnbench-") as tmp:
        rows = run_kraft(args.records, args.nodes, Path(tmp))
        if not args.no_kafka:
            rows += run_kafka(args.records, args.nodes, Path(tmp))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    doc = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
           "seconds": round(time.time() - started, 1), "records": args.records, "nodes": args.nodes,
           "load_average": os.getloadavg()[0], "rows": rows}
    (out / "txn.json").write_text(json.dumps(doc, indent=2) + "\n")
    lines = ["| system | producer | records/s | ratio to idempotent | p99 ms | commits |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        if "note" in r:
            lines.append(f"| {r['system']} | {r['note']} | - | - | - | - |")
            continue
        ratio = r.get("ratio_to_idempotent")
        lines.append(f"| {r['system']} | {r['test']} | {r['records_per_s']:,.0f} | "
                     f"{'%.2f' % ratio if ratio is not None else '1'} | {r['p99_ms']:.1f} | {r['commits'] or '-'} |")
    lines.append("")
    lines.append(f"{args.nodes} node(s), RF {min(3, args.nodes)}, {args.records:,} records of 100 B per row, "
                 f"librdkafka acks=all idempotent; run {doc['started']}, {doc['seconds']} s; "
                 f"1-min load average at the end {doc['load_average']:.2f} (2 cores).")
    (out / "txn.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    bad = [r for r in rows if "note" not in r and (r["acked"] < args.records or r["errors"])]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
