"""What security costs: produce and consume over SASL_SSL (SCRAM-SHA-512) as a ratio to
PLAINTEXT, on the same cluster in the same run.

One kraft cluster (``--nodes``, combined broker+controller nodes on loopback) whose main
listener is SASL_SSL (the controllers' and, with more than one node, replication's too) and
which has a second, PLAINTEXT client listener.  Every row runs once per listener, PLAINTEXT
first, through librdkafka (``kraftctl perf``, the clients' ``security.protocol``,
``sasl.mechanism`` and ``ssl.ca.location`` given as producer / consumer props), each into
its own topic so a consume reads exactly what its produce wrote; ``--repeat`` alternates the
pair that many times and keeps each listener's best.  With several nodes replication runs
over SASL_SSL for both rows, so the ratio is the client connections' cost alone.

Rows: produce acks=1 and acks=all (``--record-size`` bytes, 6 partitions, librdkafka's
defaults), and consume of what the acks=1 produce wrote.  Results go to ``--out`` (default
``bench/results/security/``): ``results.json`` (every raw figure) and ``results.md``.

    python bench/security_bench.py --quick      # small counts: a smoke run (about a minute)
    python bench/security_bench.py --nodes 3 --records 2000000
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from paper_bench import ROOT, create_topic, log, loadavg, machine_info, perf

SECURE = "SASL_SSL"
PLAIN = "PLAIN"  # the PLAINTEXT listener's name
MECHANISM = "SCRAM-SHA-512"
ROWS = (("produce acks=1", "produce", {"acks": "1"}), ("produce acks=all", "produce", {"acks": "all"}),
        ("consume", "consume", {}))


def start_cluster(base: Path, nodes: int):
    from cluster_helpers import fast_overrides, start_cluster as start

    from kraft.local_cluster import LocalCluster
    from kraft.security.dev_cluster import ClusterSecurity

    security = ClusterSecurity(SECURE, mechanism=MECHANISM, extra_listeners={PLAIN: "PLAINTEXT"})
    cluster = LocalCluster(base, controllers=nodes, brokers=0, security=security, overrides=fast_overrides())
    return start(cluster)


def client_props(cluster, listener: str) -> dict[str, str]:
    if listener == PLAIN:
        return {}
    return cluster.security.librdkafka_config(mechanism=MECHANISM)


def run_pair(cluster, args, round_: int) -> dict[str, dict[str, dict]]:
    """Each row once per listener: {listener: {row: perf result}}."""
    out: dict[str, dict[str, dict]] = {}
    plain_bootstrap = cluster.bootstrap_for(PLAIN)
    for listener in (PLAIN, SECURE):
        bootstrap = plain_bootstrap if listener == PLAIN else cluster.bootstrap_servers
        props = client_props(cluster, listener)
        results = out[listener] = {}
        written = None
        for row, kind, extra in ROWS:
            topic = f"{listener.lower()}-{round_}-{kind}-{extra.get('acks', 'read')}".replace("=", "")
            if kind == "produce":
                create_topic(plain_bootstrap, topic, args.partitions, min(args.nodes, 3))
                r = perf("produce", bootstrap, topic, args.records, args.timeout, size=args.record_size,
                         props={**props, **extra})
                if extra.get("acks") == "1":
                    written = topic
            else:
                r = perf("consume", bootstrap, written, args.records, args.timeout, props=props)
            results[row] = r
            log(f"round {round_} {listener:9s} {row:18s} "
                + (f"{r['records_per_s']:>12,.0f} records/s {r['mb_per_s']:8.2f} MB/s" if "error" not in r
                   else r["error"]))
    return out


def best(runs: list[dict], listener: str, row: str) -> dict | None:
    ok = [r[listener][row] for r in runs if "error" not in r[listener][row]]
    return max(ok, key=lambda r: r["records_per_s"]) if ok else None


def table(runs: list[dict], args) -> tuple[str, list[dict]]:
    rows = []
    lines = ["| row | PLAINTEXT records/s | SASL_SSL records/s | SASL_SSL / PLAINTEXT |",
             "|---|---:|---:|---:|"]
    for row, _, _ in ROWS:
        plain, secure = best(runs, PLAIN, row), best(runs, SECURE, row)
        ratio = secure["records_per_s"] / plain["records_per_s"] if plain and secure else None
        rows.append({"row": row, "plaintext": plain, "sasl_ssl": secure, "ratio": ratio})
        fmt = lambda r: f"{r['records_per_s']:,.0f} ({r['mb_per_s']:.1f} MB/s)" if r else "failed"
        lines.append(f"| {row} | {fmt(plain)} | {fmt(secure)} | {ratio:.2f} |" if ratio is not None
                     else f"| {row} | {fmt(plain)} | {fmt(secure)} | - |")
    lines.append("")
    lines.append(f"{args.nodes} node(s), {args.records:,} records of {args.record_size} B, {args.partitions} "
                 f"partitions, librdkafka defaults, best of {args.repeat}; SASL_SSL is {MECHANISM} over "
                 f"TLS (trio SSLStream); load average at the end {loadavg()}.")
    return "\n".join(lines), rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--quick", action="store_true", help="200,000 records: a smoke run")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "security")
    args = ap.parse_args(argv)
    if args.quick:
        args.records = min(args.records, 200_000)
    with tempfile.TemporaryDirectory(prefix="security-bench-") as tmp:
        started = time.monotonic()
        cluster = start_cluster(Path(tmp), args.nodes)
        try:
            log(f"cluster of {args.nodes} up in {time.monotonic() - started:.1f} s")
            runs = [run_pair(cluster, args, i) for i in range(args.repeat)]
        finally:
            cluster.stop_all()
    text, rows = table(runs, args)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.md").write_text("# SASL_SSL / PLAINTEXT\n\n" + text + "\n")
    (args.out / "results.json").write_text(json.dumps(
        {"machine": machine_info(), "args": {k: str(v) for k, v in vars(args).items()}, "rows": rows, "runs": runs},
        indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
