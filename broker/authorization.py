"""Which operation every client API needs, and the broker's one authorization hook.

``RequestAuthorization.handle`` sits between the connection and the request router
(``BrokerApi``) when ``authorizer.class.name`` is set.  For each API ``CHECKS`` names a
check that reads the request and answers one of three ways, as Kafka's KafkaApis does:

- ``None``: allowed as it is;
- a response body: refused as a whole (a group API without READ on its group is
  GROUP_AUTHORIZATION_FAILED, and the router never sees it);
- ``Narrowed(body, merge)``: the router answers the allowed part (``body``, with the denied
  topics, groups or keys left out) and ``merge`` adds the denied items to its answer with
  their error (TOPIC_AUTHORIZATION_FAILED per partition of a Produce, say), or drops what the
  caller may not see (Metadata's and ListGroups' listings).

So the router runs unchanged, and what a denied item would have done (an auto-created topic,
a read of a log) is never done.  The decisions themselves are ``kraft.security.authorizer``'s;
the ACLs are the broker's metadata image's, so a change applies once this broker has it.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, replace
from typing import Awaitable, Callable

from broker.deferred import Deferred
from broker.group.consumer_group import DESCRIBABLE
from kraft.protocol import rpc
from kraft.protocol.error_codes import ErrorCode
from kraft.security.authorizer import (
    AUTHORIZER_NAMES,
    CLUSTER_NAME,
    AclOperation as Op,
    Authorizer,
    ResourceType,
    every_operation,
    parse_super_users,
)
from metadata.controller.common import error_response as every_item_failed

log = logging.getLogger(__name__)

TOPIC_DENIED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
GROUP_DENIED = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
CLUSTER_DENIED = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
TXN_DENIED = int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
ZERO_UUID = uuid.UUID(int=0)
UNSET_OPERATIONS = -2147483648  # the *_authorized_operations fields' "not asked"
ACL_APIS = frozenset({"CreateAcls", "DeleteAcls", "DescribeAcls"})
# DescribeConfigs/AlterConfigs resource types (ConfigResource.Type)
_CONFIG_TOPIC, _CONFIG_BROKER, _CONFIG_BROKER_LOGGER, _CONFIG_GROUP = 2, 4, 8, 32


@dataclass(frozen=True, slots=True)
class Narrowed:
    body: dict  # what the router answers
    merge: Callable[[dict], dict]  # its answer -> the client's


class Caller:
    """One request's principal and host, with the ACLs of the image at hand."""

    __slots__ = ("authorizer", "index", "principal", "host", "image")

    def __init__(self, authorizer: Authorizer, image, principal: str, host: str):
        self.authorizer = authorizer
        self.image = image
        self.index = image.acl_index
        self.principal = principal
        self.host = host

    def may(self, op: Op, resource_type: ResourceType, name: str) -> bool:
        allowed = self.authorizer.authorize(self.index, self.principal, self.host, op, resource_type, name)
        if not allowed:
            log.debug("denied %s %s on %s %r from %s", self.principal, op.name, resource_type.name, name, self.host)
        return allowed

    def topic(self, op: Op, name: str) -> bool:
        return self.may(op, ResourceType.TOPIC, name)

    def group(self, op: Op, name: str) -> bool:
        return self.may(op, ResourceType.GROUP, name)

    def txn(self, op: Op, name: str) -> bool:
        return self.may(op, ResourceType.TRANSACTIONAL_ID, name)

    def cluster(self, op: Op) -> bool:
        return self.may(op, ResourceType.CLUSTER, CLUSTER_NAME)

    def operations(self, resource_type: ResourceType, name: str) -> int:
        return self.authorizer.authorized_operations(self.index, self.principal, self.host, resource_type, name)


class RequestAuthorization:
    """The hook ``BrokerApi.handle`` calls when an authorizer is configured."""

    def __init__(self, authorizer: Authorizer, image: Callable[[], object], auto_create_topics: bool = True,
                 check_of: Callable[[str], Callable | None] | None = None):
        """``check_of``: API name -> its check (default: the broker's table, ``CHECKS``)."""
        self.authorizer = authorizer
        self.image = image
        self.auto_create_topics = auto_create_topics
        self.check_of = check_of or CHECKS.get

    @classmethod
    def from_config(cls, config, image: Callable[[], object], check_of=None) -> "RequestAuthorization | None":
        """None unless ``authorizer.class.name`` names the StandardAuthorizer."""
        if (config["authorizer.class.name"] or "").strip() not in AUTHORIZER_NAMES:
            return None
        authorizer = Authorizer(parse_super_users(config["super.users"]), config["allow.everyone.if.no.acl.found"])
        return cls(authorizer, image, config["auto.create.topics.enable"], check_of)

    async def handle(self, request: rpc.Request, route: Callable[[rpc.Request], Awaitable]):
        check = self.check_of(request.api)
        if check is None:
            return await route(request)
        caller = Caller(self.authorizer, self.image(), request.principal, request.client_host)
        if request.api == "Metadata":
            verdict = check(caller, request.version, request.body, self.auto_create_topics)
        else:
            verdict = check(caller, request.version, request.body)
        if verdict is None:
            return await route(request)
        if not isinstance(verdict, Narrowed):
            return verdict
        answer = await route(replace(request, body=verdict.body))
        if answer is None:  # acks=0
            return None
        if isinstance(answer, Deferred):
            finish = answer.finish

            async def merged():
                return verdict.merge(await finish())
            return Deferred(merged)
        return verdict.merge(answer)


