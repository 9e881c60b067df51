"""One kraft node: its roles (controller, broker or both) composed over one Raft driver.

Lifetime is one trio nursery.  SIGTERM or SIGINT starts a clean shutdown: a broker asks the
controller to move its leaderships away (controlled shutdown) and closes its logs cleanly;
a controller that leads the quorum resigns so the others elect at once.
"""

from __future__ import annotations

import functools
import logging
import signal
from random import Random

import trio

from broker import broker_loggers
from broker.api import BrokerApi
from broker.controller_channel import ControllerChannel
from broker.data_path import DataPath
from broker.group.service import GroupCoordinatorService
from broker.lifecycle import BrokerLifecycle
from broker.metadata_listener import MetadataListener
from broker.connection_limits import ConnectionLimits, ConnectionQuotas
from broker.authorization import RequestAuthorization, controller_check, with_every_operation
from broker.client_quotas import ClientQuotaEnforcer
from broker.network import serve_kafka
from broker.network_security import ListenerAuth
from broker.internal_topics import (GROUP_KEY_TYPE, OFFSETS_TOPIC, TRANSACTION_KEY_TYPE, TXN_STATE_TOPIC,
                                     CoordinatorLocator, InternalTopicStore)
from broker.producer_ids import ProducerIdAllocator
from broker.txn.markers import MarkerChannel
from broker.txn.service import TransactionService
from broker.txn.verification import TxnVerifier
from broker.replica_fetcher import ReplicaFetcherManager, broker_address
from broker.replica_manager import ReplicaManager
from kraft.client import KafkaClient
from kraft.metrics.stats import RequestMetrics
from kraft.protocol import rpc
from kraft.protocol.error_codes import ErrorCode
from kraft.raft.config import RaftConfig
from kraft.raft.disk import RaftStorage
from kraft.quorum_bootstrap import discover_voters, voters_at_start
from kraft.raft.driver import PeerAddress, RaftDriver
from kraft.security.config import PLAINTEXT_CLIENT, listener_security, node_client_security
from kraft.loop_watchdog import LoopWatchdog
from kraft.server_config import ServerConfig
from kraft.storage import read_bootstrap_records
from kraft.trio_run import run_trio
from metadata.controller import ControllerConfig, QuorumController
from metadata.controller.configs import GROUP_BROKER_DEFAULTS
from metadata.features import api_versions_fields
from metadata.controller_server import ControllerServer
from metadata.image import ConfigResourceType
from metadata.snapshot import SnapshotPolicy

log = logging.getLogger("kraft.node")

