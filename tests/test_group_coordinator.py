"""The classic group membership protocol of the coordinator core (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, static membership, expiry, the initial rebalance delay)."""

from __future__ import annotations

from test_group_helpers import Harness

from broker.group.records import GroupKey, decode_group_value, decode_key
from broker.group.state import GroupState

NONE, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS = 0, 22, 25, 27
INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT = 23, 26
MEMBER_ID_REQUIRED, FENCED_INSTANCE_ID = 79, 82
NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS = 16, 14


def state(h: Harness, group="g") -> GroupState:
    return h.core.table.groups[group].state


def test_one_member_join_sync_heartbeat():
    h = Harness()
    first = h.join()
    assert first.response["error_code"] == MEMBER_ID_REQUIRED
    member_id = first.response["member_id"]
    assert member_id.startswith("client-")
    rejoin = h.join("g", member_id)
    joined = h.result(rejoin)  # initial delay 0: complete at once
    assert joined["error_code"] == NONE
    assert joined["generation_id"] == 1 and joined["leader"] == member_id
    assert joined["protocol_name"] == "range" and h.core.table.groups["g"].protocol_type == "consumer"
    assert [m["member_id"] for m in joined["members"]] == [member_id]
    assert joined["members"][0]["metadata"] == b"r"
    assert state(h) is GroupState.COMPLETING_REBALANCE
    assert h.heartbeat("g", member_id, 1) == NONE  # heartbeats keep the session during sync
    synced = h.sync("g", member_id, 1, {member_id: b"A"})
    assert synced.response == {**synced.response, "error_code": NONE, "assignment": b"A"}
    assert state(h) is GroupState.STABLE
    assert h.heartbeat("g", member_id, 1) == NONE
    # the assignment was persisted as the group's metadata
    key, value = h.writes[-1].records[-1]
    assert decode_key(key) == GroupKey("g")
    stored = decode_group_value(value)
    assert stored.generation == 1 and stored.leader == member_id and stored.members[0].assignment == b"A"


def test_old_join_versions_get_a_member_id_without_a_round_trip():
    h = Harness()
    out = h.join(version=3)
    response = h.result(out)
    assert response["error_code"] == NONE and response["member_id"]
    assert response["protocol_name"] == "range"


def test_second_member_triggers_a_rebalance_and_follower_waits_for_leader():
    h = Harness()
    (a,), gen = h.stable_group()
    b, b_join = h.join_new()
    assert h.result(b_join) is None  # parked until a rejoins
    assert state(h) is GroupState.PREPARING_REBALANCE
    assert h.heartbeat("g", a, gen) == REBALANCE_IN_PROGRESS
    a_join = h.join("g", a)
    ra, rb = h.result(a_join), h.result(b_join)
    assert ra["generation_id"] == rb["generation_id"] == gen + 1
    assert ra["leader"] == rb["leader"] == a
    assert {m["member_id"] for m in ra["members"]} == {a, b}
    assert rb["members"] == []
    b_sync = h.sync("g", b, gen + 1)
    assert h.result(b_sync) is None  # the follower waits for the leader's assignment
    a_sync = h.sync("g", a, gen + 1, {a: b"x", b: b"y"})
    assert h.result(a_sync)["assignment"] == b"x"
    assert h.result(b_sync)["assignment"] == b"y"
    assert state(h) is GroupState.STABLE


def test_three_members_then_one_leaves_in_a_batch_leave():
    h = Harness()
    ids, gen = h.stable_group(n=3)
    assert gen == 3
    response = h.leave("g", ids[2], "nobody")
    assert [m["error_code"] for m in response["members"]] == [NONE, UNKNOWN_MEMBER_ID]
    assert state(h) is GroupState.PREPARING_REBALANCE
    outs = [h.join("g", m) for m in ids[:2]]
    results = [h.result(o) for o in outs]
    assert all(r["generation_id"] == gen + 1 for r in results)
    assert ids[2] not in h.core.table.groups["g"].members


def test_leave_v0_reports_the_member_error_at_top_level():
    h = Harness()
    (a,), _ = h.stable_group()
    assert h.leave("g", "ghost", version=1)["error_code"] == UNKNOWN_MEMBER_ID
    assert h.leave("g", a, version=1)["error_code"] == NONE
    # the last member left: the group is Empty with a new generation, persisted
    group = h.core.table.groups["g"]
    assert group.state is GroupState.EMPTY and group.generation == 2
    assert decode_group_value(h.writes[-1].records[-1][1]).members == ()


