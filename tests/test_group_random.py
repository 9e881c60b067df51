"""Random schedules of three clients (one static) against the coordinator core, checking
the group's invariants after every step and that everything settles once clients stop."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from test_group_helpers import Harness

from broker.group.records import replay
from broker.group.state import GroupState

S = GroupState
ACTIONS = ["join", "join", "sync", "sync", "heartbeat", "heartbeat", "leave", "tick", "tick", "restart"]


class Client:
    def __init__(self, index: int):
        self.instance = "static-0" if index == 0 else None
        self.member_id = ""
        self.generation = -1
        self.members: list[str] = []  # set when this client was told it leads
        self.pending = []


def check_invariants(h: Harness, seen_generations: list[int]) -> None:
    group = h.core.table.groups.get("g")
    if group is None:
        return
    assert not seen_generations or group.generation >= seen_generations[-1]
    seen_generations.append(group.generation)
    if group.members:
        assert group.leader_id in group.members
        assert group.state is not S.EMPTY
    else:
        assert group.state in (S.EMPTY, S.PREPARING_REBALANCE)
    for instance, member_id in group.static_members.items():
        assert group.members[member_id].group_instance_id == instance
    for m in group.members.values():
        if group.state is S.STABLE:
            assert m.join_ticket is None
        if group.state is not S.COMPLETING_REBALANCE:
            assert m.sync_ticket is None
    assert (group.join_deadline_ms is not None) == (group.state is S.PREPARING_REBALANCE)


def step(h: Harness, client: Client, action: str, advance_ms: int) -> None:
    def learn(response):
        if response and response["error_code"] == 0 and "generation_id" in response:
            client.member_id = response["member_id"]
            client.generation = response["generation_id"]
            client.members = [m["member_id"] for m in response["members"]]

    for out in list(client.pending):
        response = h.result(out)
        if response is not None:
            client.pending.remove(out)
            learn(response)
    if action == "tick":
        h.tick(h.now + advance_ms)
    elif action in ("join", "restart"):
        if action == "restart":
            client.member_id = "" if client.instance else client.member_id
        out = h.join("g", client.member_id, instance=client.instance, session_ms=2000, rebalance_ms=3000)
        if out.response is not None and out.response["error_code"] == 79:
            client.member_id = out.response["member_id"]
        elif out.response is not None:
            learn(out.response)
        else:
            client.pending.append(out)
    elif action == "sync" and client.member_id:
        assignments = {m: m.encode() for m in client.members}
        out = h.sync("g", client.member_id, client.generation, assignments, instance=client.instance)
        if out.response is None:
            client.pending.append(out)
    elif action == "heartbeat" and client.member_id:
        h.heartbeat("g", client.member_id, client.generation, instance=client.instance)
    elif action == "leave" and client.member_id:
        h.leave("g", (client.member_id, client.instance))
        client.member_id, client.generation = "", -1


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.sampled_from(ACTIONS), st.integers(0, 2500)), max_size=60),
       st.sampled_from([0, 500]))
def test_random_schedules_keep_invariants_and_settle(schedule, initial_delay_ms):
    h = Harness(initial_rebalance_delay_ms=initial_delay_ms)
    clients = [Client(i) for i in range(3)]
    generations: list[int] = []
    for index, action, advance_ms in schedule:
        step(h, clients[index], action, advance_ms)
        check_invariants(h, generations)
    # every client goes silent: sessions and rebalances run out, every parked request ends
    for _ in range(4):
        h.tick(h.now + 600_000)
        check_invariants(h, generations)
    parked = [out for c in clients for out in c.pending if h.result(out) is None]
    assert parked == []
    group = h.core.table.groups.get("g")
    assert group is None or (group.state is S.EMPTY and not group.members)
    # the log agrees with memory: replaying it gives the same generation and no members
    if group is not None and h.writes:
        stored = replay([r for w in h.writes for r in w.records]).groups.get("g")
        assert stored is not None and stored.generation == group.generation and stored.members == ()
