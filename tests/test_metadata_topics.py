"""The QuorumController's topic, partition and config requests, with Kafka's error codes."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest
from test_metadata_helpers import Harness

from kraft.protocol.error_codes import ErrorCode

E = ErrorCode


@pytest.fixture
def h():
    h = Harness(num_partitions=3, default_replication_factor=2)
    h.add_brokers({1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"})
    return h


# ---------------------------------------------------------------------------------------
# CreateTopics


def test_create_topic_records_and_response(h):
    before = h.log_end
    result = h.create_topic("events", 6, 3, configs=[{"name": "retention.ms", "value": "1000"}])
    assert result["error_code"] == 0
    assert (result["num_partitions"], result["replication_factor"]) == (6, 3)
    assert result["configs"] == [{"name": "retention.ms", "value": "1000", "read_only": False,
                                  "config_source": 1, "is_sensitive": False}]
    names = [r.name for r in h.records(before)]
    assert names == ["TopicRecord"] + ["PartitionRecord"] * 6 + ["ConfigRecord"]
    topic = h.ctl.image.topic("events")
    assert topic.id == result["topic_id"] and topic.id.int != 0
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    for p in topic.partitions.values():
        assert p.isr == p.replicas and p.leader == p.replicas[0]
        assert (p.leader_epoch, p.partition_epoch) == (0, 0)
        assert len({racks[b] for b in p.replicas}) == 3
    assert sorted(Counter(p.leader for p in topic.partitions.values()).values()) == [1] * 6
    assert h.ctl.image.config(2, "events") == {"retention.ms": "1000"}


def test_defaults_for_partitions_and_replication(h):
    result = h.create_topic("d", -1, -1)
    assert (result["num_partitions"], result["replication_factor"]) == (3, 2)


def test_leaders_balance_across_many_topics(h):
    for i in range(60):
        assert h.create_topic(f"t{i}", 1, 2)["error_code"] == 0
    leaders = Counter(t.partitions[0].leader for t in h.ctl.image.topics_by_id.values())
    assert len(leaders) == 6 and max(leaders.values()) <= 20


@pytest.mark.parametrize("name,code", [
    ("", E.INVALID_TOPIC_EXCEPTION),
    (".", E.INVALID_TOPIC_EXCEPTION),
    ("..", E.INVALID_TOPIC_EXCEPTION),
    ("a" * 250, E.INVALID_TOPIC_EXCEPTION),
    ("bad name", E.INVALID_TOPIC_EXCEPTION),
    ("bad/name", E.INVALID_TOPIC_EXCEPTION),
    ("ünicode", E.INVALID_TOPIC_EXCEPTION),
    ("__cluster_metadata", E.INVALID_TOPIC_EXCEPTION),
    ("a" * 249, E.NONE),
    ("Good.name_with-all.0", E.NONE),
])
def test_topic_names(h, name, code):
    assert h.create_topic(name)["error_code"] == code


def test_existing_and_colliding_names(h):
    assert h.create_topic("a.b")["error_code"] == 0
    assert h.create_topic("a.b")["error_code"] == E.TOPIC_ALREADY_EXISTS
    assert h.create_topic("a_b")["error_code"] == E.INVALID_TOPIC_EXCEPTION
    assert h.create_topic("x.y_z")["error_code"] == 0
    assert h.create_topic("x_y.z")["error_code"] == E.INVALID_TOPIC_EXCEPTION
    assert h.create_topic("x_y_z")["error_code"] == E.INVALID_TOPIC_EXCEPTION
    assert h.create_topic("x_y_z_")["error_code"] == 0
    dotted = ".".join("abcdefghijklmn")  # 13 dots: more spellings than are tried one by one
    assert h.create_topic(dotted)["error_code"] == 0
    assert h.create_topic(dotted)["error_code"] == E.TOPIC_ALREADY_EXISTS
    assert h.create_topic(dotted.replace(".", "_", 7))["error_code"] == E.INVALID_TOPIC_EXCEPTION


def test_duplicates_in_one_request_and_per_topic_errors(h):
    resp = h.send("CreateTopics", {"topics": [
        {"name": "x", "num_partitions": 1, "replication_factor": 1},
        {"name": "x", "num_partitions": 1, "replication_factor": 1},
        {"name": "ok", "num_partitions": 1, "replication_factor": 1},
        {"name": "ok.1", "num_partitions": 1, "replication_factor": 1},
        {"name": "ok_1", "num_partitions": 1, "replication_factor": 1},
    ]})
    codes = {t["name"]: t["error_code"] for t in resp["topics"]}
    assert codes == {"x": E.INVALID_REQUEST, "ok": 0, "ok.1": 0, "ok_1": E.INVALID_TOPIC_EXCEPTION}
    assert h.ctl.image.topic("x") is None and h.ctl.image.topic("ok") is not None


@pytest.mark.parametrize("partitions,rf,code", [
    (0, 1, E.INVALID_PARTITIONS),
    (-5, 1, E.INVALID_PARTITIONS),
    (1, 0, E.INVALID_REPLICATION_FACTOR),
    (1, 7, E.INVALID_REPLICATION_FACTOR),
    (1, 6, E.NONE),
])
def test_partition_and_replication_checks(h, partitions, rf, code):
    assert h.create_topic("t", partitions, rf)["error_code"] == code


def test_fenced_brokers_do_not_count_for_replication(h):
    h.heartbeat(6, want_fence=True)
    assert h.create_topic("t", 1, 6)["error_code"] == E.INVALID_REPLICATION_FACTOR
    result = h.create_topic("u", 10, 5)
    assert result["error_code"] == 0
    assert all(6 not in p.replicas for p in h.ctl.image.topic("u").partitions.values())


@pytest.mark.parametrize("configs,code", [
    ([{"name": "retention.ms", "value": "abc"}], E.INVALID_CONFIG),
    ([{"name": "retention.ms", "value": "-2"}], E.INVALID_CONFIG),
    ([{"name": "no.such.config", "value": "1"}], E.INVALID_CONFIG),
    ([{"name": "cleanup.policy", "value": "compact,shred"}], E.INVALID_CONFIG),
    ([{"name": "min.insync.replicas", "value": "0"}], E.INVALID_CONFIG),
    ([{"name": "retention.ms", "value": None}], E.INVALID_CONFIG),
    ([{"name": "cleanup.policy", "value": "compact,delete"}, {"name": "min.insync.replicas", "value": "2"}], E.NONE),
    # Kafka's ThrottledReplicaListValidator: "*" alone, or partition:broker pairs
    ([{"name": "leader.replication.throttled.replicas", "value": "0:1, 1:2"}], E.NONE),
    ([{"name": "follower.replication.throttled.replicas", "value": "*"}], E.NONE),
    ([{"name": "leader.replication.throttled.replicas", "value": "*,0:1"}], E.INVALID_CONFIG),
    ([{"name": "follower.replication.throttled.replicas", "value": "0-1"}], E.INVALID_CONFIG),
    ([{"name": "follower.replication.throttled.replicas", "value": "0:x"}], E.INVALID_CONFIG),
])
def test_topic_config_validation(h, configs, code):
    assert h.create_topic("t", configs=configs)["error_code"] == code


def test_manual_assignment(h):
    assign = [{"partition_index": 0, "broker_ids": [3, 1]}, {"partition_index": 1, "broker_ids": [2, 4]}]
    result = h.create_topic("m", -1, -1, assignments=assign)
    assert result["error_code"] == 0 and result["num_partitions"] == 2
    assert h.partition("m", 0).replicas == (3, 1) and h.partition("m", 0).leader == 3
    h.heartbeat(5, want_fence=True)
    p = h.create_topic("n", -1, -1, assignments=[{"partition_index": 0, "broker_ids": [5, 6]}])
    assert p["error_code"] == 0
    assert (h.partition("n").isr, h.partition("n").leader) == ((6,), 6)


@pytest.mark.parametrize("assign,partitions,code", [
    ([{"partition_index": 0, "broker_ids": [1, 1]}], -1, E.INVALID_REPLICA_ASSIGNMENT),
    ([{"partition_index": 0, "broker_ids": [1, 99]}], -1, E.INVALID_REPLICA_ASSIGNMENT),
    ([{"partition_index": 1, "broker_ids": [1]}], -1, E.INVALID_REPLICA_ASSIGNMENT),
    ([{"partition_index": 0, "broker_ids": []}], -1, E.INVALID_REPLICA_ASSIGNMENT),
    ([{"partition_index": 0, "broker_ids": [1]}], 1, E.INVALID_REQUEST),
])
def test_bad_manual_assignments(h, assign, partitions, code):
    assert h.create_topic("t", partitions, -1, assignments=assign)["error_code"] == code


def test_assignment_to_fenced_brokers_only_fails(h):
    h.heartbeat(1, want_fence=True)
    assign = [{"partition_index": 0, "broker_ids": [1]}]
    assert h.create_topic("t", -1, -1, assignments=assign)["error_code"] == E.INVALID_REPLICA_ASSIGNMENT


def test_validate_only_writes_nothing(h):
    before = h.log_end
    resp = h.send("CreateTopics", {"validate_only": True, "topics": [
        {"name": "v", "num_partitions": 2, "replication_factor": 2}]})
    assert resp["topics"][0]["error_code"] == 0 and resp["topics"][0]["num_partitions"] == 2
    assert h.log_end == before and h.ctl.image.topic("v") is None


# ---------------------------------------------------------------------------------------
# DeleteTopics


def test_delete_by_name_and_by_id(h):
    a = h.create_topic("a", configs=[{"name": "retention.ms", "value": "5"}])
    h.create_topic("b")
    resp = h.send("DeleteTopics", {"topic_names": ["a", "zzz"]}, version=5)
    codes = {r["name"]: r["error_code"] for r in resp["responses"]}
    assert codes == {"a": 0, "zzz": E.UNKNOWN_TOPIC_OR_PARTITION}
    assert h.records()[-1].name == "RemoveTopicRecord" and h.records()[-1].data["topic_id"] == a["topic_id"]
    assert h.ctl.image.topic("a") is None and h.ctl.image.config(2, "a") == {}
    b_id = h.ctl.image.topic("b").id
    resp = h.send("DeleteTopics", {"topics": [{"name": None, "topic_id": b_id},
                                              {"name": None, "topic_id": uuid.uuid4()}]})
    r = resp["responses"]
    assert (r[0]["error_code"], r[0]["name"]) == (0, "b")
    assert r[1]["error_code"] == E.UNKNOWN_TOPIC_ID
    assert h.ctl.image.topics_by_id == {}


def test_one_request_of_thousands_of_topics_builds_no_image_per_topic(h, monkeypatch):
    """CreateTopics and DeleteTopics of 3,000 topics in one request, beside 3,000 topics that
    exist: every one created (distinct ids, same-request collisions still refused), then
    every one removed, named twice or by id.  Building the image again after each topic made
    such a request quadratic (9 s for 3,000 topics on one node); the count of images built
    is what grows with it."""
    for i in range(0, 3000, 500):
        resp = h.send("CreateTopics", {"topics": [
            {"name": f"old_{j}", "num_partitions": 1, "replication_factor": 1} for j in range(i, i + 500)]})
        assert {t["error_code"] for t in resp["topics"]} == {0}
    from metadata.delta import MetadataDelta
    built = []
    apply = MetadataDelta.apply
    monkeypatch.setattr(MetadataDelta, "apply", lambda self, *a: built.append(1) or apply(self, *a))
    names = [f"new.{i}" for i in range(3000)] + ["new_7", "old.1"]  # the last two collide
    resp = h.send("CreateTopics", {"topics": [
        {"name": n, "num_partitions": 1, "replication_factor": 1} for n in names]})
    codes = {t["name"]: t["error_code"] for t in resp["topics"]}
    assert codes.pop("new_7") == codes.pop("old.1") == E.INVALID_TOPIC_EXCEPTION
    assert set(codes.values()) == {0}
    assert len({t["topic_id"] for t in resp["topics"] if t["error_code"] == 0}) == 3000
    assert len(h.ctl.image.topics_by_name) == 6000
    assert len(built) <= 3, f"{len(built)} images built for one CreateTopics"
    built.clear()
    some_id = h.ctl.image.topic("new.5").id
    resp = h.send("DeleteTopics", {"topics": [{"name": n, "topic_id": uuid.UUID(int=0)} for n in names[:3000]]
                                   + [{"name": "new.5", "topic_id": uuid.UUID(int=0)},
                                      {"name": None, "topic_id": some_id}]})
    assert [r["error_code"] for r in resp["responses"]] == [0] * 3002
    assert len(built) <= 3, f"{len(built)} images built for one DeleteTopics"
    assert sorted(h.ctl.image.topics_by_name) == sorted(f"old_{j}" for j in range(3000))
    assert sum(r.name == "RemoveTopicRecord" for r in h.records()) == 3000


def test_delete_disabled():
    h = Harness(delete_topic_enable=False)
    h.add_brokers({1: None})
    h.create_topic("a")
    resp = h.send("DeleteTopics", {"topic_names": ["a"]}, version=5)
    assert resp["responses"][0]["error_code"] == E.TOPIC_DELETION_DISABLED


# ---------------------------------------------------------------------------------------
# CreatePartitions


def _grow(h, name, count, assignments=None, validate_only=False):
    resp = h.send("CreatePartitions", {"topics": [{"name": name, "count": count, "assignments": assignments}],
                                       "validate_only": validate_only})
    return resp["results"][0]["error_code"]


def test_create_partitions(h):
    h.create_topic("t", 2, 3)
    assert _grow(h, "t", 2) == E.INVALID_PARTITIONS
    assert _grow(h, "t", 1) == E.INVALID_PARTITIONS
    assert _grow(h, "nope", 5) == E.UNKNOWN_TOPIC_OR_PARTITION
    assert _grow(h, "t", 4, validate_only=True) == 0 and len(h.ctl.image.topic("t").partitions) == 2
    assert _grow(h, "t", 5) == 0
    parts = h.ctl.image.topic("t").partitions
    assert sorted(parts) == [0, 1, 2, 3, 4]
    assert all(len(p.replicas) == 3 and p.leader == p.replicas[0] for p in parts.values())


def test_create_partitions_with_assignments(h):
    h.create_topic("t", 1, 2)
    assert _grow(h, "t", 3, [{"broker_ids": [1, 2]}]) == E.INVALID_REPLICA_ASSIGNMENT  # too few
    assert _grow(h, "t", 2, [{"broker_ids": [1, 2, 3]}]) == E.INVALID_REPLICA_ASSIGNMENT  # wrong rf
    assert _grow(h, "t", 2, [{"broker_ids": [1, 42]}]) == E.INVALID_REPLICA_ASSIGNMENT  # unknown broker
    assert _grow(h, "t", 2, [{"broker_ids": [4, 5]}]) == 0
    assert h.partition("t", 1).replicas == (4, 5)


# ---------------------------------------------------------------------------------------
# IncrementalAlterConfigs


def _alter(h, rtype, name, *ops, validate_only=False):
    configs = [{"name": k, "config_operation": op, "value": v} for k, op, v in ops]
    resp = h.send("IncrementalAlterConfigs", {"validate_only": validate_only, "resources": [
        {"resource_type": rtype, "resource_name": name, "configs": configs}]})
    return resp["responses"][0]["error_code"]


def test_incremental_alter_topic_configs(h):
    h.create_topic("t", configs=[{"name": "retention.ms", "value": "10"}])
    assert _alter(h, 2, "t", ("retention.ms", 0, "20"), ("segment.ms", 0, "1000")) == 0
    assert h.ctl.image.config(2, "t") == {"retention.ms": "20", "segment.ms": "1000"}
    assert _alter(h, 2, "t", ("retention.ms", 1, None)) == 0
    assert h.ctl.image.config(2, "t") == {"segment.ms": "1000"}
    assert _alter(h, 2, "t", ("cleanup.policy", 2, "delete")) == 0
    assert _alter(h, 2, "t", ("cleanup.policy", 2, "compact,delete")) == 0
    assert h.ctl.image.config(2, "t")["cleanup.policy"] == "delete,compact"
    assert _alter(h, 2, "t", ("cleanup.policy", 3, "delete")) == 0
    assert h.ctl.image.config(2, "t")["cleanup.policy"] == "compact"
    before = h.log_end
    assert _alter(h, 2, "t", ("segment.ms", 0, "5"), validate_only=True) == 0
    assert _alter(h, 2, "t", ("segment.ms", 0, "1000")) == 0  # unchanged: nothing to write
    assert h.log_end == before


@pytest.mark.parametrize("rtype,name,ops,code", [
    (2, "missing", [("retention.ms", 0, "1")], E.UNKNOWN_TOPIC_OR_PARTITION),
    (2, "t", [("retention.ms", 0, "x")], E.INVALID_CONFIG),
    (2, "t", [("bogus", 0, "1")], E.INVALID_CONFIG),
    (2, "t", [("retention.ms", 2, "1")], E.INVALID_CONFIG),  # append to a non-list
    (2, "t", [("retention.ms", 9, "1")], E.INVALID_REQUEST),
    (2, "t", [("retention.ms", 0, "1"), ("retention.ms", 1, None)], E.INVALID_REQUEST),
    (4, "abc", [("min.insync.replicas", 0, "2")], E.INVALID_REQUEST),
    (4, "", [("min.insync.replicas", 0, "0")], E.INVALID_REQUEST),  # Kafka's code for a broker's
    (4, "1", [("node.id", 0, "7")], E.INVALID_REQUEST),  # a static key
    (4, "1", [("no.such.config", 0, "1")], E.INVALID_CONFIG),
    (8, "1", [("kafka.server", 0, "DEBUG")], E.INVALID_REQUEST),
    (4, "1", [("log.retention.ms", 0, "1000")], E.NONE),
])
def test_incremental_alter_errors(h, rtype, name, ops, code):
    h.create_topic("t")
    before = h.log_end
    assert _alter(h, rtype, name, *ops) == code
    if code:
        assert h.log_end == before


def test_alter_configs_resources_fail_independently(h):
    h.create_topic("t")
    resp = h.send("IncrementalAlterConfigs", {"resources": [
        {"resource_type": 2, "resource_name": "t",
         "configs": [{"name": "retention.ms", "config_operation": 0, "value": "7"}]},
        {"resource_type": 2, "resource_name": "nope",
         "configs": [{"name": "retention.ms", "config_operation": 0, "value": "7"}]},
        {"resource_type": 4, "resource_name": "2",
         "configs": [{"name": "min.insync.replicas", "config_operation": 0, "value": "2"}]},
    ]})
    assert [r["error_code"] for r in resp["responses"]] == [0, E.UNKNOWN_TOPIC_OR_PARTITION, 0]
    assert h.ctl.image.config(2, "t") == {"retention.ms": "7"}
    assert h.ctl.image.config(4, "2") == {"min.insync.replicas": "2"}


GROUP = 32


def test_group_configs_are_stored_for_any_group_name_and_checked_against_the_broker_bounds(h):
    """A KIP-848 group's own session timeout and heartbeat interval (Kafka's GroupConfig):
    the group need not exist; each value lies within group.consumer.min/max.*; the session
    stays longer than the heartbeat interval, the broker's value standing in for a key the
    group leaves out."""
    assert _alter(h, GROUP, "g", ("consumer.session.timeout.ms", 0, "50000")) == 0
    assert h.ctl.image.config(GROUP, "g") == {"consumer.session.timeout.ms": "50000"}
    assert _alter(h, GROUP, "g", ("consumer.heartbeat.interval.ms", 0, "15000")) == 0
    before = h.log_end
    for ops in ([("consumer.session.timeout.ms", 0, "44999")], [("consumer.session.timeout.ms", 0, "60001")],
                [("consumer.heartbeat.interval.ms", 0, "4999")], [("consumer.heartbeat.interval.ms", 0, "x")],
                [("share.session.timeout.ms", 0, "50000")], [("session.timeout.ms", 0, "50000")]):
        assert _alter(h, GROUP, "g", *ops) == E.INVALID_CONFIG, ops
    assert _alter(h, GROUP, "", ("consumer.session.timeout.ms", 0, "50000")) == E.INVALID_REQUEST
    assert h.log_end == before
    assert _alter(h, GROUP, "g", ("consumer.session.timeout.ms", 1, None)) == 0
    assert h.ctl.image.config(GROUP, "g") == {"consumer.heartbeat.interval.ms": "15000"}


def test_group_config_bounds_are_the_controllers_settings():
    h = Harness(group_consumer={"group.consumer.session.timeout.ms": 6000, "group.consumer.heartbeat.interval.ms": 1000,
                                "group.consumer.min.session.timeout.ms": 1000,
                                "group.consumer.max.session.timeout.ms": 10000,
                                "group.consumer.min.heartbeat.interval.ms": 500,
                                "group.consumer.max.heartbeat.interval.ms": 2000})
    assert _alter(h, GROUP, "g", ("consumer.session.timeout.ms", 0, "1500")) == 0
    # 2000 is within its bounds but not below the group's session of 1500
    assert _alter(h, GROUP, "g", ("consumer.heartbeat.interval.ms", 0, "2000")) == E.INVALID_CONFIG
    assert _alter(h, GROUP, "g", ("consumer.heartbeat.interval.ms", 0, "500")) == 0
    # the broker's heartbeat interval (1000) stands in for a group that sets only its session
    assert _alter(h, GROUP, "h", ("consumer.session.timeout.ms", 0, "1000")) == E.INVALID_CONFIG


def test_legacy_alter_configs_replaces_against_the_controllers_own_view(h):
    """The legacy AlterConfigs names a resource's whole dynamic config.  The keys it leaves out
    are the ones the controller knows of, a change not yet committed included: a broker's image
    may not have seen that change yet, and a replace worked out there would keep its key."""
    h.create_topic("t", configs=[{"name": "retention.ms", "value": "10"}])
    assert _alter(h, 2, "t", ("max.message.bytes", 0, "65536")) == 0
    h.send("IncrementalAlterConfigs", {"resources": [{"resource_type": 2, "resource_name": "t", "configs": [
        {"name": "segment.ms", "config_operation": 0, "value": "1000"}]}]}, commit=False)
    resp = h.send("AlterConfigs", {"validate_only": False, "resources": [
        {"resource_type": 2, "resource_name": "t", "configs": [{"name": "retention.ms", "value": "20"}]},
        {"resource_type": 2, "resource_name": "nope", "configs": []}]})
    assert [r["error_code"] for r in resp["responses"]] == [0, E.UNKNOWN_TOPIC_OR_PARTITION]
    assert h.ctl.image.config(2, "t") == {"retention.ms": "20"}
    resp = h.send("AlterConfigs", {"validate_only": False, "resources": [
        {"resource_type": 2, "resource_name": "t", "configs": [{"name": "retention.ms", "value": "x"}]}]})
    assert resp["responses"][0]["error_code"] == E.INVALID_CONFIG
    assert h.ctl.image.config(2, "t") == {"retention.ms": "20"}


def test_one_request_writes_at_most_10000_records(h):
    """Kafka's MAX_RECORDS_PER_USER_OP: past it the whole request is a POLICY_VIOLATION and
    nothing is written, checked before placement (2**31 - 1 partitions must cost an answer,
    not the controller's memory)."""
    before = h.log_end
    for partitions in (10_000, 2**31 - 1):
        result = h.create_topic("huge", partitions, 1)
        assert (result["error_code"], result["error_message"]) == (
            E.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")
    resp = h.send("CreateTopics", {"topics": [
        {"name": f"part{i}", "num_partitions": 5_000, "replication_factor": 1} for i in range(2)]})
    assert [t["error_code"] for t in resp["topics"]] == [E.POLICY_VIOLATION] * 2
    assert h.log_end == before and h.ctl.image.topic("huge") is None
    assert h.create_topic("big", 9_000, 1)["error_code"] == 0
    assert _grow(h, "big", 9_000 + 10_001) == E.POLICY_VIOLATION
    assert _grow(h, "big", 2**31 - 1) == E.POLICY_VIOLATION
    assert _grow(h, "big", 9_001) == 0
