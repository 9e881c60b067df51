"""The txn checker on Spark agrees with the single-process path. One local Spark session
(the ``spark`` fixture of conftest) serves the test run."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from checker_helpers import as_json, followed_by  # noqa: E402

from jepsen.checkers import check  # noqa: E402
from jepsen.checkers.txn import check_txn, edge_rows, records_of  # noqa: E402
from jepsen.checkers.txn_spark import edge_frame, micro_op_frames  # noqa: E402
from jepsen.checkers.txn_synth import all_scenarios, txn_history  # noqa: E402
from jepsen.checkers._common import flatten  # noqa: E402
from jepsen.checkers.queue import SendRec  # noqa: E402
from jepsen.checkers.spark import history_frame, paired_frame  # noqa: E402
from jepsen.history import Op, write_history  # noqa: E402


def _combined() -> tuple[list[Op], dict]:
    """Every seeded scenario, then a clean simulated run on other keys and processes."""
    ops, expected = all_scenarios()
    return followed_by(ops, txn_history(1200, seed=11), _shift), expected


def _shift(o: Op):
    if o.f == "assign":
        return [k + 500 for k in o.value]
    if o.f == "txn":
        return [_shift_mop(m) for m in o.value]
    return o.value


def _shift_mop(m):
    if m[0] == "send":
        return ["send", m[1] + 500, m[2]]
    if len(m) == 2:
        return ["poll", {k + 500: pairs for k, pairs in m[1].items()}]
    return m


def test_spark_builds_the_same_dependency_rows(spark, tmp_path):
    ops, _ = _combined()
    write_history(ops, tmp_path)
    sends, reads = micro_op_frames(paired_frame(history_frame(spark, tmp_path)))
    edges, cached = edge_frame(sends, reads)
    got = sorted(tuple(r) for r in edges.collect())
    for frame in cached:
        frame.unpersist()
    groups: dict = {}
    for fl in flatten(ops):
        for key, rec in records_of(fl):
            g = groups.setdefault(key, ([], []))
            (g[0] if isinstance(rec, SendRec) else g[1]).append(rec)
    want = sorted(r for k, (s, p) in groups.items() for r in edge_rows(k, s, p))
    assert got == want
    assert {r[2] for r in got} == {"ww", "wr", "rw"}


def test_spark_matches_the_pure_path_on_every_anomaly(spark, tmp_path):
    ops, expected = _combined()
    write_history(ops, tmp_path)
    rs = check(tmp_path, spark=spark)  # the generic entry point picks the txn checker
    rp = check(ops)
    assert rs["engine"] == "spark" and list(rs["checkers"]) == ["txn"]
    assert as_json(rs["checkers"]) == as_json(rp["checkers"])
    assert as_json(rs["stats"]) == as_json(rp["stats"])
    t = rs["checkers"]["txn"]
    assert set(t["anomalies"]) == set().union(*expected.values())
    assert t["anomalies"]["G2-item"]["fatal"] is False  # allowed by default
    assert {"G1a", "G1b", "G1c", "lost-write"} <= set(t["bad-anomaly-types"])
    assert rs["valid"] is False and t["graph"]["nodes"] > 500