def with_every_operation(api: str, version: int, body: dict, answer: dict | None) -> dict | None:
    """``answer`` with the authorized operations the request asked for set as Kafka sets
    them without an authorizer: every operation of the resource (admin UIs read them to
    decide what to offer).  With an authorizer, ``RequestAuthorization`` sets them instead."""
    if not isinstance(answer, dict):
        return answer
    if api == "Metadata" and version >= 8:
        if body.get("include_topic_authorized_operations"):
            for t in answer["topics"]:
                t["topic_authorized_operations"] = every_operation(ResourceType.TOPIC)
        if version <= 10 and body.get("include_cluster_authorized_operations"):
            answer["cluster_authorized_operations"] = every_operation(ResourceType.CLUSTER)
    elif api == "DescribeCluster" and body.get("include_cluster_authorized_operations"):
        answer["cluster_authorized_operations"] = every_operation(ResourceType.CLUSTER)
    elif api in ("DescribeGroups", "ConsumerGroupDescribe") and body.get("include_authorized_operations"):
        for g in answer["groups"]:
            g["authorized_operations"] = every_operation(ResourceType.GROUP)
    return answer


def security_disabled(api: str, body: dict) -> dict:
    """The ACL APIs' answer when no authorizer is configured, as Kafka's."""
    return every_item_failed(api, body, ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker")


# ---------------------------------------------------------------------------------- helpers


def _split(items, allowed: Callable) -> tuple[list, list]:
    yes, no = [], []
    for item in items:
        (yes if allowed(item) else no).append(item)
    return yes, no


def _appending(key: str, denied: list) -> Callable[[dict], dict]:
    def merge(answer: dict) -> dict:
        answer[key] = list(answer.get(key) or []) + denied
        return answer
    return merge


def _per_topic(caller: Caller, op: Op, body: dict, topics_key: str, name_key: str, answer_key: str,
               denied_topic: Callable[[dict], dict]):
    """Leave out the topics ``op`` is denied on; the answer gets ``denied_topic(t)`` for each."""
    allowed, denied = _split(body[topics_key], lambda t: caller.topic(op, t[name_key]))
    if not denied:
        return None
    return Narrowed({**body, topics_key: allowed}, _appending(answer_key, [denied_topic(t) for t in denied]))


def _error_or(api: str, version: int, code: int, fallback: dict) -> dict:
    return rpc.error_response(api, version, code) or fallback


# ---------------------------------------------------------------------------------- data APIs


def _produce(caller: Caller, version: int, body: dict):
    def partitions(t, code):
        return {"name": t["name"], "partition_responses": [
            {"index": p["index"], "error_code": code, "base_offset": -1, "log_append_time_ms": -1,
             "log_start_offset": -1} for p in t["partition_data"]]}
    txn_id = body.get("transactional_id")
    if txn_id is not None and not caller.txn(Op.WRITE, txn_id):
        if body["acks"] == 0:  # no answer is awaited: the records are dropped
            return Narrowed({**body, "topic_data": []}, lambda answer: answer)
        return {"responses": [partitions(t, TXN_DENIED) for t in body["topic_data"]]}
    return _per_topic(caller, Op.WRITE, body, "topic_data", "name", "responses",
                      lambda t: partitions(t, TOPIC_DENIED))


def _fetch_partition_error(p: dict, code: int) -> dict:
    return {"partition_index": p["partition"], "error_code": code, "high_watermark": -1,
            "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
            "preferred_read_replica": -1, "records": b""}  # (librdkafka refuses null records)


def _fetch(caller: Caller, version: int, body: dict):
    replica_id = body["replica_state"]["replica_id"] if version >= 15 else body["replica_id"]

    def denied_topic(t):
        return {"topic": t.get("topic"), "topic_id": t.get("topic_id"),
                "partitions": [_fetch_partition_error(p, TOPIC_DENIED) for p in t["partitions"]]}
    if replica_id >= 0:  # a follower: the cluster's own
        if caller.cluster(Op.CLUSTER_ACTION):
            return None
        return {"error_code": 0, "session_id": 0, "responses": [denied_topic(t) for t in body["topics"]]}

    def name(t):
        if version < 13:
            return t["topic"]
        topic = caller.image.topic_by_id(t["topic_id"])
        return topic.name if topic is not None else None  # unknown: the router says so

    allowed, denied = _split(body["topics"], lambda t: name(t) is None or caller.topic(Op.READ, name(t)))
    if not denied:
        return None

    def merge(answer):
        if not answer.get("error_code"):
            answer["responses"] = list(answer["responses"]) + [denied_topic(t) for t in denied]
        return answer
    return Narrowed({**body, "topics": allowed}, merge)


def _list_offsets(caller: Caller, version: int, body: dict):
    return _per_topic(caller, Op.DESCRIBE, body, "topics", "name", "topics", lambda t: {
        "name": t["name"], "partitions": [
            {"partition_index": p["partition_index"], "error_code": TOPIC_DENIED, "timestamp": -1, "offset": -1,
             "leader_epoch": -1, "old_style_offsets": []} for p in t["partitions"]]})


def _offset_for_leader_epoch(caller: Caller, version: int, body: dict):
    if caller.cluster(Op.CLUSTER_ACTION):
        return None
    return _per_topic(caller, Op.DESCRIBE, body, "topics", "topic", "topics", lambda t: {
        "topic": t["topic"], "partitions": [
            {"partition": p["partition"], "error_code": TOPIC_DENIED, "leader_epoch": -1, "end_offset": -1}
            for p in t["partitions"]]})


def _describe_producers(caller: Caller, version: int, body: dict):
    return _per_topic(caller, Op.READ, body, "topics", "name", "topics", lambda t: {
        "name": t["name"], "partitions": [
            {"partition_index": i, "error_code": TOPIC_DENIED, "error_message": None, "active_producers": []}
            for i in t["partition_indexes"]]})


def _delete_records(caller: Caller, version: int, body: dict):
    return _per_topic(caller, Op.DELETE, body, "topics", "name", "topics", lambda t: {
        "name": t["name"], "partitions": [
            {"partition_index": p["partition_index"], "error_code": TOPIC_DENIED, "low_watermark": -1}
            for p in t["partitions"]]})


def _metadata(caller: Caller, version: int, body: dict, auto_create_topics: bool):
    """Only the topics the caller may DESCRIBE; a topic that would be auto-created only
    with CREATE on the cluster or the topic (else TOPIC_AUTHORIZATION_FAILED, as Kafka)."""
    requested = body["topics"]
    with_topic_ops = version >= 8 and body.get("include_topic_authorized_operations")
    with_cluster_ops = 8 <= version <= 10 and body.get("include_cluster_authorized_operations")

    def finish(answer, keep=None):
        topics = [t for t in answer["topics"] if (keep(t) if keep else
                  t["name"] is None or caller.topic(Op.DESCRIBE, t["name"]))]
        if with_topic_ops:  # every named topic, as Kafka (an unknown one's are what its name allows)
            for t in topics:
                if t["name"]:
                    t["topic_authorized_operations"] = caller.operations(ResourceType.TOPIC, t["name"])
        answer["topics"] = topics
        if with_cluster_ops:
            answer["cluster_authorized_operations"] = (caller.operations(ResourceType.CLUSTER, CLUSTER_NAME)
                                                       if caller.cluster(Op.DESCRIBE) else 0)
        return answer

    if requested is None or (version == 0 and not requested):  # every topic: the visible ones
        return Narrowed(body, finish)
    image = caller.image
    may_create_any = None
    kept, denied = [], []
    for t in requested:
        name = t["name"]
        if name is None and t.get("topic_id"):
            found = image.topic_by_id(t["topic_id"])
            name = found.name if found is not None else None
        if name is None:
            kept.append(t)  # an unknown id or a bad request: the router answers it
            continue
        if not caller.topic(Op.DESCRIBE, name):
            # (asked by id, the id is answered; by name, not: Kafka's rule)
            denied.append({"error_code": TOPIC_DENIED, "name": t["name"],
                           "topic_id": t["topic_id"] if t["name"] is None else ZERO_UUID, "is_internal": False,
                           "partitions": [], "topic_authorized_operations": UNSET_OPERATIONS})
            continue
        if auto_create_topics and body.get("allow_auto_topic_creation", True) and image.topic(name) is None:
            if may_create_any is None:
                may_create_any = caller.cluster(Op.CREATE)
            if not may_create_any and not caller.topic(Op.CREATE, name):
                denied.append({"error_code": TOPIC_DENIED, "name": name, "is_internal": False, "partitions": [],
                               "topic_authorized_operations": UNSET_OPERATIONS})
                continue
        kept.append(t)
    if not denied and version > 0:
        if not (with_topic_ops or with_cluster_ops):
            return None
        return Narrowed(body, lambda answer: finish(answer, keep=lambda t: True))
    kept_names = {t["name"] for t in kept}

    def merge(answer):
        # v0 reads an empty list as "every topic": keep only what was asked
        finish(answer, keep=lambda t: version > 0 or t["name"] in kept_names)
        answer["topics"] = answer["topics"] + denied
        return answer
    return Narrowed({**body, "topics": kept}, merge)


def _describe_cluster(caller: Caller, version: int, body: dict):
    if not body.get("include_cluster_authorized_operations"):
        return None

    def merge(answer):
        answer["cluster_authorized_operations"] = (caller.operations(ResourceType.CLUSTER, CLUSTER_NAME)
                                                   if caller.cluster(Op.DESCRIBE) else 0)
        return answer
    return Narrowed(body, merge)


# ---------------------------------------------------------------------------------- admin APIs


def _create_topics(caller: Caller, version: int, body: dict):
    """CREATE on the cluster or on each topic; a created topic's configs only with
    DESCRIBE_CONFIGS on it (else its topic_config_error_code)."""
    on_cluster = caller.cluster(Op.CREATE)
    allowed, denied = _split(body["topics"], lambda t: on_cluster or caller.topic(Op.CREATE, t["name"]))
    denied_answers = [{"name": t["name"], "error_code": TOPIC_DENIED, "error_message": "Authorization failed.",
                       "num_partitions": -1, "replication_factor": -1, "configs": None} for t in denied]
    if not allowed:
        return {"throttle_time_ms": 0, "topics": denied_answers}

    def merge(answer):
        for t in answer["topics"]:
            if not t.get("error_code") and version >= 5 and not caller.topic(Op.DESCRIBE_CONFIGS, t["name"]):
                t.update(topic_config_error_code=TOPIC_DENIED, configs=None)
        answer["topics"] = list(answer["topics"]) + denied_answers
        return answer
    return Narrowed({**body, "topics": allowed}, merge)


def _delete_topics(caller: Caller, version: int, body: dict):
    image = caller.image
    if version >= 6:
        def name(t):
            if t["name"] is not None:
                return t["name"]
            found = image.topic_by_id(t["topic_id"])
            return found.name if found is not None else None
        allowed, denied = _split(body["topics"], lambda t: name(t) is None or caller.topic(Op.DELETE, name(t)))
        denied_answers = [{"name": t["name"], "topic_id": t["topic_id"], "error_code": TOPIC_DENIED,
                           "error_message": None} for t in denied]
        narrowed = {**body, "topics": allowed}
    else:
        allowed, denied = _split(body["topic_names"], lambda n: caller.topic(Op.DELETE, n))
        denied_answers = [{"name": n, "error_code": TOPIC_DENIED} for n in denied]
        narrowed = {**body, "topic_names": allowed}
    if not denied:
        return None
    if not allowed:
        return {"throttle_time_ms": 0, "responses": denied_answers}
    return Narrowed(narrowed, _appending("responses", denied_answers))


def _create_partitions(caller: Caller, version: int, body: dict):
    allowed, denied = _split(body["topics"], lambda t: caller.topic(Op.ALTER, t["name"]))
    if not denied:
        return None
    answers = [{"name": t["name"], "error_code": TOPIC_DENIED, "error_message": "The topic authorization is failed."}
               for t in denied]
    if not allowed:
        return {"throttle_time_ms": 0, "results": answers}
    return Narrowed({**body, "topics": allowed}, _appending("results", answers))


def _config_denial(caller: Caller, op: Op, resource: dict) -> int:
    """0 when ``op`` is allowed on the config resource, else its error code."""
    rtype, name = resource["resource_type"], resource["resource_name"]
    if rtype == _CONFIG_TOPIC:
        return 0 if caller.topic(op, name) else TOPIC_DENIED
    if rtype == _CONFIG_GROUP:
        return 0 if caller.group(op, name) else GROUP_DENIED
    if rtype in (_CONFIG_BROKER, _CONFIG_BROKER_LOGGER):
        return 0 if caller.cluster(op) else CLUSTER_DENIED
    return 0  # an unknown type: the router refuses it


def _configs(op: Op, answer_key: str, extra: dict):
    def check(caller: Caller, version: int, body: dict):
        denial = {id(r): _config_denial(caller, op, r) for r in body["resources"]}
        allowed = [r for r in body["resources"] if not denial[id(r)]]
        if len(allowed) == len(body["resources"]):
            return None
        answers = [{"error_code": denial[id(r)], "error_message": None, "resource_type": r["resource_type"],
                    "resource_name": r["resource_name"], **extra}
                   for r in body["resources"] if denial[id(r)]]
        if not allowed:
            return {"throttle_time_ms": 0, answer_key: answers}
        return Narrowed({**body, "resources": allowed}, _appending(answer_key, answers))
    return check


def _cluster_op(api: str, op: Op):
    """An API that needs ``op`` on the cluster: refused with CLUSTER_AUTHORIZATION_FAILED in
    its top-level error code, or in every item's."""
    def check(caller: Caller, version: int, body: dict):
        if caller.cluster(op):
            return None
        return rpc.error_response(api, version, CLUSTER_DENIED) or every_item_failed(api, body, ErrorCode(CLUSTER_DENIED))
    return check


def _describe_topic_partitions(caller: Caller, version: int, body: dict):
    """The handler filters (``broker.describe_topic_partitions``): the page it fills must
    count only the topics the caller may describe."""
    from broker.describe_topic_partitions import MAY_DESCRIBE, TOPIC_OPERATIONS

    return Narrowed({**body, MAY_DESCRIBE: lambda name: caller.topic(Op.DESCRIBE, name),
                     TOPIC_OPERATIONS: lambda name: caller.operations(ResourceType.TOPIC, name)}, lambda answer: answer)


def _init_producer_id(caller: Caller, version: int, body: dict):
    txn_id = body["transactional_id"]
    if txn_id is not None:
        if caller.txn(Op.WRITE, txn_id):
            return None
        code = TXN_DENIED
    elif caller.cluster(Op.IDEMPOTENT_WRITE) or caller.authorizer.authorize_any(
            caller.index, caller.principal, caller.host, Op.WRITE, ResourceType.TOPIC):
        return None
    else:
        code = CLUSTER_DENIED
    return {"error_code": code, "producer_id": -1, "producer_epoch": -1}


def _write_txn_markers(caller: Caller, version: int, body: dict):
    if caller.cluster(Op.ALTER) or caller.cluster(Op.CLUSTER_ACTION):
        return None
    return {"markers": [{"producer_id": m["producer_id"], "topics": [
        {"name": t["name"], "partitions": [{"partition_index": i, "error_code": CLUSTER_DENIED}
                                           for i in t["partition_indexes"]]} for t in m["topics"]]}
        for m in body["markers"]]}


# ---------------------------------------------------------------------------------- groups


def _group_read(api: str):
    def check(caller: Caller, version: int, body: dict):
        if caller.group(Op.READ, body["group_id"]):
            return None
        return rpc.error_response(api, version, GROUP_DENIED)
    return check


def _same(answer: dict) -> dict:
    return answer


def _consumer_group_heartbeat(caller: Caller, version: int, body: dict):
    """As Kafka: READ on the group, and DESCRIBE on every topic named in the subscription;
    topics a regex matches are left out by the coordinator unless the caller may DESCRIBE
    them (KAFKA-18813)."""
    if not caller.group(Op.READ, body["group_id"]):
        return rpc.error_response("ConsumerGroupHeartbeat", version, GROUP_DENIED)
    denied = sorted(t for t in body.get("subscribed_topic_names") or [] if not caller.topic(Op.DESCRIBE, t))
    if not denied:  # a regex's matches are filtered by the coordinator with this
        return Narrowed({**body, DESCRIBABLE: lambda topic: caller.topic(Op.DESCRIBE, topic)}, _same)
    return {**rpc.error_response("ConsumerGroupHeartbeat", version, TOPIC_DENIED),
            "error_message": f"The group is not authorized to describe topics {', '.join(denied)}."}


def _every_partition(body: dict, code: int) -> list[dict]:
    return [{"name": t["name"], "partitions": [{"partition_index": p["partition_index"], "error_code": code}
                                               for p in t["partitions"]]} for t in body["topics"]]


def _offset_commit(caller: Caller, version: int, body: dict):
    if not caller.group(Op.READ, body["group_id"]):
        return {"throttle_time_ms": 0, "topics": _every_partition(body, GROUP_DENIED)}
    return _per_topic(caller, Op.READ, body, "topics", "name", "topics",
                      lambda t: _every_partition({"topics": [t]}, TOPIC_DENIED)[0])


def _txn_offset_commit(caller: Caller, version: int, body: dict):
    if not caller.txn(Op.WRITE, body["transactional_id"]):
        return {"throttle_time_ms": 0, "topics": _every_partition(body, TXN_DENIED)}
    return _offset_commit(caller, version, body)


def _offset_fetch_partitions(t: dict, code: int) -> dict:
    return {"name": t["name"], "partitions": [
        {"partition_index": i, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
         "error_code": code} for i in t["partition_indexes"] or ()]}


def _offset_fetch(caller: Caller, version: int, body: dict):
    """DESCRIBE on the group, then only the topics the caller may DESCRIBE: named ones are
    TOPIC_AUTHORIZATION_FAILED, and "every topic" lists only the visible ones."""
    def visible(topics):
        return [t for t in topics if caller.topic(Op.DESCRIBE, t["name"])]

    if version < 8:
        if not caller.group(Op.DESCRIBE, body["group_id"]):
            if version >= 2:
                return {"throttle_time_ms": 0, "error_code": GROUP_DENIED, "topics": []}
            return {"topics": [_offset_fetch_partitions(t, GROUP_DENIED) for t in body["topics"] or ()]}
        if body["topics"] is None:
            return Narrowed(body, lambda answer: {**answer, "topics": visible(answer["topics"])})
        allowed, denied = _split(body["topics"], lambda t: caller.topic(Op.DESCRIBE, t["name"]))
        if not denied:
            return None
        return Narrowed({**body, "topics": allowed},
                        _appending("topics", [_offset_fetch_partitions(t, TOPIC_DENIED) for t in denied]))
    groups, denied_groups, denied_topics = [], [], {}
    for g in body["groups"]:
        if not caller.group(Op.DESCRIBE, g["group_id"]):
            denied_groups.append({"group_id": g["group_id"], "error_code": GROUP_DENIED, "topics": []})
            continue
        if g["topics"] is not None:
            allowed, denied = _split(g["topics"], lambda t: caller.topic(Op.DESCRIBE, t["name"]))
            if denied:
                denied_topics[g["group_id"]] = [_offset_fetch_partitions(t, TOPIC_DENIED) for t in denied]
                g = {**g, "topics": allowed}
        groups.append(g)
    if not groups:
        return {"throttle_time_ms": 0, "groups": denied_groups}

    def merge(answer):
        for g in answer["groups"]:
            g["topics"] = visible(g["topics"]) + denied_topics.get(g["group_id"], [])
        answer["groups"] = list(answer["groups"]) + denied_groups
        return answer
    return Narrowed({**body, "groups": groups}, merge)


def _list_groups(caller: Caller, version: int, body: dict):
    if caller.cluster(Op.DESCRIBE):
        return None
    return Narrowed(body, lambda answer: {**answer, "groups": [
        g for g in answer["groups"] if caller.group(Op.DESCRIBE, g["group_id"])]})


def _groups_described(caller: Caller, body: dict, ids_key: str, denied_entry: Callable[[str], dict],
                      narrow: Callable[[dict], None] | None = None):
    """DescribeGroups and ConsumerGroupDescribe: DESCRIBE on each group, a denied one answered
    with ``denied_entry(id)``; the described ones get their authorized operations when asked,
    and ``narrow`` trims each of them."""
    allowed, denied = _split(body[ids_key], lambda g: caller.group(Op.DESCRIBE, g))
    answers = [denied_entry(g) for g in denied]
    if not allowed:
        return {"throttle_time_ms": 0, "groups": answers}

    def merge(answer):
        for g in answer["groups"]:
            if body.get("include_authorized_operations"):
                g["authorized_operations"] = caller.operations(ResourceType.GROUP, g["group_id"])
            if narrow is not None:
                narrow(g)
        answer["groups"] = list(answer["groups"]) + answers
        return answer
    return Narrowed({**body, ids_key: allowed}, merge)


def _describe_groups(caller: Caller, version: int, body: dict):
    return _groups_described(caller, body, "groups", lambda g: {
        "error_code": GROUP_DENIED, "group_id": g, "group_state": "", "protocol_type": "", "protocol_data": "",
        "members": [], "authorized_operations": UNSET_OPERATIONS})


def _consumer_group_describe(caller: Caller, version: int, body: dict):
    def visible_topics_only(group):
        for m in group["members"]:
            for key in ("assignment", "target_assignment"):
                m[key] = {"topic_partitions": [t for t in m[key]["topic_partitions"]
                                               if caller.topic(Op.DESCRIBE, t["topic_name"])]}
    return _groups_described(caller, body, "group_ids", lambda g: {
        "error_code": GROUP_DENIED, "error_message": None, "group_id": g, "group_state": "", "group_epoch": 0,
        "assignment_epoch": 0, "assignor_name": "", "members": [], "authorized_operations": UNSET_OPERATIONS},
        visible_topics_only)


def _delete_groups(caller: Caller, version: int, body: dict):
    allowed, denied = _split(body["groups_names"], lambda g: caller.group(Op.DELETE, g))
    if not denied:
        return None
    answers = [{"group_id": g, "error_code": GROUP_DENIED} for g in denied]
    if not allowed:
        return {"throttle_time_ms": 0, "results": answers}
    return Narrowed({**body, "groups_names": allowed}, _appending("results", answers))


def _offset_delete(caller: Caller, version: int, body: dict):
    if not caller.group(Op.DELETE, body["group_id"]):
        return {"error_code": GROUP_DENIED, "throttle_time_ms": 0, "topics": []}
    return _per_topic(caller, Op.READ, body, "topics", "name", "topics",
                      lambda t: _every_partition({"topics": [t]}, TOPIC_DENIED)[0])


def _find_coordinator(caller: Caller, version: int, body: dict):
    def denial(key_type: int, key: str) -> int:
        if key_type == 0:
            return 0 if caller.group(Op.DESCRIBE, key) else GROUP_DENIED
        if key_type == 1:
            return 0 if caller.txn(Op.DESCRIBE, key) else TXN_DENIED
        return 0

    key_type = body.get("key_type", 0)
    if version < 4:
        code = denial(key_type, body["key"])
        return None if not code else {"error_code": code, "error_message": None, "node_id": -1, "host": "",
                                      "port": -1}
    codes = {key: denial(key_type, key) for key in body["coordinator_keys"]}
    allowed = [k for k in body["coordinator_keys"] if not codes[k]]
    if len(allowed) == len(body["coordinator_keys"]):
        return None
    answers = [{"key": k, "node_id": -1, "host": "", "port": -1, "error_code": c, "error_message": None}
               for k, c in codes.items() if c]
    if not allowed:
        return {"throttle_time_ms": 0, "coordinators": answers}
    return Narrowed({**body, "coordinator_keys": allowed}, _appending("coordinators", answers))


# ---------------------------------------------------------------------------------- transactions


def _txn_write(api: str):
    def check(caller: Caller, version: int, body: dict):
        return None if caller.txn(Op.WRITE, body["transactional_id"]) else rpc.error_response(api, version, TXN_DENIED)
    return check


def _add_offsets_to_txn(caller: Caller, version: int, body: dict):
    if not caller.txn(Op.WRITE, body["transactional_id"]):
        return {"throttle_time_ms": 0, "error_code": TXN_DENIED}
    if not caller.group(Op.READ, body["group_id"]):
        return {"throttle_time_ms": 0, "error_code": GROUP_DENIED}
    return None


def _add_partitions_to_txn(caller: Caller, version: int, body: dict):
    if version >= 4:  # from brokers verifying a transaction (KIP-890)
        return None if caller.cluster(Op.CLUSTER_ACTION) else {"throttle_time_ms": 0, "error_code": CLUSTER_DENIED,
                                                               "results_by_transaction": []}
    topics = body["v3_and_below_topics"]

    def answer(code_of):
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
            {"name": t["name"], "results_by_partition": [
                {"partition_index": i, "partition_error_code": code_of(t)} for i in t["partitions"]]}
            for t in topics]}
    if not caller.txn(Op.WRITE, body["v3_and_below_transactional_id"]):
        return answer(lambda t: TXN_DENIED)
    denied = {t["name"] for t in topics if not caller.topic(Op.WRITE, t["name"])}
    if not denied:
        return None
    # As Kafka: none is added when one is denied
    return answer(lambda t: TOPIC_DENIED if t["name"] in denied else int(ErrorCode.OPERATION_NOT_ATTEMPTED))


