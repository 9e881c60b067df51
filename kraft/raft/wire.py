"""Raft core messages <-> Kafka wire messages (Vote, BeginQuorumEpoch, EndQuorumEpoch,
Fetch, FetchSnapshot) for the single partition ``__cluster_metadata-0``.

Versions are fixed: kraft's nodes talk to kraft's nodes.  Vote v1 and Fetch v17 carry the
directory ids of KIP-853's replica keys (the voter a candidate asks, the replica fetching);
Fetch names the partition by Kafka's fixed topic id of ``__cluster_metadata``.
"""

from __future__ import annotations

import uuid

from kraft.raft import messages as m
from kraft.raft.record_codec import decode_raft_batches, encode_batches

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
METADATA_TOPIC_ID = uuid.UUID(int=1)  # Kafka's Topic.CLUSTER_METADATA_TOPIC_ID
_NO_DIRECTORY = uuid.UUID(int=0)

VERSIONS = {"Vote": 1, "BeginQuorumEpoch": 0, "EndQuorumEpoch": 0, "Fetch": 17, "FetchSnapshot": 0}


def _directory(value) -> uuid.UUID | None:
    return None if value in (None, _NO_DIRECTORY) else value


def _metadata_partition(body: dict, topics_key: str) -> dict:
    topics = body[topics_key]
    if len(topics) != 1 or topics[0]["topic_id"] != METADATA_TOPIC_ID or len(topics[0]["partitions"]) != 1:
        raise NotRaftMessage(f"not a request for {METADATA_TOPIC}-0")
    return topics[0]["partitions"][0]

API_OF = {
    m.VoteRequest: "Vote", m.VoteResponse: "Vote",
    m.BeginQuorumEpochRequest: "BeginQuorumEpoch", m.BeginQuorumEpochResponse: "BeginQuorumEpoch",
    m.EndQuorumEpochRequest: "EndQuorumEpoch", m.EndQuorumEpochResponse: "EndQuorumEpoch",
    m.FetchRequest: "Fetch", m.FetchResponse: "Fetch",
    m.FetchSnapshotRequest: "FetchSnapshot", m.FetchSnapshotResponse: "FetchSnapshot",
}


class NotRaftMessage(ValueError):
    """A request for another topic/partition, or a shape the quorum does not use."""


def _topic(name_key: str, partition: dict) -> list[dict]:
    return [{name_key: METADATA_TOPIC, "partitions": [partition]}]


def _only_partition(body: dict, topics_key: str, name_key: str) -> dict:
    topics = body[topics_key]
    if len(topics) != 1 or topics[0][name_key] != METADATA_TOPIC or len(topics[0]["partitions"]) != 1:
        raise NotRaftMessage(f"not a request for {METADATA_TOPIC}-0")
    return topics[0]["partitions"][0]


def _leader(d: dict) -> m.LeaderAndEpoch:
    return m.LeaderAndEpoch(d["leader_id"], d["leader_epoch"])


def _offset_and_epoch(d: dict | None, offset_key: str = "end_offset") -> m.OffsetAndEpoch | None:
    if d is None or d[offset_key] < 0 or d["epoch"] < 0:
        return None
    return m.OffsetAndEpoch(d[offset_key], d["epoch"])


# ------------------------------------------------------------------------- requests


