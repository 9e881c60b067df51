"""DescribeProducers (KIP-664): the active producers of the partitions this broker hosts
(leader or follower), from each replica's producer state, for ``kraftctl transactions describe-producers`` and
finding hanging transactions."""

from __future__ import annotations



def describe_producers(replicas, body: dict) -> dict:
    topics = []
    for t in body["topics"]:
        partitions = []
        for index in t["partition_indexes"]:
            partitions.append(_describe_partition(replicas, t["name"], index))
        topics.append({"name": t["name"], "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}


def _describe_partition(replicas, topic: str, index: int) -> dict:
    out = {"partition_index": index, "error_code": 0, "error_message": None, "active_producers": []}
    p = replicas.get(topic, index)
    if p is None or p.log.closed:
        # Any replica answers (a follower tracks producers from what it replicates), as in
        # Kafka: kafka-transactions find-hanging --broker-id asks every replica it hosts.
        out["error_code"] = replicas.not_hosted_error(topic, index)
        return out
    for pid, entry in sorted(p.producers.producers.items()):
        out["active_producers"].append({
            "producer_id": pid, "producer_epoch": entry.producer_epoch, "last_sequence": entry.last_seq,
            "last_timestamp": entry.last_timestamp, "coordinator_epoch": entry.coordinator_epoch,
            "current_txn_start_offset": entry.current_txn_first_offset})
    return out
