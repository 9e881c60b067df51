"""ACLs without processes: the authorizer's decisions (kraft.security.authorizer, Kafka's
StandardAuthorizer rules), CreateAcls/DeleteAcls/DescribeAcls on the controller, replay
into the image and snapshots, and the per-API checks of broker.authorization."""

from __future__ import annotations

import uuid

import pytest
from test_metadata_helpers import Harness

from broker.authorization import CHECKS, UNCHECKED, Caller, Narrowed
from broker.api import BROKER_APIS
from broker.group.consumer_group import DESCRIBABLE
from broker.group.service import GROUP_API_VERSIONS
from broker.txn.service import TXN_API_VERSIONS
from kraft.protocol.error_codes import ErrorCode
from kraft.security.authorizer import (
    AclBinding,
    AclFilter,
    AclIndex,
    AclOperation as Op,
    Authorizer,
    PatternType as P,
    PermissionType as Perm,
    ResourceType as R,
    parse_super_users,
)
from metadata.delta import ReplayError, apply_records, image_from_records
from metadata.image import EMPTY_IMAGE
from metadata.serde import make

E = ErrorCode
HOST = "10.0.0.1"


def acl(name, op, perm=Perm.ALLOW, principal="User:alice", rtype=R.TOPIC, pattern=P.LITERAL, host="*"):
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def decide(acls, op, name, principal="User:alice", host=HOST, rtype=R.TOPIC, **settings):
    return Authorizer(**settings).authorize(AclIndex(acls), principal, host, op, rtype, name)


def test_literal_prefixed_and_wildcard_patterns():
    acls = [acl("orders", Op.READ), acl("pay-", Op.WRITE, pattern=P.PREFIXED), acl("*", Op.DESCRIBE)]
    assert decide(acls, Op.READ, "orders")
    assert not decide(acls, Op.READ, "orders2")  # literal: that name only
    assert decide(acls, Op.WRITE, "pay-eu") and decide(acls, Op.WRITE, "pay-")
    assert not decide(acls, Op.WRITE, "pay")  # a prefix matches names that start with it
    assert decide(acls, Op.DESCRIBE, "anything")  # "*" names every topic
    assert not decide(acls, Op.READ, "anything")
    assert not decide(acls, Op.READ, "orders", rtype=R.GROUP)  # ACLs are per resource type


def test_deny_wins_and_principal_host_matching():
    acls = [acl("t", Op.ALL), acl("t", Op.WRITE, Perm.DENY),
            acl("t", Op.READ, principal="User:*"), acl("t", Op.ALTER, host="10.0.0.9")]
    assert decide(acls, Op.READ, "t") and decide(acls, Op.DELETE, "t")
    assert not decide(acls, Op.WRITE, "t")  # DENY before ALLOW (ALL allows it)
    assert decide(acls, Op.READ, "t", principal="User:bob")  # User:* is everyone
    assert not decide(acls, Op.DELETE, "t", principal="User:bob")
    alter_only_from = [acl("t", Op.ALTER, host="10.0.0.9")]
    assert decide(alter_only_from, Op.ALTER, "t", host="10.0.0.9")
    assert not decide(alter_only_from, Op.ALTER, "t", host=HOST)
    # a prefixed DENY covers a literal ALLOW; a DENY of ALL denies every operation
    assert not decide([acl("t", Op.READ), acl("t", Op.READ, Perm.DENY, pattern=P.PREFIXED)], Op.READ, "t")
    assert not decide([acl("t", Op.READ), acl("*", Op.ALL, Perm.DENY, principal="User:*")], Op.READ, "t")


def test_implied_operations_apply_to_allow_only():
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert decide([acl("t", op)], Op.DESCRIBE, "t"), op
    assert not decide([acl("t", Op.CREATE)], Op.DESCRIBE, "t")
    assert decide([acl("t", Op.ALTER_CONFIGS)], Op.DESCRIBE_CONFIGS, "t")
    assert not decide([acl("t", Op.DESCRIBE_CONFIGS)], Op.ALTER_CONFIGS, "t")
    # DENY READ does not deny DESCRIBE
    assert decide([acl("t", Op.DESCRIBE), acl("t", Op.READ, Perm.DENY)], Op.DESCRIBE, "t")


