"""The Spark path agrees with the pure path. One local Spark session (the ``spark``
fixture of conftest) serves the test run."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest

pytest.importorskip("pyspark")

from checker_helpers import as_json, followed_by  # noqa: E402
from click.testing import CliRunner  # noqa: E402
from test_checker_histories import (  # noqa: E402
    all_scenarios,
    exponent_zeros,
    json_identities,
    negative_zero,
    nested_floats,
    reg,
    shown,
    string_and_integer_keys,
)

from jepsen.__main__ import main  # noqa: E402
from jepsen.checkers import check, check_linearizable, check_queue  # noqa: E402
from jepsen.checkers.spark import spark_check_linearizable, spark_check_queue  # noqa: E402
from jepsen.checkers.synth import queue_history, register_history  # noqa: E402
from jepsen.history import (  # noqa: E402
    Op,
    parquet_schema,
    read_history,
    to_columns,
    write_history,
)


def _combined() -> tuple[list[Op], dict]:
    """Every anomaly scenario, then a clean synthetic run on other keys and processes."""
    ops, expected = all_scenarios()
    return followed_by(ops, queue_history(4000, seed=11), _shift), expected


def _shift(o: Op):
    v = o.value
    if o.f == "send" and v is not None:
        return [v[0] + 200, v[1]]
    if o.f == "poll" and isinstance(v, dict):
        return {k + 200: pairs for k, pairs in v.items()}
    if o.f == "assign":
        return [k + 200 for k in v]
    return v


def test_queue_matches_the_pure_path(spark, tmp_path):
    ops, expected = _combined()
    write_history(ops, tmp_path)
    rs = spark_check_queue(spark, tmp_path)
    assert shown(rs) == expected
    rp = check_queue(ops)
    assert as_json(rs) == as_json(rp)  # statistics too: Spark's quantiles are exact
    assert rs["partitions"] == 13 + 1 + 8
    assert rs["realtime-lag"]["sends-seen"] > 1000


def test_one_and_one_point_zero_and_true_are_different_values(spark):
    ops, expected = json_identities()
    rs = spark_check_queue(spark, ops)
    assert shown(rs) == expected
    assert as_json(rs) == as_json(check_queue(ops))


def _both_paths(spark, ops: list[Op], path, rewrite=None) -> dict:
    """Checks the history file of ``ops`` on both paths (its value texts passed through
    ``rewrite``), asserts they agree, and returns the result."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols = to_columns(ops)
    if rewrite is not None:
        cols["value"] = [rewrite(v) for v in cols["value"]]
    pq.write_table(pa.Table.from_pydict(cols, schema=parquet_schema()), path)
    rs = spark_check_queue(spark, path)
    rp = check_queue(read_history(path))
    assert as_json(rs) == as_json(rp)
    return rp


@pytest.mark.parametrize("rewrite", [None, exponent_zeros])
def test_negative_zero_is_zero_on_both_paths(spark, tmp_path, rewrite):
    """Written ``-0.0`` a JSON number is a decimal to Spark, which has no -0; written
    ``-0.0e0`` a double, whose text keeps the sign."""
    ops, expected = negative_zero()
    assert shown(_both_paths(spark, ops, tmp_path / "h.parquet", rewrite)) == expected


def test_floats_inside_values_on_both_paths(spark, tmp_path):
    ops, expected = nested_floats()
    assert shown(_both_paths(spark, ops, tmp_path / "h.parquet")) == expected


def test_string_and_integer_keys_on_both_paths(spark, tmp_path):
    ops, expected = string_and_integer_keys()
    r = _both_paths(spark, ops, tmp_path / "h.parquet")
    assert shown(r) == expected
    assert r["partitions"] == 3


def test_a_completion_without_invocation_does_not_stretch_the_time_grid(spark):
    """The Spark path buckets by a grid read from the records (first invocation, last
    record) and checks again with the operations' own grid when a stray completion at
    the end made the two differ."""
    ops = queue_history(400, seed=4)
    last = ops[-1]
    ops.append(Op(last.index + 1, last.time + 10**12, "ok", 777, "poll", {}))
    rs = spark_check_queue(spark, ops)
    rp = check_queue(ops)
    assert as_json(rs) == as_json(rp)
    assert rs["unseen-series"]["bucket-ns"] < 10**10


