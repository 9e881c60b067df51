"""The broker's request router: every client API, answered from the metadata image, the
replica manager, or (for changes) by forwarding to the active controller."""

from __future__ import annotations

import logging

import trio

from broker import broker_loggers
from broker.authorization import ACL_APIS, RequestAuthorization, security_disabled, with_every_operation
from broker.config_defaults import describe_resource, with_created_configs
from broker.controller_channel import ControllerChannel, ControllerUnavailable
from broker.data_path import DataPath
from broker.delete_records import delete_records
from broker.describe_producers import describe_producers
from broker.metadata_listener import MetadataListener
from broker.producer_ids import ProducerIdAllocator, ProducerIdError
from broker.txn_markers import TxnMarkerWriter
from kraft.protocol import codec, rpc
from kraft.protocol.error_codes import ErrorCode
from kraft.protocol.schema import Versions
from kraft.server_config import ServerConfig
from metadata.controller.topics import INTERNAL_TOPICS
from metadata.features import api_versions_fields
from metadata.image import ConfigResourceType

log = logging.getLogger(__name__)

# The versions the broker serves: what it implements, within the schema table's range.
BROKER_APIS: dict[str, tuple[int, int]] = {
    "Produce": (3, 11), "Fetch": (4, 17), "ListOffsets": (1, 10), "Metadata": (0, 12),
    "OffsetForLeaderEpoch": (2, 4), "ApiVersions": (0, 4), "CreateTopics": (2, 7),
    "DeleteTopics": (1, 6), "CreatePartitions": (0, 3), "DescribeConfigs": (1, 4),
    "AlterConfigs": (0, 2), "IncrementalAlterConfigs": (0, 1), "InitProducerId": (0, 5), "DescribeCluster": (0, 1),
    "DescribeQuorum": (0, 2), "DescribeLogDirs": (0, 4), "WriteTxnMarkers": (0, 1), "DescribeProducers": (0, 0),
    "DescribeUserScramCredentials": (0, 0), "AlterUserScramCredentials": (0, 0),
    "DeleteRecords": (0, 2), "ElectLeaders": (0, 2), "UnregisterBroker": (0, 0),
    "AlterPartitionReassignments": (0, 0), "ListPartitionReassignments": (0, 0),
    "DescribeAcls": (0, 3), "CreateAcls": (0, 3), "DeleteAcls": (0, 3),
    "DescribeClientQuotas": (0, 1), "AlterClientQuotas": (0, 1),
    "AddRaftVoter": (0, 0), "RemoveRaftVoter": (0, 0), "UpdateFeatures": (0, 2), "DescribeTopicPartitions": (0, 0),
}
VOTER_CHANGES = frozenset({"AddRaftVoter", "RemoveRaftVoter"})
# Describe too: answered from the controller's image, it sees a change the moment it commits.
FORWARDED = {"CreateTopics", "DeleteTopics", "CreatePartitions", "IncrementalAlterConfigs", "AlterConfigs",
             "DescribeQuorum", "DescribeUserScramCredentials", "AlterUserScramCredentials",
             "ElectLeaders", "UnregisterBroker", "AlterPartitionReassignments", "ListPartitionReassignments",
             "DescribeClientQuotas", "AlterClientQuotas", "AddRaftVoter", "RemoveRaftVoter", "UpdateFeatures",
             *ACL_APIS}
# Answered before the broker is ready: clients send it first, and it tells only what this
# broker speaks, which is true from the start.  Everything else waits for readiness.
ANSWERED_BEFORE_READY = frozenset({"ApiVersions"})
METADATA_STEP = 2000  # partitions a Metadata answer builds before giving the event loop back


def supported_versions(apis: dict[str, tuple[int, int]]) -> dict[int, Versions]:
    return {rpc.API_KEYS[name]: Versions(lo, hi) for name, (lo, hi) in apis.items()}