def _describe_transactions(caller: Caller, version: int, body: dict):
    allowed, denied = _split(body["transactional_ids"], lambda t: caller.txn(Op.DESCRIBE, t))
    answers = [{"error_code": TXN_DENIED, "transactional_id": t, "transaction_state": "",
                "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1,
                "producer_epoch": -1, "topics": []} for t in denied]

    def merge(answer):
        for state in answer["transaction_states"]:  # only the partitions of visible topics
            state["topics"] = [t for t in state["topics"] if caller.topic(Op.DESCRIBE, t["topic"])]
        answer["transaction_states"] = list(answer["transaction_states"]) + answers
        return answer
    if not allowed:
        return {"throttle_time_ms": 0, "transaction_states": answers}
    return Narrowed({**body, "transactional_ids": allowed}, merge)


def _list_transactions(caller: Caller, version: int, body: dict):
    return Narrowed(body, lambda answer: {**answer, "transaction_states": [
        s for s in answer["transaction_states"] if caller.txn(Op.DESCRIBE, s["transactional_id"])]})


# ---------------------------------------------------------------------------------- the table

CHECKS: dict[str, Callable] = {
    "Produce": _produce,
    "Fetch": _fetch,
    "ListOffsets": _list_offsets,
    "OffsetForLeaderEpoch": _offset_for_leader_epoch,
    "Metadata": _metadata,
    "DescribeCluster": _describe_cluster,
    "DescribeProducers": _describe_producers,
    "CreateTopics": _create_topics,
    "DeleteTopics": _delete_topics,
    "CreatePartitions": _create_partitions,
    "DescribeConfigs": _configs(Op.DESCRIBE_CONFIGS, "results", {"configs": []}),
    "AlterConfigs": _configs(Op.ALTER_CONFIGS, "responses", {}),
    "IncrementalAlterConfigs": _configs(Op.ALTER_CONFIGS, "responses", {}),
    "InitProducerId": _init_producer_id,
    "WriteTxnMarkers": _write_txn_markers,
    "DeleteRecords": _delete_records,
    "ElectLeaders": _cluster_op("ElectLeaders", Op.ALTER),
    "UnregisterBroker": _cluster_op("UnregisterBroker", Op.ALTER),
    "AddRaftVoter": _cluster_op("AddRaftVoter", Op.ALTER),
    "RemoveRaftVoter": _cluster_op("RemoveRaftVoter", Op.ALTER),
    "AlterPartitionReassignments": _cluster_op("AlterPartitionReassignments", Op.ALTER),
    "ListPartitionReassignments": _cluster_op("ListPartitionReassignments", Op.DESCRIBE),
    "AlterClientQuotas": _cluster_op("AlterClientQuotas", Op.ALTER_CONFIGS),
    "UpdateFeatures": _cluster_op("UpdateFeatures", Op.ALTER),
    "DescribeTopicPartitions": _describe_topic_partitions,
    "DescribeClientQuotas": _cluster_op("DescribeClientQuotas", Op.DESCRIBE_CONFIGS),
    "DescribeLogDirs": _cluster_op("DescribeLogDirs", Op.DESCRIBE),
    "DescribeQuorum": _cluster_op("DescribeQuorum", Op.DESCRIBE),
    "DescribeUserScramCredentials": _cluster_op("DescribeUserScramCredentials", Op.DESCRIBE),
    "AlterUserScramCredentials": _cluster_op("AlterUserScramCredentials", Op.ALTER),
    "DescribeAcls": _cluster_op("DescribeAcls", Op.DESCRIBE),
    "CreateAcls": _cluster_op("CreateAcls", Op.ALTER),
    "DeleteAcls": _cluster_op("DeleteAcls", Op.ALTER),
    "FindCoordinator": _find_coordinator,
    "JoinGroup": _group_read("JoinGroup"),
    "SyncGroup": _group_read("SyncGroup"),
    "Heartbeat": _group_read("Heartbeat"),
    "LeaveGroup": _group_read("LeaveGroup"),
    "OffsetCommit": _offset_commit,
    "TxnOffsetCommit": _txn_offset_commit,
    "OffsetFetch": _offset_fetch,
    "ListGroups": _list_groups,
    "DescribeGroups": _describe_groups,
    "DeleteGroups": _delete_groups,
    "ConsumerGroupHeartbeat": _consumer_group_heartbeat,
    "ConsumerGroupDescribe": _consumer_group_describe,
    "OffsetDelete": _offset_delete,
    "AddPartitionsToTxn": _add_partitions_to_txn,
    "AddOffsetsToTxn": _add_offsets_to_txn,
    "EndTxn": _txn_write("EndTxn"),
    "DescribeTransactions": _describe_transactions,
    "ListTransactions": _list_transactions,
}
# Every API a client may call has a check; ApiVersions (and SASL's) need none.
UNCHECKED = frozenset({"ApiVersions"})


def controller_check(api: str) -> Callable | None:
    """The check of a request on a controller listener (Kafka's ControllerApis): the
    broker's where the API is one a broker serves too (CreateTopics sent with
    ``--bootstrap-controller``, DescribeQuorum, the ACL APIs, ...), else the cluster's
    own traffic (Raft, broker registration and heartbeats, AlterPartition), which needs
    CLUSTER_ACTION on the cluster (ElectLeaders: ALTER).  The nodes' principals are
    super users, so only an operator's or a stranger's request is ever refused."""
    if api in UNCHECKED:
        return None
    return CHECKS.get(api) or _cluster_op(api, Op.ALTER if api == "ElectLeaders" else Op.CLUSTER_ACTION)


__all__ = ["ACL_APIS", "CHECKS", "RequestAuthorization", "UNCHECKED", "controller_check", "security_disabled"]
