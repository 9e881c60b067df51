"""Partition control: ISR changes from partition leaders (AlterPartition) and leader
elections on request (ElectLeaders).

AlterPartition follows Kafka's checks, in Kafka's order: an unknown partition; epochs
ahead of ours (we are probably no longer the active controller: NOT_CONTROLLER); a
stale leader epoch (FENCED_LEADER_EPOCH); a sender that is not the leader
(INVALID_REQUEST); a stale partition epoch (INVALID_UPDATE_VERSION); a malformed ISR or
recovery state (INVALID_REQUEST); ISR members that are not registered, unfenced and out
of controlled shutdown, or (v3) whose broker epoch is not current (INELIGIBLE_REPLICA,
OPERATION_NOT_ATTEMPTED before v2).
"""

from __future__ import annotations

from kraft.protocol.error_codes import ErrorCode
from metadata.controller.cluster import check_broker_epoch
from metadata.controller import reassignment
from metadata.controller.common import ApiError, ControllerContext, Txn
from metadata.controller.elections import change_partition, preferred_election
from metadata.image import NO_LEADER, LeaderRecoveryState


# ---------------------------------------------------------------------------------------
# AlterPartition


def alter_partition(ctx: ControllerContext, txn: Txn, version: int, req: dict, now_ms: int) -> dict:
    broker_id = req["broker_id"]
    check_broker_epoch(txn, broker_id, req["broker_epoch"])
    # Topics and brokers as before the request (it changes neither); partitions through
    # the transaction (txn.partition), as earlier ones of the request left them.
    image = txn.image
    topics_out = []
    for t in req["topics"]:
        topic = image.topic_by_id(t["topic_id"]) if version >= 2 else image.topic(t["topic_name"])
        parts_out = []
        topics_out.append({"topic_name": t["topic_name"], "topic_id": t["topic_id"], "partitions": parts_out})
        for p in t["partitions"]:
            index = p["partition_index"]
            try:
                if topic is None:
                    raise ApiError(ErrorCode.UNKNOWN_TOPIC_ID if version >= 2
                                   else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                _alter_one(txn, image, version, broker_id, topic.id, index, p)
                part = txn.partition(topic.id, index)
                parts_out.append({
                    "partition_index": index, "error_code": 0, "leader_id": part.leader,
                    "leader_epoch": part.leader_epoch, "isr": list(part.isr),
                    "leader_recovery_state": part.leader_recovery_state,
                    "partition_epoch": part.partition_epoch,
                })
            except ApiError as e:
                parts_out.append({"partition_index": index, "error_code": int(e.code)})
    return {"throttle_time_ms": 0, "error_code": 0, "topics": topics_out}


def _alter_one(txn: Txn, image, version: int, broker_id: int, topic_id, index: int, p: dict) -> None:
    """One partition's ISR change; ``image``: the brokers (from before the request)."""
    part = txn.partition(topic_id, index)
    if part is None:
        raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    # A leader ahead of us means we are probably no longer the active controller.
    if p["leader_epoch"] > part.leader_epoch or p["partition_epoch"] > part.partition_epoch:
        raise ApiError(ErrorCode.NOT_CONTROLLER)
    if p["leader_epoch"] != part.leader_epoch:
        raise ApiError(ErrorCode.FENCED_LEADER_EPOCH)
    if broker_id != part.leader:
        raise ApiError(ErrorCode.INVALID_REQUEST, f"broker {broker_id} is not the leader")
    if p["partition_epoch"] != part.partition_epoch:
        raise ApiError(ErrorCode.INVALID_UPDATE_VERSION)
    if version >= 3:
        members = [(s["broker_id"], s["broker_epoch"]) for s in p["new_isr_with_epochs"]]
    else:
        members = [(b, -1) for b in p["new_isr"]]
    new_isr = [b for b, _ in members]
    if not new_isr or len(set(new_isr)) != len(new_isr):
        raise ApiError(ErrorCode.INVALID_REQUEST, "the new ISR is empty or has duplicates")
    if any(b not in part.replicas for b in new_isr) or part.leader not in new_isr:
        raise ApiError(ErrorCode.INVALID_REQUEST, "the new ISR must be replicas and include the leader")
    recovery = p["leader_recovery_state"]
    if recovery == LeaderRecoveryState.RECOVERING and part.leader_recovery_state != recovery:
        raise ApiError(ErrorCode.INVALID_REQUEST, "a leader cannot ask to go back to recovering")
    if recovery not in (LeaderRecoveryState.RECOVERED, LeaderRecoveryState.RECOVERING):
        raise ApiError(ErrorCode.INVALID_REQUEST, f"bad leader recovery state {recovery}")
    if part.leader_recovery_state == LeaderRecoveryState.RECOVERING and len(new_isr) > 1 \
            and recovery == LeaderRecoveryState.RECOVERING:
        raise ApiError(ErrorCode.INVALID_REQUEST, "a recovering leader cannot grow the ISR")
    for b, epoch in members:
        reg = image.broker(b)
        if reg is None or not reg.is_active or (epoch != -1 and reg.epoch != epoch):
            raise ApiError(ErrorCode.INELIGIBLE_REPLICA if version > 1 else ErrorCode.OPERATION_NOT_ATTEMPTED,
                           f"broker {b} cannot join the ISR")
    rec = change_partition(image, topic_id, index, part, target_isr=new_isr, recovery_state=recovery)
    if rec is not None:
        txn.add(rec)
    assert txn.partition(topic_id, index).leader == part.leader or part.leader == NO_LEADER
    done = reassignment.completion(txn, image, topic_id, index)  # the last adding replica joined the ISR
    if done is not None:
        txn.add(done)


# ---------------------------------------------------------------------------------------
# ElectLeaders

PREFERRED, UNCLEAN = 0, 1


def elect_leaders(ctx: ControllerContext, txn: Txn, version: int, req: dict, now_ms: int) -> dict:
    election = req["election_type"]
    if election not in (PREFERRED, UNCLEAN):
        raise ApiError(ErrorCode.INVALID_REQUEST, f"unknown election type {election}")
    wanted = req["topic_partitions"]
    everything = wanted is None
    image = txn.image  # topics and brokers; partitions through txn.partition, as alter_partition
    if everything:
        wanted = [{"topic": name, "partitions": sorted(t.partitions)}
                  for name, t in sorted(image.topics_by_name.items())]
    results = []
    for entry in wanted:
        parts_out = []
        for index in entry["partitions"]:
            code, message = _elect_one(txn, image, election, entry["topic"], index)
            if everything and code == ErrorCode.ELECTION_NOT_NEEDED:
                continue  # asked for everything: report only what was attempted
            parts_out.append({"partition_id": index, "error_code": int(code), "error_message": message})
        if parts_out or not everything:
            results.append({"topic": entry["topic"], "partition_result": parts_out})
    return {"throttle_time_ms": 0, "error_code": 0, "replica_election_results": results}


def _elect_one(txn: Txn, image, election: int, name: str, index: int):
    topic = image.topic(name)
    part = None if topic is None else txn.partition(topic.id, index)
    if part is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {name}-{index}"
    if election == PREFERRED:
        if part.replicas and part.leader == part.replicas[0]:
            return ErrorCode.ELECTION_NOT_NEEDED, None
        rec = preferred_election(image, topic.id, index, part)
        if rec is None:
            return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, \
                f"the preferred leader of {name}-{index} is not an available ISR member"
    else:
        if part.leader != NO_LEADER:
            return ErrorCode.ELECTION_NOT_NEEDED, None
        rec = change_partition(image, topic.id, index, part, unclean=True)
        if rec is None or rec.data["leader"] in (NO_LEADER, -2):
            return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, f"no live replica of {name}-{index}"
    txn.add(rec)
    return ErrorCode.NONE, None