def test_session_expiry_removes_the_member_and_rebalances():
    h = Harness()
    (a, b), gen = h.stable_group(n=2, session_ms=1000)
    h.tick(500)
    assert h.heartbeat("g", a, gen) == NONE
    h.tick(1200)  # b's session (last seen at 0) ran out; a heartbeat at 500
    group = h.core.table.groups["g"]
    assert b not in group.members and a in group.members
    assert group.state is GroupState.PREPARING_REBALANCE
    assert h.heartbeat("g", b, gen) == UNKNOWN_MEMBER_ID
    r = h.result(h.join("g", a, session_ms=1000))
    assert r["generation_id"] == gen + 1 and r["leader"] == a


def test_rebalance_timeout_drops_members_that_do_not_rejoin():
    h = Harness()
    (a, b), gen = h.stable_group(n=2, rebalance_ms=5000)
    h.now = 100
    changed = h.join("g", b, protocols=(("range", b"new"),), rebalance_ms=5000)
    assert h.result(changed) is None
    h.tick(3000)
    assert h.heartbeat("g", a, gen) == REBALANCE_IN_PROGRESS  # a is alive, just not rejoining
    h.tick(5099)
    assert h.result(changed) is None
    h.tick(5100)
    r = h.result(changed)
    assert r["generation_id"] == gen + 1 and r["leader"] == b and len(r["members"]) == 1
    assert h.heartbeat("g", a, gen) == UNKNOWN_MEMBER_ID


def test_generation_fencing():
    h = Harness()
    (a,), gen = h.stable_group()
    assert h.heartbeat("g", a, gen + 1) == ILLEGAL_GENERATION
    assert h.heartbeat("g", a, gen - 1) == ILLEGAL_GENERATION
    assert h.sync("g", a, gen + 5).response["error_code"] == ILLEGAL_GENERATION
    assert h.heartbeat("g", "stranger", gen) == UNKNOWN_MEMBER_ID
    assert h.heartbeat("nope", a, gen) == UNKNOWN_MEMBER_ID
    # a join from an unknown member id is refused
    assert h.join("g", "made-up").response["error_code"] == UNKNOWN_MEMBER_ID
    assert h.join("fresh", "made-up").response["error_code"] == UNKNOWN_MEMBER_ID


def test_stable_follower_rejoin_with_same_metadata_does_not_rebalance():
    h = Harness()
    (a, b), gen = h.stable_group(n=2)
    follower = b if h.core.table.groups["g"].leader_id == a else a
    r = h.join("g", follower).response
    assert r["generation_id"] == gen and r["members"] == []
    assert state(h) is GroupState.STABLE


def test_static_member_rejoin_replaces_the_member_without_rebalance():
    h = Harness()
    out = h.join(instance="i-1")  # static members get their id at once
    r = h.result(out)
    old = r["member_id"]
    assert r["error_code"] == NONE and old.startswith("i-1-")
    h.sync("g", old, 1, {old: b"P0"})
    assert state(h) is GroupState.STABLE
    # restart: same instance id, no member id, same metadata
    again = h.join(instance="i-1", version=5)
    r2 = again.response
    assert r2["error_code"] == NONE and r2["member_id"] != old and r2["generation_id"] == 1
    assert state(h) is GroupState.STABLE
    new = r2["member_id"]
    assert h.heartbeat("g", old, 1, instance="i-1") == FENCED_INSTANCE_ID
    assert h.heartbeat("g", new, 1, instance="i-1") == NONE
    assert h.sync("g", new, 1, instance="i-1").response["assignment"] == b"P0"
    assert h.leave("g", (old, "i-1"))["members"][0]["error_code"] == FENCED_INSTANCE_ID
    # the replacement was persisted
    assert decode_group_value(h.writes[-1].records[-1][1]).members[0].member_id == new


def test_static_leader_rejoin_v9_skips_assignment_and_changed_metadata_rebalances():
    h = Harness()
    r = h.result(h.join(instance="i-1", version=9))
    h.sync("g", r["member_id"], 1, {r["member_id"]: b"P0"}, version=5)
    again = h.join(instance="i-1", version=9).response
    assert again["skip_assignment"] is True and len(again["members"]) == 1
    changed = h.join(instance="i-1", version=9, protocols=(("range", b"other"),))
    assert state(h) is GroupState.COMPLETING_REBALANCE  # a one-member group completes at once
    assert h.result(changed)["generation_id"] == 2


