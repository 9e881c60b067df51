"""Committed offsets (commit fencing, simple commits, fetch in all its shapes, retention) and
the admin APIs (ListGroups, DescribeGroups, DeleteGroups, OffsetDelete)."""

from __future__ import annotations

from test_group_helpers import Harness, offsets_of, subscription

from broker.group.records import GroupKey, OffsetKey, decode_key
from broker.group.state import GroupState

ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS = 22, 25, 27
OFFSET_METADATA_TOO_LARGE, NOT_COORDINATOR, FENCED_INSTANCE_ID = 12, 16, 82
NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, GROUP_SUBSCRIBED_TO_TOPIC = 68, 69, 86


def codes(commit_response: dict) -> list[int]:
    return [p["error_code"] for t in commit_response["topics"] for p in t["partitions"]]


def test_simple_commit_creates_the_group_and_fetch_returns_it():
    h = Harness()
    r = h.commit("simple", {("t", 0): (42, "meta"), ("t", 1): (7, None)})
    assert codes(r) == [0, 0]
    assert "simple" in h.core.table.groups and h.core.table.groups["simple"].state is GroupState.EMPTY
    got = h.fetch("simple", {"t": [0, 1, 2], "u": [0]})
    assert offsets_of(got) == {("t", 0): (42, "meta"), ("t", 1): (7, ""), ("t", 2): (-1, ""), ("u", 0): (-1, "")}
    epochs = {p["partition_index"]: p["committed_leader_epoch"] for p in got["topics"][0]["partitions"]}
    assert epochs == {0: 3, 1: 3, 2: -1}
    # one atomic batch: both commit records
    (write,) = h.writes
    assert [decode_key(k) for k, _ in write.records] == [OffsetKey("simple", "t", 0), OffsetKey("simple", "t", 1)]


def test_commits_become_visible_only_once_written():
    h = Harness()
    out = h.core.handle("OffsetCommit", 8, _commit_body("g", 5), 0)
    assert h.fetch("g", {"t": [0]})["topics"][0]["partitions"][0]["committed_offset"] == -1
    h.core.apply_write(out.writes[0])
    assert h.fetch("g", {"t": [0]})["topics"][0]["partitions"][0]["committed_offset"] == 5


def _commit_body(group, offset):
    from test_group_helpers import wire
    return wire("OffsetCommit", 8, group_id=group, topics=[{"name": "t", "partitions": [
        {"partition_index": 0, "committed_offset": offset, "committed_metadata": ""}]}])


def test_member_commit_fencing():
    h = Harness()
    (a, b), gen = h.stable_group(n=2)
    assert codes(h.commit("g", {("t", 0): (1, "")}, member_id=a, generation=gen)) == [0]
    assert codes(h.commit("g", {("t", 0): (2, "")}, member_id=a, generation=gen - 1)) == [ILLEGAL_GENERATION]
    assert codes(h.commit("g", {("t", 0): (2, "")}, member_id="x", generation=gen)) == [UNKNOWN_MEMBER_ID]
    # a simple commit is refused while the group has members
    assert codes(h.commit("g", {("t", 0): (3, "")})) == [UNKNOWN_MEMBER_ID]
    assert codes(h.commit("nobody", {("t", 0): (3, "")}, member_id="m", generation=4)) == [ILLEGAL_GENERATION]
    # during the sync phase commits wait for the new generation
    _, c_join = h.join_new()
    for m in (a, b):
        h.join("g", m)
    gen2 = h.result(c_join)["generation_id"]
    assert codes(h.commit("g", {("t", 0): (4, "")}, member_id=a, generation=gen2)) == [REBALANCE_IN_PROGRESS]
    assert offsets_of(h.fetch("g", {"t": [0]})) == {("t", 0): (1, "")}


def test_commit_in_preparing_rebalance_with_current_generation_is_accepted():
    h = Harness()
    (a,), gen = h.stable_group()
    h.join_new()  # a second member: the group prepares a rebalance, a has not rejoined yet
    assert h.core.table.groups["g"].state is GroupState.PREPARING_REBALANCE
    assert codes(h.commit("g", {("t", 0): (9, "")}, member_id=a, generation=gen)) == [0]