def damaged(ops: list[Op], seed: int, n: int = 40) -> list[Op]:
    """A clean queue history with ``n`` random faults: reads dropped, repeated or
    changed, acknowledged offsets moved, acknowledged sends reported failed."""
    rng = random.Random(seed)
    ops = list(ops)
    polls = [i for i, o in enumerate(ops)
             if o.f == "poll" and o.type == "ok" and any(o.value.values())]
    sends = [i for i, o in enumerate(ops) if o.f == "send" and o.type == "ok"]
    for _ in range(n):
        what = rng.choice(["drop", "repeat", "value", "offset", "fail"])
        if what in ("drop", "repeat", "value"):
            i = rng.choice(polls)
            v = {k: [list(p) for p in ps] for k, ps in ops[i].value.items()}
            if not any(v.values()):  # emptied by earlier drops
                continue
            k = rng.choice([k for k in v if v[k]])
            j = rng.randrange(len(v[k]))
            if what == "drop":
                del v[k][j]
            elif what == "repeat":
                v[k].insert(j, list(v[k][j]))
            else:
                v[k][j][1] = rng.choice([rng.randrange(10**6), f"x{rng.randrange(5)}"])
        else:
            i = rng.choice(sends)
            if ops[i].type != "ok":
                continue
            k, (off, val) = ops[i].value
            if what == "offset":
                v = [k, [max(0, off + rng.choice([-2, -1, 1, 3])), val]]
            else:
                ops[i] = dataclasses.replace(ops[i], type="fail", value=[k, val])
                continue
        ops[i] = dataclasses.replace(ops[i], value=v)
    return ops


@pytest.mark.parametrize("seed, max_examples", [(1, 1000), (2, 2)])
def test_queue_matches_the_pure_path_on_damaged_histories(spark, seed, max_examples):
    ops = damaged(queue_history(3000, seed=seed), seed)
    rs = spark_check_queue(spark, ops, max_examples=max_examples)
    rp = check_queue(ops, max_examples=max_examples)
    assert len(rp["anomaly-types"]) >= 6
    assert as_json(rs) == as_json(rp)


def test_linearizability_matches_the_pure_path(spark):
    ops = register_history(3000, keys=30, seed=5)
    i = next(i for i, o in enumerate(ops)
             if o.f == "read" and o.type == "ok" and o.value[1] is not None and i > 1000)
    o = ops[i]
    ops[i] = Op(o.index, o.time, o.type, o.process, o.f, [o.value[0], 999])
    rs = spark_check_linearizable(spark, ops, partitions=3)
    assert rs == check_linearizable(ops)
    assert rs["valid"] is False and rs["keys"] == 30
    assert [f["key"] for f in rs["failures"]["examples"]] == [o.value[0]]


def test_other_models_and_unknown_on_spark(spark):
    steps = [(p, "invoke", "append", p) for p in range(10)]
    steps += [(p, "ok", "append", p) for p in range(10)]
    steps += [(99, "invoke", "read", None), (99, "ok", "read", [3])]
    ops = reg(*steps, key=None)
    r = check(ops, spark=spark, model="log", keyed=False, budget=20)
    assert r["valid"] == "unknown" and r["engine"] == "spark"
    assert r["checkers"]["linearizable"]["model"] == "log"
    assert r["stats"]["by-f"]["append"]["ok"] == 10


def test_cli_on_spark_with_progress(spark, tmp_path):
    ops, _ = all_scenarios()
    write_history(ops, tmp_path)
    r = CliRunner().invoke(main, ["check", str(tmp_path), "--spark-master", "local[2]"])
    assert r.exit_code == 1, r.output
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["engine"] == "spark" and res["valid"] is False
    assert len(res["checkers"]["queue"]["anomaly-types"]) == 13
    assert "[spark] stage" in r.stderr and "[check] queue checked" in r.stderr
    assert not spark.sparkContext._jsc.sc().isStopped()  # the CLI left our session alone


def test_progress_prints_a_stage_that_ran_between_polls(spark):
    """A stage that starts and ends between two polls of the progress thread (here: no
    poll at all before the end) still gets its line, named by its phase."""
    import io

    from jepsen.checkers.spark import StageProgress, phase

    out = io.StringIO()
    with StageProgress(spark, out=out, interval_s=3600), phase(spark, "count rows"):
        assert spark.range(10).count() == 10
    lines = out.getvalue().splitlines()
    assert lines and all(line.startswith("[spark] stage ") for line in lines), lines
    assert any("count rows" in line and "done in" in line for line in lines), lines