class BrokerApi:
    def __init__(self, config: ServerConfig, cluster_id: str, metadata: MetadataListener,
                 data_path: DataPath, channel: ControllerChannel, nursery: trio.Nursery,
                 groups=None, coordinators=None, broker_epoch=lambda: -1, ready: trio.Event | None = None,
                 transactions=None, producer_ids: ProducerIdAllocator | None = None,
                 voter_channel: ControllerChannel | None = None):
        self.config = config
        self.cluster_id = cluster_id
        self.metadata = metadata
        self.data = data_path
        self.channel = channel
        # AddRaftVoter and RemoveRaftVoter wait at the controller until the new voter set
        # commits (a new voter first catches up, up to the request's timeout_ms): on a
        # connection of their own, the forwarded requests behind them are not held up.
        self.voter_channel = voter_channel or channel
        self.nursery = nursery
        self.groups = groups  # GroupCoordinatorService
        self.coordinators = coordinators  # CoordinatorLocator
        self._broker_epoch = broker_epoch
        if ready is None:
            ready = trio.Event()
            ready.set()
        self.ready = ready  # set once, when this broker may serve clients (cli.node)
        apis = dict(BROKER_APIS)
        if groups is not None:
            from broker.group.service import group_api_versions

            apis.update(group_api_versions(config))
            apis["FindCoordinator"] = (0, 6)
        self.supported = supported_versions(apis)
        self.producer_ids = producer_ids or ProducerIdAllocator(channel, config.node_id, broker_epoch)
        self.transactions = transactions  # TransactionService
        if transactions is not None:
            from broker.txn.service import TXN_API_VERSIONS

            apis.update(TXN_API_VERSIONS)
            self.supported = supported_versions(apis)
        self._auto_creating: set[str] = set()
        # (No data path: tests of the request router alone.)
        self.txn_markers = (TxnMarkerWriter(data_path.replicas, config["request.timeout.ms"])
                            if data_path is not None else None)
        self._partitions_cache: dict = {}  # topic name -> (topic, live brokers, Metadata partitions)
        # ACLs (broker.authorization): None without authorizer.class.name, as Kafka
        self.authorization = RequestAuthorization.from_config(config, lambda: self.metadata.image)

    async def handle(self, request: rpc.Request, listener: str | None = None) -> dict | None:
        """Answer ``request``; ``listener``: the listener it arrived on, whose endpoints
        Metadata, DescribeCluster and FindCoordinator name (as Kafka does)."""
        if not self.ready.is_set() and request.api not in ANSWERED_BEFORE_READY:
            await self._until_ready(request.api, request.body)
        if self.authorization is not None:
            return await self.authorization.handle(request, lambda allowed: self._route(allowed, listener))
        return with_every_operation(request.api, request.version, request.body, await self._route(request, listener))

    async def produce_burst(self, requests: list[rpc.Request]) -> list | None:
        """Consecutive Produce requests of one connection answered together
        (``DataPath.produce_burst``), or None when each must go through ``handle`` (before
        the broker is ready, or with ACLs, which decide per request)."""
        if not self.ready.is_set() or self.authorization is not None:
            return None
        return await self.data.produce_burst([r.body for r in requests], requests[0].version)

    async def _route(self, request: rpc.Request, listener: str | None) -> dict | None:
        api, version, body = request.api, request.version, request.body
        if api == "Produce":
            return await self.data.produce(body, version)
        if api == "Fetch":
            return await self.data.fetch(body, version)
        if api == "ListOffsets":
            return self.data.list_offsets(body, version)
        if api == "Metadata":
            return await self.metadata_response(body, version, listener)
        if api == "DescribeTopicPartitions":
            return self.describe_topic_partitions(body, listener)
        if api == "ApiVersions":
            return self.api_versions(version)
        if api == "OffsetForLeaderEpoch":
            return self.data.offset_for_leader_epoch(body, version)
        if api == "WriteTxnMarkers":
            return self.txn_markers.write(body, version)
        if api in ACL_APIS and self.authorization is None:
            return security_disabled(api, body)
        if api == "IncrementalAlterConfigs" and broker_loggers.names_loggers(body):
            return await broker_loggers.alter_configs(
                self.config.node_id, body, lambda rest: self.forward("IncrementalAlterConfigs", version, rest))
        if api == "CreateTopics" and version >= 5:
            return with_created_configs(self.config, self.metadata.image, body, await self.forward(api, version, body))
        if api in FORWARDED:
            return await self.forward(api, version, body)
        if api == "DescribeConfigs":
            return self.describe_configs(body)
        if api == "DescribeCluster":
            return self.describe_cluster(body, listener)
        if api == "DescribeLogDirs":
            results = await self.data.replicas.describe_log_dirs(body["topics"])
            return {"error_code": 0, "results": results}
        if api == "DescribeProducers":
            return describe_producers(self.data.replicas, body)
        if api == "DeleteRecords":
            return await delete_records(self.data.replicas, body)
        if api == "InitProducerId":
            return await self.init_producer_id(body, version)
        if api == "FindCoordinator":
            return self.coordinators.find(body, version,
                                          self._endpoint if listener is None else
                                          lambda broker: self._endpoint(broker, listener))
        if self.transactions is not None and api in self.transactions.apis:
            return await self.transactions.handle(api, version, body)
        if self.groups is not None and api in ("OffsetCommit", "TxnOffsetCommit"):
            return await self._commit_offsets(api, version, body, request.header.client_id)
        if self.groups is not None and api in self.supported_names:
            # A member's client host as Kafka reports it: the peer's address, "/127.0.0.1".
            host = request.client_host
            return await self.groups.handle(api, version, body, client_id=request.header.client_id,
                                            client_host=f"/{host}" if host and host != "?" else "")
        raise AssertionError(f"{api} is advertised but has no handler")

    async def _commit_offsets(self, api: str, version: int, body: dict, client_id: str | None) -> dict:
        """(Txn)OffsetCommit: as Kafka, an offset for a partition that does not exist is
        refused (UNKNOWN_TOPIC_OR_PARTITION) before the group coordinator sees the request,
        and the others are committed."""
        image = self.metadata.image

        def exists(name: str, index: int) -> bool:
            topic = image.topic(name)
            return topic is not None and index in topic.partitions

        unknown = {(t["name"], p["partition_index"]) for t in body["topics"] for p in t["partitions"]
                   if not exists(t["name"], p["partition_index"])}
        if not unknown:
            return await self.groups.handle(api, version, body, client_id=client_id)
        known_topics = [{**t, "partitions": [p for p in t["partitions"] if (t["name"], p["partition_index"]) not in unknown]}
                        for t in body["topics"]]
        known_topics = [t for t in known_topics if t["partitions"]]
        answered = {}
        if known_topics:
            response = await self.groups.handle(api, version, {**body, "topics": known_topics}, client_id=client_id)
            answered = {(t["name"], p["partition_index"]): p["error_code"]
                        for t in response["topics"] for p in t["partitions"]}
        else:
            response = {"throttle_time_ms": 0}
        return {**response, "topics": [
            {"name": t["name"], "partitions": [
                {"partition_index": p["partition_index"],
                 "error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) if (t["name"], p["partition_index"]) in unknown
                 else answered.get((t["name"], p["partition_index"]), 0)}
                for p in t["partitions"]]} for t in body["topics"]]}

    async def _until_ready(self, api: str, body: dict) -> None:
        """Hold a request that arrives before this broker is ready, as Kafka's broker reads
        no request until it is: answered early, a Metadata names no broker and no
        controller, and librdkafka waits for a controller until its request times out,
        while a held request simply takes longer.  The wait is bounded by the request's
        own timeout (30 s without one): past it the client has given up anyway, and an
        answer from the state at hand frees the connection."""
        with trio.move_on_after(_timeout_s(body)):
            await self.ready.wait()
            return
        log.info("answering %s before this broker is ready", api)

    # ------------------------------------------------------------------ metadata

    def api_versions(self, version: int = 0) -> dict:
        """The APIs this broker serves and, from version 3, the features it supports and the
        cluster finalized (kafka-features describe)."""
        return {"error_code": 0, "api_keys": [
            {"api_key": k, "min_version": v.lo, "max_version": v.hi} for k, v in sorted(self.supported.items())],
            **api_versions_fields(self.metadata.image, version)}

    def _active_brokers(self):
        return [b for b in self.metadata.image.active_brokers()]

    def _endpoint(self, broker, listener: str | None = None):
        if listener is not None:
            for e in broker.listeners:
                if e.name == listener:
                    return e
        for e in broker.listeners:
            if e.name == "PLAINTEXT" or not self.config.controller_listener_names or \
                    e.name not in self.config.controller_listener_names:
                return e
        return None

    async def metadata_response(self, body: dict, version: int, listener: str | None = None) -> dict:
        """Built from one image; the event loop is given back every ``METADATA_STEP``
        partitions not cached: answering for 100,000 that all changed (a broker fenced)
        held a node's loop 2.5 s, past the quorum's fetch timeout (issue 19)."""
        image = self.metadata.image
        brokers = []
        alive = set()
        for b in self._active_brokers():
            e = self._endpoint(b, listener)
            if e is not None:
                brokers.append({"node_id": b.id, "host": e.host, "port": e.port, "rack": b.rack})
                alive.add(b.id)
        requested = body["topics"]
        unknown_ids = {}  # index in names -> a requested topic id that no topic has
        if requested is None or (version == 0 and not requested):
            names = sorted(image.topics_by_name)
        else:
            names = []
            for t in requested:
                name = t["name"]
                topic_id = t.get("topic_id")
                if topic_id is not None and topic_id.int:  # by id, the name ignored, as Kafka does
                    found = image.topic_by_id(topic_id)
                    name = found.name if found else None
                    if found is None:
                        unknown_ids[len(names)] = topic_id
                names.append(name)
        topics = []
        if version < 12 and None in names:
            # Before v12 a request cannot name a topic by id, and the response cannot hold a
            # null name (Kafka refuses such a request as invalid).
            return {"brokers": brokers, "cluster_id": self.cluster_id, "controller_id": -1,
                    "topics": [{"error_code": ErrorCode.INVALID_REQUEST, "name": name or "", "partitions": []}
                               for name in names], "cluster_authorized_operations": -2147483648}
        auto_create = requested is not None and body.get("allow_auto_topic_creation", True) and \
            self.config["auto.create.topics.enable"]
        built = 0  # partitions built since the loop last ran
        for i, name in enumerate(names):
            if built >= METADATA_STEP:
                built = 0
                await trio.sleep(0)
            topic = image.topic(name) if name is not None else None
            if i in unknown_ids:
                topics.append({"error_code": ErrorCode.UNKNOWN_TOPIC_ID, "name": None, "topic_id": unknown_ids[i],
                               "partitions": [], "topic_authorized_operations": -2147483648})
                continue
            if topic is None:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if name is not None else ErrorCode.UNKNOWN_TOPIC_ID
                if name is not None and not _legal_topic_name(name):
                    error = ErrorCode.INVALID_TOPIC_EXCEPTION  # as Kafka, which checks the name first
                elif auto_create and name:
                    self._auto_create(name)
                    error = ErrorCode.LEADER_NOT_AVAILABLE
                topics.append({"error_code": error, "name": name, "partitions": [],
                               "topic_authorized_operations": -2147483648})
                continue
            partitions, was_built = self._partitions(topic, alive)
            built += len(partitions) if was_built else 0
            topics.append({"error_code": 0, "name": name, "topic_id": topic.id,
                           "is_internal": name in INTERNAL_TOPICS, "partitions": partitions,
                           "topic_authorized_operations": -2147483648})
        return {"brokers": brokers, "cluster_id": self.cluster_id, "controller_id": self._controller_id(alive),
                "topics": topics, "cluster_authorized_operations": -2147483648}

    def describe_topic_partitions(self, body: dict, listener: str | None = None) -> dict:
        """DescribeTopicPartitions (``broker.describe_topic_partitions``), from one image."""
        from broker import describe_topic_partitions as dtp

        alive = {b.id for b in self._active_brokers() if self._endpoint(b, listener) is not None}
        try:
            return dtp.describe(body, self.metadata.image, lambda topic: self._partitions(topic, alive)[0],
                                self.config["max.request.partition.size.limit"], _legal_topic_name)
        except dtp.InvalidRequest as exc:
            log.info("DescribeTopicPartitions refused: %s", exc)
            return dtp.error_answer(body, ErrorCode.INVALID_REQUEST)

    def _partitions(self, topic, alive: set[int]) -> tuple[list[dict], bool]:
        """A topic's partitions as Metadata answers them, and whether they were built now
        (not cached): kept while the topic and the live brokers stay the same, since images
        share unchanged topics and clients ask again and again (librdkafka refreshes the
        metadata of 20,000 partitions on every leader error, and building the answer was an
        eighth of a node's CPU under load)."""
        cached = self._partitions_cache.get(topic.name)
        if cached is not None and cached[0] is topic and cached[1] == alive:
            return cached[2], False
        partitions = []
        for index in sorted(topic.partitions):
            reg = topic.partitions[index]
            leader = reg.leader if reg.leader in alive else -1
            partitions.append({
                "error_code": 0 if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
                "partition_index": index, "leader_id": leader, "leader_epoch": reg.leader_epoch,
                "replica_nodes": list(reg.replicas), "isr_nodes": list(reg.isr),
                "offline_replicas": [r for r in reg.replicas if r not in alive]})
        if len(self._partitions_cache) > 10_000:
            self._partitions_cache.clear()
        self._partitions_cache[topic.name] = (topic, frozenset(alive), partitions)
        return partitions, True

    def _controller_id(self, alive: set[int]) -> int:
        """The "controller" named to clients, which send it their admin requests: in KRaft any
        broker will do (it forwards them to the active controller; Kafka names a random
        live one).  This broker itself when live: the client has just reached it, and knows
        it from this very response.  kafka-python's admin client asks for the controller
        with a Metadata of its own and then sends to that id through the broker list of an
        earlier Metadata, so naming another broker that became live in between failed its
        create_topics with UnknownBrokerIdError while a cluster was starting."""
        if self.config.node_id in alive:
            return self.config.node_id
        return min(alive) if alive else -1

    def _auto_create(self, name: str) -> None:
        if name in INTERNAL_TOPICS:  # never as a plain topic: Kafka gives them their settings
            if self.coordinators is not None:
                self.coordinators.create_internal_topic(name)
            return
        if name in self._auto_creating:
            return
        self._auto_creating.add(name)

        async def create():
            try:
                body = {"topics": [{"name": name, "num_partitions": -1, "replication_factor": -1,
                                    "assignments": [], "configs": []}], "timeout_ms": 30000,
                        "validate_only": False}
                await self.channel.request("CreateTopics", 7, body)
            except ControllerUnavailable as exc:
                log.info("auto-creating %s failed: %s", name, exc)
            finally:
                self._auto_creating.discard(name)

        self.nursery.start_soon(create)

    def describe_cluster(self, body: dict, listener: str | None = None) -> dict:
        if body.get("endpoint_type", 1) != 1:  # KIP-919: controllers are asked on their own listener
            return {"error_code": ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                    "error_message": "The broker does not support endpoint type CONTROLLER",
                    "endpoint_type": body["endpoint_type"], "cluster_id": self.cluster_id,
                    "controller_id": -1, "brokers": [], "cluster_authorized_operations": -2147483648}
        brokers = []
        for b in self._active_brokers():
            e = self._endpoint(b, listener)
            if e is not None:
                brokers.append({"broker_id": b.id, "host": e.host, "port": e.port, "rack": b.rack})
        return {"error_code": 0, "error_message": None, "endpoint_type": 1, "cluster_id": self.cluster_id,
                "controller_id": self._controller_id({b["broker_id"] for b in brokers}), "brokers": brokers,
                "cluster_authorized_operations": -2147483648}

    def describe_configs(self, body: dict) -> dict:
        results = []
        for res in body["resources"]:
            results.append(describe_resource(self.config, self.metadata.image, res,
                                             body.get("include_synonyms", False)))
        return {"results": results}

    # ------------------------------------------------------------------ forwarding

    async def forward(self, api: str, version: int, body: dict) -> dict:
        try:
            channel = self.voter_channel if api in VOTER_CHANGES else self.channel
            return await channel.request(api, version, body, timeout_s=_timeout_s(body))
        except ControllerUnavailable as exc:
            log.info("forwarding %s failed: %s", api, exc)
            return _forward_error(api, body, version)

    async def init_producer_id(self, body: dict, version: int) -> dict:
        if body["transactional_id"] is not None:
            if self.transactions is None:
                return {"error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                        "producer_id": -1, "producer_epoch": -1}
            return await self.transactions.init_producer_id(body, version)
        try:
            pid = await self.producer_ids.next_id()
        except ProducerIdError as exc:
            return {"error_code": exc.error_code, "producer_id": -1, "producer_epoch": -1}
        return {"error_code": 0, "producer_id": pid, "producer_epoch": 0}

    @property
    def supported_names(self) -> set[str]:
        return {rpc.API_NAMES[k] for k in self.supported}


def _timeout_s(body: dict) -> float:
    ms = body.get("timeout_ms") or 30000
    return max(1.0, min(ms, 120000) / 1000)


def _legal_topic_name(name: str) -> bool:
    import re

    return 0 < len(name) <= 249 and name not in (".", "..") and re.fullmatch(r"[A-Za-z0-9._-]+", name) is not None


def _forward_error(api: str, body: dict, version: int) -> dict:
    """Every item of the request answered with NOT_CONTROLLER's retriable cousin."""
    code = ErrorCode.REQUEST_TIMED_OUT
    out = codec.default_message(api, "response")
    if api == "CreateTopics":
        out["topics"] = [{"name": t["name"], "error_code": code, "num_partitions": -1,
                          "replication_factor": -1} for t in body["topics"]]
    elif api == "DeleteTopics":
        names = body.get("topic_names") or [t["name"] for t in body.get("topics", [])]
        out["responses"] = [{"name": n, "error_code": code} for n in names]
    elif api == "CreatePartitions":
        out["results"] = [{"name": t["name"], "error_code": code} for t in body["topics"]]
    elif api == "DescribeQuorum":
        out["error_code"] = code
    elif api == "AlterUserScramCredentials":
        users = dict.fromkeys(i["name"] for i in body["deletions"] + body["upsertions"])
        out["results"] = [{"user": u, "error_code": code, "error_message": None} for u in users]
    elif api in ("DescribeUserScramCredentials", "UnregisterBroker", "AddRaftVoter", "RemoveRaftVoter"):
        out["error_code"] = code
    elif api in ("AlterPartitionReassignments", "ListPartitionReassignments"):
        from metadata.controller.common import error_response

        out.update(error_response(api, body, code))
    elif api == "ElectLeaders":
        out["error_code"] = code
        out["replica_election_results"] = [
            {"topic": t["topic"], "partition_result": [
                {"partition_id": p, "error_code": code, "error_message": None} for p in t["partitions"]]}
            for t in body["topic_partitions"] or []]
    elif api in ACL_APIS or api in ("AlterClientQuotas", "DescribeClientQuotas", "UpdateFeatures"):
        from metadata.controller.common import error_response

        out.update(error_response(api, body, code))
    elif api in ("IncrementalAlterConfigs", "AlterConfigs"):
        out["responses"] = [{"error_code": code, "resource_type": r["resource_type"],
                             "resource_name": r["resource_name"]} for r in body["resources"]]
    return out


__all__ = ["BROKER_APIS", "BrokerApi", "ConfigResourceType", "supported_versions"]