def test_static_member_commit_is_fenced_by_instance_id():
    h = Harness()
    r = h.result(h.join(instance="i"))
    h.sync("g", r["member_id"], 1, {r["member_id"]: b""})
    new = h.join(instance="i").response["member_id"]
    assert codes(h.commit("g", {("t", 0): (1, "")}, member_id=r["member_id"], generation=1,
                          instance="i")) == [FENCED_INSTANCE_ID]
    assert codes(h.commit("g", {("t", 0): (1, "")}, member_id=new, generation=1, instance="i")) == [0]


def test_metadata_too_large():
    h = Harness(offset_metadata_max_bytes=5)
    r = h.commit("g", {("t", 0): (1, "x" * 6), ("t", 1): (1, "12345")})
    assert codes(r) == [OFFSET_METADATA_TOO_LARGE, 0]
    assert offsets_of(h.fetch("g", {"t": [0, 1]})) == {("t", 0): (-1, ""), ("t", 1): (1, "12345")}


def test_offset_fetch_shapes():
    h = Harness()
    h.commit("g1", {("a", 0): (1, ""), ("b", 2): (2, "")})
    h.commit("g2", {("a", 0): (5, "")})
    all_offsets = h.fetch("g1", None)
    assert offsets_of(all_offsets) == {("a", 0): (1, ""), ("b", 2): (2, "")}
    multi = h.call("OffsetFetch", 8, groups=[{"group_id": "g1", "topics": [{"name": "a", "partition_indexes": [0]}]},
                                            {"group_id": "g2", "topics": None},
                                            {"group_id": "none", "topics": None}]).response
    by_group = {g["group_id"]: g for g in multi["groups"]}
    assert by_group["g1"]["topics"][0]["partitions"][0]["committed_offset"] == 1
    assert by_group["g2"]["topics"][0]["partitions"][0]["committed_offset"] == 5
    assert by_group["none"]["topics"] == [] and by_group["none"]["error_code"] == 0
    old = h.fetch("g1", {"a": [0]}, version=1)
    assert offsets_of(old) == {("a", 0): (1, "")}


def test_offset_fetch_errors_per_version():
    h = Harness(num_partitions=1)
    h.core.unload(0)
    assert h.fetch("g", {"t": [0]}, version=7)["error_code"] == NOT_COORDINATOR
    v1 = h.fetch("g", {"t": [0, 1]}, version=1)
    assert [p["error_code"] for p in v1["topics"][0]["partitions"]] == [NOT_COORDINATOR] * 2
    v8 = h.fetch("g", {"t": [0]}, version=8)
    assert v8["groups"][0]["error_code"] == NOT_COORDINATOR


def test_retention_expires_simple_offsets_then_the_group():
    h = Harness(offsets_retention_ms=1000, offsets_retention_check_interval_ms=100)
    h.tick(0)
    h.commit("s", {("t", 0): (1, "")})
    h.now = 500
    h.commit("s", {("t", 1): (2, "")})
    h.tick(1000)
    assert offsets_of(h.fetch("s", {"t": [0, 1]})) == {("t", 0): (-1, ""), ("t", 1): (2, "")}
    h.tick(1500)
    assert "s" not in h.core.table.groups
    tomb = [(decode_key(k), v) for k, v in h.writes[-1].records]
    assert tomb == [(OffsetKey("s", "t", 1), None), (GroupKey("s"), None)]


def test_retention_keeps_offsets_of_a_stable_group():
    h = Harness(offsets_retention_ms=1000, offsets_retention_check_interval_ms=100)
    h.tick(0)
    (a,), gen = h.stable_group(session_ms=100_000,
                               protocols=(("range", subscription("t")),))
    h.commit("g", {("t", 0): (1, ""), ("gone", 0): (1, "")}, member_id=a, generation=gen)
    h.tick(5000)
    assert offsets_of(h.fetch("g", {"t": [0], "gone": [0]})) == {("t", 0): (1, ""), ("gone", 0): (-1, "")}


