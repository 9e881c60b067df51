"""A node's metrics over HTTP in the Prometheus text format, named after Kafka's MBeans.

The naming rule (docs/METRICS.md) is the JMX exporter's common Kafka rules with lowercase
names: ``kafka.<domain>:type=<Type>,name=<Name>,<tag>=<v>...`` becomes the family
``kafka_<domain>_<type>_<name>`` (lowercased, ``.`` and ``-`` as ``_``) with the tags as
labels; a meter (``...PerSec``) drops ``PerSec`` and is a counter (``_total``); a timer or
histogram (``...TimeMs``, ``RequestBytes``) is a summary (``{quantile=...}``, ``_count``,
``_sum``); a gauge keeps its name.  Kafka's newer metrics
(``kafka.server:type=raft-metrics`` attributes such as ``current-leader``) become
``kafka_server_raft_metrics_current_leader``; their ``-rate`` attributes are exported as the
counters behind them (``append-records-rate`` -> ``..._append_records_total``).

Serving: ``prometheus_client``'s WSGI app on a threaded HTTP server, so a scrape runs in its
own thread and never on the trio event loop; the server's thread waits for connections with
no poll interval (``prometheus_client.start_http_server`` wakes twice a second, CPU an idle
node burns for nothing) and ``close`` wakes it by shutting its listening socket down.
Everything a scrape reads is either an integer the hot paths keep (``kraft.metrics.stats``),
an immutable metadata image, or a container copied first (``list(d.values())`` is atomic
under the GIL); per-partition values are computed at scrape time, never kept up to date on
the data path.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from functools import lru_cache
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.exposition import make_wsgi_app
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kraft import clock
from kraft.metrics.stats import LOG_FLUSH_MS, QUANTILES, Histogram, RequestMetrics, error_name
from kraft.server_config import ListenError

log = logging.getLogger(__name__)

# Kafka's BrokerState values (kafka.server:type=KafkaServer,name=BrokerState)
BROKER_STARTING, BROKER_RUNNING = 1, 3


def family_name(mbean: str, *, meter: bool = False) -> str:
    """The family of a Kafka MBean name, by the rule in the module doc:
    ``kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec`` ->
    ``kafka_server_brokertopicmetrics_messagesin`` (a meter's counter adds ``_total``)."""
    domain, _, props = mbean.partition(":")
    parts = dict(p.split("=", 1) for p in props.split(","))
    name = parts.get("name", "")
    if meter and name.endswith("PerSec"):
        name = name[: -len("PerSec")]
    words = [domain, parts["type"]] + ([name] if name else [])
    return "_".join(w.replace(".", "_").replace("-", "_") for w in words).lower()


@lru_cache(maxsize=None)
def _family(mbean: str, meter: bool = False) -> str:
    return family_name(mbean, meter=meter)


def counter(mbean: str, doc: str, labels=()) -> CounterMetricFamily:
    return CounterMetricFamily(_family(mbean, True), doc, labels=list(labels))


def gauge(mbean: str, doc: str, labels=()) -> GaugeMetricFamily:
    return GaugeMetricFamily(_family(mbean), doc, labels=list(labels))


def summary(mbean: str, doc: str) -> Metric:
    return Metric(_family(mbean), doc, "summary")


def add_summary(family: Metric, labels: dict, histogram: Histogram, now: float) -> None:
    """Quantiles of the recent window, and the cumulative count and sum: what the JMX
    exporter makes of a Kafka histogram (``{quantile="0.99"}`` and ``_count``) plus ``_sum``."""
    for q, v in zip(QUANTILES, histogram.quantiles(now)):
        family.add_sample(family.name, dict(labels, quantile=str(q)), v)
    family.add_sample(family.name + "_count", labels, histogram.count)
    family.add_sample(family.name + "_sum", labels, histogram.sum)


def _kraft_version() -> str:
    try:
        from importlib.metadata import version

        return version("kraft")
    except Exception:  # noqa: BLE001 - running from a source tree
        return "unknown"


class NodeCollector(Collector):
    """Every Kafka-named family of one node (``cli.node.Node``), read at scrape time."""

    def __init__(self, node):
        self.node = node
        self._version = _kraft_version()
        self._controller_cache: tuple | None = None  # (image, counts)

    def describe(self):
        return []  # no collect() at registration: the node is not running yet

    def collect(self):
        node = self.node
        now = time.monotonic()
        info = GaugeMetricFamily("kraft_node_info", "This node: its id, roles and kraft's version",
                                 labels=["node_id", "roles", "version"])
        info.add_metric([str(node.config.node_id), ",".join(sorted(node.config.roles)), self._version], 1)
        yield info
        if node.request_metrics is not None:
            yield from request_families(node.request_metrics, now)
        if node.replicas is not None:
            yield from broker_families(node, now)
        if node.controller is not None:
            yield from self._controller_families(node.controller)
        if node.driver is not None:
            yield from raft_families(node.driver, node.config.node_id)
        flush = summary("kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs",
                        "Log flushes (fsyncs) of this process, in milliseconds")
        add_summary(flush, {}, LOG_FLUSH_MS, now)
        yield flush

    def _controller_families(self, server):
        qc = server.controller
        active = gauge("kafka.controller:type=KafkaController,name=ActiveControllerCount",
                       "1 on the active controller, else 0")
        active.add_metric([], 1 if qc.is_active else 0)
        yield active
        image = qc.image  # committed and immutable: safe to walk from this thread
        cached = self._controller_cache
        if cached is None or cached[0] is not image:
            cached = self._controller_cache = (image, _controller_counts(image))
        for name, value in cached[1].items():
            g = gauge(f"kafka.controller:type=KafkaController,name={name}",
                      f"{name} as this controller's committed metadata shows it")
            g.add_metric([], value)
            yield g
        g = gauge("kafka.controller:type=KafkaController,name=LastAppliedRecordOffset",
                  "Offset of the last metadata record this controller applied")
        g.add_metric([], image.offset)
        yield g
        g = gauge("kafka.controller:type=KafkaController,name=MetadataErrorCount",
                  "Metadata log errors this controller met (its records landing at other offsets "
                  "than it counted on)")
        g.add_metric([], server.metadata_errors)
        yield g


def _controller_counts(image) -> dict[str, int]:
    brokers = list(image.brokers.values())
    partitions = offline = imbalance = 0
    for topic in list(image.topics_by_name.values()):
        for reg in list(topic.partitions.values()):
            partitions += 1
            if not reg.has_leader:
                offline += 1
            elif reg.replicas and reg.leader != reg.replicas[0]:
                imbalance += 1
    return {"ActiveBrokerCount": sum(1 for b in brokers if not b.fenced),
            "FencedBrokerCount": sum(1 for b in brokers if b.fenced),
            "GlobalTopicCount": len(image.topics_by_name), "GlobalPartitionCount": partitions,
            "OfflinePartitionsCount": offline, "PreferredReplicaImbalanceCount": imbalance}


# ------------------------------------------------------------------ requests

def request_families(metrics: RequestMetrics, now: float):
    apis = list(metrics.apis.values())
    requests = counter("kafka.network:type=RequestMetrics,name=RequestsPerSec",
                       "Requests received, by request name and version", ["request", "version"])
    errors = counter("kafka.network:type=RequestMetrics,name=ErrorsPerSec",
                     "Error codes in responses (every error_code field, NONE included), by request "
                     "name", ["request", "error"])
    times = {}
    for api in apis:
        for version, n in list(api.requests.items()):
            requests.add_metric([api.name, str(version)], n)
        for code, n in list(api.errors.items()):
            errors.add_metric([api.name, error_name(code)], n)
        for name, histogram in api.histograms.items():
            family = times.get(name)
            if family is None:
                unit = "bytes" if name == "RequestBytes" else "milliseconds"
                family = times[name] = summary(f"kafka.network:type=RequestMetrics,name={name}",
                                               f"{name} of requests, in {unit}, by request name")
            add_summary(family, {"request": api.name}, histogram, now)
    yield requests
    yield errors
    yield from times.values()


# ------------------------------------------------------------------ broker

_TOPIC_METERS = (  # Kafka's name, TopicStats attribute, help
    ("MessagesInPerSec", "messages_in", "Records appended by this broker as leader"),
    ("BytesInPerSec", "bytes_in", "Bytes appended by this broker as leader"),
    ("BytesOutPerSec", "bytes_out", "Bytes fetched from this broker by consumers"),
    ("TotalProduceRequestsPerSec", "total_produce", "Partitions produced to (one per partition per request)"),
    ("TotalFetchRequestsPerSec", "total_fetch", "Partitions fetched (one per partition per request)"),
    ("FailedProduceRequestsPerSec", "failed_produce", "Partitions whose produce failed"),
    ("FailedFetchRequestsPerSec", "failed_fetch", "Partitions whose fetch failed"),
)


def broker_families(node, now: float):
    replicas = node.replicas
    stats = replicas.topic_stats
    topics = list(stats.topics.items())
    for kafka_name, attr, doc in _TOPIC_METERS:
        family = counter(f"kafka.server:type=BrokerTopicMetrics,name={kafka_name}",
                         doc + " (no topic label: all topics)", ["topic"])
        _add_unlabelled(family, getattr(stats.all, attr))
        for topic, ts in topics:
            family.add_metric([topic], getattr(ts, attr))
        yield family
    for kafka_name, value, doc in (
            ("ReplicationBytesInPerSec", stats.replication_bytes_in, "Bytes appended by followers here"),
            ("ReplicationBytesOutPerSec", stats.replication_bytes_out, "Bytes fetched from here by followers")):
        family = counter(f"kafka.server:type=BrokerTopicMetrics,name={kafka_name}", doc)
        family.add_metric([], value)
        yield family
    yield from replication_quota_families(replicas.replication_quotas)
    yield from _zero_copy_families()
    yield from replica_manager_families(node)
    yield from _metadata_families(node)
    yield from _fetch_session_families(node)
    yield from _group_families(node)
    state = gauge("kafka.server:type=KafkaServer,name=BrokerState",
                  "Kafka's BrokerState: 1 starting, 3 running (serving clients)")
    state.add_metric([], BROKER_RUNNING if node.ready.is_set() else BROKER_STARTING)
    yield state


def replication_quota_families(quotas):
    """Kafka's replication quota sensors: the bytes/s of throttled partitions (in the ISR or
    not) this broker sent as a leader and fetched as a follower, over the quota's windows."""
    now_ms = clock.monotonic_ms()
    for kind, quota, doc in (("LeaderReplication", quotas.leader, "sent to followers of throttled replicas"),
                             ("FollowerReplication", quotas.follower, "fetched for throttled replicas")):
        rate = gauge(f"kafka.server:type={kind},name=byte-rate", f"Bytes per second {doc}")
        rate.add_metric([], quota.byte_rate(now_ms))
        yield rate


def _zero_copy_families():
    """How fetched record bytes left (broker.file_records): kraft's own, Kafka has none."""
    from broker.file_records import STATS
    for name, value, doc in (
            ("SendfileBytesPerSec", STATS.sendfile_bytes, "Fetched record bytes sent by sendfile (zero copy)"),
            ("SendfileCallsPerSec", STATS.sendfile_calls, "sendfile calls made for fetched records"),
            ("CopiedBytesPerSec", STATS.copied_bytes, "Fetched record bytes read into memory to be sent")):
        family = counter(f"kraft.network:type=FetchRecords,name={name}", doc)
        family.add_metric([], value)
        yield family


def _add_unlabelled(family: Metric, value) -> None:
    """The all-topics sample: Kafka's MBean without the topic tag, so no ``topic`` label."""
    family.add_sample(family.name + "_total", {}, value)


def replica_manager_families(node):
    replicas = node.replicas
    partitions = list(replicas.partitions.items())
    per_partition = node.config["kraft.metrics.partition.metrics.enable"]
    offline_dir = replicas.log_dir_error is not None
    leaders = under_replicated = under_min_isr = at_min_isr = offline = 0
    min_isr_of: dict[str, int] = {}
    size = gauge("kafka.log:type=Log,name=Size", "Bytes of the partition's log", ["topic", "partition"])
    end = gauge("kafka.log:type=Log,name=LogEndOffset", "The partition's log end offset", ["topic", "partition"])
    start = gauge("kafka.log:type=Log,name=LogStartOffset", "The partition's log start offset",
                  ["topic", "partition"])
    segments = gauge("kafka.log:type=Log,name=NumLogSegments", "Segments of the partition's log",
                     ["topic", "partition"])
    urp = gauge("kafka.cluster:type=Partition,name=UnderReplicated",
                "1 when this broker leads the partition and its ISR is smaller than its replicas",
                ["topic", "partition"])
    for (topic, index), partition in partitions:
        st = partition.state
        labels = [topic, str(index)]
        plog = partition.log
        offline += offline_dir
        if per_partition and not plog.closed:
            size.add_metric(labels, plog.size_in_bytes)
            end.add_metric(labels, plog.log_end_offset)
            start.add_metric(labels, plog.log_start_offset)
            segments.add_metric(labels, len(plog.segments))
        if st.is_leader and not offline_dir:
            leaders += 1
            isr = len(st.isr)
            is_under = isr < len(st.replicas)
            under_replicated += is_under
            if per_partition:
                urp.add_metric(labels, 1 if is_under else 0)
            min_isr = min_isr_of.get(topic)
            if min_isr is None:
                min_isr = min_isr_of[topic] = replicas.min_insync_replicas(topic)
            under_min_isr += isr < min_isr
            at_min_isr += isr == min_isr
        elif per_partition:
            urp.add_metric(labels, 0)
    rm = replicas.stats
    for name, value, doc in (
            ("PartitionCount", len(partitions), "Partition replicas hosted by this broker"),
            ("LeaderCount", leaders, "Partitions this broker leads"),
            ("UnderReplicatedPartitions", under_replicated,
             "Partitions this broker leads whose ISR is smaller than their replicas"),
            ("UnderMinIsrPartitionCount", under_min_isr,
             "Partitions this broker leads with fewer in-sync replicas than min.insync.replicas"),
            ("AtMinIsrPartitionCount", at_min_isr,
             "Partitions this broker leads with exactly min.insync.replicas in-sync replicas"),
            ("OfflineReplicaCount", offline, "Replicas hosted here that are offline (a failed log dir)")):
        g = gauge(f"kafka.server:type=ReplicaManager,name={name}", doc)
        g.add_metric([], value)
        yield g
    for name, value, doc in (
            ("IsrShrinksPerSec", rm.isr_shrinks, "ISR shrinks this broker's leaders had committed"),
            ("IsrExpandsPerSec", rm.isr_expands, "ISR expansions this broker's leaders had committed"),
            ("FailedIsrUpdatesPerSec", rm.failed_isr_updates, "ISR changes the controller refused or lost")):
        c = counter(f"kafka.server:type=ReplicaManager,name={name}", doc)
        c.add_metric([], value)
        yield c
    if per_partition:
        yield from (size, end, start, segments, urp)


def _metadata_families(node):
    listener = node.metadata
    if listener is None:
        return
    prefix = "kafka.server:type=broker-metadata-metrics,name="
    applied_ms = listener.last_applied_ms
    lag = max(_wall_ms() - applied_ms, 0) if applied_ms >= 0 else -1
    for name, value, doc in (
            ("last-applied-record-offset", listener.image.offset, "Offset of the last metadata record applied"),
            ("last-applied-record-timestamp", applied_ms,
             "When (epoch ms) the last metadata batch was applied here (the log has no timestamps)"),
            ("last-applied-record-lag-ms", lag,
             "Milliseconds since the last metadata batch was applied (the active controller "
             "writes one at least every metadata.max.idle.interval.ms)"),
            ("metadata-apply-error-count", listener.apply_errors,
             "Metadata images a subscriber (the replica manager, ...) failed to apply")):
        g = gauge(prefix + name, doc)
        g.add_metric([], value)
        yield g


def _wall_ms() -> int:
    from kraft import clock

    return clock.wall_ms()


def _fetch_session_families(node):
    if node.data_path is None:
        return
    cache = node.data_path.sessions
    sessions, cached = cache.cached()
    for name, value, doc in (
            ("NumIncrementalFetchSessions", sessions, "Incremental fetch sessions held (KIP-227)"),
            ("NumIncrementalFetchPartitionsCached", cached, "Partitions held by the fetch sessions")):
        g = gauge(f"kafka.server:type=FetchSessionCache,name={name}", doc)
        g.add_metric([], value)
        yield g
    c = counter("kafka.server:type=FetchSessionCache,name=IncrementalFetchSessionEvictionsPerSec",
                "Fetch sessions closed to make room for new ones")
    c.add_metric([], cache.evictions)
    yield c


# classic groups' states, then KIP-848 consumer groups' own (Stable and Empty are both's)
_GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling")


def _group_families(node):
    if node.groups is None:
        return
    groups = list(node.groups.core.table.groups.values())
    by_state = dict.fromkeys(_GROUP_STATES, 0)
    offsets = 0
    for group in groups:
        state = group.state.value if group.modern is None else group.modern.state_name()
        by_state[state] = by_state.get(state, 0) + 1
        offsets += len(group.offsets)
    prefix = "kafka.coordinator.group:type=GroupMetadataManager,name="
    for name, value, doc in (("NumGroups", len(groups), "Consumer groups this broker coordinates"),
                             ("NumOffsets", offsets, "Committed offsets of those groups")):
        g = gauge(prefix + name, doc)
        g.add_metric([], value)
        yield g
    for state, value in by_state.items():
        g = gauge(prefix + f"NumGroups{state}", f"Groups this broker coordinates in state {state}")
        g.add_metric([], value)
        yield g


# ------------------------------------------------------------------ raft

def raft_families(driver, node_id: int):
    prefix = "kafka.server:type=raft-metrics,name="
    raft = getattr(driver, "node", None)
    leader = driver.leader
    role = getattr(raft, "role", None)
    voters = getattr(getattr(driver, "config", None), "voters", frozenset())
    if node_id not in voters and not driver.is_leader:
        state = "observer"
    elif role is not None:
        state = role.value
    else:  # the pysyncobj engine: leader or follower
        state = "leader" if driver.is_leader else "follower"
    g = gauge(prefix + "current-state", "This node's Raft state (the label; the value is 1)", ["state"])
    g.add_metric([state], 1)
    yield g
    for name, value, doc in (
            ("current-leader", leader.leader_id, "The quorum leader this node knows (-1: none)"),
            ("current-epoch", leader.epoch, "The quorum epoch this node knows"),
            ("high-watermark", driver.high_watermark, "The metadata log's high watermark here"),
            ("log-end-offset", raft.log.end_offset if raft is not None else -1,
             "The metadata log's end offset here")):
        g = gauge(prefix + name, doc)
        g.add_metric([], value)
        yield g
    metrics = getattr(driver, "metrics", None)
    if metrics is None:
        return
    avg, peak = metrics.commit_latency.avg_max(time.monotonic())
    for name, value, doc in (
            ("commit-latency-avg", avg, "Average ms from a leader's append to its commit (last 30-60 s)"),
            ("commit-latency-max", peak, "Maximum ms from a leader's append to its commit (last 30-60 s)")):
        g = gauge(prefix + name, doc)
        g.add_metric([], value)
        yield g
    for name, value, doc in (
            ("append-records", metrics.append_records, "Records appended to the metadata log as leader "
                                                       "(Kafka's append-records-rate is its rate)"),
            ("fetch-records", metrics.fetch_records, "Records fetched from the metadata log's leader "
                                                     "(Kafka's fetch-records-rate is its rate)")):
        c = CounterMetricFamily(family_name(prefix + name), doc)
        c.add_metric([], value)
        yield c


# ------------------------------------------------------------------ serving

class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - a scrape is not worth a log line
        pass


class MetricsServer:
    """The HTTP endpoint of one node (``close`` stops it)."""

    def __init__(self, node, host: str, port: int):
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(NodeCollector(node))
        ProcessCollector(registry=self.registry)  # CPU seconds, RSS, open fds
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        try:
            family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
            server_class = type("_Server", (_Server,), {"address_family": family})
            self._httpd = make_server(host, port, make_wsgi_app(self.registry), server_class,
                                      handler_class=_QuietHandler)
        except OSError as exc:
            raise ListenError(exc.errno, f"kraft.metrics.port: cannot listen on {host}:{port}: {exc.strerror}") from exc
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": None},
                                        name="metrics-http", daemon=True)
        self._thread.start()
        self.port = self._httpd.server_port
        self.host = host

    def close(self) -> None:
        try:  # wakes serve_forever's wait: the socket reads as ready (accept fails) until it stops
            self._httpd.socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._httpd.shutdown()
        self._httpd.server_close()


def serve_node_metrics(node) -> MetricsServer | None:
    """Start serving ``node``'s metrics when ``kraft.metrics.port`` is set."""
    config = node.config
    port = config["kraft.metrics.port"]
    if not port:
        return None
    server = MetricsServer(node, config["kraft.metrics.host"] or "0.0.0.0", port)
    log.info("metrics (Prometheus) at http://%s:%d/metrics", server.host, server.port)
    return server
