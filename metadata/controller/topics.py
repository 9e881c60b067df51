"""Topic control: CreateTopics, DeleteTopics, CreatePartitions.

CreateTopics, DeleteTopics and CreatePartitions answer per topic: one topic's error does
not stop the others.  Every check runs against the image including records not yet
committed (and earlier topics of the same request), so two creations of one name cannot
both succeed.  CreateTopics and DeleteTopics read the image as it was before the request
and keep what the request itself created or removed beside it: building the image again
after every topic (``Txn.image``) copies every topic's entry, which made one request of
3,000 topics take 9 s.  CreatePartitions refuses a topic named twice, so the image from
before the request is all it reads.
"""

from __future__ import annotations

import itertools
import re
import uuid
from random import Random

from kraft.protocol.error_codes import ErrorCode
from metadata.controller import configs as cfgs
from metadata.controller.common import ApiError, ControllerContext, Txn, named_twice
from metadata.controller.placement import PlacementError, UsableBroker, place
from metadata.image import (
    ZERO_UUID,
    ConfigResourceType,
    MetadataImage,
    PartitionRegistration,
)
from metadata.serde import MetadataRecord, make

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
METADATA_TOPIC = "__cluster_metadata"
# Topics the brokers create and own (Kafka's Topic.INTERNAL_TOPICS).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
METADATA_TOPIC_ID = uuid.UUID(int=1)
CONFIG_SOURCE_DYNAMIC_TOPIC = 1
# Kafka's QuorumController.MAX_RECORDS_PER_USER_OP: one request may write at most this many
# metadata records.  Past it the whole request fails with POLICY_VIOLATION and Kafka's
# message, before anything is placed: a CreateTopics asking for 2**31 partitions must cost
# an answer, not the controller's memory.
MAX_RECORDS_PER_USER_OP = 10_000
EXCESSIVE_BATCH = "Unable to perform excessively large batch operation."


def validate_topic_name(name: str) -> None:
    def bad(why):
        raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, why)

    if not name:
        bad("topic name is illegal, it can't be empty")
    if name in (".", ".."):
        bad("topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        bad(f"topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters")
    if not _LEGAL_TOPIC.fullmatch(name):
        bad(f"topic name {name!r} is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'")
    if name == METADATA_TOPIC:
        bad(f"creation of internal topic {METADATA_TOPIC} is prohibited")


def _collision_key(name: str) -> str:
    return name.replace(".", "_")


def usable_brokers(image: MetadataImage) -> list[UsableBroker]:
    return [UsableBroker(b.id, b.rack) for b in image.active_brokers()]


def new_topic_id(rng: Random, image: MetadataImage, taken=frozenset()) -> uuid.UUID:
    """A new topic id: none of ``image``'s, nor in ``taken`` (ids given out since it)."""
    while True:
        topic_id = uuid.UUID(int=rng.getrandbits(128), version=4)
        # Kafka never hands out ids whose base64 form starts with '-' (62 in the alphabet)
        if topic_id.int >> 122 == 62 or topic_id in (ZERO_UUID, METADATA_TOPIC_ID):
            continue
        if image.topic_by_id(topic_id) is None and topic_id not in taken:
            return topic_id


class _Created:
    """The topics one CreateTopics has created so far, beside the image from before it: the
    ids given out, and which existing or created topic a new name collides with (``.`` and
    ``_`` are the same to Kafka's metrics)."""

    def __init__(self, image: MetadataImage):
        self.image = image
        self.collisions: dict[str, str] = {}  # collision key -> name, of this request's topics
        self.ids: set[uuid.UUID] = set()

    def add(self, name: str, topic_id: uuid.UUID) -> None:
        self.collisions.setdefault(_collision_key(name), name)
        self.ids.add(topic_id)

    def colliding(self, name: str) -> str | None:
        """A topic other than ``name`` with its collision key, or None.  The image's are
        found by trying each spelling of ``name``'s dots and underscores (a name has few)
        rather than reading every topic's name for each topic created."""
        other = self.collisions.get(_collision_key(name))
        if other is not None and other != name:
            return other
        spots = [i for i, ch in enumerate(name) if ch in "._"]
        existing = self.image.topics_by_name
        if len(spots) > _MAX_SPELLINGS_LOG2:
            key = _collision_key(name)
            return next((n for n in existing if n != name and _collision_key(n) == key), None)
        chars = list(name)
        for spelling in itertools.product("._", repeat=len(spots)):
            for i, ch in zip(spots, spelling):
                chars[i] = ch
            candidate = "".join(chars)
            if candidate != name and candidate in existing:
                return candidate
        return None


_MAX_SPELLINGS_LOG2 = 10  # past 1,024 spellings of one name, read every topic's name instead


def _check_manual(image: MetadataImage, replicas: list[int], index: int) -> list[int]:
    """ISR for a manually assigned partition, after checking the assignment."""
    if not replicas:
        raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"partition {index} has an empty replica list")
    if len(set(replicas)) != len(replicas):
        raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       f"partition {index} has duplicate replicas {replicas}")
    for b in replicas:
        if image.broker(b) is None:
            raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"partition {index} names broker {b}, which is not registered")
    isr = [b for b in replicas if image.brokers[b].is_active]
    if not isr:
        raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       f"all brokers of the manual assignment of partition {index} are fenced "
                       "or in controlled shutdown")
    return isr