def test_list_and_describe_groups():
    h = Harness()
    (a,), _ = h.stable_group("live")
    h.commit("simple", {("t", 0): (1, "")})
    listed = h.call("ListGroups", 4, states_filter=[]).response
    assert {(g["group_id"], g["group_state"], g["protocol_type"]) for g in listed["groups"]} == {
        ("live", "Stable", "consumer"), ("simple", "Empty", "")}
    stable_only = h.call("ListGroups", 4, states_filter=["stable"]).response
    assert [g["group_id"] for g in stable_only["groups"]] == ["live"]
    described = h.call("DescribeGroups", 5, groups=["live", "missing"]).response["groups"]
    live, missing = described
    assert live["group_state"] == "Stable" and live["protocol_data"] == "range"
    (member,) = live["members"]
    assert member["member_id"] == a and member["member_assignment"] == f"assign-{a}".encode()
    assert member["client_id"] == "client" and member["member_metadata"] == b"r"
    assert missing["group_state"] == "Dead" and missing["error_code"] == 0


def test_delete_groups():
    h = Harness()
    h.stable_group("busy")
    h.commit("idle", {("t", 0): (1, ""), ("t", 1): (2, "")})
    r = h.call("DeleteGroups", 2, groups_names=["busy", "idle", "ghost"]).response
    assert [x["error_code"] for x in r["results"]] == [NON_EMPTY_GROUP, 0, GROUP_ID_NOT_FOUND]
    assert "idle" not in h.core.table.groups
    assert [(decode_key(k), v) for k, v in h.writes[-1].records] == [
        (OffsetKey("idle", "t", 0), None), (OffsetKey("idle", "t", 1), None), (GroupKey("idle"), None)]
    assert offsets_of(h.fetch("idle", {"t": [0]})) == {("t", 0): (-1, "")}


def test_offset_delete():
    h = Harness()
    (a,), gen = h.stable_group(protocols=(("range", subscription("t", "u")),))
    h.commit("g", {("t", 0): (1, ""), ("old", 0): (1, "")}, member_id=a, generation=gen)
    r = h.call("OffsetDelete", 0, group_id="g", topics=[
        {"name": "t", "partitions": [{"partition_index": 0}]},
        {"name": "old", "partitions": [{"partition_index": 0}]}]).response
    assert r["error_code"] == 0
    assert [p["error_code"] for t in r["topics"] for p in t["partitions"]] == [GROUP_SUBSCRIBED_TO_TOPIC, 0]
    assert offsets_of(h.fetch("g", {"t": [0], "old": [0]})) == {("t", 0): (1, ""), ("old", 0): (-1, "")}
    missing = h.call("OffsetDelete", 0, group_id="nope", topics=[]).response
    assert missing["error_code"] == GROUP_ID_NOT_FOUND
    # a non-consumer group with members: its subscriptions are unknown
    h.stable_group("conn", protocol_type="connect")
    assert h.call("OffsetDelete", 0, group_id="conn", topics=[]).response["error_code"] == NON_EMPTY_GROUP


def test_commit_with_explicit_retention_writes_value_v1_and_expires_on_time():
    import struct

    from broker.group.records import decode_offset_value
    h = Harness(offsets_retention_check_interval_ms=10)
    h.tick(0)
    out = h.call("OffsetCommit", 2, group_id="r", generation_id_or_member_epoch=-1, member_id="",
                 retention_time_ms=50, topics=[{"name": "t", "partitions": [
                     {"partition_index": 0, "committed_offset": 4, "committed_metadata": None}]}])
    assert codes(out.response) == [0]
    ((_, value),) = h.writes[-1].records
    assert struct.unpack_from(">h", value)[0] == 1
    assert decode_offset_value(value).expire_timestamp == 50
    h.tick(40)
    assert offsets_of(h.fetch("r", {"t": [0]})) == {("t", 0): (4, "")}
    h.tick(60)
    assert offsets_of(h.fetch("r", {"t": [0]})) == {("t", 0): (-1, "")}