def test_initial_rebalance_delay_waits_and_extends_for_new_members():
    h = Harness(initial_rebalance_delay_ms=3000)
    a, a_join = h.join_new(rebalance_ms=10_000)
    h.now = 1000
    b, b_join = h.join_new(rebalance_ms=10_000)
    h.tick(2999)
    assert h.result(a_join) is None and h.result(b_join) is None
    h.tick(3000)  # b arrived during the delay: wait one more delay
    assert h.result(a_join) is None
    h.tick(6000)
    ra, rb = h.result(a_join), h.result(b_join)
    assert ra["generation_id"] == rb["generation_id"] == 1
    assert {m["member_id"] for m in ra["members"]} == {a, b}


def test_initial_delay_is_capped_by_the_rebalance_timeout():
    h = Harness(initial_rebalance_delay_ms=3000)
    _, out = h.join_new(rebalance_ms=2000)
    h.tick(1999)
    assert h.result(out) is None
    h.tick(2000)
    assert h.result(out)["generation_id"] == 1


def test_protocol_vote_and_inconsistent_protocols():
    h = Harness()
    a, _ = h.join_new(protocols=(("range", b""), ("roundrobin", b"")))
    h.sync("g", a, 1, {a: b""})
    _, b_join = h.join_new(protocols=(("roundrobin", b""), ("range", b"")))
    _, c_join = h.join_new(protocols=(("roundrobin", b""), ("range", b""), ("sticky", b"")))
    a_join = h.join("g", a, protocols=(("range", b""), ("roundrobin", b"")))
    # both are candidates (sticky is not); a votes range, b and c roundrobin
    assert {h.result(o)["protocol_name"] for o in (a_join, b_join, c_join)} == {"roundrobin"}
    bad = h.join(protocols=(("sticky", b""),))
    assert bad.response["error_code"] == INCONSISTENT_GROUP_PROTOCOL
    other_type = h.join(protocol_type="connect")
    assert other_type.response["error_code"] == INCONSISTENT_GROUP_PROTOCOL


def test_invalid_requests():
    h = Harness(min_session_timeout_ms=6000)
    assert h.join(session_ms=10).response["error_code"] == INVALID_SESSION_TIMEOUT
    assert h.join(group="").response["error_code"] == 24
    assert h.join(protocols=()).response["error_code"] == INCONSISTENT_GROUP_PROTOCOL


def test_pending_member_expires_and_unblocks_the_join():
    h = Harness()
    (a,), gen = h.stable_group(session_ms=1000)
    b_first = h.join(session_ms=1000)  # MEMBER_ID_REQUIRED; b never comes back
    assert b_first.response["error_code"] == MEMBER_ID_REQUIRED
    assert h.core.table.groups["g"].pending_members
    h.tick(900)
    assert h.heartbeat("g", a, gen) == NONE
    h.tick(1000)
    assert not h.core.table.groups["g"].pending_members
    assert state(h) is GroupState.STABLE


def test_not_coordinator_and_loading():
    h = Harness(num_partitions=2)
    from broker.group.records import partition_for
    gid = next(g for g in (f"g{i}" for i in range(50)) if partition_for(g, 2) == 1)
    h.core.unload(1)
    assert h.join(group=gid).response["error_code"] == NOT_COORDINATOR
    h.core.begin_loading(1)
    assert h.join(group=gid).response["error_code"] == COORDINATOR_LOAD_IN_PROGRESS
    assert h.heartbeat(gid, "m", 1) == COORDINATOR_LOAD_IN_PROGRESS


def test_unload_completes_parked_requests_with_not_coordinator():
    h = Harness(initial_rebalance_delay_ms=3000)
    _, out = h.join_new()
    h.absorb(h.core.unload(0))
    assert h.result(out)["error_code"] == NOT_COORDINATOR
    assert "g" not in h.core.table.groups


def test_leader_leaving_during_sync_resets_followers():
    h = Harness()
    (a,), _ = h.stable_group()
    b, b_join = h.join_new()
    h.join("g", a)
    gen2 = h.result(b_join)["generation_id"]
    b_sync = h.sync("g", b, gen2)
    h.leave("g", a)  # the leader leaves before sending assignments
    assert h.result(b_sync)["error_code"] == REBALANCE_IN_PROGRESS
    assert state(h) in (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE)


def test_protocol_vote_majority_wins_over_the_first_members_preference():
    h = Harness(initial_rebalance_delay_ms=100)
    joins = [h.join_new(protocols=tuple((n, n.encode()) for n in prefs), rebalance_ms=100)
             for prefs in (("x", "y"), ("y", "x"), ("y", "x"))]
    h.tick(100)
    results = [h.result(out) for _, out in joins]
    assert [r["protocol_name"] for r in results] == ["y"] * 3
    (leader,) = [r for r in results if r["members"]]
    assert leader["member_id"] == joins[0][0]  # the first member is still the leader
    assert [m["metadata"] for m in leader["members"]] == [b"y"] * 3