def test_super_users_and_no_acl_found():
    assert parse_super_users(" User:admin ;User:CN=broker,O=x;;") == {"User:admin", "User:CN=broker,O=x"}
    deny_all = [acl("t", Op.ALL, Perm.DENY, principal="User:*")]
    assert decide(deny_all, Op.READ, "t", principal="User:admin", super_users={"User:admin"})
    assert not decide([], Op.READ, "t")  # allow.everyone.if.no.acl.found=false (Kafka's default)
    assert decide([], Op.READ, "t", allow_if_no_acl=True)
    # any ACL on the resource, for anyone, and the default no longer applies
    assert not decide([acl("t", Op.READ, principal="User:carol")], Op.READ, "t", allow_if_no_acl=True)
    assert decide([acl("other", Op.READ, principal="User:carol")], Op.READ, "t", allow_if_no_acl=True)


def test_authorize_any_for_idempotent_producers_and_authorized_operations():
    auth = Authorizer()
    assert auth.authorize_any(AclIndex([acl("x-", Op.WRITE, pattern=P.PREFIXED)]), "User:alice", HOST, Op.WRITE, R.TOPIC)
    assert not auth.authorize_any(AclIndex([acl("x", Op.WRITE), acl("x", Op.WRITE, Perm.DENY)]),
                                  "User:alice", HOST, Op.WRITE, R.TOPIC)
    assert not auth.authorize_any(AclIndex([acl("x", Op.READ)]), "User:alice", HOST, Op.WRITE, R.TOPIC)
    bits = auth.authorized_operations(AclIndex([acl("t", Op.READ)]), "User:alice", HOST, R.TOPIC, "t")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE)


def test_filters_match_as_kafkas():
    lit, pre, star = acl("orders", Op.READ), acl("ord", Op.READ, pattern=P.PREFIXED), acl("*", Op.READ)
    match = AclFilter(R.TOPIC, "orders", P.MATCH)
    assert [a for a in (lit, pre, star, acl("other", Op.READ)) if match.matches(a)] == [lit, pre, star]
    assert [a for a in (lit, pre) if AclFilter(R.ANY, None, P.PREFIXED).matches(a)] == [pre]
    assert not AclFilter(principal="User:bob").matches(lit)
    assert AclFilter(operation=Op.READ, permission=Perm.ALLOW).matches(lit)


def create(*acls):
    return {"creations": [{"resource_type": a.resource_type, "resource_name": a.resource_name,
                           "resource_pattern_type": a.pattern_type, "principal": a.principal, "host": a.host,
                           "operation": a.operation, "permission_type": a.permission} for a in acls]}


def any_filter(**kw):
    f = {"resource_type_filter": R.ANY, "resource_name_filter": None, "pattern_type_filter": P.ANY,
         "principal_filter": None, "host_filter": None, "operation": Op.ANY, "permission_type": Perm.ANY}
    f.update(kw)
    return f


def test_controller_creates_describes_deletes_and_snapshots_acls():
    h = Harness()
    alice_read = acl("orders", Op.READ)
    bad_cluster = acl("not-the-cluster", Op.ALTER, rtype=R.CLUSTER)
    resp = h.send("CreateAcls", create(alice_read, acl("pay-", Op.WRITE, pattern=P.PREFIXED), alice_read,
                                       bad_cluster, acl("", Op.READ), acl("t", Op.READ, principal="alice")))
    assert [r["error_code"] for r in resp["results"]] == [0, 0, 0] + [E.INVALID_REQUEST] * 3
    image = h.ctl.image
    assert sorted(a.resource_name for a in image.acls.values()) == ["orders", "pay-"]  # the repeat is one ACL
    assert len([r for r in h.records() if r.name == "AccessControlEntryRecord"]) == 2
    described = h.send("DescribeAcls", any_filter(resource_type_filter=R.TOPIC, resource_name_filter="pay-eu",
                                                   pattern_type_filter=P.MATCH))
    assert [(r["resource_name"], r["pattern_type"], r["acls"][0]["operation"]) for r in described["resources"]] == [
        ("pay-", P.PREFIXED, Op.WRITE)]
    snapshot = image_from_records(image.records(), image.offset)
    assert snapshot.acls == image.acls
    deleted = h.send("DeleteAcls", {"filters": [any_filter(resource_name_filter="orders"),
                                                any_filter(operation=Op.WRITE), any_filter(pattern_type_filter=P.UNKNOWN)]})
    results = deleted["filter_results"]
    assert [len(r["matching_acls"]) for r in results] == [1, 1, 0] and results[2]["error_code"] == E.INVALID_REQUEST
    assert not h.ctl.image.acls
    with pytest.raises(ReplayError):
        apply_records(EMPTY_IMAGE, [make("RemoveAccessControlEntryRecord", id=uuid.uuid4())])


