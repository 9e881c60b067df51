"""The txn checker, single-process path: every seeded anomaly class is found, clean and
serial histories are valid, and txn histories round-trip through JSON lines and Parquet."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jepsen.checkers import check, render_html
from jepsen.checkers.txn import ALLOWED, ANOMALIES, check_txn
from jepsen.checkers.txn_graph import CYCLE_TYPES, Node, find_cycles, order_edges, sccs
from jepsen.checkers.txn_synth import SCENARIOS, all_scenarios, scenario, serial_history, \
    txn_history
from jepsen.history import read_jsonl, read_parquet, write_history


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_each_seeded_anomaly_is_found_alone(name):
    ops, expected = scenario(name)
    r = check_txn(ops, allowed=())
    assert name in expected
    assert set(r["anomalies"]) == expected
    assert r["valid"] is False
    assert r["bad-anomaly-types"] == sorted(expected)


def test_every_class_has_a_scenario():
    found = set().union(*(scenario(n)[1] for n in SCENARIOS))
    wanted = set(CYCLE_TYPES) | {"G1a", "G1b", "precommitted-read", "inconsistent-offsets",
                                 "duplicate", "lost-write", "unseen", "poll-skip",
                                 "nonmonotonic-poll", "nonmonotonic-send"}
    assert wanted <= found <= set(ANOMALIES)


def test_scenarios_together_show_each_cycle_with_its_transactions():
    ops, expected = all_scenarios()
    r = check_txn(ops, allowed=())
    assert set(r["anomalies"]) == set().union(*expected.values())
    g0 = r["anomalies"]["G0"]["examples"][0]
    assert [s["type"] for s in g0["steps"]] == ["ww", "ww"]
    assert {s["key"] for s in g0["steps"]} == {0, 1}
    assert [o["invoke-index"] for o in g0["ops"]] == g0["cycle"]
    assert all(o["f"] == "txn" and o["type"] == "ok" for o in g0["ops"])
    gs = r["anomalies"]["G-single"]["examples"][0]
    assert sorted(s["type"] for s in gs["steps"]) == ["rw", "wr"]
    rw = next(s for s in gs["steps"] if s["type"] == "rw")
    assert (rw["value"], rw["value'"]) == (1, 3)  # read 1 at offset 0, missed 3 at 1
    rt = r["anomalies"]["G1c-realtime"]["examples"][0]
    assert "realtime" in {s["type"] for s in rt["steps"]}


def test_allowed_anomalies_are_reported_but_not_fatal():
    ops, _ = scenario("G2-item")
    r = check_txn(ops)
    assert r["valid"] is True and r["anomaly-types"] == ["G2-item"]
    assert r["anomalies"]["G2-item"]["fatal"] is False
    ops, _ = scenario("G1a")
    assert check_txn(ops)["valid"] is False
    # A G1c without ww edges (a read from the future) stays fatal; one through ww does not.
    ops, _ = scenario("G1c-realtime")
    r = check_txn(ops)
    assert r["valid"] is False and r["bad-anomaly-types"] == ["G1c-realtime"]
    assert [s["type"] for s in r["anomalies"]["G1c-realtime"]["examples"][0]["steps"]] \
        == ["wr", "realtime"]
    assert "G1a" not in ALLOWED and "G1b" not in ALLOWED


def test_clean_concurrent_history_is_valid():
    ops = txn_history(4000, seed=7)
    r = check_txn(ops)
    assert r["valid"] is True, r["bad-anomaly-types"]
    assert r["graph"]["nodes"] > 1000
    assert r["graph"]["edges"]["ww"] > 500 and r["graph"]["edges"]["rw"] > 500
    assert r["stats"]["by-f"]["txn"]["fail"] > 0  # aborted transactions are in it
    assert not set(r["anomalies"]) - ALLOWED


txn_steps = st.lists(st.lists(st.one_of(st.just("poll"), st.integers(0, 2)), min_size=1,
                              max_size=4), min_size=1, max_size=25)


@settings(max_examples=40, deadline=None)
@given(txn_steps, st.sets(st.integers(0, 24)), st.integers(1, 4))
def test_serial_histories_are_valid_with_nothing_allowed(steps, aborts, processes):
    values = [0, 0, 0]
    txns = []
    for t in steps:
        mops = []
        for m in t:
            if m == "poll":
                mops.append(["poll"])
            else:
                mops.append(["send", m, values[m]])
                values[m] += 1
        txns.append(mops)
    ops = serial_history(txns, keys=3, processes=processes, aborts=frozenset(aborts))
    r = check_txn(ops, allowed=())
    assert r["valid"] is True, (r["anomaly-types"], r["anomalies"])


def test_cycle_search_pieces():
    # Tarjan finds the 3-cycle, not the tail.
    assert sccs({1: [2], 2: [3], 3: [1, 4], 4: []}) == [[1, 2, 3]]
    # Realtime edges are a transitive reduction: 1 -> 2 -> 3, no 1 -> 3.
    nodes = [Node(1, "a", 0, 10, 1), Node(2, "b", 20, 30, 2), Node(3, "c", 40, 50, 3)]
    assert sorted(order_edges(nodes)) == [(1, 2, "realtime"), (2, 3, "realtime")]
    # A G2-item cycle must be simple: rw there and back over one pair is G-single only.
    edges = {(1, 2): {"rw": {}}, (2, 1): {"wr": {}}}
    assert set(find_cycles(edges)) == {"G-single"}


def test_txn_history_round_trips(tmp_path):
    ops, _ = all_scenarios()
    write_history(ops, tmp_path)
    assert read_jsonl(tmp_path / "history.jsonl") == ops
    assert read_parquet(tmp_path / "history.parquet") == ops
    r = check(tmp_path)  # auto picks the txn checker
    assert list(r["checkers"]) == ["txn"] and r["valid"] is False
    assert r["stats"]["by-f"]["txn"]["ok"] > 50
    json.dumps(r)
    page = render_html(r)
    assert "<td>G2-item</td>" in page and "-rw-&gt;" in page  # cycles show their edges
