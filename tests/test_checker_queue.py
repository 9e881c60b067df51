"""The queue checker's pure path: every anomaly class alone, and clean histories."""

from __future__ import annotations

import dataclasses

import pytest
from test_checker_histories import (
    SCENARIOS,
    Builder,
    all_scenarios,
    clean,
    exponent_zeros,
    json_identities,
    negative_zero,
    nested_floats,
    shown,
    string_and_integer_keys,
)

from jepsen.checkers import ANOMALIES, check_queue
from jepsen.checkers.queue import SendRec, check_partition, fatal_types
from jepsen.checkers.synth import queue_history
from jepsen.history import Op, decode_value, encode_value


def test_every_anomaly_has_a_scenario():
    assert set(SCENARIOS) == set(ANOMALIES)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_flags_exactly_its_anomaly(name):
    b = Builder()
    expected = SCENARIOS[name](b, 0, 0)
    r = check_queue(b.ops)
    assert shown(r) == expected
    assert r["anomaly-types"] == [name]
    assert r["valid"] is False
    assert r["anomalies"][name]["fatal"] is True
    assert r["anomalies"][name]["count"] == 1


def test_anomaly_details():
    b = Builder()
    SCENARIOS["lost-write"](b, 3, 0)
    lw = check_queue(b.ops)["anomalies"]["lost-write"]["examples"][0]
    assert (lw["key"], lw["value"], lw["offset"], lw["max-read-offset"]) == (3, "a", 0, 1)
    op = lw["ops"][0]
    assert (op["f"], op["type"], op["index"], op["time"]) == ("send", "ok", 1, 2000)
    assert op["value"] == [3, [0, "a"]]

    b = Builder()
    SCENARIOS["poll-skip"](b, 0, 0)
    ps = check_queue(b.ops)["anomalies"]["poll-skip"]["examples"][0]
    assert ps["offsets"] == [0, 2] and ps["skipped"] == [1] and ps["delta"] == 2

    b = Builder()
    SCENARIOS["inconsistent-offsets"](b, 0, 0)
    io = check_queue(b.ops)["anomalies"]["inconsistent-offsets"]["examples"][0]
    assert io["offset"] == 0 and io["values"] == ["a", "b"]


def test_clean_history_passes():
    b = Builder()
    clean(b, 0, 0)
    b.op("nemesis", "start-kill", None, "info")
    b.op(0, "crash", None, "info")
    r = check_queue(b.ops)
    assert r["valid"] is True and r["anomalies"] == {}
    assert r["stats"]["by-f"]["send"] == {"ok": 2, "fail": 0, "info": 0}
    assert r["stats"]["by-f"]["start-kill"]["info"] == 1
    assert r["unseen-series"]["series"][-1]["unseen"] == 0
    assert r["realtime-lag"]["sends-seen"] == 2


def test_all_scenarios_in_one_history():
    ops, expected = all_scenarios()
    r = check_queue(ops)
    assert shown(r) == expected
    assert r["partitions"] == len(SCENARIOS) + 1


def test_one_and_one_point_zero_and_true_are_different_values():
    ops, expected = json_identities()
    r = check_queue(ops)
    assert shown(r) == expected
    io = r["anomalies"]["inconsistent-offsets"]["examples"][0]
    assert io["values"] == [1, 1.0] and [type(v) for v in io["values"]] == [int, float]
    assert r["anomalies"]["unexpected"]["examples"][0]["value"] == 1.0


def test_negative_zero_is_zero():
    ops, expected = negative_zero()
    assert shown(check_queue(ops)) == expected
    reread = [dataclasses.replace(o, value=decode_value(exponent_zeros(encode_value(o.value))))
              for o in ops]
    assert shown(check_queue(reread)) == expected


def test_floats_inside_values_follow_the_top_level_rule():
    ops, expected = nested_floats()
    assert shown(check_queue(ops)) == expected
    # as read back from JSON, where the map's name "7" is the integer 7
    r = check_queue([dataclasses.replace(o, value=decode_value(encode_value(o.value)))
                     for o in ops])
    assert shown(r) == expected
    io = r["anomalies"]["inconsistent-offsets"]["examples"]
    assert [x["values"] for x in io] == [[[1, 1.0], [1, 1]], [[1], [True]],
                                         [{"a": [0.0]}, {"a": [0]}]]


def test_string_and_integer_keys_are_two_partitions():
    ops, expected = string_and_integer_keys()
    r = check_queue(ops)
    assert shown(r) == expected and r["partitions"] == 3