def test_every_client_api_has_a_check():
    served = set(BROKER_APIS) | set(GROUP_API_VERSIONS) | set(TXN_API_VERSIONS) | {"FindCoordinator"}
    assert served - set(CHECKS) - UNCHECKED == set()


def _caller(acls, principal="User:bob"):
    image = apply_records(EMPTY_IMAGE, [make("AccessControlEntryRecord", id=uuid.uuid4(), resource_type=a.resource_type,
                                             resource_name=a.resource_name, pattern_type=a.pattern_type,
                                             principal=a.principal, host=a.host, operation=a.operation,
                                             permission_type=a.permission) for a in acls])
    return Caller(Authorizer(), image, principal, HOST)


def test_produce_is_narrowed_to_the_writable_topics():
    caller = _caller([acl("ok", Op.WRITE, principal="User:bob")])
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": "ok", "partition_data": [{"index": 0, "records": b""}]},
        {"name": "secret", "partition_data": [{"index": 0, "records": b""}, {"index": 1, "records": b""}]}]}
    verdict = CHECKS["Produce"](caller, 9, body)
    assert isinstance(verdict, Narrowed) and [t["name"] for t in verdict.body["topic_data"]] == ["ok"]
    answer = verdict.merge({"responses": [{"name": "ok", "partition_responses": [{"index": 0, "error_code": 0}]}]})
    assert [(t["name"], [p["error_code"] for p in t["partition_responses"]]) for t in answer["responses"]] == [
        ("ok", [0]), ("secret", [E.TOPIC_AUTHORIZATION_FAILED] * 2)]
    txn = CHECKS["Produce"](caller, 9, {**body, "transactional_id": "tx"})
    assert {p["error_code"] for t in txn["responses"] for p in t["partition_responses"]} == {
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}


def test_group_and_cluster_refusals():
    caller = _caller([acl("g", Op.READ, principal="User:bob", rtype=R.GROUP)])
    assert CHECKS["JoinGroup"](caller, 5, {"group_id": "g"}) is None
    assert CHECKS["Heartbeat"](caller, 4, {"group_id": "h"})["error_code"] == E.GROUP_AUTHORIZATION_FAILED
    assert CHECKS["DescribeLogDirs"](caller, 4, {"topics": None})["error_code"] == E.CLUSTER_AUTHORIZATION_FAILED
    assert CHECKS["InitProducerId"](caller, 4, {"transactional_id": None})["error_code"] == \
        E.CLUSTER_AUTHORIZATION_FAILED
    assert CHECKS["CreateAcls"](caller, 3, create(acl("t", Op.READ)))["results"][0]["error_code"] == \
        E.CLUSTER_AUTHORIZATION_FAILED


