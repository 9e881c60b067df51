"""Whole-history checking without Spark: results.json, the HTML fragment, the CLI."""

from __future__ import annotations

import json
import socket

from click.testing import CliRunner
from test_checker_histories import SCENARIOS, Builder, all_scenarios, reg

from jepsen.__main__ import main
from jepsen.checkers import check, check_store, merge_valid, render_html
from jepsen.checkers.synth import queue_history, register_history
from jepsen.history import write_history, write_jsonl


def test_merge_valid():
    assert merge_valid(True, True) is True
    assert merge_valid(True, "unknown") == "unknown"
    assert merge_valid("unknown", False) is False
    assert merge_valid() is True


def test_check_picks_checkers_by_functions():
    q = check(queue_history(800, seed=1))
    assert list(q["checkers"]) == ["queue"] and q["valid"] is True
    assert q["stats"]["by-f"]["poll"]["ok"] > 0 and "stats" not in q["checkers"]["queue"]
    r = check(register_history(800, keys=8, seed=1))
    assert list(r["checkers"]) == ["linearizable"] and r["valid"] is True
    assert set(r["stats"]["by-f"]) == {"read", "write", "cas"}
    assert r["engine"] == "python"


def test_check_store_writes_results(tmp_path):
    b = Builder()
    SCENARIOS["duplicate"](b, 0, 0)
    write_history(b.ops, tmp_path)
    res = check_store(tmp_path)
    on_disk = json.loads((tmp_path / "results.json").read_text())
    assert on_disk == json.loads(json.dumps(res))
    assert on_disk["valid"] is False
    assert on_disk["checkers"]["queue"]["bad-anomaly-types"] == ["duplicate"]


def test_cli_exit_codes(tmp_path):
    runner = CliRunner()
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.mkdir()
    bad.mkdir()
    write_jsonl(queue_history(500, seed=2), good / "history.jsonl")
    ops, _ = all_scenarios()
    write_jsonl(ops, bad / "history.jsonl")
    r = runner.invoke(main, ["check", str(good), "--no-spark", "-q"])
    assert r.exit_code == 0, r.output
    assert "valid: True" in r.output
    r = runner.invoke(main, ["check", str(bad), "--no-spark", "-q"])
    assert r.exit_code == 1
    assert "lost-write" in r.output
    assert json.loads((bad / "results.json").read_text())["valid"] is False


def test_cli_unknown_exits_2(tmp_path):
    steps = [(p, "invoke", "write", p) for p in range(10)]
    steps += [(p, "ok", "write", p) for p in range(10)]
    steps += [(99, "invoke", "read", None), (99, "ok", "read", 77)]
    write_jsonl(reg(*steps), tmp_path / "history.jsonl")
    r = CliRunner().invoke(main, ["check", str(tmp_path), "--no-spark", "-q",
                                  "--budget", "10"])
    assert r.exit_code == 2, r.output


def test_html_fragment_names_the_anomalies():
    ops, _ = all_scenarios()
    frag = render_html(check(ops))
    assert frag.startswith('<div class="jepsen-results">') and frag.endswith("</div>")
    for name in SCENARIOS:
        assert f"<td>{name}</td>" in frag
    assert "INVALID" in frag
    lin = reg((0, "invoke", "write", 1), (0, "ok", "write", 1),
              (1, "invoke", "read", None), (1, "ok", "read", "<script>"))
    frag = render_html(check(lin))
    assert "&lt;script&gt;" in frag and "<script>" not in frag
    assert "fails" in frag and "final states" in frag


def test_cli_history_topic_errors_exit_2(tmp_path):
    """What ``check --history-topic`` refuses before any Spark session starts."""
    runner = CliRunner()
    out = tmp_path / "out"
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{s.getsockname()[1]}"
    r = runner.invoke(main, ["check", "--history-topic", "h", "--bootstrap-server", closed,
                             "--no-spark", str(out)])
    assert r.exit_code == 2 and "--no-spark" in r.output
    r = runner.invoke(main, ["check", "--history-topic", "h", str(out)])
    assert r.exit_code == 2 and "needs --bootstrap-server" in r.output
    r = runner.invoke(main, ["check", "--history-topic", "h", "--bootstrap-server", closed,
                             str(out)])
    assert r.exit_code == 2
    assert "cannot connect to the cluster" in r.stderr and closed in r.stderr
    assert not out.exists()
    write_history(queue_history(50, seed=3), out)  # a run folder: not overwritten
    r = runner.invoke(main, ["check", "--history-topic", "h", "--bootstrap-server", closed,
                             str(out)])
    assert r.exit_code == 2 and "already holds a history" in r.output
    r = runner.invoke(main, ["check", "--bootstrap-server", closed, str(out)])
    assert r.exit_code == 2 and "is for --history-topic" in r.output
    r = runner.invoke(main, ["check", "--no-spark", str(tmp_path / "nothing")])
    assert r.exit_code == 2 and "no directory" in r.output
