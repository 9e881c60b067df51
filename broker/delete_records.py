"""DeleteRecords (API 21, ``kafka-delete-records.sh``, ``AdminClient.delete_records``):
advance a partition's log start offset on its leader, delete the segments wholly below it,
and answer once the followers have followed.

As Kafka's ReplicaManager.deleteRecords: offset -1 means the high watermark; an offset
above the high watermark (or below -1) is OFFSET_OUT_OF_RANGE; a broker that does not lead
the partition answers NOT_LEADER_OR_FOLLOWER.  The answer waits (at most the request's
``timeout_ms``) until the partition's low watermark, the smallest log start offset among
the leader and its live followers, reaches the offset: the followers learn the new start
from their next fetch and report theirs in the one after.  Past the timeout the partition
answers REQUEST_TIMED_OUT with the low watermark reached so far.
"""

from __future__ import annotations

import trio

from kraft.protocol.error_codes import ErrorCode

POLL_S = 0.05


def low_watermark(partition, live_brokers) -> int:
    """The smallest log start offset among the leader and its live followers (Kafka's
    ``lowWatermarkIfLeader``)."""
    low = partition.log.log_start_offset
    for replica_id, remote in partition.state.remote.items():
        if replica_id in live_brokers and 0 <= remote.log_start_offset < low:
            low = remote.log_start_offset
    return low


def _start_deleting(replicas, topic: str, index: int, offset: int) -> tuple[int, object | None, int]:
    """(error code, the partition to wait on, the offset to wait for)."""
    partition = replicas.get(topic, index)
    if partition is None or partition.log.closed:
        return replicas.not_hosted_error(topic, index), None, -1
    if not partition.state.is_leader:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, None, -1
    hw = partition.state.high_watermark
    target = hw if offset == -1 else offset
    if target < 0 or target > hw:  # the HW never passes the log end: the log accepts the rest
        return ErrorCode.OFFSET_OUT_OF_RANGE, partition, -1
    partition.delete_records_before(target)
    return ErrorCode.NONE, partition, target


async def delete_records(replicas, body: dict) -> dict:
    live = {b.id for b in replicas.image.active_brokers()}
    pending = []  # (result dict, partition, target)
    topics = []
    for t in body["topics"]:
        results = []
        for p in t["partitions"]:
            index = p["partition_index"]
            code, partition, target = _start_deleting(replicas, t["name"], index, p["offset"])
            result = {"partition_index": index, "error_code": int(code), "low_watermark": -1}
            if code == ErrorCode.NONE:
                pending.append((result, partition, target))
            results.append(result)
        topics.append({"name": t["name"], "partitions": results})
    with trio.move_on_after(max(body["timeout_ms"], 0) / 1000):
        while any(low_watermark(partition, live) < target for _, partition, target in pending):
            await trio.sleep(POLL_S)
    for result, partition, target in pending:
        result["low_watermark"] = low = low_watermark(partition, live)
        if low < target:
            result["error_code"] = int(ErrorCode.REQUEST_TIMED_OUT)
    return {"throttle_time_ms": 0, "topics": topics}