def test_reassignment_between_polls_excuses_a_skip():
    b = Builder()
    b.send(0, 0, "a", 0)
    b.send(0, 0, "b", 1)
    b.send(0, 0, "c", 2)
    b.poll(1, {0: [[0, "a"], [1, "b"]]})
    b.op(1, "assign", [0])
    b.poll(1, {0: [[0, "a"]]})  # rewound by the assignment: not nonmonotonic
    b.poll(1, {0: [[1, "b"], [2, "c"]]})
    assert check_queue(b.ops)["anomalies"] == {}


def test_subscribe_makes_poll_skips_allowed_but_listed():
    b = Builder()
    b.op(1, "subscribe", [0])
    expected = SCENARIOS["nonmonotonic-poll"](b, 0, 0)
    r = check_queue(b.ops)
    assert r["sub-via"] == "subscribe"
    assert shown(r) == expected
    assert r["valid"] is True and r["anomalies"]["nonmonotonic-poll"]["fatal"] is False
    assert check_queue(b.ops, sub_via="assign")["valid"] is False
    assert "poll-skip" not in fatal_types("subscribe") and "poll-skip" in fatal_types(None)


def test_indefinite_send_read_later_is_committed():
    b = Builder()
    b.send(0, 0, "a", type_="info")
    b.send(2, 0, "b", 0)
    b.send(2, 0, "c", 1)
    b.poll(1, {0: [[2, "a"]]})  # a was committed (it was read)...
    r = check_queue(b.ops)
    # ...and b, c sit below the highest offset read but were never seen: lost.
    assert shown(r) == {"lost-write": [[2], [4]]}


def test_pending_invocations_count_as_indefinite():
    b = Builder()
    b.send(0, 0, "a", 0)
    b.invoke(2, "send", [0, "b"])  # never completes
    b.poll(1, {0: [[0, "a"], [1, "b"]]})
    r = check_queue(b.ops)
    assert r["anomalies"] == {}
    assert r["stats"]["by-f"]["send"] == {"ok": 1, "fail": 0, "info": 1}


def test_realtime_order_ignores_concurrent_sends():
    b = Builder()
    i1 = b.invoke(0, "send", [0, "a"])
    i2 = b.invoke(2, "send", [0, "b"])
    b.add("ok", 0, "send", [0, [1, "a"]])
    b.add("ok", 2, "send", [0, [0, "b"]])
    b.poll(1, {0: [[0, "b"], [1, "a"]]})
    assert (i1, i2) == (0, 1)
    assert check_queue(b.ops)["anomalies"] == {}


def test_max_examples_caps_lists_not_counts():
    b = Builder()
    for n in range(5):
        b.send(0, 0, n, n)
    b.poll(1, {0: [[9, "x"]]})
    r = check_queue(b.ops, max_examples=2)
    assert r["anomalies"]["lost-write"]["count"] == 5
    assert len(r["anomalies"]["lost-write"]["examples"]) == 2


def test_check_partition_is_pure_over_records():
    sends = [SendRec(0, 0, 1, 1, 2, "ok", "a", 0, 0), SendRec(0, 2, 3, 3, 4, "ok", "b", 1, 0)]
    part = check_partition(0, sends, [], {}, t0=0, bucket_ns=10)
    assert sorted(part["anomalies"]) == ["unseen"]
    assert part["unseen-acked"] == {0: 2} and part["unseen-seen"] == {}


def test_synthetic_clean_history_passes():
    ops = queue_history(6000, seed=7)
    r = check_queue(ops)
    assert r["valid"] is True, r["anomaly-types"]
    assert r["stats"]["by-f"]["send"]["ok"] > 1000
    assert sum(1 for o in ops if o.f == "start-kill") >= 1


def test_synthetic_history_with_a_dropped_read_is_caught():
    ops = queue_history(3000, seed=8)
    # Erase one record from every poll that returned it: the send becomes lost or unseen.
    victim = next(o for o in ops if o.f == "send" and o.type == "ok").value
    key, (_, value) = victim
    edited = []
    for o in ops:
        if o.f == "poll" and o.type == "ok" and key in o.value:
            pairs = [p for p in o.value[key] if p[1] != value]
            o = Op(o.index, o.time, o.type, o.process, o.f, {**o.value, key: pairs})
        edited.append(o)
    r = check_queue(edited)
    assert r["valid"] is False
    kinds = set(r["anomaly-types"])
    assert "lost-write" in kinds
    assert r["anomalies"]["lost-write"]["examples"][0]["value"] == value