def _new_partition(topic_id, index, replicas, isr) -> MetadataRecord:
    return PartitionRegistration(
        replicas=tuple(replicas), isr=tuple(isr), leader=isr[0], leader_epoch=0, partition_epoch=0,
    ).to_record(topic_id, index)


# ---------------------------------------------------------------------------------------
# CreateTopics


def _records_asked(ctx: ControllerContext, topic: dict) -> int:
    """How many records creating ``topic`` would write, from the request alone."""
    partitions = len(topic["assignments"]) if topic["assignments"] else topic["num_partitions"]
    if partitions == -1:
        partitions = ctx.config.num_partitions
    return 1 + max(partitions, 0) + len(topic["configs"])


def create_topics(ctx: ControllerContext, txn: Txn, version: int, req: dict, now_ms: int) -> dict:
    names = [t["name"] for t in req["topics"]]
    if sum(_records_asked(ctx, t) for t in req["topics"]) > MAX_RECORDS_PER_USER_OP:
        return {"throttle_time_ms": 0, "topics": [
            {"name": name, "topic_id": ZERO_UUID, "error_code": ErrorCode.POLICY_VIOLATION,
             "error_message": EXCESSIVE_BATCH, "num_partitions": -1, "replication_factor": -1,
             "configs": None} for name in dict.fromkeys(names)]}
    duplicates = named_twice(names)
    image = txn.image
    created = _Created(image)
    results = []
    seen = set()
    for topic in req["topics"]:
        name = topic["name"]
        if name in seen:
            continue
        seen.add(name)
        result = {"name": name, "topic_id": ZERO_UUID, "error_code": 0, "error_message": None,
                  "num_partitions": -1, "replication_factor": -1, "configs": None}
        results.append(result)
        try:
            if name in duplicates:
                raise ApiError(ErrorCode.INVALID_REQUEST, "duplicate topic name in the request")
            records = _create_topic(ctx, image, created, topic, result)
        except ApiError as e:
            result.update(error_code=int(e.code), error_message=e.message)
            continue
        if not req["validate_only"]:  # (validated topics are not there for the next ones to collide with)
            txn.add(*records)
            created.add(name, result["topic_id"])
    return {"throttle_time_ms": 0, "topics": results}


