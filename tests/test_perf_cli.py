"""``kraftctl perf produce`` / ``perf consume`` against a real 1-node cluster."""

import json
import re
import subprocess
import sys

from cluster_helpers import fast_overrides, start_cluster


def kraftctl(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "cli.main", *args], check=False, capture_output=True, text=True,
                          timeout=timeout)


def test_perf_produce_and_consume_print_their_figures(make_cluster):
    cluster = start_cluster(make_cluster(controllers=1, brokers=0, overrides=fast_overrides()))
    bs = f"--bootstrap-server={cluster.bootstrap_servers}"
    created = kraftctl("topics", bs, "--create", "--topic", "perf", "--partitions", "2",
                       "--replication-factor", "1")
    assert created.returncode == 0, created.stderr

    produced = kraftctl("perf", "produce", bs, "--topic", "perf", "--num-records", "3000",
                        "--record-size", "100", "--throughput", "-1", "--timeout", "60",
                        "--producer-props", "acks=all", "linger.ms=5", "batch.size=16384",
                        "--producer-props", "compression.type=lz4")
    assert produced.returncode == 0, produced.stderr
    line = produced.stdout.strip().splitlines()[-1]
    assert re.match(r"3000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
                    r"[\d.]+ ms max latency, [\d.]+ ms 50th, [\d.]+ ms 95th, [\d.]+ ms 99th, "
                    r"[\d.]+ ms 99\.9th\.$", line), line

    consumed = kraftctl("perf", "consume", bs, "--topic", "perf", "--num-records", "3000",
                        "--timeout", "60", "--json")
    assert consumed.returncode == 0, consumed.stderr
    result = json.loads(consumed.stdout.strip().splitlines()[-1])
    assert result["records"] == 3000 and result["bytes"] == 300_000 and not result["timed_out"]
    for key in ("records_per_s", "mb_per_s", "avg_latency_ms", "p50_ms", "p95_ms", "p99_ms",
                "max_latency_ms"):
        assert result[key] >= 0, key
    assert result["records_per_s"] > 0

    text = kraftctl("perf", "consume", bs, "--topic", "perf", "--num-records", "1000", "--timeout", "60")
    assert text.returncode == 0, text.stderr
    assert re.match(r"1000 records consumed, [\d.]+ records/sec \([\d.]+ MB/sec\)", text.stdout), text.stdout
    assert "ms 99th" in text.stdout

    bad = kraftctl("perf", "produce", bs, "--topic", "perf", "--num-records", "1",
                   "--producer-props", "nonsense")
    assert bad.returncode != 0 and "key=value" in bad.stderr


def test_perf_produce_in_transactions_commits_what_it_sent(make_cluster):
    """``--transaction-duration-ms`` (kafka-producer-perf-test's option): the records go out
    in transactions committed every so often, all readable under read_committed."""
    cluster = start_cluster(make_cluster(controllers=1, brokers=0, overrides=fast_overrides(
        transaction_state_log_replication_factor=1, transaction_state_log_min_isr=1)))
    bs = f"--bootstrap-server={cluster.bootstrap_servers}"
    assert kraftctl("topics", bs, "--create", "--topic", "tperf", "--partitions", "2",
                    "--replication-factor", "1").returncode == 0
    produced = kraftctl("perf", "produce", bs, "--topic", "tperf", "--num-records", "3000",
                        "--throughput", "4000", "--transaction-duration-ms", "200", "--timeout", "90",
                        "--json")
    assert produced.returncode == 0, produced.stderr
    result = json.loads(produced.stdout.strip().splitlines()[-1])
    assert result["records_acked"] == 3000 and result["errors"] == 0, result
    assert result["transactions_committed"] >= 3, result
    consumed = kraftctl("perf", "consume", bs, "--topic", "tperf", "--num-records", "3000", "--timeout", "60",
                        "--consumer-props", "isolation.level=read_committed", "--json")
    assert consumed.returncode == 0, consumed.stderr
    assert json.loads(consumed.stdout.strip().splitlines()[-1])["records"] == 3000
