"""The store layout and the report, from synthetic histories (no cluster)."""

from __future__ import annotations

import json
import math
import os

from jepsen import report, store
from jepsen.checkers import check_store
from jepsen.checkers.synth import queue_history, register_history
from jepsen.history import Op, read_history, reindex, write_history
from jepsen.runner import Recorder


def test_new_run_dir_and_latest_symlink(tmp_path):
    a = store.new_run_dir(tmp_path, "queue kraft/kill", now=1_700_000_000.0)
    b = store.new_run_dir(tmp_path, "queue kraft/kill", now=1_700_000_000.0)  # same instant
    c = store.new_run_dir(tmp_path, "queue kraft/kill", now=1_700_000_100.5)
    assert a.parent == b.parent == c.parent == tmp_path / "queue_kraft_kill"
    assert a.name == "20231114T221320.000Z" and b.name == a.name + "-1"
    assert c.name == "20231114T221500.500Z"
    latest = a.parent / "latest"
    assert latest.is_symlink() and os.readlink(latest) == c.name
    assert latest.resolve() == c.resolve()
    store.write_json(a / "test.json", {"x": 1})
    assert store.runs(tmp_path) == [a]


def test_recorder_numbers_and_writes_live(tmp_path):
    rec = Recorder(tmp_path / "history.jsonl")
    rec.add(0, "invoke", "send", [0, 1])
    rec.nemesis({"type": "invoke", "process": "nemesis", "f": "start-kill", "value": "one"})
    rec.add(0, "ok", "send", [0, [0, 1]])
    rec.nemesis({"type": "info", "process": "nemesis", "f": "start-kill",
                 "value": {"killed": [2]}})
    ops = read_history(tmp_path / "history.jsonl")  # readable before close (flushed)
    rec.close()
    assert [o.index for o in ops] == [0, 1, 2, 3]
    assert [o.time for o in ops] == sorted(o.time for o in ops)
    assert ops[1].process == "nemesis" and rec.counts["ok"] == 1
    assert "start-kill" in rec.nemesis_state


def _with_nemesis(ops):
    """Spreads a synthetic history over 10 s and adds a kill and a partition window."""
    t0 = ops[0].time
    span = max(1, ops[-1].time - t0)
    out = [Op(o.index, int(o.time - t0) * 10_000_000_000 // span, o.type, o.process, o.f,
              o.value, o.error) for o in ops if o.process != "nemesis"]

    def nem(t_s, type_, f, value):
        return Op(0, int(t_s * 1e9), type_, "nemesis", f, value)
    out += [nem(2, "invoke", "start-kill", "one"), nem(2.01, "info", "start-kill", {"killed": [1]}),
            nem(4, "invoke", "stop-kill", None), nem(4.01, "info", "stop-kill", {}),
            nem(5, "invoke", "start-partition", "majority"),
            nem(5.01, "info", "start-partition", {})]
    out.sort(key=lambda o: o.time)
    return reindex(out)


def test_report_from_a_synthetic_queue_history(tmp_path):
    ops = _with_nemesis(queue_history(3000, seed=4))
    run = store.new_run_dir(tmp_path, "synthetic")
    write_history(ops, run)
    results = check_store(run)
    assert results["valid"] is True
    (run / "node1").mkdir()
    (run / "node1" / "node.log").write_text("hello\n")
    summary = {"test": "synthetic", "records": len(ops), "options": {"nodes": 1}}
    index = report.write_report(run, ops, results, summary)
    for p in report.PLOTS:
        assert (run / p).stat().st_size > 5000, p
    page = index.read_text()
    assert "synthetic" in page and 'class="verdict valid"' in page
    for p in report.PLOTS + ("history.jsonl", "history.parquet", "results.json",
                             "node1/node.log"):
        assert p in page
    assert "jepsen-results" in page  # render_html's fragment
    w = report.nemesis_windows(ops)
    assert [x[0] for x in w] == ["kill", "partition"]
    assert abs(w[0][1] - 2) < 0.1 and abs(w[0][2] - 4) < 0.1 and math.isinf(w[1][2])


