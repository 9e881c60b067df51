"""Partition reassignment in the controller (KIP-455), against the sans-IO QuorumController:
start, completion when the last adding replica joins the ISR, replacement, cancellation,
and the refusals."""

from __future__ import annotations

from kraft.protocol.error_codes import ErrorCode as E
from test_metadata_controller import Harness, _alter


def harness():
    h = Harness()
    h.add_brokers({1: None, 2: None, 3: None, 4: None, 5: None})
    h.create_topic("t", assignments=[{"partition_index": 0, "broker_ids": [1, 2]}], num_partitions=-1, rf=-1)
    return h


def reassign(h, replicas, index=0, topic="t"):
    resp = h.send("AlterPartitionReassignments", {"timeout_ms": 1000, "topics": [
        {"name": topic, "partitions": [{"partition_index": index, "replicas": replicas}]}]})
    return resp["responses"][0]["partitions"][0]["error_code"]


def ongoing(h):
    resp = h.send("ListPartitionReassignments", {"timeout_ms": 1000, "topics": None})
    return {(t["name"], p["partition_index"]): (p["replicas"], p["adding_replicas"], p["removing_replicas"])
            for t in resp["topics"] for p in t["partitions"]}


def isr_change(h, isr):
    part = h.partition("t", 0)
    code, _ = _alter(h, broker=part.leader, leader_epoch=part.leader_epoch,
                     partition_epoch=part.partition_epoch, isr=isr)
    assert code == 0


def test_a_move_completes_when_the_last_adding_replica_joins_the_isr():
    h = harness()
    assert reassign(h, [3, 4, 5]) == 0
    p = h.partition("t", 0)
    assert (p.replicas, p.adding_replicas, p.removing_replicas, p.isr, p.leader) == \
        ((3, 4, 5, 1, 2), (3, 4, 5), (1, 2), (1, 2), 1)
    assert ongoing(h) == {("t", 0): ([3, 4, 5, 1, 2], [3, 4, 5], [1, 2])}
    isr_change(h, (1, 2, 3, 4))
    assert h.partition("t", 0).adding_replicas == (3, 4, 5)  # 5 is not in yet
    isr_change(h, (1, 2, 3, 4, 5))
    p = h.partition("t", 0)
    assert (p.replicas, p.adding_replicas, p.removing_replicas, p.isr, p.leader) == \
        ((3, 4, 5), (), (), (3, 4, 5), 3)  # the leader was removed: the first of the target leads
    assert ongoing(h) == {}


def test_raising_the_replication_factor_keeps_the_leader():
    h = harness()
    assert reassign(h, [1, 2, 3]) == 0
    isr_change(h, (1, 2, 3))
    p = h.partition("t", 0)
    assert (p.replicas, p.isr, p.leader, p.adding_replicas) == ((1, 2, 3), (1, 2, 3), 1, ())


def test_removing_replicas_only_completes_at_once():
    h = harness()
    assert reassign(h, [2]) == 0
    p = h.partition("t", 0)
    assert (p.replicas, p.isr, p.leader, p.removing_replicas) == ((2,), (2,), 2, ())


def test_cancel_reverts_to_the_original_replicas():
    h = harness()
    assert reassign(h, [3, 4]) == 0
    isr_change(h, (1, 2, 3))
    assert reassign(h, None) == 0
    p = h.partition("t", 0)
    assert (p.replicas, p.isr, p.leader, p.adding_replicas, p.removing_replicas) == ((1, 2), (1, 2), 1, (), ())
    assert reassign(h, None) == E.NO_REASSIGNMENT_IN_PROGRESS


def test_a_new_target_replaces_the_ongoing_one_from_the_original_replicas():
    h = harness()
    assert reassign(h, [3, 4]) == 0
    isr_change(h, (1, 2, 3))
    assert reassign(h, [1, 5]) == 0
    p = h.partition("t", 0)
    assert (p.replicas, p.adding_replicas, p.removing_replicas, p.isr) == ((1, 5, 2), (5,), (2,), (1, 2))


def test_refusals():
    h = harness()
    assert reassign(h, [1, 9]) == E.INVALID_REPLICA_ASSIGNMENT  # broker 9 is not registered
    assert reassign(h, [1, 1]) == E.INVALID_REPLICA_ASSIGNMENT
    assert reassign(h, []) == E.INVALID_REPLICA_ASSIGNMENT
    assert reassign(h, [1], index=7) == E.UNKNOWN_TOPIC_OR_PARTITION
    assert reassign(h, [1], topic="nope") == E.UNKNOWN_TOPIC_OR_PARTITION
    assert reassign(h, [3]) == 0 and h.partition("t", 0).adding_replicas == (3,)  # needs 3 to catch up
    assert ongoing(h) == {("t", 0): ([3, 1, 2], [3], [1, 2])}