def test_consumer_group_protocol_checks():
    """ConsumerGroupHeartbeat: READ on the group and DESCRIBE on each named topic, as Kafka
    (and on each topic a regex matches: the coordinator asks);
    ConsumerGroupDescribe: DESCRIBE on the group, assignments narrowed to visible topics."""
    caller = _caller([acl("g", Op.READ, principal="User:bob", rtype=R.GROUP),
                      acl("orders", Op.DESCRIBE, principal="User:bob")])
    beat = {"group_id": "g", "subscribed_topic_names": ["orders"]}
    allowed = CHECKS["ConsumerGroupHeartbeat"](caller, 1, beat)
    # the coordinator is handed the caller's DESCRIBE check, for the topics a regex matches
    assert isinstance(allowed, Narrowed) and allowed.merge({"error_code": 0}) == {"error_code": 0}
    assert allowed.body[DESCRIBABLE]("orders") and not allowed.body[DESCRIBABLE]("secret")
    assert CHECKS["ConsumerGroupHeartbeat"](caller, 1, {**beat, "group_id": "h"})["error_code"] == \
        E.GROUP_AUTHORIZATION_FAILED
    refused = CHECKS["ConsumerGroupHeartbeat"](caller, 1, {**beat, "subscribed_topic_names": ["orders", "secret"]})
    assert refused["error_code"] == E.TOPIC_AUTHORIZATION_FAILED and "secret" in refused["error_message"]
    verdict = CHECKS["ConsumerGroupDescribe"](caller, 0, {"group_ids": ["g", "h"],
                                                          "include_authorized_operations": False})
    assert isinstance(verdict, Narrowed) and verdict.body["group_ids"] == ["g"]
    member = {"assignment": {"topic_partitions": [{"topic_name": "orders"}, {"topic_name": "secret"}]},
              "target_assignment": {"topic_partitions": [{"topic_name": "secret"}]}}
    answer = verdict.merge({"groups": [{"group_id": "g", "members": [member]}]})
    assert [g["group_id"] for g in answer["groups"]] == ["g", "h"]
    assert answer["groups"][1]["error_code"] == E.GROUP_AUTHORIZATION_FAILED
    seen = answer["groups"][0]["members"][0]
    assert seen["assignment"]["topic_partitions"] == [{"topic_name": "orders"}]
    assert seen["target_assignment"]["topic_partitions"] == []


def _populated(fields, version):
    """A message with one element in every array and a name in every string, so that a
    check that refuses or narrows has items to answer."""
    from kraft.protocol.codec import field_default

    out = {}
    for f in fields:
        if f.is_array and f.fields:
            out[f.key] = [_populated(f.fields, version)]
        elif f.type == "[]string":
            out[f.key] = ["x-name"]
        elif f.type == "[]int32":
            out[f.key] = [0]
        elif f.fields:
            out[f.key] = _populated(f.fields, version)
        elif f.type == "string":
            out[f.key] = "x-name"
        else:
            out[f.key] = field_default(f)
    return out


@pytest.mark.parametrize("api", sorted(CHECKS))
def test_every_refusal_and_narrowed_answer_encodes(api):
    """A caller with no ACLs, every version the broker serves: what the check answers (or
    merges into the router's empty answer) is a response the codec can write."""
    from kraft.protocol import codec

    served = {**BROKER_APIS, **GROUP_API_VERSIONS, **TXN_API_VERSIONS, "FindCoordinator": (0, 6)}
    lo, hi = served[api]
    caller = _caller([])
    for version in range(lo, hi + 1):
        spec = codec.spec_for(api, "request")
        body = codec.decode(api, "request", version,
                            codec.encode(api, "request", version, _populated(spec.fields, version)))
        verdict = CHECKS[api](caller, version, body) if api != "Metadata" else CHECKS[api](caller, version, body, True)
        if verdict is None:
            continue
        if isinstance(verdict, Narrowed):
            verdict = verdict.merge(codec.default_message(api, "response"))
        codec.encode(api, "response", version, verdict)


def _controller_apis():
    from cli.node import QUORUM_APIS
    from metadata.controller.quorum_controller import HANDLERS

    return sorted(set(HANDLERS) | QUORUM_APIS | {"DescribeQuorum", "DescribeCluster", "DescribeConfigs"})


@pytest.mark.parametrize("api", _controller_apis())
def test_every_controller_api_is_checked_and_its_refusal_encodes(api):
    from broker.authorization import controller_check
    from kraft.protocol import codec

    check = controller_check(api)
    assert check is not None
    caller = _caller([])
    versions = codec.versions_of(api)
    for version in range(versions.lo, versions.hi + 1):
        spec = codec.spec_for(api, "request")
        body = codec.decode(api, "request", version,
                            codec.encode(api, "request", version, _populated(spec.fields, version)))
        verdict = check(caller, version, body)
        if api not in CHECKS:  # the cluster's own traffic: CLUSTER_ACTION, refused here
            assert verdict is not None, (api, version)
        if verdict is None:
            continue
        if isinstance(verdict, Narrowed):
            verdict = verdict.merge(codec.default_message(api, "response"))
        codec.encode(api, "response", version, verdict)
