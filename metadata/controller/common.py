"""Shared pieces of the controller: its configuration, what a request handler is given (its
context and transaction), results and errors."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from random import Random
from typing import Callable, Mapping

from kraft.protocol.error_codes import ErrorCode
from metadata.controller.configs import GROUP_BROKER_DEFAULTS
from metadata.controller.sessions import BrokerSessions
from metadata.delta import MetadataDelta
from metadata.image import MetadataImage
from metadata.serde import MetadataRecord


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    """The controller's settings, under Kafka's names (see ``from_properties``)."""

    node_id: int
    cluster_id: str
    num_partitions: int = 1
    default_replication_factor: int = 1
    broker_session_timeout_ms: int = 9000
    # kraft.broker.session.disconnect.timeout.ms (sessions.BrokerSessions); < 0: off
    broker_session_disconnect_timeout_ms: int = 1000
    max_idle_interval_ms: int = 500  # metadata.max.idle.interval.ms (0 disables NoOpRecords)
    unclean_leader_election_enable: bool = False
    unclean_leader_election_interval_ms: int = 300_000
    delete_topic_enable: bool = True
    producer_id_block_size: int = 1000
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_ms: int = 300_000
    leader_imbalance_per_broker_percentage: int = 10
    # group.consumer.* (session and heartbeat, their bounds): what a group's own configs are
    # checked against
    group_consumer: Mapping[str, int] = field(default_factory=lambda: dict(GROUP_BROKER_DEFAULTS))

    @classmethod
    def from_properties(cls, props: Mapping[str, object], *, cluster_id: str) -> "ControllerConfig":
        """Build from ``server.properties`` keys (values as strings or already typed)."""

        def get(key, conv, default):
            v = props.get(key)
            return default if v is None else conv(v)

        def to_bool(v):
            return v if isinstance(v, bool) else str(v).strip().lower() == "true"

        return cls(
            node_id=int(props["node.id"]),
            cluster_id=cluster_id,
            num_partitions=get("num.partitions", int, 1),
            default_replication_factor=get("default.replication.factor", int, 1),
            broker_session_timeout_ms=get("broker.session.timeout.ms", int, 9000),
            broker_session_disconnect_timeout_ms=get(
                "kraft.broker.session.disconnect.timeout.ms", int, 1000),
            max_idle_interval_ms=get("metadata.max.idle.interval.ms", int, 500),
            unclean_leader_election_enable=get("unclean.leader.election.enable", to_bool, False),
            unclean_leader_election_interval_ms=get("unclean.leader.election.interval.ms", int, 300_000),
            delete_topic_enable=get("delete.topic.enable", to_bool, True),
            auto_leader_rebalance_enable=get("auto.leader.rebalance.enable", to_bool, True),
            leader_imbalance_check_interval_ms=get(
                "leader.imbalance.check.interval.seconds", lambda v: int(v) * 1000, 300_000),
            leader_imbalance_per_broker_percentage=get("leader.imbalance.per.broker.percentage", int, 10),
            group_consumer={key: get(key, int, default) for key, default in GROUP_BROKER_DEFAULTS.items()},
        )


@dataclass(frozen=True, slots=True)
class ControllerContext:
    """What a request handler uses besides the request and its ``Txn`` (which holds the
    working image and the records being written): the settings, the random source of new
    ids and placements, and the brokers' sessions.  The QuorumController owns them and hands
    every handler the same context, so a handler never sees the controller itself."""

    config: ControllerConfig
    rng: Random
    sessions: BrokerSessions


@dataclass(frozen=True, slots=True)
class ControllerResult:
    """What one request or tick produced.

    ``records`` must be appended to the metadata log as one atomic batch, at once and in
    the order given; they are expected at offsets ``base_offset .. commit_offset``.  Send
    ``response`` (None for a tick) only once the log has committed ``commit_offset``:
    that is the last record of this result, or, when it wrote nothing, the last record
    written before it (so a reply never reveals state that could still be lost).
    """

    records: tuple[MetadataRecord, ...]
    response: dict | None
    base_offset: int
    commit_offset: int
    values: tuple[bytes, ...] = ()  # ``records`` encoded, as they go to the log

    @property
    def last_offset(self) -> int:
        return self.commit_offset


def named_twice(keys) -> set:
    """The keys that appear more than once (a request naming one resource twice is refused
    for it, as Kafka does)."""
    return {key for key, count in Counter(keys).items() if count > 1}


class ApiError(Exception):
    """A request (or one item of it) fails with a Kafka error code."""

    def __init__(self, code: ErrorCode, message: str | None = None):
        super().__init__(message or code.name)
        self.code = code
        self.message = message


class Txn:
    """Records being built for one result, and the image they lead to.

    Every record added is replayed at once, so later checks in the same request (the
    second of two topics, the next partition's election) see the earlier ones.
    """

    def __init__(self, image: MetadataImage, base_offset: int):
        self.base = image
        self.base_offset = base_offset
        self.records: list[MetadataRecord] = []
        self._delta = MetadataDelta(image)
        self._image: MetadataImage | None = image

    def add(self, *records: MetadataRecord) -> None:
        for record in records:
            self._delta.replay(record)
            self.records.append(record)
        self._image = None

    @property
    def next_offset(self) -> int:
        """The offset the next added record will have."""
        return self.base_offset + len(self.records)

    def partition(self, topic_id, index: int):
        """A partition as the records added so far leave it.  Cheaper than ``image``, which
        after an add is built again whole (every topic's entry copied): a handler changing
        partition after partition reads them here (AlterPartition of 3,000 partitions beside
        9,000 topics took 38 s through ``image``)."""
        return self._delta.partition(topic_id, index)

    @property
    def image(self) -> MetadataImage:
        if self._image is None:
            self._image = self._delta.apply(self.next_offset - 1)
        return self._image


# A request handler: (context, transaction, API version, decoded request, time) -> response.
# It adds its records to the transaction; an ApiError fails the whole request.
Handler = Callable[[ControllerContext, Txn, int, dict, int], dict]


def error_response(api: str, body: dict, code: ErrorCode, message: str | None = None) -> dict:
    """A response to ``body`` that fails every item with ``code``."""
    code = int(code)
    if api == "CreateTopics":
        return {"topics": [
            {"name": t["name"], "error_code": code, "error_message": message}
            for t in body["topics"]
        ]}
    if api == "DeleteTopics":
        items = body["topics"] or [{"name": n, "topic_id": None} for n in body["topic_names"]]
        out = []
        for t in items:
            item = {"name": t["name"], "error_code": code, "error_message": message}
            if t.get("topic_id") is not None:
                item["topic_id"] = t["topic_id"]
            out.append(item)
        return {"responses": out}
    if api == "CreatePartitions":
        return {"results": [
            {"name": t["name"], "error_code": code, "error_message": message} for t in body["topics"]
        ]}
    if api in ("IncrementalAlterConfigs", "AlterConfigs"):
        return {"responses": [
            {"error_code": code, "error_message": message, "resource_type": r["resource_type"],
             "resource_name": r["resource_name"]}
            for r in body["resources"]
        ]}
    if api == "ElectLeaders":
        return {"error_code": code, "replica_election_results": []}
    if api == "AlterUserScramCredentials":
        users = dict.fromkeys(i["name"] for i in body["deletions"] + body["upsertions"])
        return {"results": [{"user": u, "error_code": code, "error_message": message} for u in users]}
    if api == "DescribeUserScramCredentials":
        return {"error_code": code, "error_message": message, "results": []}
    if api == "CreateAcls":
        return {"results": [{"error_code": code, "error_message": message} for _ in body["creations"]]}
    if api == "DeleteAcls":
        return {"filter_results": [{"error_code": code, "error_message": message, "matching_acls": []}
                                   for _ in body["filters"]]}
    if api == "AlterPartitionReassignments":
        return {"error_code": code, "error_message": message, "responses": [
            {"name": t["name"], "partitions": [
                {"partition_index": p["partition_index"], "error_code": code, "error_message": message}
                for p in t["partitions"]]} for t in body["topics"]]}
    if api == "ListPartitionReassignments":
        return {"error_code": code, "error_message": message, "topics": []}
    if api == "AlterClientQuotas":
        return {"entries": [{"error_code": code, "error_message": message, "entity": e["entity"]}
                            for e in body["entries"]]}
    if api == "DescribeClientQuotas":
        return {"error_code": code, "error_message": message, "entries": None}
    if api == "UpdateFeatures":
        return {"error_code": code, "error_message": message, "results": [
            {"feature": u["feature"], "error_code": code, "error_message": message} for u in body["feature_updates"]]}
    if api in ("UnregisterBroker", "ControllerRegistration", "DescribeAcls"):
        return {"error_code": code, "error_message": message}
    # AlterPartition, BrokerRegistration, BrokerHeartbeat, AllocateProducerIds
    return {"error_code": code}