def request_to_wire(msg, cluster_id: str | None) -> tuple[str, int, dict]:
    """(api, version, body) of a core request."""
    api = API_OF[type(msg)]
    if isinstance(msg, m.VoteRequest):
        body = {"cluster_id": cluster_id, "topics": _topic("topic_name", {
            "partition_index": 0, "candidate_epoch": msg.candidate_epoch,
            "candidate_id": msg.candidate_id, "candidate_directory_id": _NO_DIRECTORY,
            "voter_directory_id": msg.voter_directory_id or _NO_DIRECTORY,
            "last_offset_epoch": msg.last_offset_epoch,
            "last_offset": msg.last_offset, "pre_vote": msg.pre_vote})}
    elif isinstance(msg, m.BeginQuorumEpochRequest):
        body = {"cluster_id": cluster_id, "topics": _topic("topic_name", {
            "partition_index": 0, "leader_id": msg.leader_id, "leader_epoch": msg.leader_epoch})}
    elif isinstance(msg, m.EndQuorumEpochRequest):
        body = {"cluster_id": cluster_id, "topics": _topic("topic_name", {
            "partition_index": 0, "leader_id": msg.leader_id, "leader_epoch": msg.leader_epoch,
            "preferred_successors": list(msg.preferred_successors)})}
    elif isinstance(msg, m.FetchRequest):
        body = {"cluster_id": cluster_id, "replica_state": {"replica_id": msg.replica_id, "replica_epoch": -1},
                "max_wait_ms": msg.max_wait_ms, "min_bytes": 0, "max_bytes": 0x7FFFFFFF,
                "topics": [{"topic_id": METADATA_TOPIC_ID, "partitions": [{
                    "partition": 0, "current_leader_epoch": msg.current_leader_epoch,
                    "fetch_offset": msg.fetch_offset, "last_fetched_epoch": msg.last_fetched_epoch,
                    "partition_max_bytes": 0x7FFFFFFF,
                    "replica_directory_id": msg.directory_id or _NO_DIRECTORY}]}]}
    elif isinstance(msg, m.FetchSnapshotRequest):
        body = {"cluster_id": cluster_id, "replica_id": msg.replica_id, "max_bytes": 0x7FFFFFFF,
                "topics": _topic("name", {
                    "partition": 0, "current_leader_epoch": msg.current_leader_epoch,
                    "snapshot_id": {"end_offset": msg.snapshot_id.offset, "epoch": msg.snapshot_id.epoch},
                    "position": msg.position})}
    else:
        raise TypeError(f"not a raft request: {msg!r}")
    return api, VERSIONS[api], body


def request_from_wire(api: str, body: dict, voters) -> tuple[int, object]:
    """(source node id, core request) of a wire request; raises NotRaftMessage."""
    if api == "Vote":
        p = _only_partition(body, "topics", "topic_name")
        return p["candidate_id"], m.VoteRequest(p["candidate_epoch"], p["candidate_id"],
                                                p["last_offset_epoch"], p["last_offset"], p["pre_vote"],
                                                _directory(p.get("voter_directory_id")))
    if api == "BeginQuorumEpoch":
        p = _only_partition(body, "topics", "topic_name")
        return p["leader_id"], m.BeginQuorumEpochRequest(p["leader_id"], p["leader_epoch"])
    if api == "EndQuorumEpoch":
        p = _only_partition(body, "topics", "topic_name")
        return p["leader_id"], m.EndQuorumEpochRequest(p["leader_id"], p["leader_epoch"],
                                                       tuple(p["preferred_successors"]))
    if api == "Fetch":
        p = _metadata_partition(body, "topics")
        replica = body["replica_state"]["replica_id"]
        return replica, m.FetchRequest(replica, p["current_leader_epoch"], p["fetch_offset"],
                                       p["last_fetched_epoch"], observer=replica not in voters,
                                       directory_id=_directory(p.get("replica_directory_id")),
                                       max_wait_ms=body["max_wait_ms"])
    if api == "FetchSnapshot":
        p = _only_partition(body, "topics", "name")
        sid = p["snapshot_id"]
        return body["replica_id"], m.FetchSnapshotRequest(
            body["replica_id"], p["current_leader_epoch"],
            m.OffsetAndEpoch(sid["end_offset"], sid["epoch"]), p["position"])
    raise NotRaftMessage(f"{api} is not a quorum api")


# ------------------------------------------------------------------------- responses


