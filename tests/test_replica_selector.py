"""The rack-aware replica selector (KIP-392) against a real PartitionState: which replica the
leader names for a consumer, from the followers' fetch positions it has seen."""

from broker.partition_state import PartitionState
from broker.replica_selector import preferred_read_replica

RACKS = {1: "a", 2: "b", 3: "b", 4: "c"}


def leader_with(positions: dict[int, tuple[int, int]], isr=(1, 2, 3, 4), leo=100) -> PartitionState:
    """Broker 1 leading replicas 1-4 with log end ``leo``; ``positions``: follower -> (fetch
    offset, fetch time) of its last fetch."""
    st = PartitionState(1)
    st.become_leader(1, 0, [1, 2, 3, 4], list(isr), leo, 0, 0)
    for rid, (offset, at) in positions.items():
        st.on_follower_fetch(rid, offset, 0, at, current_leader_epoch=1, log_start_offset=0)
    return st


def pick(st, rack, offset=50, racks=RACKS):
    return preferred_read_replica(st, rack, offset, racks.get)


def test_the_leader_serves_without_a_rack_or_in_its_own():
    st = leader_with({2: (100, 10), 3: (100, 10), 4: (100, 10)})
    assert pick(st, None) is None and pick(st, "") is None and pick(st, "a") is None
    assert pick(st, "z") is None  # no replica there


def test_the_in_sync_replica_of_the_rack_furthest_ahead():
    st = leader_with({2: (80, 10), 3: (100, 10), 4: (100, 10)})
    assert pick(st, "b") == 3 and pick(st, "c") == 4
    assert pick(st, "b", offset=90) == 3  # 2 has not got there
    assert pick(st, "b", offset=101) is None  # past every follower's log end


def test_replicas_out_of_the_isr_or_not_live_are_not_named():
    st = leader_with({2: (100, 10), 3: (100, 10), 4: (100, 10)}, isr=(1, 2, 4))
    assert pick(st, "b") == 2
    assert pick(st, "b", racks={**RACKS, 2: None}) is None  # broker 2 fenced: no rack known
