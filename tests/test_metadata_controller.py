"""The QuorumController's cluster control: registration, heartbeats, fencing, elections,
controlled shutdown, AlterPartition, producer ids, pending state and leadership changes."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest
from test_metadata_helpers import CLUSTER_ID, NODE_ID, Harness, incarnation

from kraft.protocol.error_codes import ErrorCode
from metadata.controller import ControllerConfig, QuorumController
from metadata import serde
from metadata.delta import apply_records
from metadata.snapshot import SnapshotPolicy

E = ErrorCode


# ---------------------------------------------------------------------------------------
# Registration


def test_registration_epoch_is_the_offset_of_its_record():
    h = Harness()
    assert h.register(1)["broker_epoch"] == 0
    assert h.register(2)["broker_epoch"] == 1
    b = h.ctl.image.broker(2)
    assert (b.epoch, b.fenced, b.incarnation_id) == (1, True, incarnation(2))
    assert b.listeners[0].port == 9094


def test_wrong_cluster_id_is_refused():
    h = Harness()
    resp = h.register(1, cluster_id="other")
    assert resp["error_code"] == E.INCONSISTENT_CLUSTER_ID
    assert h.ctl.image.broker(1) is None and h.log_end == 0


def test_same_incarnation_is_idempotent():
    h = Harness()
    epoch = h.register(1)["broker_epoch"]
    end = h.log_end
    assert h.register(1)["broker_epoch"] == epoch
    assert h.log_end == end


def test_new_incarnation_replaces_the_old_after_its_session():
    h = Harness()
    h.add_brokers({1: None, 2: None})
    h.create_topic("t", 1, 2, assignments=[], num_partitions=1)
    old = h.ctl.image.broker(1).epoch
    # the old incarnation is still heartbeating: a second one is a duplicate
    assert h.register(1, n=1)["error_code"] == E.DUPLICATE_BROKER_REGISTRATION
    h.now_ms += 10_000
    h.heartbeat(2)
    resp = h.register(1, n=1)
    assert resp["error_code"] == 0 and resp["broker_epoch"] > old
    b = h.ctl.image.broker(1)
    assert b.incarnation_id == incarnation(1, 1) and b.fenced and b.epoch == resp["broker_epoch"]
    # the old incarnation left the ISR before the new one was registered
    p = h.partition("t")
    assert 1 not in p.isr and p.leader == 2


def test_clean_restart_with_previous_epoch_is_accepted_at_once():
    h = Harness()
    h.add_brokers({1: None})
    old = h.ctl.image.broker(1).epoch
    assert h.register(1, n=1, previous_broker_epoch=old)["error_code"] == 0


# ---------------------------------------------------------------------------------------
# Heartbeats, fencing, unfencing


def test_fencing_timeline():
    h = Harness(broker_session_timeout_ms=9000)
    epoch = h.register(1)["broker_epoch"]
    # behind its registration record: stays fenced, not caught up
    resp = h.heartbeat(1, offset=epoch - 1)
    assert (resp["is_caught_up"], resp["is_fenced"]) == (False, True)
    # caught up but wants to stay fenced
    resp = h.heartbeat(1, offset=epoch, want_fence=True)
    assert (resp["is_caught_up"], resp["is_fenced"]) == (True, True)
    resp = h.heartbeat(1, offset=epoch)
    assert (resp["is_caught_up"], resp["is_fenced"]) == (True, False)
    assert h.records()[-1].name == "UnfenceBrokerRecord"
    assert not h.ctl.image.broker(1).fenced
    # heartbeats keep it in; silence longer than the session fences it
    h.tick(1000)
    h.tick(5000)
    h.heartbeat(1)
    h.tick(8999)
    assert not h.ctl.image.broker(1).fenced
    result = h.tick(1)
    assert [r.name for r in result.records] == ["FenceBrokerRecord"]
    assert h.ctl.image.broker(1).fenced
    # it comes back with a heartbeat
    assert not h.heartbeat(1)["is_fenced"]


def test_a_closed_heartbeat_connection_shortens_the_session():
    h = Harness(broker_session_timeout_ms=9000, broker_session_disconnect_timeout_ms=1000)
    h.add_brokers({1: None, 2: None})
    h.heartbeat(1, connection_id="c1")
    h.heartbeat(2, connection_id="c2")
    h.tick(2000)
    assert h.ctl.connection_closed("c-other", h.now_ms) is None  # no broker's connection
    assert h.ctl.connection_closed("c1", h.now_ms) == 1
    h.tick(999)
    assert not h.ctl.image.broker(1).fenced
    result = h.tick(1)  # 1000 ms after the close, 3000 ms into a 9000 ms session
    assert [r.data["id"] for r in result.records if r.name == "FenceBrokerRecord"] == [1]
    assert not h.ctl.image.broker(2).fenced
    assert h.ctl.connection_closed("c1", h.now_ms) is None  # once


def test_a_heartbeat_after_the_close_keeps_the_session():
    h = Harness(broker_session_timeout_ms=9000, broker_session_disconnect_timeout_ms=1000)
    h.add_brokers({1: None})
    h.heartbeat(1, connection_id="c1")
    h.ctl.connection_closed("c1", h.now_ms)
    h.tick(500)
    h.heartbeat(1, connection_id="c2")  # it reconnected
    h.tick(8000)
    assert not h.ctl.image.broker(1).fenced
    # a close of a connection it no longer heartbeats on changes nothing
    h.heartbeat(1, connection_id="c3")
    assert h.ctl.connection_closed("c2", h.now_ms) is None
    h.tick(8999)
    assert not h.ctl.image.broker(1).fenced
    assert [r.name for r in h.tick(1).records] == ["FenceBrokerRecord"]


def test_a_closed_connection_never_lengthens_a_session():
    h = Harness(broker_session_timeout_ms=3000, broker_session_disconnect_timeout_ms=5000)
    h.add_brokers({1: None})
    h.heartbeat(1, connection_id="c1")
    h.ctl.connection_closed("c1", h.now_ms)
    h.tick(2999)
    assert not h.ctl.image.broker(1).fenced
    assert [r.name for r in h.tick(1).records] == ["FenceBrokerRecord"]


def test_a_new_controller_gives_brokers_on_gone_nodes_a_short_session():
    """A newly active controller knows which voters' processes are gone (their quorum
    connections closed): a broker on such a node is fenced after the disconnect timeout,
    not a whole session later; one that heartbeats keeps its session."""
    h = Harness(broker_session_timeout_ms=9000, broker_session_disconnect_timeout_ms=1000)
    h.add_brokers({1: None, 2: None, 3: None})
    assert h.ctl.brokers_gone([2, 3, 42], h.now_ms) == [2, 3]  # 42: no such broker
    h.tick(500)
    h.heartbeat(3)  # alive after all
    h.tick(499)
    assert not h.ctl.image.broker(2).fenced
    result = h.tick(1)
    assert [r.data["id"] for r in result.records if r.name == "FenceBrokerRecord"] == [2]
    h.tick(7000)
    assert not h.ctl.image.broker(1).fenced and not h.ctl.image.broker(3).fenced


def test_closed_connections_fence_nobody_with_the_key_off():
    h = Harness(broker_session_timeout_ms=9000, broker_session_disconnect_timeout_ms=-1)
    h.add_brokers({1: None})
    h.heartbeat(1, connection_id="c1")
    assert h.ctl.connection_closed("c1", h.now_ms) is None
    h.tick(8999)
    assert not h.ctl.image.broker(1).fenced


def test_heartbeat_epoch_checks():
    h = Harness()
    h.add_brokers({1: None})
    assert h.heartbeat(1, epoch=12345)["error_code"] == E.STALE_BROKER_EPOCH
    resp = h.send("BrokerHeartbeat", {"broker_id": 7, "broker_epoch": 0})
    assert resp["error_code"] == E.STALE_BROKER_EPOCH


def test_heartbeats_are_soft_state():
    h = Harness()
    h.add_brokers({1: None})
    end = h.log_end
    for _ in range(5):
        h.heartbeat(1)
        h.now_ms += 100
    assert h.log_end == end  # nothing written for a heartbeat of a settled broker


def test_fencing_elects_a_new_leader_from_the_isr_with_an_epoch_bump():
    h = Harness()
    h.add_brokers({1: "a", 2: "b", 3: "c"})
    h.create_topic("t", assignments=[{"partition_index": 0, "broker_ids": [1, 2, 3]}],
                   num_partitions=-1, rf=-1)
    p = h.partition("t")
    assert (p.leader, p.leader_epoch, p.isr) == (1, 0, (1, 2, 3))
    h.heartbeat(1, want_fence=True)
    p = h.partition("t")
    assert (p.leader, p.leader_epoch, p.isr) == (2, 1, (2, 3))
    # a follower going away shrinks the ISR but keeps the leader epoch
    h.heartbeat(3, want_fence=True)
    p = h.partition("t")
    assert (p.leader, p.leader_epoch, p.isr, p.partition_epoch) == (2, 1, (2,), 2)
    # the last ISR member stays in the ISR, but the partition is leaderless
    h.heartbeat(2, want_fence=True)
    p = h.partition("t")
    assert (p.leader, p.leader_epoch, p.isr) == (-1, 2, (2,))
    # broker 1 is alive again but not in the ISR: no clean leader
    h.heartbeat(1)
    assert h.partition("t").leader == -1
    # the ISR member returning takes the leadership back
    h.heartbeat(2)
    p = h.partition("t")
    assert (p.leader, p.leader_epoch) == (2, 3)


def _leaderless_with_live_replica(**config):
    h = Harness(**config)
    h.add_brokers({1: None, 2: None})
    h.create_topic("t", assignments=[{"partition_index": 0, "broker_ids": [1, 2]}], num_partitions=-1, rf=-1)
    h.heartbeat(2, want_fence=True)  # ISR [1]
    h.heartbeat(1, want_fence=True)  # ISR stays [1], no leader
    h.heartbeat(2)  # broker 2 is back, outside the ISR
    return h


def test_no_unclean_election_by_default():
    h = _leaderless_with_live_replica()
    p = h.partition("t")
    assert (p.leader, p.isr) == (-1, (1,))


def test_unclean_election_when_enabled_statically():
    h = _leaderless_with_live_replica(unclean_leader_election_enable=True)
    # broker 1 left while 2 was fenced: with unclean election on, 2 takes over when it returns
    p = h.partition("t")
    assert (p.leader, p.isr, p.leader_recovery_state) == (2, (2,), 1)


def test_unclean_election_enabled_by_topic_config():
    h = _leaderless_with_live_replica()
    resp = h.send("IncrementalAlterConfigs", {"resources": [{
        "resource_type": 2, "resource_name": "t",
        "configs": [{"name": "unclean.leader.election.enable", "config_operation": 0, "value": "true"}]}]})
    assert resp["responses"][0]["error_code"] == 0
    assert h.partition("t").leader == -1  # a config change alone does not elect
    h.heartbeat(2, want_fence=True)
    h.heartbeat(2)
    p = h.partition("t")
    assert (p.leader, p.isr, p.leader_recovery_state) == (2, (2,), 1)


def test_the_periodic_check_elects_where_a_topic_enabled_unclean_election():
    """Kafka's maybeElectUncleanLeaders: the live replica outside the ISR needs no broker
    event; every ``unclean.leader.election.interval.ms`` the controller elects it for the
    topics that allow it, and leaves the others leaderless."""
    h = Harness(unclean_leader_election_interval_ms=1000, max_idle_interval_ms=0)
    h.add_brokers({1: None, 2: None})
    for name in ("t", "strict"):
        h.create_topic(name, assignments=[{"partition_index": 0, "broker_ids": [1, 2]}],
                       num_partitions=-1, rf=-1)
    h.heartbeat(2, want_fence=True)  # ISR [1]
    h.heartbeat(1, want_fence=True)  # ISR stays [1], no leader
    h.heartbeat(2)  # broker 2 is back, outside the ISR
    assert h.partition("t").leader == h.partition("strict").leader == -1
    h.tick()  # the check's clock starts
    h.send("IncrementalAlterConfigs", {"resources": [{
        "resource_type": 2, "resource_name": "t",
        "configs": [{"name": "unclean.leader.election.enable", "config_operation": 0, "value": "true"}]}]})
    assert h.tick(999).records == ()
    assert h.partition("t").leader == -1
    h.tick(1)
    p = h.partition("t")
    assert (p.leader, p.isr, p.leader_recovery_state) == (2, (2,), 1)
    assert h.partition("strict").leader == -1
    assert h.tick(1000).records == ()  # nothing left to elect


def test_unclean_election_enabled_by_cluster_broker_config():
    h = _leaderless_with_live_replica()
    h.send("IncrementalAlterConfigs", {"resources": [{
        "resource_type": 4, "resource_name": "",
        "configs": [{"name": "unclean.leader.election.enable", "config_operation": 0, "value": "true"}]}]})
    h.heartbeat(2, want_fence=True)
    h.heartbeat(2)
    assert h.partition("t").leader == 2


def test_controlled_shutdown_moves_leadership_before_saying_go():
    h = Harness()
    h.add_brokers({1: "a", 2: "b", 3: "c"})
    h.create_topic("t", assignments=[{"partition_index": 0, "broker_ids": [1, 2, 3]},
                                     {"partition_index": 1, "broker_ids": [2, 1, 3]},
                                     {"partition_index": 2, "broker_ids": [1]}], num_partitions=-1, rf=-1)
    resp = h.heartbeat(1, want_shut_down=True, commit=False)
    names = [r.name for r in h.last_result.records]
    assert names == ["BrokerRegistrationChangeRecord"] + ["PartitionChangeRecord"] * 3
    moves_offset = h.last_result.commit_offset
    # the answer only goes out once the moves commit
    assert moves_offset == h.log_end - 1
    h.commit()
    # the other brokers have not seen the moves yet: not yet
    assert not resp["should_shut_down"] and not resp["is_fenced"]
    p0, p1, p2 = (h.partition("t", i) for i in range(3))
    assert (p0.leader, p0.leader_epoch, p0.isr) == (2, 1, (2, 3))
    assert (p1.leader, p1.leader_epoch, p1.isr) == (2, 0, (2, 3))
    assert (p2.leader, p2.isr) == (-1, (1,))  # nowhere to go: leaderless
    assert h.ctl.image.broker(1).in_controlled_shutdown
    # a broker in controlled shutdown gets no new replicas
    assert h.create_topic("u", 1, 3)["error_code"] == E.INVALID_REPLICATION_FACTOR
    h.heartbeat(2, offset=moves_offset)
    assert not h.heartbeat(1, want_shut_down=True)["should_shut_down"]  # 3 is still behind
    assert h.log_end - 1 == moves_offset  # waiting writes nothing
    h.heartbeat(3, offset=moves_offset)
    resp = h.heartbeat(1, want_shut_down=True)
    assert resp["should_shut_down"] and resp["is_fenced"]
    assert h.ctl.image.broker(1).fenced
    assert h.records()[-1].name == "FenceBrokerRecord"


def test_controlled_shutdown_of_the_last_isr_member_leaves_partitions_leaderless():
    h = Harness()
    h.add_brokers({1: None, 2: None})
    h.create_topic("t", assignments=[{"partition_index": 0, "broker_ids": [1, 2]}], num_partitions=-1, rf=-1)
    h.heartbeat(2, want_fence=True)
    h.heartbeat(2)  # 2 is alive again but out of the ISR
    h.heartbeat(1, want_shut_down=True)
    h.heartbeat(2)
    resp = h.heartbeat(1, want_shut_down=True)
    # the sole ISR member gives up leadership (leaderless) rather than block its shutdown
    assert resp["should_shut_down"]
    p = h.partition("t")
    assert (p.leader, p.isr) == (-1, (1,))


def test_a_lone_broker_shuts_down_at_once():
    h = Harness()
    h.add_brokers({1: None})
    h.create_topic("t")
    resp = h.heartbeat(1, want_shut_down=True)
    assert resp["should_shut_down"] and resp["is_fenced"]
    # a fenced broker may always go
    assert h.heartbeat(1, want_shut_down=True)["should_shut_down"]


# ---------------------------------------------------------------------------------------
# AlterPartition


def _alter(h, *, broker=1, leader_epoch=0, partition_epoch=0, isr=(1, 2), version=3, epochs=None,
           broker_epoch=None):
    topic = h.ctl.image.topic("t")
    states = [{"broker_id": b, "broker_epoch": (epochs or {}).get(b, -1)} for b in isr]
    body = {"broker_id": broker,
            "broker_epoch": h.ctl.image.broker(broker).epoch if broker_epoch is None else broker_epoch,
            "topics": [{"topic_id": topic.id, "topic_name": "t", "partitions": [{
                "partition_index": 0, "leader_epoch": leader_epoch, "partition_epoch": partition_epoch,
                "new_isr": list(isr), "new_isr_with_epochs": states}]}]}
    resp = h.send("AlterPartition", body, version=version)
    if resp["error_code"]:
        return resp["error_code"], None
    part = resp["topics"][0]["partitions"][0]
    return part["error_code"], part


def _alter_harness():
    h = Harness()
    h.add_brokers({1: None, 2: None, 3: None})
    h.create_topic("t", assignments=[{"partition_index": 0, "broker_ids": [1, 2, 3]}], num_partitions=-1, rf=-1)
    return h


def test_alter_partition_shrinks_and_expands_the_isr():
    h = _alter_harness()
    code, part = _alter(h, isr=(1, 2))
    assert code == 0
    assert (part["leader_id"], part["leader_epoch"], part["isr"], part["partition_epoch"]) == (1, 0, [1, 2], 1)
    code, part = _alter(h, isr=(1, 2, 3), partition_epoch=1, version=2)
    assert code == 0 and part["isr"] == [1, 2, 3] and part["partition_epoch"] == 2
    assert h.partition("t").isr == (1, 2, 3)


def test_alter_partition_epoch_checks():
    h = _alter_harness()
    _alter(h, isr=(1, 2))  # partition epoch 1
    assert _alter(h, broker_epoch=999)[0] == E.STALE_BROKER_EPOCH
    assert _alter(h, partition_epoch=0)[0] == E.INVALID_UPDATE_VERSION
    assert _alter(h, partition_epoch=5)[0] == E.NOT_CONTROLLER
    assert _alter(h, broker=2, partition_epoch=1)[0] == E.INVALID_REQUEST  # not the leader
    h.heartbeat(1, want_fence=True)
    h.heartbeat(1)  # leader moved to 2 with epoch 1; 1 is a live follower outside the ISR
    p = h.partition("t")
    assert (p.leader, p.leader_epoch) == (2, 1)
    code, _ = _alter(h, broker=2, leader_epoch=0, partition_epoch=p.partition_epoch, isr=(2,))
    assert code == E.FENCED_LEADER_EPOCH
    code, part = _alter(h, broker=2, leader_epoch=1, partition_epoch=p.partition_epoch, isr=(2, 1))
    assert code == 0 and part["isr"] == [2, 1]


def test_alter_partition_refuses_ineligible_replicas():
    h = _alter_harness()
    _alter(h, isr=(1,))
    h.heartbeat(3, want_fence=True)
    assert _alter(h, isr=(1, 3), partition_epoch=1)[0] == E.INELIGIBLE_REPLICA
    assert _alter(h, isr=(1, 3), partition_epoch=1, version=1)[0] == E.OPERATION_NOT_ATTEMPTED
    h.heartbeat(3)
    epoch3 = h.ctl.image.broker(3).epoch
    assert _alter(h, isr=(1, 3), partition_epoch=1, epochs={3: epoch3 + 1})[0] == E.INELIGIBLE_REPLICA
    assert _alter(h, isr=(1, 3), partition_epoch=1, epochs={3: epoch3})[0] == 0
    assert _alter(h, isr=(2, 3), partition_epoch=2)[0] == E.INVALID_REQUEST  # leader left out
    assert _alter(h, isr=(1, 9), partition_epoch=2)[0] == E.INVALID_REQUEST  # not a replica


def test_alter_partition_of_thousands_of_partitions_builds_no_image_per_partition(monkeypatch):
    """A leader whose follower died shrinks the ISR of every partition they share in one
    AlterPartition.  3,000 of them beside 9,000 topics: every ISR changed, each answered with
    its new state, the same partition named twice answered as the first change left it.
    Building the image after each partition's change made this 38 s (the broker gives up on
    the request after 10), the count of images built is what grew."""
    h = Harness()
    h.add_brokers({1: None, 2: None, 3: None})
    for i in range(0, 9000, 1000):
        h.send("CreateTopics", {"topics": [
            {"name": f"t{j}", "num_partitions": 1, "replication_factor": 3} for j in range(i, i + 1000)]})
    image = h.ctl.image
    led = [t for t in image.topics_by_id.values() if t.partitions[0].leader == 1][:3000]
    assert len(led) == 3000

    def entry(topic, partition_epoch=0):
        return {"topic_name": topic.name, "topic_id": topic.id, "partitions": [{
            "partition_index": 0, "leader_epoch": 0, "partition_epoch": partition_epoch, "new_isr": [],
            "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": -1} for b in topic.partitions[0].isr if b != 3],
            "leader_recovery_state": 0}]}

    from metadata.delta import MetadataDelta
    built = []
    apply = MetadataDelta.apply
    monkeypatch.setattr(MetadataDelta, "apply", lambda self, *a: built.append(1) or apply(self, *a))
    body = {"broker_id": 1, "broker_epoch": image.broker(1).epoch,
            "topics": [entry(t) for t in led] + [entry(led[0], partition_epoch=1)]}
    resp = h.send("AlterPartition", body)
    parts = [p for t in resp["topics"] for p in t["partitions"]]
    assert [p["error_code"] for p in parts] == [0] * 3001
    assert all(3 not in p["isr"] and p["partition_epoch"] == 1 for p in parts)
    assert len(built) <= 3, f"{len(built)} images built for one AlterPartition"
    assert all(h.ctl.image.topic_by_id(t.id).partitions[0].isr == tuple(b for b in t.partitions[0].isr if b != 3)
               for t in led)


def test_alter_partition_unknown_topic():
    h = _alter_harness()
    import uuid as _uuid
    body = {"broker_id": 1, "broker_epoch": h.ctl.image.broker(1).epoch, "topics": [{"topic_id": _uuid.uuid4(), "partitions": [
        {"partition_index": 0, "leader_epoch": 0, "partition_epoch": 0, "new_isr_with_epochs": []}]}]}
    resp = h.send("AlterPartition", body)
    assert resp["topics"][0]["partitions"][0]["error_code"] == E.UNKNOWN_TOPIC_ID


# ---------------------------------------------------------------------------------------
# Producer ids, NoOps, snapshots


def test_allocate_producer_ids_in_blocks():
    h = Harness()
    h.add_brokers({1: None})
    epoch = h.ctl.image.broker(1).epoch
    r1 = h.send("AllocateProducerIds", {"broker_id": 1, "broker_epoch": epoch})
    r2 = h.send("AllocateProducerIds", {"broker_id": 1, "broker_epoch": epoch})
    assert (r1["producer_id_start"], r1["producer_id_len"]) == (0, 1000)
    assert r2["producer_id_start"] == 1000
    assert h.ctl.image.next_producer_id == 2000
    assert h.send("AllocateProducerIds", {"broker_id": 1, "broker_epoch": 77})["error_code"] == E.STALE_BROKER_EPOCH


def test_noop_records_when_idle():
    h = Harness(max_idle_interval_ms=500)
    assert h.tick(0).records == ()
    assert h.tick(499).records == ()
    assert [r.name for r in h.tick(1).records] == ["NoOpRecord"]
    assert h.tick(100).records == ()
    assert [r.name for r in h.tick(400).records] == ["NoOpRecord"]


def test_snapshot_policy():
    policy = SnapshotPolicy(max_bytes_between_snapshots=1000, max_interval_ms=60_000)
    assert not policy.due(0)
    policy.committed(600, 0)
    assert not policy.due(1)
    policy.committed(400, 2)
    assert policy.due(3)
    policy.taken(10, 3)
    assert not policy.due(4)
    policy.committed(1, 5)
    assert not policy.due(60_002) and policy.due(60_003)
    policy.taken(11, 60_003)
    assert not policy.due(10**9)  # nothing new: no snapshot however long it has been
    assert policy.snapshot_end == 11
    policy.loaded(8)  # an older snapshot (a follower's first load) does not move it back
    assert policy.snapshot_end == 11
    defaults = SnapshotPolicy()
    assert (defaults.max_bytes_between_snapshots, defaults.max_interval_ms) == (20 * 1024 * 1024, 3_600_000)


def test_snapshot_interval_zero_disables_the_time_trigger():
    # metadata.log.max.snapshot.interval.ms=0, as in Kafka: only the byte count triggers
    policy = SnapshotPolicy(max_bytes_between_snapshots=1000, max_interval_ms=0)
    policy.committed(1, 0)
    assert not policy.due(10**9)
    policy.committed(999, 1)
    assert policy.due(2)


# ---------------------------------------------------------------------------------------
# Pending state and leadership


def test_concurrent_creations_of_one_topic_conflict_before_commit():
    h = Harness()
    h.add_brokers({1: None})
    first = h.send("CreateTopics", {"topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1}]},
                   commit=False)
    second = h.send("CreateTopics", {"topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1}]},
                    commit=False)
    assert first["topics"][0]["error_code"] == 0
    assert second["topics"][0]["error_code"] == E.TOPIC_ALREADY_EXISTS
    assert h.ctl.image.topic("t") is None and h.ctl.working_image.topic("t") is not None
    # the failed one must still wait for the write it depends on
    assert h.last_result.commit_offset == h.log_end - 1
    h.commit()
    assert h.ctl.image.topic("t") is not None
    assert h.ctl.pending_offsets == []


def test_losing_leadership_discards_pending_state():
    h = Harness()
    h.add_brokers({1: None})
    h.send("CreateTopics", {"topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1}]}, commit=False)
    assert h.ctl.working_image.topic("t") is not None
    h.ctl.on_leader_change(NODE_ID + 1, h.epoch + 1)
    assert not h.ctl.is_active
    assert h.ctl.working_image == h.ctl.image and h.ctl.working_image.topic("t") is None
    assert h.ctl.pending_offsets == []
    h.batches = h.batches[:h.committed]  # the new leader truncated the uncommitted write
    # a standby answers NOT_CONTROLLER and writes nothing
    resp = h.send("CreateTopics", {"topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1}]})
    assert resp["topics"][0]["error_code"] == E.NOT_CONTROLLER and h.last_result.records == ()
    assert h.ctl.tick(10**6).records == ()
    # leadership back: the lost write is gone, the name is free again
    h.ctl.on_leader_change(NODE_ID, h.epoch + 2, next_offset=h.log_end)
    assert h.create_topic("t")["error_code"] == 0


def test_standby_follows_the_log():
    h = Harness()
    h.add_brokers({1: "a", 2: "b"})
    h.create_topic("t", 2, 2)
    standby = QuorumController(ControllerConfig(node_id=NODE_ID + 1, cluster_id=CLUSTER_ID))
    standby.on_leader_change(NODE_ID, 1)
    from metadata import serde
    for base, values in h.batches:
        standby.replay(serde.decode_all(values), base + len(values) - 1)
    assert standby.image == h.ctl.image == standby.working_image
    # the active controller's own records committed: its committed image is the one it built
    # when writing them, not a second copy
    assert h.ctl.image is h.ctl.working_image


def test_committed_image_follows_our_records_as_they_commit_one_batch_at_a_time():
    h = Harness()
    h.add_brokers({1: None})
    for name in ("a", "b", "c"):
        h.send("CreateTopics", {"topics": [{"name": name, "num_partitions": 2, "replication_factor": 1}]},
               commit=False)
    replayed = h.ctl.image
    while h.committed < len(h.batches):
        base, values = h.batches[h.committed]
        h.ctl.replay(serde.decode_all(values), base + len(values) - 1)
        h.committed += 1
        replayed = apply_records(replayed, serde.decode_all(values), base + len(values) - 1)
        assert h.ctl.image == replayed
    assert h.ctl.image is h.ctl.working_image and h.ctl.pending_offsets == []


def test_commits_of_records_we_did_not_write_rebuild_the_working_image():
    h = Harness()
    h.add_brokers({1: None})
    h.send("CreateTopics", {"topics": [{"name": "a", "num_partitions": 1, "replication_factor": 1}]}, commit=False)
    # an older leader's record commits below our first pending offset
    from metadata.serde import make
    ours_base = h.batches[h.committed][0]
    ctl = h.ctl
    ctl._pending[0] = replace(ctl._pending[0], base_offset=ours_base + 1,
                              last_offset=ctl._pending[0].last_offset + 1)
    ctl._next_offset += 1
    foreign = [make("ConfigRecord", resource_type=4, resource_name="", name="min.insync.replicas", value="2")]
    ctl.replay(foreign, ours_base)
    assert ctl.working_image.config(4, "") == {"min.insync.replicas": "2"}
    assert ctl.working_image.topic("a") is not None and ctl.image.topic("a") is None


def test_other_records_committed_at_our_offsets_are_decoded_and_we_resign():
    """Our own batch, committed where expected, is taken as the image we made without
    decoding it; other bytes at the same offsets are someone else's records."""
    h = Harness()
    h.add_brokers({1: None})
    h.send("CreateTopics", {"topics": [{"name": "a", "num_partitions": 1, "replication_factor": 1}]}, commit=False)
    from metadata.serde import encode, make
    base, values = h.batches[h.committed]
    other = [encode(make("ConfigRecord", resource_type=4, resource_name="", name="min.insync.replicas",
                         value=str(2 + i))) for i in range(len(values))]
    h.ctl.replay_encoded(other, base + len(values) - 1)
    assert not h.ctl.is_active
    assert h.ctl.image.config(4, "") == {"min.insync.replicas": str(1 + len(values))}