def test_session_is_quiet(spark):
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.ui.enabled") == "false"
    assert conf.get("spark.ui.showConsoleProgress") == "false"
    opts = conf.get("spark.driver.extraJavaOptions")
    cfg = opts.split("-Dlog4j2.configurationFile=file:")[1].split()[0]
    with open(cfg) as f:
        assert "rootLogger.level = error" in f.read()


def test_a_session_for_short_checks_compiles_with_c1_alone(spark, monkeypatch):
    """The fixture's session is for short checks: its JVM runs with C1 only; a check of
    unknown or large size keeps the JVM's tiers, and JEPSEN_SPARK_JIT overrides both."""
    from jepsen.checkers.spark import SHORT_CHECK_RECORDS, jit_options

    args = list(spark.sparkContext._jvm.java.lang.management.ManagementFactory
                .getRuntimeMXBean().getInputArguments())
    assert "-XX:TieredStopAtLevel=1" in args
    assert jit_options(SHORT_CHECK_RECORDS) == "-XX:TieredStopAtLevel=1"
    assert jit_options(SHORT_CHECK_RECORDS + 1) == "" and jit_options(None) == ""
    monkeypatch.setenv("JEPSEN_SPARK_JIT", "c2")
    assert jit_options(10) == ""
    monkeypatch.setenv("JEPSEN_SPARK_JIT", "c1")
    assert jit_options(None) == "-XX:TieredStopAtLevel=1"
    monkeypatch.setenv("JEPSEN_SPARK_JIT", "fast")
    with pytest.raises(ValueError, match="JEPSEN_SPARK_JIT"):
        jit_options(10)


def test_history_size_reads_the_count_without_the_history(tmp_path):
    from jepsen.history import JSONL_FILE, history_size

    ops, _ = _combined()
    assert history_size(tmp_path) is None
    write_history(ops, tmp_path)
    assert history_size(tmp_path) == len(ops)  # from the Parquet footer
    assert history_size(tmp_path / "history.parquet") == len(ops)  # a file, as read_history takes
    (tmp_path / "history.parquet").unlink()
    assert (tmp_path / JSONL_FILE).is_file() and history_size(tmp_path) == len(ops)


def test_queue_over_many_row_groups_and_from_a_frame(spark, tmp_path):
    """A history of many Parquet row groups is read by several Python tasks (the examples'
    records by those whose row groups can hold them), and a frame of the same records
    goes through ``mapInArrow`` instead: both give the single-process path's result."""
    import pyarrow.parquet as pq

    from jepsen.checkers import spark_queue
    from jepsen.history import write_parquet

    ops = damaged(queue_history(3000, seed=3), 3)
    path = str(tmp_path / "history.parquet")
    write_parquet(ops, path, row_group_size=300)
    assert pq.ParquetFile(path).metadata.num_row_groups == 11
    tasks = spark_queue.row_group_tasks(path, 4)
    assert sorted(g for _, gs in tasks for g in gs) == list(range(
        pq.ParquetFile(path).metadata.num_row_groups)) and len(tasks) == 4
    rp = as_json(check_queue(ops, max_examples=5))
    assert len(rp["anomaly-types"]) >= 6
    assert as_json(spark_check_queue(spark, path, max_examples=5)) == rp
    assert as_json(spark_check_queue(spark, spark.read.parquet(path), max_examples=5)) == rp


def test_buckets_are_sized_by_task_slots_and_history_size(spark):
    """Two buckets per task slot (each task costs its own tenth of a second), more when a
    bucket would hold over ``BUCKET_RECORDS`` (all of a bucket is in one worker)."""
    from jepsen.checkers.spark_queue import BUCKET_RECORDS, buckets, local_threads

    assert [local_threads(m) for m in ("local", "local[2]", "local[3,2]", "spark://h:7077",
                                       "local-cluster[2,1,1024]")] == [1, 2, 3, None, None]
    assert spark.sparkContext.master == "local[2]"
    assert buckets(spark, 1000) == buckets(spark, 1_000_000) == 4
    assert buckets(spark, 8 * BUCKET_RECORDS) == 8
    assert buckets(spark, 8 * BUCKET_RECORDS + 1) == 9
    assert buckets(spark, None) == spark.sparkContext.defaultParallelism  # a frame