def response_to_wire(msg) -> tuple[str, int, dict]:
    api = API_OF[type(msg)]
    if isinstance(msg, m.VoteResponse):
        body = {"error_code": 0, "topics": _topic("topic_name", {
            "partition_index": 0, "error_code": int(msg.error_code), "leader_id": msg.leader_id,
            "leader_epoch": msg.leader_epoch, "vote_granted": msg.vote_granted, "pre_vote": msg.pre_vote})}
    elif isinstance(msg, (m.BeginQuorumEpochResponse, m.EndQuorumEpochResponse)):
        body = {"error_code": 0, "topics": _topic("topic_name", {
            "partition_index": 0, "error_code": int(msg.error_code), "leader_id": msg.leader_id,
            "leader_epoch": msg.leader_epoch})}
    elif isinstance(msg, m.FetchResponse):
        part = {"partition_index": 0, "error_code": int(msg.error_code),
                "high_watermark": msg.high_watermark, "last_stable_offset": msg.high_watermark,
                "log_start_offset": msg.log_start_offset,
                "current_leader": {"leader_id": msg.current_leader.leader_id,
                                   "leader_epoch": msg.current_leader.epoch},
                "records": encode_batches(msg.records)}
        if msg.diverging_epoch is not None:
            part["diverging_epoch"] = {"epoch": msg.diverging_epoch.epoch,
                                       "end_offset": msg.diverging_epoch.offset}
        if msg.snapshot_id is not None:
            part["snapshot_id"] = {"end_offset": msg.snapshot_id.offset, "epoch": msg.snapshot_id.epoch}
        body = {"responses": [{"topic_id": METADATA_TOPIC_ID, "partitions": [part]}]}
    elif isinstance(msg, m.FetchSnapshotResponse):
        sid = msg.snapshot_id or m.OffsetAndEpoch(0, 0)
        body = {"error_code": 0, "topics": _topic("name", {
            "index": 0, "error_code": int(msg.error_code),
            "snapshot_id": {"end_offset": sid.offset, "epoch": sid.epoch},
            "current_leader": {"leader_id": msg.current_leader.leader_id,
                               "leader_epoch": msg.current_leader.epoch},
            "size": msg.size, "position": msg.position, "unaligned_records": msg.unaligned_records})}
    else:
        raise TypeError(f"not a raft response: {msg!r}")
    return api, VERSIONS[api], body


def _error(code: int) -> m.Errors:
    try:
        return m.Errors(code)
    except ValueError:
        return m.Errors.INVALID_REQUEST


def response_from_wire(api: str, body: dict):
    """The core response in a wire response body; raises NotRaftMessage on a top-level error."""
    if body.get("error_code"):
        raise NotRaftMessage(f"{api} failed with error {body['error_code']}")
    if api == "Vote":
        p = _only_partition(body, "topics", "topic_name")
        return m.VoteResponse(_error(p["error_code"]), p["leader_id"], p["leader_epoch"],
                              p["vote_granted"], p["pre_vote"])
    if api in ("BeginQuorumEpoch", "EndQuorumEpoch"):
        p = _only_partition(body, "topics", "topic_name")
        cls = m.BeginQuorumEpochResponse if api == "BeginQuorumEpoch" else m.EndQuorumEpochResponse
        return cls(_error(p["error_code"]), p["leader_id"], p["leader_epoch"])
    if api == "Fetch":
        p = _metadata_partition(body, "responses")
        return m.FetchResponse(
            _error(p["error_code"]), _leader(p["current_leader"]), p["high_watermark"],
            max(p["log_start_offset"], 0), decode_raft_batches(p["records"] or b""),
            _offset_and_epoch(p["diverging_epoch"]), _offset_and_epoch(p["snapshot_id"]))
    if api == "FetchSnapshot":
        p = _only_partition(body, "topics", "name")
        return m.FetchSnapshotResponse(
            _error(p["error_code"]), _leader(p["current_leader"]),
            _offset_and_epoch(p["snapshot_id"]), p["size"], p["position"],
            bytes(p["unaligned_records"] or b""))
    raise NotRaftMessage(f"{api} is not a quorum api")