def _create_topic(ctx: ControllerContext, image: MetadataImage, created: _Created, topic: dict, result: dict):
    """The records creating ``topic``; ``image`` is from before the request, ``created``
    what the request has created since."""
    name = topic["name"]
    validate_topic_name(name)
    if image.topic(name) is not None:
        raise ApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
    other = created.colliding(name)
    if other is not None:
        raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic {name!r} collides with existing topic {other!r}")

    config_records = []
    configs = {}
    for c in topic["configs"]:
        if c["name"] in configs:
            raise ApiError(ErrorCode.INVALID_CONFIG, f"duplicate configuration {c['name']}")
        try:
            cfgs.validate(cfgs.TOPIC_CONFIGS, c["name"], c["value"])
        except cfgs.ConfigError as e:
            raise ApiError(ErrorCode.INVALID_CONFIG, str(e)) from None
        configs[c["name"]] = c["value"]

    if topic["assignments"]:
        if topic["num_partitions"] != -1 or topic["replication_factor"] != -1:
            raise ApiError(ErrorCode.INVALID_REQUEST,
                           "both partitions or replication factor and a replica assignment were set")
        by_index = {}
        for a in topic["assignments"]:
            if a["partition_index"] in by_index:
                raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               f"partition {a['partition_index']} is assigned twice")
            by_index[a["partition_index"]] = list(a["broker_ids"])
        if sorted(by_index) != list(range(len(by_index))):
            raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           "partitions must be numbered consecutively from 0")
        assignment = [by_index[i] for i in range(len(by_index))]
        isrs = [_check_manual(image, replicas, i) for i, replicas in enumerate(assignment)]
    else:
        num_partitions = topic["num_partitions"]
        if num_partitions == -1:
            num_partitions = ctx.config.num_partitions
        if num_partitions <= 0:
            raise ApiError(ErrorCode.INVALID_PARTITIONS,
                           f"number of partitions was set to an invalid non-positive value {num_partitions}")
        rf = topic["replication_factor"]
        if rf == -1:
            rf = ctx.config.default_replication_factor
        if rf <= 0:
            raise ApiError(ErrorCode.INVALID_REPLICATION_FACTOR,
                           f"replication factor must be larger than 0, got {rf}")
        try:
            assignment = place(usable_brokers(image), num_partitions, rf, ctx.rng)
        except PlacementError as e:
            raise ApiError(ErrorCode.INVALID_REPLICATION_FACTOR, str(e)) from None
        isrs = assignment

    topic_id = new_topic_id(ctx.rng, image, created.ids)
    records = [make("TopicRecord", name=name, topic_id=topic_id)]
    for index, (replicas, isr) in enumerate(zip(assignment, isrs)):
        records.append(_new_partition(topic_id, index, replicas, isr))
    for key, value in configs.items():
        config_records.append(make("ConfigRecord", resource_type=ConfigResourceType.TOPIC,
                                   resource_name=name, name=key, value=value))
    records += config_records
    result.update(
        topic_id=topic_id,
        num_partitions=len(assignment),
        replication_factor=len(assignment[0]),
        configs=[
            {"name": k, "value": v, "read_only": False, "config_source": CONFIG_SOURCE_DYNAMIC_TOPIC,
             "is_sensitive": False}
            for k, v in sorted(configs.items())
        ],
    )
    return records


# ---------------------------------------------------------------------------------------
# DeleteTopics


