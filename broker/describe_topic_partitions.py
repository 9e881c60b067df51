"""DescribeTopicPartitions (KIP-966): topics' partitions a page at a time, which Kafka 4's
admin client (``describeTopics``, ``kafka-topics --describe``) asks for in place of Metadata.

As Kafka's handler: the topics named (or, with none named, every topic the caller may
describe) in name order from the cursor's topic on, that topic from the cursor's partition;
at most ``ResponsePartitionLimit`` partitions (and at most ``max.request.partition.size.limit``),
the answer's cursor pointing at the first partition left out.  A named topic that does not
exist is answered UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name);
with none named, one deleted meanwhile is left out.  kraft has no eligible leader replicas
(KIP-966's ELR): both of their lists are empty, as Kafka's are with ELR off.
"""

from __future__ import annotations

from collections.abc import Callable

from kraft.protocol.error_codes import ErrorCode
from kraft.security.authorizer import ResourceType, every_operation
from metadata.controller.topics import INTERNAL_TOPICS

# Put into the request by the authorization layer (``broker.authorization``) when ACLs are
# on: ``name -> bool``, whether the caller may DESCRIBE the topic, and ``name -> int``, its
# authorized operations.  Without them every topic is visible with every operation, as
# Kafka answers without an authorizer.
MAY_DESCRIBE = "kraft_may_describe"
TOPIC_OPERATIONS = "kraft_topic_operations"
TOPIC_DENIED = 29  # TOPIC_AUTHORIZATION_FAILED


class InvalidRequest(ValueError):
    pass


def error_answer(body: dict, code: int) -> dict:
    """Every named topic failed with ``code`` (Kafka's getErrorResponse)."""
    return {"throttle_time_ms": 0, "next_cursor": None, "topics": [
        {"error_code": int(code), "name": t["name"], "is_internal": False, "partitions": []} for t in body["topics"]]}


def describe(body: dict, image, partitions_of: Callable, limit_max: int, legal_name: Callable[[str], bool]) -> dict:
    """The answer to ``body`` from ``image``.  ``partitions_of(topic)``: the topic's
    partitions as Metadata answers them; ``limit_max``: max.request.partition.size.limit.
    Raises InvalidRequest for a cursor Kafka refuses."""
    cursor = body.get("cursor")
    cursor_topic = cursor["topic_name"] if cursor is not None else ""
    every = not body["topics"]
    named = image.topics_by_name if every else [t["name"] for t in body["topics"]]
    names = sorted({n for n in named if n >= cursor_topic})
    if cursor is not None and not every and cursor_topic not in names:
        raise InvalidRequest(f"DescribeTopicPartitionsRequest topic list should contain the cursor topic: "
                             f"{cursor_topic}")
    if cursor is not None and cursor["partition_index"] < 0:
        raise InvalidRequest(f"DescribeTopicPartitionsRequest cursor partition must be valid: {cursor}")
    may_describe = body.get(MAY_DESCRIBE)
    denied = []  # named topics the caller may not describe: their existence is not disclosed
    if may_describe is not None:
        denied = [] if every else [n for n in names if not may_describe(n)]
        names = [n for n in names if may_describe(n)]
    all_operations = every_operation(ResourceType.TOPIC)
    operations = body.get(TOPIC_OPERATIONS) or (lambda name: all_operations)
    remaining = max(min(limit_max, body["response_partition_limit"]), 1)
    topics, next_cursor = [], None
    for name in names:
        if remaining == 0:  # the page is full: the next one starts at this topic
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        topic = image.topic(name)
        if topic is None:
            if not every:
                topics.append({"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if legal_name(name)
                               else ErrorCode.INVALID_TOPIC_EXCEPTION, "name": name,
                               "is_internal": name in INTERNAL_TOPICS, "partitions": [],
                               "topic_authorized_operations": operations(name)})
            continue
        start = cursor["partition_index"] if cursor is not None and name == cursor_topic else 0
        count = len(topic.partitions)
        end = min(count, start + remaining)
        partitions = [dict(p, error_code=0, eligible_leader_replicas=[], last_known_elr=[])
                      for p in partitions_of(topic)[start:end]]
        topics.append({"error_code": 0, "name": name, "topic_id": topic.id, "is_internal": name in INTERNAL_TOPICS,
                       "partitions": partitions, "topic_authorized_operations": operations(name)})
        if end < count:
            next_cursor = {"topic_name": name, "partition_index": end}
            break
        remaining -= len(partitions)
    topics += [{"error_code": TOPIC_DENIED, "name": name, "is_internal": False, "partitions": []} for name in denied]
    return {"throttle_time_ms": 0, "topics": topics, "next_cursor": next_cursor}