ALTER_PARTITION_BATCH = 1000  # ISR changes per AlterPartition request
ALTER_PARTITION_RETRY_S = 0.5  # before sending an unanswered ISR change again
QUORUM_APIS = {"Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "Fetch", "FetchSnapshot"}
INTER_BROKER_PURPOSES = {"replication", "txn-markers", "txn-verification"}  # the others talk to the controllers


class NodeSecurity:
    """A node's TLS and SASL (kraft.security), built once at start so that a bad key file or
    setting stops the node with a message naming it: the server side of each listener, and
    the client side towards the controllers (``sasl.mechanism.controller.protocol``) and
    towards the other brokers' inter-broker listener (``sasl.mechanism.inter.broker.protocol``)."""

    def __init__(self, config: ServerConfig):
        props = config.originals
        self.listeners = {e.listener: listener_security(props, e.listener, config.security_protocol(e.listener))
                          for e in config.listeners}
        controller = config.controller_listener_names[0]
        self.controller = self._client(config, controller, "sasl.mechanism.controller.protocol")
        self.inter_broker = PLAINTEXT_CLIENT
        if config.is_broker:
            self.inter_broker = self._client(config, config.inter_broker_listener,
                                             "sasl.mechanism.inter.broker.protocol")

    @staticmethod
    def _client(config: ServerConfig, listener: str, mechanism_key: str):
        protocol = config.security_protocol(listener)
        return node_client_security(config.originals, listener, protocol, config[mechanism_key])

    def auth(self, listener: str, scram_credentials, ready: trio.Event | None = None) -> ListenerAuth | None:
        security = self.listeners[listener]
        if security.protocol == "PLAINTEXT":
            return None
        return ListenerAuth(security, scram_credentials, ready)


class FanOutListener:
    """One Raft listener feeding several roles (combined mode: controller and broker)."""

    def __init__(self, listeners):
        self.listeners = listeners

    def handle_load_snapshot(self, snapshot_id, records):
        for listener in self.listeners:
            listener.handle_load_snapshot(snapshot_id, records)

    def handle_commit(self, batch):
        for listener in self.listeners:
            listener.handle_commit(batch)

    def handle_leader_change(self, leader):
        for listener in self.listeners:
            listener.handle_leader_change(leader)


def raft_config(config: ServerConfig, voter_ids) -> RaftConfig:
    from pathlib import Path

    from kraft.storage import parse_uuid_string, read_meta

    meta = read_meta(Path(config.metadata_log_dir))
    directory_id = parse_uuid_string(meta.directory_id) if meta is not None and meta.directory_id else None
    return RaftConfig(
        node_id=config.node_id, voters=frozenset(voter_ids),
        directory_id=directory_id,
        election_timeout_ms=config["controller.quorum.election.timeout.ms"],
        fetch_timeout_ms=config["controller.quorum.fetch.timeout.ms"],
        election_backoff_max_ms=config["controller.quorum.election.backoff.max.ms"],
        request_timeout_ms=config["controller.quorum.request.timeout.ms"],
    )


def controller_config(config: ServerConfig, cluster_id: str) -> ControllerConfig:
    props = {k: config[k] for k in ("node.id", "num.partitions", "default.replication.factor",
                                    "broker.session.timeout.ms",
                                    "kraft.broker.session.disconnect.timeout.ms",
                                    "metadata.max.idle.interval.ms",
                                    "unclean.leader.election.enable", "unclean.leader.election.interval.ms",
                                    "delete.topic.enable",
                                    "auto.leader.rebalance.enable", "leader.imbalance.check.interval.seconds",
                                    "leader.imbalance.per.broker.percentage", *GROUP_BROKER_DEFAULTS)}
    return ControllerConfig.from_properties(props, cluster_id=cluster_id)


class Node:
    def __init__(self, config: ServerConfig, cluster_id: str):
        self.config = config
        self.cluster_id = cluster_id
        # Where each controller listens: controller.quorum.voters, else (a dynamic quorum)
        # the voter set of the metadata log's newest snapshot, else what the bootstrap servers
        # name (_run); the Raft driver keeps it current.
        self.voters = {v.node_id: PeerAddress(v.host, v.port) for v in voters_at_start(config)}
        self.controller: ControllerServer | None = None
        self.metadata: MetadataListener | None = None
        self.replicas: ReplicaManager | None = None
        self.lifecycle: BrokerLifecycle | None = None
        self.driver: RaftDriver | None = None
        self.ready = trio.Event()  # the broker serves clients (Kafka: request processing enabled)
        self.security = NodeSecurity(config)  # raises SecurityConfigError before anything starts
        # What kraft.metrics.exporter reads at scrape time; with kraft.metrics.port unset,
        # connections time nothing (the broker's own counters are a few integers anyway).
        self.request_metrics = RequestMetrics() if config["kraft.metrics.port"] else None
        self.watchdog = LoopWatchdog(freeze=config["kraft.gc.freeze.enable"])
        self.data_path: DataPath | None = None
        self.controller_authorization: RequestAuthorization | None = None
        self.groups: GroupCoordinatorService | None = None

    def _own_host(self) -> str | None:
        hosts = {e.host for e in self.config.listeners if e.host}
        return hosts.pop() if len(hosts) == 1 and not hosts & {"0.0.0.0", "::"} else None

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        from kraft.metrics.exporter import serve_node_metrics

        metrics_server = serve_node_metrics(self)
        try:
            await self._run(task_status)
        finally:
            if metrics_server is not None:
                metrics_server.close()

    async def _run(self, task_status) -> None:
        config = self.config
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.watchdog.run)
            # Separate connections per purpose, as Kafka keeps separate network clients: a
            # server answers one connection's requests in order, so a heartbeat waiting for a
            # commit must never queue behind (or in front of) the Raft fetches that commit it.
            def client(purpose: str) -> KafkaClient:
                security = self.security.inter_broker if purpose in INTER_BROKER_PURPOSES else \
                    self.security.controller
                return KafkaClient(nursery, client_id=f"kraft-node-{config.node_id}-{purpose}",
                                   local_address=self._own_host(), security=security)
            if not self.voters:  # a dynamic quorum this node's log does not name yet
                found = await discover_voters(client("bootstrap"), config, log)
                self.voters.update({i: PeerAddress(h, p) for i, (h, p) in found.items()})
            listeners = []
            if config.is_controller:
                qc = QuorumController(controller_config(config, self.cluster_id),
                                      bootstrap=read_bootstrap_records(config))
                self.controller = ControllerServer(config.node_id, qc, snapshots=SnapshotPolicy(
                    config["metadata.log.max.record.bytes.between.snapshots"],
                    config["metadata.log.max.snapshot.interval.ms"]))
                listeners.append(self.controller)
            if config.is_broker:
                # combined: the broker takes the image the controller built of each batch (it
                # comes first in the FanOutListener) instead of building an equal one
                self.metadata = MetadataListener(
                    controller_image=(lambda: qc.image) if config.is_controller else None)
                listeners.append(self.metadata)
            storage = RaftStorage(config.metadata_log_dir, segment_bytes=config["metadata.log.segment.bytes"])
            if config.is_controller and config["controller.quorum.engine"] == "pysyncobj":
                from kraft.raft.pysyncobj_engine import PySyncObjEngine

                endpoint = next(config.listener(n) for n in config.controller_listener_names if config.listener(n))
                self.driver = PySyncObjEngine(raft_config(config, self.voters), storage, self.voters,
                                              FanOutListener(listeners),
                                              password=config["controller.quorum.pysyncobj.password"],
                                              cluster_id=self.cluster_id, bind_host=endpoint.host or "0.0.0.0")
            else:  # kraft's own KIP-595 engine; brokers are always its observers
                self.driver = RaftDriver(raft_config(config, self.voters), storage, client("raft"), self.voters,
                                         FanOutListener(listeners), cluster_id=self.cluster_id, rng=Random())
            if self.controller:
                self.controller.driver = self.driver
                if isinstance(self.driver, RaftDriver):  # its VotersRecords move the controller's next offset
                    self.driver.on_control_appended = self.controller.controller.skip_to
                endpoint = next(config.listener(n) for n in config.controller_listener_names if config.listener(n))
                controller = self.controller.controller
                self.controller_authorization = RequestAuthorization.from_config(
                    config, lambda: controller.image, check_of=controller_check)
                await nursery.start(functools.partial(
                    serve_kafka, self._controller_request, endpoint.host or "0.0.0.0", endpoint.port,
                    max_frame_bytes=config["socket.request.max.bytes"],
                    limits=ConnectionLimits.from_config(config), metrics=self.request_metrics,
                    auth=self.security.auth(endpoint.listener, lambda: controller.image.scram_credentials),
                    on_close=self.controller.connection_closed, name=f"listener {endpoint.listener}"))
                nursery.start_soon(self.controller.run)
            if config.is_broker:
                await self._start_broker(nursery, client)
            await nursery.start(self.driver.run)
            log.info("node %d started (%s)", config.node_id, ",".join(sorted(config.roles)))
            if config.is_controller and config.node_id not in self._current_voters():
                log.info("node %d is a controller outside controller.quorum.voters: it follows the "
                         "metadata log as an observer until `kraftctl metadata-quorum add-controller` "
                         "makes it a voter", config.node_id)
            task_status.started()
            with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for sig in signals:
                    log.info("received %s: shutting down", signal.Signals(sig).name)
                    break
            with trio.move_on_after(30):
                await self.shutdown()
            nursery.cancel_scope.cancel()
        if self.replicas is not None:
            self.replicas.close()
        log.info("node %d stopped", config.node_id)

    async def _start_broker(self, nursery: trio.Nursery, client) -> None:
        config = self.config
        self.replicas = ReplicaManager(config.node_id, config)
        # Channels to the active controller, each on a connection of its own, as Kafka's
        # broker keeps "heartbeat", "alter-partition" and "forwarding" channel managers: a
        # controller answers a connection's requests in order, so a forwarded request that
        # waits long (an AddRaftVoter waiting up to its timeout_ms for the new voter to catch
        # up) held every heartbeat queued behind it until the broker was fenced.
        def controller_channel(purpose: str) -> ControllerChannel:
            made = ControllerChannel(client(purpose), self.voters, lambda: self.metadata.leader.leader_id)
            self.metadata.leader_subscribers.append(made.on_leader_change)
            return made

        channel = controller_channel("forwarding")
        self.lifecycle = BrokerLifecycle(config, self.cluster_id, controller_channel("heartbeat"), self.metadata,
                                         offline_log_dirs=lambda: self.replicas.offline_log_dirs,
                                         quorum_gone=self._quorum_gone)
        data = self.data_path = DataPath(
            self.replicas, sendfile=config["kraft.fetch.sendfile.enable"],
            fetch_session_slots=config["max.incremental.fetch.session.cache.slots"],
            replica_selector=config["replica.selector.class"])
        groups = self.groups = GroupCoordinatorService(config.node_id, config,
                                                       InternalTopicStore(self.replicas, OFFSETS_TOPIC),
                                                       topics=lambda: self.replicas.image.topics_by_name,
                                                       group_configs=lambda group_id: self.replicas.image.config(
                                                           ConfigResourceType.GROUP, group_id))
        producer_ids = ProducerIdAllocator(channel, config.node_id, lambda: self.lifecycle.broker_epoch)
        inter_broker_listener = config.inter_broker_listener
        markers_client = client("txn-markers")

        def marker_channel(on_done, is_current):
            return MarkerChannel(markers_client, lambda: self.replicas.image, inter_broker_listener, on_done,
                                 is_current)

        transactions = TransactionService(config.node_id, config, InternalTopicStore(self.replicas, TXN_STATE_TOPIC),
                                          producer_ids, lambda: self.replicas.image, marker_channel)
        data.txn_verifier = TxnVerifier(
            config.node_id, transactions.verify, transactions.partition_for, lambda: self.replicas.image,
            client("txn-verification"), lambda image, broker: broker_address(image, broker, inter_broker_listener))

        def follow_coordinator_leadership(topic, index, is_leader):
            if topic == OFFSETS_TOPIC:
                (groups.on_become_leader if is_leader else groups.on_resign)(index)
            elif topic == TXN_STATE_TOPIC:
                (transactions.on_become_leader if is_leader else transactions.on_resign)(index)

        self.replicas.leadership_listeners.append(follow_coordinator_leadership)

        def follow_offsets_markers(topic, index, producer_id, producer_epoch, committed):
            if topic == OFFSETS_TOPIC:
                groups.on_txn_marker(index, producer_id, producer_epoch, committed)

        self.replicas.txn_marker_listeners.append(follow_offsets_markers)
        coordinators = CoordinatorLocator(config, self.replicas, channel, nursery, {
            GROUP_KEY_TYPE: (OFFSETS_TOPIC, groups.partition_for),
            TRANSACTION_KEY_TYPE: (TXN_STATE_TOPIC, transactions.partition_for)})
        api = BrokerApi(config, self.cluster_id, self.metadata, data, channel, nursery, groups=groups,
                        coordinators=coordinators, broker_epoch=lambda: self.lifecycle.broker_epoch,
                        ready=self.ready, transactions=transactions, producer_ids=producer_ids,
                        voter_channel=controller_channel("voter-changes"))
        await nursery.start(groups.run)
        await nursery.start(transactions.run)
        limits = ConnectionLimits.from_config(config)
        quotas = ConnectionQuotas(limits)  # one count for all of the broker's listeners, as Kafka
        client_quotas = ClientQuotaEnforcer.from_config(config, lambda: self.metadata.image.client_quotas)
        for endpoint in config.broker_listeners:
            auth = self.security.auth(endpoint.listener, lambda: self.metadata.image.scram_credentials, self.ready)
            await nursery.start(functools.partial(
                serve_kafka, functools.partial(api.handle, listener=endpoint.listener),
                endpoint.host or "0.0.0.0", endpoint.port, supported=api.supported,
                max_frame_bytes=config["socket.request.max.bytes"], limits=limits, quotas=quotas, auth=auth,
                metrics=self.request_metrics, client_quotas=client_quotas, produce_burst=api.produce_burst,
                name=f"listener {endpoint.listener}"))
        fetchers = ReplicaFetcherManager(config.node_id, self.replicas, client("replication"),
                                         inter_broker_listener,
                                         fetch_max_bytes=config["replica.fetch.response.max.bytes"],
                                         partition_max_bytes=config["replica.fetch.max.bytes"],
                                         wait_max_ms=config["replica.fetch.wait.max.ms"],
                                         min_bytes=config["replica.fetch.min.bytes"],
                                         backoff_s=config["replica.fetch.backoff.ms"] / 1000,
                                         broker_epoch=lambda: self.lifecycle.broker_epoch)
        nursery.start_soon(self.lifecycle.run)
        nursery.start_soon(self._become_ready)
        nursery.start_soon(self.replicas.run_reconciler)
        nursery.start_soon(self.replicas.run_maintenance)
        nursery.start_soon(self.replicas.run_epoch_checkpoints)
        nursery.start_soon(self.replicas.run_cleaner)
        nursery.start_soon(fetchers.run)
        nursery.start_soon(self._send_isr_proposals, controller_channel("alter-partition"))

    async def _become_ready(self) -> None:
        """Hand the metadata image to the replica manager only once this broker has caught up
        with the log, as Kafka's broker waits for its initial catch-up: a restarting broker
        replays the whole metadata history, and acting on the stale leaderships in it (leading
        an old epoch, truncating to an old leader's log) would serve or destroy data.  Then,
        once it is unfenced, let the client requests held until now through (BrokerApi)."""
        await self.lifecycle.registered.wait()
        image = await self.metadata.wait_for(lambda img: img.offset >= self.lifecycle.broker_epoch)
        log.info("metadata caught up at offset %d: taking on partitions", image.offset)
        self.replicas.publish(image)
        self.metadata.subscribers.append(lambda previous, image: self.replicas.publish(image))
        await self.metadata.wait_for(lambda _image: self.lifecycle.ready_to_serve())
        log.info("ready: serving clients at metadata offset %d", self.metadata.image.offset)
        self.ready.set()

    def _quorum_gone(self) -> bool:
        """Every other voter refused this node's last request to it, the leader among them:
        no controller is running to answer (every node of the cluster is stopping)."""
        driver = self.driver
        if not isinstance(driver, RaftDriver) or self.metadata.leader.leader_id == self.config.node_id:
            return False
        others = [v for v in self.voters if v != self.config.node_id]
        return bool(others) and all(v in driver.gone_peers for v in others)

    async def _send_isr_proposals(self, channel: ControllerChannel) -> None:
        """Send the leaders' ISR changes to the controller, every pending one in one
        AlterPartition request (at most ``ALTER_PARTITION_BATCH``), as Kafka's
        AlterPartitionManager does: one request per partition, one after the other, took
        minutes when thousands of replicas fell out of sync at once (issue 15)."""
        replicas = self.replicas
        while True:
            await replicas.isr_proposal_event.wait()
            replicas.isr_proposal_event = trio.Event()
            proposals, replicas.isr_proposals = replicas.isr_proposals, []
            again = []
            for start in range(0, len(proposals), ALTER_PARTITION_BATCH):
                again += await self._alter_partitions(channel, proposals[start:start + ALTER_PARTITION_BATCH])
            if again:  # unanswered or refused for a reason that may pass: after a pause
                await trio.sleep(ALTER_PARTITION_RETRY_S)
                for partition, proposal in again:
                    if partition.state.pending is proposal and replicas.get(partition.topic, partition.index) is partition:
                        replicas.propose(partition, proposal)

    async def _alter_partitions(self, channel: ControllerChannel, proposals: list) -> list:
        """Send ``proposals`` in one request; returns those to send again."""
        topics: dict[str, dict] = {}
        for partition, proposal in proposals:
            topic = topics.setdefault(partition.topic, {
                "topic_name": partition.topic, "topic_id": partition.topic_id, "partitions": []})
            # v3: each member with the broker epoch its last fetch carried (KIP-903): the
            # controller refuses one that has registered again since; the leader's own is
            # its registration's.
            epochs = proposal.broker_epochs or (-1,) * len(proposal.new_isr)
            topic["partitions"].append({
                "partition_index": partition.index, "leader_epoch": proposal.leader_epoch,
                "new_isr_with_epochs": [
                    {"broker_id": b, "broker_epoch": self.lifecycle.broker_epoch if b == self.config.node_id else e}
                    for b, e in zip(proposal.new_isr, epochs)],
                "leader_recovery_state": 0, "partition_epoch": proposal.partition_epoch})
        body = {"broker_id": self.config.node_id, "broker_epoch": self.lifecycle.broker_epoch,
                "topics": list(topics.values())}
        errors: dict[tuple, int] = {}  # (topic id, index) -> error code
        top_error = None  # for every partition: None when the controller did not answer
        try:
            resp = await channel.request("AlterPartition", 3, body, timeout_s=10)
        except Exception as exc:  # noqa: BLE001 - any failure: no answer
            log.info("AlterPartition of %d partitions failed: %s", len(proposals), exc)
            resp = None
        if resp is not None and resp["error_code"]:
            log.info("AlterPartition of %d partitions refused: %s", len(proposals),
                     ErrorCode(resp["error_code"]).name)
            top_error = resp["error_code"]
        elif resp is not None:
            top_error = ErrorCode.UNKNOWN_SERVER_ERROR  # a partition the answer left out
            for t in resp["topics"]:
                for p in t["partitions"]:
                    errors[(t["topic_id"], p["partition_index"])] = p["error_code"]
        again = []
        for partition, proposal in proposals:
            error = errors.get((partition.topic_id, partition.index), top_error)
            self.replicas.stats.isr_update(proposal.kind.value, ok=error == ErrorCode.NONE)
            if error != ErrorCode.NONE:
                if resp is not None and not resp["error_code"]:
                    log.info("%s: ISR change %s -> %s refused: %s", partition.name, proposal.kind.value,
                             list(proposal.new_isr), ErrorCode(error).name)
                # Pending until an answer proves it was not applied (see the method).
                if partition.on_alter_partition_error(proposal, None if error is None else ErrorCode(error)):
                    again.append((partition, proposal))
            else:
                log.info("%s: ISR %s -> %s", partition.name, proposal.kind.value, list(proposal.new_isr))
        return again

    async def _controller_request(self, request: rpc.Request) -> dict:
        if self.controller_authorization is not None:  # ACLs, as on the broker listeners
            return await self.controller_authorization.handle(request, self._route_controller_request)
        return with_every_operation(request.api, request.version, request.body,
                                    await self._route_controller_request(request))

    async def _route_controller_request(self, request: rpc.Request) -> dict:
        api = request.api
        if api in QUORUM_APIS:
            return await self.driver.handle(api, request.body)
        if api == "ApiVersions":
            from kraft.protocol import codec

            keys = sorted(rpc.API_KEYS[a] for a in ("ApiVersions", "Vote", "BeginQuorumEpoch",
                          "EndQuorumEpoch", "Fetch", "FetchSnapshot", "DescribeQuorum",
                          "DescribeCluster", "DescribeConfigs", "AddRaftVoter", "RemoveRaftVoter")) + sorted(
                rpc.API_KEYS[a] for a in _controller_apis())
            return {"error_code": 0, "api_keys": [
                {"api_key": k, "min_version": codec.versions_of(rpc.API_NAMES[k]).lo,
                 "max_version": codec.versions_of(rpc.API_NAMES[k]).hi} for k in keys],
                **api_versions_fields(self.controller.controller.image, request.version)}
        if api == "DescribeQuorum":
            return self.driver.describe_quorum()
        if api in ("AddRaftVoter", "RemoveRaftVoter"):
            return await self._change_voters(api, request.body)
        if api == "DescribeCluster":
            leader = self.driver.describe_quorum()["topics"][0]["partitions"][0]["leader_id"]
            return describe_controllers(request.body, self.cluster_id, self._current_voters(), leader)
        if api == "IncrementalAlterConfigs" and broker_loggers.names_loggers(request.body):
            # this controller's log levels (kafka-configs --bootstrap-controller --entity-type broker-loggers)
            return await broker_loggers.alter_configs(
                self.config.node_id, request.body,
                lambda rest: self.controller.handle(api, request.version, rest, request.connection_id))
        if api == "DescribeConfigs":  # a controller's own config (kafka-configs --bootstrap-controller)
            from broker.config_defaults import describe_resource

            return {"results": [describe_resource(self.config, self.controller.controller.image, res,
                                                  request.body.get("include_synonyms", False))
                                for res in request.body["resources"]]}
        response = await self.controller.handle(api, request.version, request.body, request.connection_id)
        if api == "CreateTopics" and request.version >= 5:  # the new topics' configs, as a broker's answer
            from broker.config_defaults import with_created_configs

            return with_created_configs(self.config, self.controller.controller.image, request.body, response)
        return response

    def _current_voters(self) -> dict[int, PeerAddress]:
        """The voter set in force with each voter's endpoint (pysyncobj's is the static one)."""
        return self.driver.current_voters() if isinstance(self.driver, RaftDriver) else self.voters

    async def _change_voters(self, api: str, body: dict) -> dict:
        """AddRaftVoter / RemoveRaftVoter (KIP-853), answered by the quorum leader once the
        new voter set is committed."""
        from kraft.raft.record_codec import Voter

        def answer(error, message=None):
            return {"throttle_time_ms": 0, "error_code": int(error), "error_message": message}

        if not isinstance(self.driver, RaftDriver):
            return answer(ErrorCode.UNSUPPORTED_VERSION, "controller.quorum.engine=pysyncobj has a static voter set")
        if body.get("cluster_id") not in (None, self.cluster_id):
            return answer(ErrorCode.INCONSISTENT_CLUSTER_ID, f"this is cluster {self.cluster_id}")
        if api == "RemoveRaftVoter":
            error, message = await self.driver.remove_voter(body["voter_id"], body["voter_directory_id"], timeout_s=30)
            return answer(error, message)
        listeners = [lst for lst in body["listeners"] if lst["name"] in self.config.controller_listener_names] or \
            body["listeners"]
        if not listeners:
            return answer(ErrorCode.INVALID_REQUEST, "AddRaftVoter names no listener of the new controller")
        endpoint = listeners[0]
        voter = Voter(body["voter_id"], body["voter_directory_id"], endpoint["host"], endpoint["port"],
                      endpoint["name"])
        timeout_s = max(1.0, min(body.get("timeout_ms") or 30000, 120000) / 1000)
        error, message = await self.driver.add_voter(voter, timeout_s)
        return answer(error, message)

    async def shutdown(self) -> None:
        if self.lifecycle is not None:
            await self.lifecycle.controlled_shutdown(timeout_s=10)
        if self.driver is not None:
            await self.driver.shutdown()