def delete_topics(ctx: ControllerContext, txn: Txn, version: int, req: dict, now_ms: int) -> dict:
    if version >= 6:
        items = [(t["name"], t["topic_id"]) for t in req["topics"]]
    else:
        items = [(n, None) for n in req["topic_names"]]
    out = []
    removed = set()  # the ids this request removed (read from the image before it)
    image = txn.image
    for name, topic_id in items:
        result = {"name": name, "topic_id": topic_id or ZERO_UUID, "error_code": 0, "error_message": None}
        out.append(result)
        try:
            if not ctx.config.delete_topic_enable:
                raise ApiError(ErrorCode.TOPIC_DELETION_DISABLED, "topic deletion is disabled")
            by_id = topic_id is not None and topic_id != ZERO_UUID
            if by_id and name is not None:
                raise ApiError(ErrorCode.INVALID_REQUEST, "give a topic name or a topic id, not both")
            if by_id:
                topic = image.topic_by_id(topic_id)
                if topic is None:
                    raise ApiError(ErrorCode.UNKNOWN_TOPIC_ID, f"no topic with id {topic_id}")
            elif name is None:
                raise ApiError(ErrorCode.INVALID_REQUEST, "neither a topic name nor a topic id")
            else:
                topic = image.topic(name)
                if topic is None:
                    raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic named {name!r}")
            if topic.id in removed:
                continue  # named twice in this request: removed already
            result.update(name=topic.name, topic_id=topic.id)
            removed.add(topic.id)
            txn.add(make("RemoveTopicRecord", topic_id=topic.id))
        except ApiError as e:
            result.update(error_code=int(e.code), error_message=e.message)
    return {"throttle_time_ms": 0, "responses": out}


# ---------------------------------------------------------------------------------------
# CreatePartitions


def create_partitions(ctx: ControllerContext, txn: Txn, version: int, req: dict, now_ms: int) -> dict:
    names = [t["name"] for t in req["topics"]]
    image = txn.image  # a topic named twice is refused, so none needs another's new partitions
    if _partitions_asked(image, req) > MAX_RECORDS_PER_USER_OP:
        return {"throttle_time_ms": 0, "results": [
            {"name": name, "error_code": ErrorCode.POLICY_VIOLATION, "error_message": EXCESSIVE_BATCH}
            for name in names]}
    duplicates = named_twice(names)
    results = []
    for topic in req["topics"]:
        name = topic["name"]
        result = {"name": name, "error_code": 0, "error_message": None}
        results.append(result)
        try:
            if name in duplicates:
                raise ApiError(ErrorCode.INVALID_REQUEST, "duplicate topic name in the request")
            records = _create_partitions(ctx, image, topic)
        except ApiError as e:
            result.update(error_code=int(e.code), error_message=e.message)
            continue
        if not req["validate_only"]:
            txn.add(*records)
    return {"throttle_time_ms": 0, "results": results}


def _partitions_asked(image: MetadataImage, req: dict) -> int:
    total = 0
    for t in req["topics"]:
        topic = image.topic(t["name"])
        if topic is not None:
            total += max(t["count"] - len(topic.partitions), 0)
    return total


def _create_partitions(ctx: ControllerContext, image: MetadataImage, req: dict):
    topic = image.topic(req["name"])
    if topic is None:
        raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic named {req['name']!r}")
    current = len(topic.partitions)
    count = req["count"]
    if count < current:
        raise ApiError(ErrorCode.INVALID_PARTITIONS,
                       f"topic currently has {current} partitions, more than the requested {count}")
    if count == current:
        raise ApiError(ErrorCode.INVALID_PARTITIONS, f"topic already has {current} partitions")
    rf = len(topic.partitions[0].replicas)
    adding = count - current
    if req["assignments"] is not None:
        if len(req["assignments"]) != adding:
            raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"{len(req['assignments'])} assignments given for {adding} new partitions")
        assignment = []
        isrs = []
        for i, a in enumerate(req["assignments"]):
            replicas = list(a["broker_ids"])
            if len(replicas) != rf:
                raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               f"inconsistent replication factor: {len(replicas)} replicas, topic has {rf}")
            isrs.append(_check_manual(image, replicas, current + i))
            assignment.append(replicas)
    else:
        try:
            assignment = place(usable_brokers(image), adding, rf, ctx.rng, start_partition=current)
        except PlacementError as e:
            raise ApiError(ErrorCode.INVALID_REPLICATION_FACTOR, str(e)) from None
        isrs = assignment
    return [
        _new_partition(topic.id, current + i, replicas, isr)
        for i, (replicas, isr) in enumerate(zip(assignment, isrs))
    ]