def test_commit_beyond_our_offsets_means_we_lost_leadership():
    h = Harness()
    from metadata.serde import make
    h.ctl.replay([make("NoOpRecord")], 5)
    assert not h.ctl.is_active


def test_control_batches_advance_the_offsets():
    h = Harness()
    h.ctl.replay([], 0)  # e.g. a LeaderChangeMessage at offset 0
    assert h.ctl.is_active and h.ctl.image.offset == 0 and h.ctl.next_offset == 1
    h.batches, h.committed = [(0, [b""])], 1
    assert h.register(1)["broker_epoch"] == 1
    # a control batch landing where our pending records were meant to go: we are not leading
    h.heartbeat(1)
    h.send("CreateTopics", {"topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1}]},
           commit=False)
    assert h.ctl.working_image.topic("t") is not None
    h.ctl.replay([], h.ctl.next_offset - 1)
    assert not h.ctl.is_active and h.ctl.working_image.topic("t") is None


def test_load_snapshot_replaces_the_image():
    h = Harness()
    h.add_brokers({1: None})
    h.create_topic("t")
    other = QuorumController(ControllerConfig(node_id=NODE_ID + 1, cluster_id=CLUSTER_ID))
    other.load_snapshot(h.ctl.image.records(), h.ctl.image.offset)
    assert other.image == h.ctl.image
    # replaying records the snapshot already holds changes nothing
    from metadata import serde
    for base, values in h.batches:
        other.replay(serde.decode_all(values), base + len(values) - 1)
    assert other.image == h.ctl.image


def test_controller_modules_are_sans_io():
    forbidden = {"socket", "trio", "time", "asyncio", "threading", "select", "selectors", "random"}
    root = Path(__file__).resolve().parents[1] / "metadata"
    # the cores (the trio shell, controller_server.py, lives beside them)
    files = [root / f for f in ("serde.py", "image.py", "delta.py", "snapshot.py")]
    files += sorted((root / "controller").rglob("*.py"))
    assert len(files) >= 12
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                if node.module == "random" and all(a.name == "Random" for a in node.names):
                    continue
                names = [node.module]
            else:
                continue
            assert not {n.split(".")[0] for n in names} & forbidden, (path, names)


def test_unregister_broker():
    h = Harness()
    h.add_brokers({1: None, 2: None})
    h.create_topic("t", assignments=[{"partition_index": 0, "broker_ids": [1, 2]}], num_partitions=-1, rf=-1)
    assert h.send("UnregisterBroker", {"broker_id": 1})["error_code"] == 0
    assert h.ctl.image.broker(1) is None
    p = h.partition("t")
    assert (p.leader, p.isr) == (2, (2,))
    assert h.send("UnregisterBroker", {"broker_id": 1})["error_code"] == E.BROKER_ID_NOT_REGISTERED


@pytest.mark.parametrize("api,body", [
    ("BrokerHeartbeat", {"broker_id": 1}),
    ("AlterPartition", {"broker_id": 1}),
    ("AllocateProducerIds", {"broker_id": 1}),
    ("DeleteTopics", {"topic_names": ["x"]}),
    ("CreatePartitions", {"topics": [{"name": "x", "count": 2}]}),
    ("IncrementalAlterConfigs", {"resources": [{"resource_type": 2, "resource_name": "x"}]}),
    ("AlterConfigs", {"resources": [{"resource_type": 2, "resource_name": "x"}]}),
    ("UnregisterBroker", {"broker_id": 1}),
])
def test_not_controller_responses_fit_the_schemas(api, body):
    h = Harness()
    h.ctl.resign()
    resp = h.send(api, body, version=5 if api == "DeleteTopics" else None)
    codes = [resp.get("error_code")]
    for key in ("responses", "results", "topics"):
        codes += [item.get("error_code") for item in resp.get(key) or []]
    assert E.NOT_CONTROLLER in codes


def test_reelection_in_a_new_epoch_drops_pending_writes():
    h = Harness()
    h.add_brokers({1: None})
    h.send("CreateTopics", {"topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1}]}, commit=False)
    h.batches = h.batches[:h.committed]  # the uncommitted write did not survive the election
    h.ctl.on_leader_change(NODE_ID, h.epoch + 1, next_offset=h.log_end)
    assert h.ctl.pending_offsets == [] and h.ctl.working_image.topic("t") is None
    assert h.create_topic("t")["error_code"] == 0


def test_session_expiry_moves_leadership():
    h = Harness()
    h.add_brokers({1: None, 2: None})
    h.create_topic("t", assignments=[{"partition_index": 0, "broker_ids": [1, 2]}], num_partitions=-1, rf=-1)
    h.tick(0)
    for _ in range(4):
        h.now_ms += 3000
        h.heartbeat(2)
        h.tick()
    p = h.partition("t")
    assert h.ctl.image.broker(1).fenced and not h.ctl.image.broker(2).fenced
    assert (p.leader, p.leader_epoch, p.isr) == (2, 1, (2,))


def test_a_broker_in_many_isrs_is_fenced_in_batches_one_per_tick(monkeypatch):
    """At most FENCE_BATCH partition changes per controller event: a broker in 66,000 ISRs
    made one event of 66,000 records that held every node's loop for seconds (issue 19).
    The rest follow, a batch per tick, until the broker is in no ISR and leads nothing;
    a controller that takes over part-way finishes the job."""
    from metadata.controller import cluster

    monkeypatch.setattr(cluster, "FENCE_BATCH", 2)
    h = Harness()
    h.add_brokers({1: None, 2: None})
    h.create_topic("t", assignments=[{"partition_index": i, "broker_ids": [1, 2]} for i in range(7)],
                   num_partitions=-1, rf=-1)
    h.tick(0)

    def involving_1():
        return [i for i, p in h.ctl.image.topic("t").partitions.items() if 1 in p.isr or p.leader == 1]

    assert len(involving_1()) == 7
    h.now_ms += 9000
    h.heartbeat(2)
    names = [r.name for r in h.tick().records]
    assert names.count("PartitionChangeRecord") == 2 and "FenceBrokerRecord" in names
    assert len(involving_1()) == 5
    h.heartbeat(2)
    h.tick(100)
    assert len(involving_1()) == 3
    h.ctl.on_leader_change(NODE_ID, h.epoch + 1, next_offset=h.log_end)  # a new active controller
    h.heartbeat(2)
    h.tick(100)
    assert len(involving_1()) == 1
    h.heartbeat(2)
    h.tick(100)
    assert involving_1() == []
    assert [r.name for r in h.tick(100).records if r.name == "PartitionChangeRecord"] == []
    assert all(p.leader == 2 and p.isr == (2,) for p in h.ctl.image.topic("t").partitions.values())


def test_a_fenced_broker_s_leaderships_move_before_its_other_isr_changes(monkeypatch):
    """The partitions it led are unavailable until their change is written; those it only
    followed wait just for their ISR to shrink.  So the leaderships go out first: a broker
    killed at 100,000 partitions is in every ISR but leads a third of them (issue 19)."""
    from metadata.controller import cluster

    monkeypatch.setattr(cluster, "FENCE_BATCH", 2)
    h = Harness()
    h.add_brokers({1: None, 2: None})
    # 1 leads the odd partitions, and follows in the ISR of the even ones
    h.create_topic("t", assignments=[{"partition_index": i, "broker_ids": [2, 1] if i % 2 == 0 else [1, 2]}
                                     for i in range(8)], num_partitions=-1, rf=-1)
    h.tick(0)
    parts = h.ctl.image.topic("t").partitions
    assert [i for i, p in parts.items() if p.leader == 1] == [1, 3, 5, 7]
    h.now_ms += 9000
    h.heartbeat(2)
    written = [r.data["partition_id"] for r in h.tick().records if r.name == "PartitionChangeRecord"]
    for _ in range(4):
        h.heartbeat(2)
        written += [r.data["partition_id"] for r in h.tick(100).records if r.name == "PartitionChangeRecord"]
    assert written == [1, 3, 5, 7, 0, 2, 4, 6]
    assert all(p.leader == 2 and p.isr == (2,) for p in h.ctl.image.topic("t").partitions.values())


def test_the_next_fence_batch_waits_until_the_quorum_has_committed_the_last(monkeypatch):
    """Batches written faster than the quorum commits them piled up: every heartbeat's
    answer waited behind the pile, brokers went unheard past their session and were
    fenced in turn (issue 19).  A batch goes out only when less than one is pending."""
    from metadata.controller import cluster

    monkeypatch.setattr(cluster, "FENCE_BATCH", 2)
    h = Harness()
    h.add_brokers({1: None, 2: None})
    h.create_topic("t", assignments=[{"partition_index": i, "broker_ids": [1, 2]} for i in range(6)],
                   num_partitions=-1, rf=-1)
    h.tick(0)
    h.now_ms += 9000
    h.heartbeat(2)

    def changes(result):
        return sum(1 for r in result.records if r.name == "PartitionChangeRecord")

    assert changes(h.tick(commit=False)) == 2
    assert changes(h.tick(100, commit=False)) == 0  # the first batch is not committed yet
    h.commit()
    assert changes(h.tick(100, commit=False)) == 2
    h.commit()
    assert changes(h.tick(100)) == 2
    assert all(p.leader == 2 and p.isr == (2,) for p in h.ctl.image.topic("t").partitions.values())


def test_new_active_controller_gives_every_broker_a_fresh_session():
    h = Harness()
    h.add_brokers({1: None})
    h.ctl.on_leader_change(NODE_ID, h.epoch + 1, next_offset=h.log_end)
    h.now_ms += 60_000  # long after the last heartbeat the old controller saw
    assert h.tick().records == ()
    assert [r.name for r in h.tick(9000).records] == ["FenceBrokerRecord", "NoOpRecord"]


def test_registration_checks_metadata_version_support():
    h = Harness()
    from metadata.serde import make
    h.ctl.replay([make("FeatureLevelRecord", name="metadata.version", feature_level=14)], 0)
    h.ctl.on_leader_change(NODE_ID, 2, next_offset=1)
    h.batches = [(0, [b""])]  # pretend: offset 0 is taken
    h.committed = 1
    bad = [{"name": "metadata.version", "min_supported_version": 1, "max_supported_version": 7}]
    assert h.register(1, features=bad)["error_code"] == E.UNSUPPORTED_VERSION
    good = [{"name": "metadata.version", "min_supported_version": 1, "max_supported_version": 20}]
    resp = h.register(1, features=good)
    assert resp["error_code"] == 0 and resp["broker_epoch"] == 1


def test_controller_registration():
    h = Harness()
    body = {"controller_id": 3000, "incarnation_id": incarnation(3000),
            "listeners": [{"name": "CONTROLLER", "host": "c", "port": 9093, "security_protocol": 0}]}
    assert h.send("ControllerRegistration", body)["error_code"] == 0
    c = h.ctl.image.controllers[3000]
    assert c.listeners[0].port == 9093
    end = h.log_end
    assert h.send("ControllerRegistration", body)["error_code"] == 0
    assert h.log_end == end  # the same registration again writes nothing


# ---------------------------------------------------------------------------------------
# Leader elections on request, and preferred-leader rebalancing


def _moved_leadership():
    h = Harness()
    h.add_brokers({1: None, 2: None, 3: None})
    h.create_topic("t", assignments=[{"partition_index": 0, "broker_ids": [1, 2]},
                                     {"partition_index": 1, "broker_ids": [2, 1]},
                                     {"partition_index": 2, "broker_ids": [3]}], num_partitions=-1, rf=-1)
    h.heartbeat(1, want_fence=True)  # p0 leader -> 2, ISR [2]
    h.heartbeat(1)
    return h


def _elect(h, election, partitions=None, version=2):
    tp = None if partitions is None else [{"topic": "t", "partitions": partitions}]
    resp = h.send("ElectLeaders", {"election_type": election, "topic_partitions": tp}, version=version)
    return {(r["topic"], p["partition_id"]): p["error_code"]
            for r in resp["replica_election_results"] for p in r["partition_result"]}


def test_preferred_leader_election():
    h = _moved_leadership()
    assert h.partition("t", 0).leader == 2
    # asked for everything, the answer leaves out partitions that need no election
    assert _elect(h, 0) == {("t", 0): E.PREFERRED_LEADER_NOT_AVAILABLE}
    # the preferred replica is alive but not back in the ISR yet
    assert _elect(h, 0, [0, 1, 9]) == {("t", 0): E.PREFERRED_LEADER_NOT_AVAILABLE,
                                       ("t", 1): E.ELECTION_NOT_NEEDED,
                                       ("t", 9): E.UNKNOWN_TOPIC_OR_PARTITION}
    part = h.partition("t", 0)
    code, _ = _alter(h, broker=2, leader_epoch=part.leader_epoch, partition_epoch=part.partition_epoch,
                     isr=(2, 1))
    assert code == 0
    assert _elect(h, 0, [0]) == {("t", 0): 0}
    p = h.partition("t", 0)
    assert (p.leader, p.leader_epoch) == (1, 2)


def test_unclean_election_on_request():
    h = _moved_leadership()
    h.heartbeat(3, want_fence=True)  # p2: no leader, ISR [3]
    h.heartbeat(2, want_fence=True)  # p0 and p1: ISR [2], no leader; 1 is alive outside the ISR
    assert h.partition("t", 0).leader == -1
    assert _elect(h, 1) == {("t", 0): 0, ("t", 1): 0, ("t", 2): E.ELIGIBLE_LEADERS_NOT_AVAILABLE}
    p = h.partition("t", 0)
    assert (p.leader, p.isr, p.leader_recovery_state) == (1, (1,), 1)
    # the new leader finishes recovery with AlterPartition
    code, part = _alter(h, broker=1, leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch, isr=(1,))
    assert code == 0 and part["leader_recovery_state"] == 0
    assert _elect(h, 7) == {}  # unknown election type: a top-level INVALID_REQUEST
    assert h.send("ElectLeaders", {"election_type": 7, "topic_partitions": None})["error_code"] == E.INVALID_REQUEST


def test_automatic_preferred_leader_rebalance():
    h = _moved_leadership()
    part = h.partition("t", 0)
    _alter(h, broker=2, leader_epoch=part.leader_epoch, partition_epoch=part.partition_epoch, isr=(2, 1))
    h.tick(0)
    h.heartbeat_all(299_000)
    h.tick()
    assert h.partition("t", 0).leader == 2  # not yet: the check runs every 300 s
    h.heartbeat_all(1000)
    result = h.tick()
    assert "PartitionChangeRecord" in [r.name for r in result.records]
    assert h.partition("t", 0).leader == 1


def test_rebalance_waits_for_a_broker_s_imbalance_to_pass_the_percentage():
    from metadata.controller.elections import rebalance_leaders

    h = _moved_leadership()
    part = h.partition("t", 0)
    _alter(h, broker=2, leader_epoch=part.leader_epoch, partition_epoch=part.partition_epoch, isr=(2, 1))
    image = h.ctl.image
    preferred_1 = sum(1 for p in image.topic("t").partitions.values() if p.replicas[0] == 1)
    not_led = sum(1 for p in image.topic("t").partitions.values() if p.replicas[0] == 1 and p.leader != 1)
    share = 100 * not_led // preferred_1
    assert not_led >= 1
    assert rebalance_leaders(image, share) == []  # leader.imbalance.per.broker.percentage not passed
    assert len(rebalance_leaders(image, share - 1)) == not_led


def test_bootstrap_records_open_a_new_log():
    from metadata.serde import make
    boot = [make("FeatureLevelRecord", name="metadata.version", feature_level=14)]
    h = Harness()
    h.ctl.bootstrap = tuple(boot)
    resp = h.register(1)
    assert [r.name for r in h.records()] == ["FeatureLevelRecord", "RegisterBrokerRecord"]
    assert resp["broker_epoch"] == 1  # after the bootstrap record
    assert h.ctl.image.metadata_version == 14
    h.tick(1000)
    assert [r.name for r in h.records()].count("FeatureLevelRecord") == 1
    # a refused first request still writes the bootstrap, and only once
    h2 = Harness()
    h2.ctl.bootstrap = tuple(boot)
    assert h2.register(1, cluster_id="nope")["error_code"] == E.INCONSISTENT_CLUSTER_ID
    assert h2.register(1)["broker_epoch"] == 1
    assert [r.name for r in h2.records()] == ["FeatureLevelRecord", "RegisterBrokerRecord"]


def test_own_commits_take_the_fast_path(monkeypatch):
    """Our records come back from the log decoded; they must still be recognised as ours
    (a rebuild would be correct but costs a pass over every pending record)."""
    h = Harness()
    rebuilds = []
    monkeypatch.setattr(h.ctl, "_rebuild_working", lambda: rebuilds.append(1))
    h.add_brokers({1: "a", 2: "b", 3: None})
    h.create_topic("t", 3, 3, configs=[{"name": "cleanup.policy", "value": "compact"}])
    h.heartbeat(1, want_shut_down=True)
    h.send("ControllerRegistration", {"controller_id": 3000, "incarnation_id": incarnation(3000)})
    h.send("AllocateProducerIds", {"broker_id": 2, "broker_epoch": h.ctl.image.broker(2).epoch})
    h.tick(10_000)
    h.tick(500)
    assert {r.name for r in h.records()} >= {"RegisterBrokerRecord", "PartitionRecord", "ConfigRecord",
                                              "BrokerRegistrationChangeRecord", "PartitionChangeRecord",
                                              "FenceBrokerRecord", "RegisterControllerRecord",
                                              "ProducerIdsRecord", "NoOpRecord"}
    assert rebuilds == [] and h.ctl.is_active and h.ctl.pending_offsets == []


def test_a_broker_reporting_an_offline_log_dir_is_fenced_and_loses_its_leaderships():
    """kraft brokers host one log directory: naming it in offline_log_dirs takes every
    replica of the broker out of leadership and the ISRs, and keeps it fenced while it
    reports the failure (its heartbeats keep its session alive)."""
    import uuid

    h = Harness()
    h.add_brokers({1: "a", 2: "b", 3: "c"})
    h.create_topic("t", assignments=[{"partition_index": 0, "broker_ids": [1, 2, 3]}],
                   num_partitions=-1, rf=-1)
    b = h.ctl.working_image.broker(1)
    body = {"broker_id": 1, "broker_epoch": b.epoch, "current_metadata_offset": h.ctl.image.offset,
            "want_fence": False, "want_shut_down": False, "offline_log_dirs": [uuid.uuid4()]}
    resp = h.send("BrokerHeartbeat", body)
    assert resp["is_fenced"]
    p = h.partition("t")
    assert (p.leader, p.isr) == (2, (2, 3))
    body["current_metadata_offset"] = h.ctl.image.offset
    assert h.send("BrokerHeartbeat", body)["is_fenced"]  # not unfenced while the dir is offline


def test_broker_epoch_minus_one_is_no_wildcard():
    """Anything that reaches the controller's port knows broker ids; only the broker knows its
    epoch.  A heartbeat or AlterPartition with epoch -1 is STALE_BROKER_EPOCH, as in Kafka."""
    h = _alter_harness()
    resp = h.heartbeat(1, epoch=-1, want_fence=True)
    assert resp["error_code"] == E.STALE_BROKER_EPOCH
    assert not h.ctl.image.broker(1).fenced
    assert _alter(h, broker_epoch=-1)[0] == E.STALE_BROKER_EPOCH


def test_ticking_only_when_next_tick_ms_says_writes_what_ticking_always_writes(monkeypatch):
    """The controller server ticks when ``next_tick_ms`` says (an idle one for its
    NoOpRecords, not ten times a second): over heartbeats, a closed connection, a broker
    gone silent and fenced in batches, NoOpRecords, leader rebalances and unclean-election
    checks, a controller ticked only then writes the same records at the same times as one
    ticked every 10 ms."""
    from metadata.controller import cluster

    monkeypatch.setattr(cluster, "FENCE_BATCH", 2)
    runs, ticks = [], []
    for lazy in (False, True):
        h = Harness(broker_session_timeout_ms=3000, broker_session_disconnect_timeout_ms=700,
                    max_idle_interval_ms=500, leader_imbalance_check_interval_ms=1500,
                    unclean_leader_election_interval_ms=2000)
        h.add_brokers({1: None, 2: None, 3: None})
        h.create_topic("t", assignments=[{"partition_index": i, "broker_ids": [1, 2, 3]}
                                         for i in range(7)], num_partitions=-1, rf=-1)
        h.create_topic("u", assignments=[{"partition_index": i, "broker_ids": [3, 2]}
                                         for i in range(5)], num_partitions=-1, rf=-1)
        written, n = [], 0
        for _ in range(1200):  # 12 s
            h.now_ms += 10
            t = h.now_ms
            if t % 1000 == 0:
                h.heartbeat(2)
                if t < 3000:
                    h.heartbeat(1, connection_id="c1")
                if t < 6000 or t >= 9000:  # 3 falls silent, and comes back
                    h.heartbeat(3)
            if t == 2500:
                assert h.ctl.connection_closed("c1", t) == 1
            if not lazy or h.ctl.next_tick_ms(t) <= t:
                n += 1
                written += [(t, r.name, r.data) for r in h.tick().records]
        runs.append(written)
        ticks.append(n)
    names = {name for _, name, _ in runs[0]}
    assert {"NoOpRecord", "FenceBrokerRecord", "PartitionChangeRecord"} <= names
    assert runs[1] == runs[0]
    assert ticks[1] < ticks[0] / 3, ticks
