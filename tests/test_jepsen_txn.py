"""The txn workload: its generator, its drain targets, and one short real run through the
CLI (3 nodes, a kill, transactions of confluent-kafka against kraft) that must end valid."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jepsen.history import Op
from jepsen.workloads import WORKLOADS, make_workload
from jepsen.workloads.txn import TxnGenerator, drain_targets, topic_of

REPO = Path(__file__).resolve().parents[1]


def test_generator_assigns_first_and_values_are_unique_and_increasing_per_key():
    g = TxnGenerator(keys=4, seed=3)
    assert g.next(0) == ("assign", [0, 1, 2, 3])
    seen: dict[int, list[int]] = {}
    for i in range(300):
        f, mops = g.next(i % 3 if i % 3 else 0)
        if f == "assign":
            continue
        assert f == "txn" and 1 <= len(mops) <= 4
        for m in mops:
            assert m[0] in ("send", "poll")
            if m[0] == "send":
                seen.setdefault(m[1], []).append(m[2])
    for vs in seen.values():
        assert vs == sorted(set(vs))
    assert set(seen) == {0, 1, 2, 3}


def test_generator_is_seeded_and_retire_reassigns():
    a, b = TxnGenerator(3, seed=9), TxnGenerator(3, seed=9)
    assert [a.next(1) for _ in range(30)] == [b.next(1) for _ in range(30)]
    a.retire(1)
    assert a.next(1)[0] == "assign"


def test_keys_span_two_topics():
    assert "txn" in WORKLOADS
    w = make_workload("txn", keys=5)
    assert w.topics() == [("jepsen-txn-0", 3), ("jepsen-txn-1", 2)]
    assert [topic_of(k, 2) for k in range(5)] == [
        ("jepsen-txn-0", 0), ("jepsen-txn-1", 0), ("jepsen-txn-0", 1), ("jepsen-txn-1", 1),
        ("jepsen-txn-0", 2)]


def test_drain_targets_from_ok_transactions():
    ops = [Op(0, 0, "ok", 0, "txn", [["send", 0, [5, 1]], ["poll", {0: [[6, 2]], 1: [[2, 3]]}]]),
           Op(1, 1, "fail", 1, "txn", [["send", 2, 9]]),
           Op(2, 2, "ok", 0, "txn", [["send", 2, [0, 9]], ["poll", {}]])]
    assert drain_targets(ops) == {0: 6, 1: 2, 2: 0}


def _cli(*args):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "jepsen", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)


def test_one_short_real_txn_run_is_valid(tmp_path):
    started = time.monotonic()
    p = _cli("test", "--workload", "txn", "--nodes", "3", "--time-limit", "10", "--nemesis",
             "kill", "--rate", "30", "--no-spark", "--seed", "3", "--interval", "4",
             "--recovery", "4", "--kill-targets", "one", "--store", str(tmp_path))
    took = time.monotonic() - started
    run = (tmp_path / "txn-kraft-kill-n3" / "latest").resolve()
    assert p.returncode == 0, p.stdout + p.stderr[-4000:]
    from jepsen.history import read_history
    ops = read_history(run)
    txns = [o for o in ops if o.f == "txn" and o.type != "invoke"]
    ok = [o for o in txns if o.type == "ok"]
    assert len(ok) >= 10
    sent = [m for o in ok for m in o.value if m[0] == "send"]
    assert sent and all(isinstance(m[2][0], int) for m in sent)
    assert any(o.type == "fail" and o.error == "aborted by the client" for o in txns)
    res = json.loads((run / "results.json").read_text())
    t = res["checkers"]["txn"]
    assert res["valid"] is True and t["valid"] is True, t["bad-anomaly-types"]
    assert t["graph"]["edges"].get("wr", 0) > 0
    summary = json.loads((run / "test.json").read_text())
    assert summary["drain"]["complete"] is True
    print(f"txn run: {took:.1f}s, {len(ok)} ok / {len(txns)} txns, anomalies "
          f"{summary['anomalies']}")


def test_unsafe_for_the_txn_workload_serves_read_committed_past_the_lso():
    from jepsen.runner import TestOptions

    ov = TestOptions(workload="txn", unsafe=True).cluster_overrides()
    assert ov["kraft.unsafe.read.committed.high.watermark"] == "true"
    assert "kraft.unsafe.ack.before.replication" not in ov
    assert "kraft.unsafe.read.committed.high.watermark" not in TestOptions(workload="txn").cluster_overrides()


def _txn_runs(tmp_path, unsafe: bool, runs: int = 20) -> list[dict]:
    """``python -m jepsen test --workload txn --nemesis kill --nodes 3 --time-limit 20
    [--unsafe]`` (single-process checker), seeds 500..."""
    pytest.importorskip("confluent_kafka")
    from jepsen.campaign import run_campaign
    from jepsen.runner import TestOptions

    base = TestOptions(workload="txn", nemesis=["kill"], nodes=3, time_limit_s=20, rate=100,
                       unsafe=unsafe, store=str(tmp_path), spark=False, progress=False, seed=500)
    return run_campaign(base, runs=runs)["runs"]


FATAL_READS = ("G1a", "G1b", "precommitted-read")


@pytest.mark.campaign
def test_read_committed_past_the_lso_is_caught_in_19_of_20_runs(tmp_path):
    runs = _txn_runs(tmp_path, True)
    caught = [r for r in runs if r["valid"] is False and any(r["anomalies"].get(a) for a in FATAL_READS)]
    assert len(caught) >= 19, runs


@pytest.mark.campaign
def test_the_same_txn_runs_are_valid_on_the_safe_broker(tmp_path):
    runs = _txn_runs(tmp_path, False)
    assert all(r["valid"] is True for r in runs), runs