def describe_controllers(body: dict, cluster_id: str, voters: dict[int, PeerAddress],
                         leader_id: int) -> dict:
    """DescribeCluster on a controller listener (KIP-919): the controllers and the active
    one, which is how an admin client started with ``--bootstrap-controller`` (e.g.
    ``kafka-metadata-quorum``) finds the quorum.  Controllers describe only controllers."""
    answer = {"error_code": 0, "error_message": None, "endpoint_type": 2, "cluster_id": cluster_id,
              "controller_id": leader_id if leader_id in voters else -1, "brokers": [],
              "cluster_authorized_operations": -2147483648}
    if body.get("endpoint_type", 1) != 2:
        answer.update(error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                      error_message="The controller only supports endpoint type CONTROLLER")
        return answer
    answer["brokers"] = [{"broker_id": node_id, "host": address.host, "port": address.port, "rack": None}
                         for node_id, address in sorted(voters.items())]
    return answer


def _controller_apis():
    from metadata.controller import HANDLERS

    return HANDLERS


def raise_open_files_limit() -> tuple[int, int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit, as a JVM started by Kafka's scripts
    does (-XX:+MaxFDLimit); returns and logs ``(soft before, soft after, hard)``.  The
    broker does not need it to host many partitions (its segment files go through a bounded
    cache, ``kraft.log.open.files.max``); clients' connections do."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard
    if target == resource.RLIM_INFINITY:  # Linux refuses an infinite soft NOFILE
        try:
            with open("/proc/sys/fs/nr_open") as f:
                target = int(f.read())
        except (OSError, ValueError):
            target = soft
    new_soft = soft
    if soft != resource.RLIM_INFINITY and target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            new_soft = target
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open files limit from %d to %d: %s", soft, target, exc)
    log.info("open files limit (RLIMIT_NOFILE): soft %d -> %d, hard %d", soft, new_soft, hard)
    return soft, new_soft, hard


def setup_logging(node_id: int, level: str = "INFO") -> None:
    # The format uses none of these: not gathering them takes a fifth off each record, and
    # a broker logs one per leadership it takes (the logging HOWTO's "Optimization").
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format=f"%(asctime)s [node {node_id}] %(levelname)s %(name)s: %(message)s",
    )


def run(config: ServerConfig, cluster_id: str) -> None:
    run_trio(Node(config, cluster_id).run)