def test_report_for_an_invalid_register_history_and_an_error(tmp_path):
    ops = register_history(400, keys=4, seed=1)
    # a read of a value nobody wrote: not linearizable
    t = ops[-1].time
    ops = reindex(list(ops) + [Op(0, t + 1, "invoke", 99, "read", [0, None]),
                               Op(0, t + 2, "ok", 99, "read", [0, 123456])])
    run = store.new_run_dir(tmp_path, "reg")
    write_history(ops, run)
    results = check_store(run, workload="linearizable", model="register")
    assert results["valid"] is False
    page = report.write_report(run, ops, results, {"test": "reg"}).read_text()
    assert 'class="verdict invalid"' in page
    # a run that never started: no history, an error, still an index
    run2 = store.new_run_dir(tmp_path, "broken")
    page2 = report.write_report(run2, [], {"valid": "unknown", "checkers": {}},
                                {"test": "broken", "error": "cluster did not start"}).read_text()
    assert "cluster did not start" in page2 and 'verdict unknown' in page2


def test_campaign_table_and_html(tmp_path):
    from jepsen.campaign import by_engine, format_table

    rows = [{"run": i, "engine": e, "nemesis": "kill", "seed": i, "unsafe": False,
             "valid": v, "anomalies": a, "ops-per-s": 100.0, "p50-ms": 5.0, "p99-ms": 50.0,
             "run-s": 20.0, "directory": str(tmp_path / f"r{i}"), "error": ""}
            for i, (e, v, a) in enumerate([("kraft", True, {}),
                                           ("kraft", False, {"lost-write": 3}),
                                           ("pysyncobj", "unknown", {})])]
    text = format_table(rows)
    assert "lost-write=3" in text and len(text.splitlines()) == 4
    eng = by_engine(rows)
    assert eng["kraft"]["valid"] == 1 and eng["kraft"]["lost-write-runs"] == 1
    assert eng["pysyncobj"]["unknown"] == 1
    page = report.campaign_html(rows, "c", eng, tmp_path)
    assert page.count("<tr>") >= 6 and "r1/index.html" in page
    json.dumps(eng)


def test_report_plots_the_scraped_cluster_metrics_with_the_fault_windows(tmp_path):
    from jepsen import metrics

    ops = _with_nemesis(queue_history(600, seed=2))
    run = store.new_run_dir(tmp_path, "scraped")
    write_history(ops, run)
    t0 = report.t0_of(ops)
    lines = []
    for second in range(10):  # node 1 killed from 2 s to 4 s; node 2 then leads (epoch 2)
        for node in (1, 2, 3):
            t = t0 + int((second + 0.1 * node) * 1e9)
            if node == 1 and 2 <= second < 4:
                lines.append({"time": t, "node": node, "up": False, "error": "refused"})
                continue
            leader, epoch = (1, 1) if second < 3 else (2, 2)
            lines.append({"time": t, "node": node, "up": True, "urp": 4.0 if 2 <= second < 6 and node != 1 else 0.0,
                          "leaders": 2.0, "raft_leader": leader, "raft_epoch": epoch,
                          "produce_p99_ms": 20.0 + second, "produce_p50_ms": 5.0, "fetch_p99_ms": 0.0})
    (run / metrics.FILE).write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"time": 1, "no')
    assert len(metrics.read(run)) == len(lines)  # a line cut short by a killed run is skipped
    series = metrics.summarize(metrics.read(run), t0)
    assert [v for _, v in series[1]["up"]][:5] == [1, 1, 0, 0, 1]
    assert len(series[1]["urp"]) == 8 and series[2]["urp"][2] == (2.2, 4.0)
    assert [(round(t), leader, epoch) for t, leader, epoch in report.quorum_leader_changes(lines, t0)] \
        == [(0, 1, 1), (3, 2, 2)]
    page = report.write_report(run, ops, check_store(run), {"test": "scraped"}).read_text()
    assert (run / report.METRICS_PLOT).stat().st_size > 5000
    assert report.METRICS_PLOT in page and "metrics.jsonl" in page


def test_extract_takes_the_plotted_series_from_a_scrape():
    from jepsen.metrics import extract

    samples = {"kafka_server_replicamanager_underreplicatedpartitions": [({}, 3.0)],
               "kafka_server_raft_metrics_current_epoch": [({}, 7.0)],
               "kafka_network_requestmetrics_totaltimems": [
                   ({"request": "Produce", "quantile": "0.99"}, 12.5),
                   ({"request": "Produce", "quantile": "0.5"}, float("nan")),
                   ({"request": "Metadata", "quantile": "0.99"}, 99.0)]}
    assert extract(samples) == {"urp": 3.0, "raft_epoch": 7.0, "produce_p99_ms": 12.5}
