"""Partition reassignment (KIP-455): AlterPartitionReassignments and
ListPartitionReassignments, as Kafka's ReplicationControlManager does them.

Moving a partition from replicas R to target T happens in two metadata changes:

1. Start: the replica set becomes T followed by the members of R not in T, with
   ``adding_replicas`` = T - R and ``removing_replicas`` = R - T.  The leader and ISR stay.
   Brokers in T - R create their replica and fetch from the leader like any follower.
2. Completion, in the AlterPartition that brings the last adding replica into the ISR: the
   replica set becomes T, the ISR loses the removing replicas, and if the leader is one of
   them the first ISR member of T leads.  Brokers no longer in the replica set delete their
   replica.

A target without new replicas (only removals, or a new order) completes at once, provided
some ISR member remains.  A new reassignment of a partition being moved replaces the old
one, from the original replicas.  Cancelling (replicas null) reverts to the original
replicas and drops the adding ones from the ISR.
"""

from __future__ import annotations

from kraft.protocol.error_codes import ErrorCode
from metadata.controller.common import ApiError, ControllerContext, Txn
from metadata.image import NO_LEADER, MetadataImage, PartitionRegistration
from metadata.serde import MetadataRecord, make


def original_replicas(part: PartitionRegistration) -> list[int]:
    return [b for b in part.replicas if b not in part.adding_replicas]


def target_replicas(part: PartitionRegistration) -> list[int]:
    return [b for b in part.replicas if b not in part.removing_replicas]


def is_reassigning(part: PartitionRegistration) -> bool:
    return bool(part.adding_replicas or part.removing_replicas)


def alter_partition_reassignments(ctx: ControllerContext, txn: Txn, version: int, req: dict,
                                  now_ms: int) -> dict:
    responses = []
    for t in req["topics"]:
        parts_out = []
        for p in t["partitions"]:
            index = p["partition_index"]
            try:
                _reassign(txn, t["name"], index, p["replicas"])
                parts_out.append({"partition_index": index, "error_code": 0, "error_message": None})
            except ApiError as e:
                parts_out.append({"partition_index": index, "error_code": int(e.code),
                                  "error_message": e.message})
        responses.append({"name": t["name"], "partitions": parts_out})
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "responses": responses}


def _reassign(txn: Txn, name: str, index: int, target: list[int] | None) -> None:
    topic = txn.image.topic(name)
    part = None if topic is None else topic.partitions.get(index)
    if part is None:
        raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {name}-{index}")
    if target is None:
        if not is_reassigning(part):
            raise ApiError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, f"{name}-{index} is not being reassigned")
        txn.add(_cancel(txn.image, topic.id, index, part))
        return
    if not target or len(set(target)) != len(target):
        raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       f"the replicas of {name}-{index} must be a non-empty list without duplicates")
    unknown = [b for b in target if txn.image.broker(b) is None]
    if unknown:
        raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       f"brokers {unknown} are not registered")
    original = original_replicas(part)
    adding = [b for b in target if b not in original]
    removing = [b for b in original if b not in target]
    if not adding:
        isr = [b for b in part.isr if b in target]
        if not isr:
            raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"no in-sync replica of {name}-{index} would remain")
        txn.add(_complete(txn.image, topic.id, index, part, target, isr))
        return
    merged = list(target) + [b for b in original if b not in target]
    isr = [b for b in part.isr if b in merged]  # a replaced reassignment's adding ones may be in it
    if not isr:
        raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       f"no in-sync replica of {name}-{index} would remain")
    fields = {}
    if tuple(isr) != part.isr:
        fields["isr"] = isr
    if part.leader != NO_LEADER and part.leader not in isr:
        fields["leader"] = _first_eligible(txn.image, merged, isr)
    txn.add(make("PartitionChangeRecord", partition_id=index, topic_id=topic.id, replicas=merged,
                 adding_replicas=adding, removing_replicas=removing, **fields))


def _first_eligible(image, replicas: list[int], isr: list[int]) -> int:
    """The first of ``replicas`` in ``isr`` whose broker can lead (NO_LEADER if none)."""
    for b in replicas:
        reg = image.brokers.get(b)
        if b in isr and reg is not None and reg.is_active:
            return b
    return NO_LEADER


def _complete(image, topic_id, index: int, part: PartitionRegistration, target: list[int],
              isr: list[int]) -> MetadataRecord:
    fields = {"replicas": list(target), "isr": isr, "adding_replicas": [], "removing_replicas": []}
    if part.leader != NO_LEADER and part.leader not in isr:  # the leader is being removed
        fields["leader"] = _first_eligible(image, target, isr)
    return make("PartitionChangeRecord", partition_id=index, topic_id=topic_id, **fields)


def _cancel(image, topic_id, index: int, part: PartitionRegistration) -> MetadataRecord:
    original = original_replicas(part)
    isr = [b for b in part.isr if b in original]
    if not isr:
        raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       "cancelling would leave no in-sync replica among the original ones")
    fields = {"replicas": original, "isr": isr, "adding_replicas": [], "removing_replicas": []}
    if part.leader != NO_LEADER and part.leader not in isr:
        fields["leader"] = _first_eligible(image, original, isr)
    return make("PartitionChangeRecord", partition_id=index, topic_id=topic_id, **fields)


def completion(txn: Txn, brokers: MetadataImage, topic_id, index: int) -> MetadataRecord | None:
    """The record that completes ``index``'s reassignment, once every adding replica is in
    its ISR (called after each ISR change); None if there is nothing to complete.
    ``brokers``: an image whose brokers are current (the partition is read from ``txn``)."""
    part = txn.partition(topic_id, index)
    if part is None or not is_reassigning(part):
        return None
    if any(b not in part.isr for b in part.adding_replicas):
        return None
    target = target_replicas(part)
    isr = [b for b in part.isr if b in target]
    if not isr:
        return None
    return _complete(brokers, topic_id, index, part, target, isr)


def list_partition_reassignments(ctx: ControllerContext, txn: Txn, version: int, req: dict,
                                 now_ms: int) -> dict:
    image = txn.image
    if req["topics"] is None:
        wanted = [(name, sorted(t.partitions)) for name, t in sorted(image.topics_by_name.items())]
    else:
        wanted = [(t["name"], t["partition_indexes"]) for t in req["topics"]]
    topics = []
    for name, indexes in wanted:
        topic = image.topic(name)
        if topic is None:
            continue
        parts = []
        for index in indexes:
            part = topic.partitions.get(index)
            if part is not None and is_reassigning(part):
                parts.append({"partition_index": index, "replicas": list(part.replicas),
                              "adding_replicas": list(part.adding_replicas),
                              "removing_replicas": list(part.removing_replicas)})
        if parts:
            topics.append({"name": name, "partitions": parts})
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "topics": topics}
