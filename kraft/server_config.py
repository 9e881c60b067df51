"""A node's configuration: Kafka's ``server.properties`` keys, typed and validated.

Every key kraft understands is declared once in ``KEYS`` with its type and default (Kafka's
defaults unless noted).  The rest of Kafka's broker keys load and are logged as not used,
except the few kraft cannot honour (``kraft.kafka_broker_keys``), so a file written for
Kafka starts a node.  A key that is neither kraft's nor Kafka's is refused when it looks
misspelt (its first word is one of theirs: ``log.retention.hour``) — a typo must not
silently become a default — and otherwise taken as a plugin's setting and logged, as Kafka
hands such keys to its plugins.  ``broker.id`` is ``node.id``'s synonym, as in Kafka.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any, Callable

from kraft.kafka_broker_keys import NOT_HONOURED, NOT_USED, refusal
from kraft.log.config import COMPRESSION_TYPES, TIMESTAMP_TYPES
from kraft.properties import read_properties


class ConfigError(ValueError):
    """A missing, unknown or invalid configuration key; the message names the key."""


class ListenError(OSError):
    """A configured address could not be listened on (taken by another process, not this
    machine's, or a privileged port): the node stops with this one line, as Kafka's "Socket
    server failed to bind"."""

    def __str__(self) -> str:
        return self.strerror


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    type: str  # int | bool | string | list | password | double
    default: Any = None
    required: bool = False
    validate: Callable[[Any], str | None] | None = None  # returns an error text or None


def _in_range(low, high):
    return lambda v: None if low <= v <= high else f"must be in [{low}, {high}]"


def _at_least(n):
    return lambda v: None if v >= n else f"must be at least {n}"


def _authorizer_name(value: str) -> str | None:
    from kraft.security.authorizer import AUTHORIZER_NAMES, STANDARD_AUTHORIZER

    if not value or value.strip() in AUTHORIZER_NAMES:
        return None
    return f"kraft's only authorizer is {STANDARD_AUTHORIZER} (or: standard)"


def _replica_selector(value: str | None) -> str | None:
    from broker.replica_selector import SELECTORS

    if not value or value.strip() in SELECTORS:
        return None
    return f"kraft runs no Java classes: one of {', '.join(SELECTORS)}"


def _rebalance_protocols(values: list[str]) -> str | None:
    known = {"classic", "consumer", "streams", "share"}
    names = {v.strip().lower() for v in values}
    if unknown := names - known:
        return f"unknown protocol(s) {', '.join(sorted(unknown))} (known: {', '.join(sorted(known))})"
    return None if "classic" in names else "must include classic"


def _migration_policy(value: str) -> str | None:
    known = ("bidirectional", "upgrade", "downgrade", "disabled")
    return None if value.strip().lower() in known else f"must be one of {', '.join(known)}"


def _assignors(values: list[str]) -> str | None:
    from broker.group.assignors import assignor_names

    try:
        assignor_names(values)
    except ValueError as exc:
        return str(exc)
    return None


def parse_per_ip_overrides(entries: list[str]) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count`` entries (``[v6]:count`` too)."""
    out = {}
    for entry in entries:
        host, sep, count = entry.strip().rpartition(":")
        if not sep or not host or not count.strip().isdigit():
            raise ValueError(f"{entry!r} is not host:count")
        out[host.strip("[]")] = int(count)
    return out


def _per_ip_overrides_error(entries) -> str | None:
    try:
        parse_per_ip_overrides(entries)
    except ValueError as exc:
        return str(exc)
    return None


_K = ConfigKey
KEYS: dict[str, ConfigKey] = {k.name: k for k in [
    _K("node.id", "int", required=True, validate=_at_least(0)),
    _K("process.roles", "list", required=True),
    _K("controller.quorum.voters", "list", []),
    _K("controller.quorum.bootstrap.servers", "list", []),
    _K("controller.listener.names", "list", []),
    _K("listeners", "list", ["PLAINTEXT://:9092"]),
    _K("advertised.listeners", "list", []),
    _K("inter.broker.listener.name", "string", None),
    _K("listener.security.protocol.map", "list",
       ["CONTROLLER:PLAINTEXT", "PLAINTEXT:PLAINTEXT", "SSL:SSL", "SASL_PLAINTEXT:SASL_PLAINTEXT",
        "SASL_SSL:SASL_SSL"]),
    # Security (kraft.security): each may also be set per listener as listener.name.<l>.<key>
    _K("security.inter.broker.protocol", "string", "PLAINTEXT"),
    _K("sasl.enabled.mechanisms", "list", ["GSSAPI"]),
    _K("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI"),
    _K("sasl.mechanism.controller.protocol", "string", "GSSAPI"),
    _K("ssl.keystore.type", "string", "JKS"),
    _K("ssl.keystore.location", "string", None),
    _K("ssl.keystore.password", "password", None),
    _K("ssl.keystore.certificate.chain", "password", None),
    _K("ssl.keystore.key", "password", None),
    _K("ssl.key.password", "password", None),
    _K("ssl.truststore.type", "string", "JKS"),
    _K("ssl.truststore.location", "string", None),
    _K("ssl.truststore.password", "password", None),
    _K("ssl.truststore.certificates", "password", None),
    _K("ssl.client.auth", "string", "none",
       validate=lambda v: None if v.lower() in ("none", "requested", "required") else
       "must be none, requested or required"),
    _K("ssl.endpoint.identification.algorithm", "string", "https"),
    _K("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"]),
    _K("ssl.principal.mapping.rules", "string", "DEFAULT",
       validate=lambda v: None if v.strip() == "DEFAULT" else "is DEFAULT only in kraft"),
    # Authorization (kraft.security.authorizer): off unless authorizer.class.name names
    # Kafka's StandardAuthorizer (or the alias "standard")
    _K("authorizer.class.name", "string", "", validate=_authorizer_name),
    _K("super.users", "string", None),
    _K("allow.everyone.if.no.acl.found", "bool", False),
    _K("log.dirs", "list", []),
    _K("log.dir", "string", "/tmp/kraft-logs"),
    _K("metadata.log.dir", "string", None),
    _K("broker.rack", "string", None),
    # KIP-392: the leader sends a consumer to a replica in its client.rack (broker.replica_selector)
    _K("replica.selector.class", "string", None, validate=_replica_selector),
    # Topic defaults
    _K("num.partitions", "int", 1, validate=_at_least(1)),
    _K("default.replication.factor", "int", 1, validate=_at_least(1)),
    _K("min.insync.replicas", "int", 1, validate=_at_least(1)),
    _K("auto.create.topics.enable", "bool", True),
    _K("delete.topic.enable", "bool", True),
    _K("unclean.leader.election.enable", "bool", False),
    # How often the active controller elects leaders for leaderless partitions of topics
    # where unclean.leader.election.enable became true (Kafka's internal key, same default)
    _K("unclean.leader.election.interval.ms", "int", 300000, validate=_at_least(1)),
    _K("auto.leader.rebalance.enable", "bool", True),
    _K("leader.imbalance.check.interval.seconds", "int", 300, validate=_at_least(1)),
    _K("leader.imbalance.per.broker.percentage", "int", 10,
       validate=lambda v: None if 0 <= v <= 100 else "must be a percentage (0-100)"),
    _K("message.max.bytes", "int", 1048588, validate=_at_least(0)),
    _K("compression.type", "string", "producer", validate=lambda v: None if v in COMPRESSION_TYPES else
       "must be one of " + ", ".join(COMPRESSION_TYPES)),
    _K("compression.gzip.level", "int", -1, validate=_in_range(-1, 9)),
    _K("compression.lz4.level", "int", 9, validate=_in_range(1, 17)),
    _K("compression.zstd.level", "int", 3, validate=_in_range(-131072, 22)),
    _K("log.message.timestamp.type", "string", "CreateTime",
       validate=lambda v: None if v in TIMESTAMP_TYPES else "must be " + " or ".join(TIMESTAMP_TYPES)),
    _K("log.message.timestamp.before.max.ms", "int", 2**63 - 1, validate=_at_least(0)),
    _K("log.message.timestamp.after.max.ms", "int", 3_600_000, validate=_at_least(0)),
    # Log
    _K("log.segment.bytes", "int", 1073741824, validate=_at_least(14)),
    _K("log.roll.ms", "int", None),
    _K("log.roll.hours", "int", 168, validate=_at_least(1)),
    _K("log.retention.ms", "int", None),
    _K("log.retention.minutes", "int", None),
    _K("log.retention.hours", "int", 168),
    _K("log.retention.bytes", "int", -1),
    _K("log.retention.check.interval.ms", "int", 300000, validate=_at_least(1)),
    _K("log.index.interval.bytes", "int", 4096, validate=_at_least(0)),
    _K("log.index.size.max.bytes", "int", 10485760, validate=_at_least(4)),
    _K("log.flush.interval.messages", "int", 2**63 - 1, validate=_at_least(1)),
    _K("log.flush.interval.ms", "int", None),
    _K("log.cleanup.policy", "list", ["delete"]),
    _K("log.cleaner.enable", "bool", True),
    _K("log.cleaner.backoff.ms", "int", 15000, validate=_at_least(0)),
    # The defaults of topic keys (broker.config_defaults.topic_defaults)
    _K("log.cleaner.delete.retention.ms", "int", 86_400_000, validate=_at_least(0)),
    _K("log.cleaner.min.compaction.lag.ms", "int", 0, validate=_at_least(0)),
    _K("log.cleaner.max.compaction.lag.ms", "int", 2**63 - 1, validate=_at_least(1)),
    _K("log.cleaner.min.cleanable.ratio", "double", 0.5, validate=_in_range(0.0, 1.0)),
    _K("log.segment.delete.delay.ms", "int", 60_000, validate=_at_least(0)),
    # Replication
    _K("replica.lag.time.max.ms", "int", 30000, validate=_at_least(1)),
    _K("replica.fetch.max.bytes", "int", 1048576, validate=_at_least(0)),
    _K("replica.fetch.response.max.bytes", "int", 10485760, validate=_at_least(0)),
    _K("replica.fetch.wait.max.ms", "int", 500, validate=_at_least(0)),  # broker.replica_fetcher
    _K("replica.fetch.min.bytes", "int", 1, validate=_at_least(1)),
    _K("replica.fetch.backoff.ms", "int", 1000, validate=_at_least(0)),
    _K("max.incremental.fetch.session.cache.slots", "int", 1000, validate=_at_least(0)),
    _K("replica.high.watermark.checkpoint.interval.ms", "int", 5000, validate=_at_least(1)),
    _K("producer.id.expiration.ms", "int", 86400000, validate=_at_least(1)),
    _K("producer.id.expiration.check.interval.ms", "int", 600000, validate=_at_least(1)),
    _K("request.timeout.ms", "int", 30000),
    _K("socket.request.max.bytes", "int", 104857600, validate=_at_least(1)),
    # the most partitions one DescribeTopicPartitions answer holds (broker.describe_topic_partitions)
    _K("max.request.partition.size.limit", "int", 2000, validate=_at_least(1)),
    # Connection limits (broker.connection_limits)
    _K("max.connections", "int", 2**31 - 1, validate=_at_least(0)),
    _K("max.connections.per.ip", "int", 2**31 - 1, validate=_at_least(0)),
    _K("max.connections.per.ip.overrides", "list", [], validate=_per_ip_overrides_error),
    _K("connections.max.idle.ms", "int", 600000, validate=_at_least(1)),
    # Client quotas (kraft.quotas): the windows a client's rates are measured over
    _K("quota.window.num", "int", 11, validate=_at_least(1)),
    _K("quota.window.size.seconds", "int", 1, validate=_at_least(1)),
    # Replication quotas (kraft.quotas.replication): the windows replication rates are measured over
    _K("replication.quota.window.num", "int", 11, validate=_at_least(1)),
    _K("replication.quota.window.size.seconds", "int", 1, validate=_at_least(1)),
    # Groups and offsets
    _K("offsets.topic.num.partitions", "int", 50, validate=_at_least(1)),
    _K("offsets.topic.replication.factor", "int", 3, validate=_at_least(1)),
    _K("offsets.retention.minutes", "int", 10080, validate=_at_least(1)),
    _K("group.initial.rebalance.delay.ms", "int", 3000, validate=_at_least(0)),
    _K("group.min.session.timeout.ms", "int", 6000),
    _K("group.max.session.timeout.ms", "int", 1800000),
    # KIP-848's consumer groups (broker/group/consumer_group.py)
    _K("group.coordinator.rebalance.protocols", "list", ["classic", "consumer"], validate=_rebalance_protocols),
    _K("group.consumer.heartbeat.interval.ms", "int", 5000, validate=_at_least(1)),
    _K("group.consumer.session.timeout.ms", "int", 45000, validate=_at_least(1)),
    # the bounds of a group's own consumer.session.timeout.ms and consumer.heartbeat.interval.ms
    # (ConfigResource GROUP, metadata.controller.configs)
    _K("group.consumer.min.session.timeout.ms", "int", 45000, validate=_at_least(1)),
    _K("group.consumer.max.session.timeout.ms", "int", 60000, validate=_at_least(1)),
    _K("group.consumer.min.heartbeat.interval.ms", "int", 5000, validate=_at_least(1)),
    _K("group.consumer.max.heartbeat.interval.ms", "int", 15000, validate=_at_least(1)),
    _K("group.consumer.max.size", "int", 2147483647, validate=_at_least(1)),
    _K("group.consumer.assignors", "list", ["uniform", "range"], validate=_assignors),
    _K("group.consumer.migration.policy", "string", "bidirectional", validate=_migration_policy),
    _K("group.consumer.regex.refresh.interval.ms", "int", 600000, validate=_at_least(1)),
    # Transactions (broker/txn)
    _K("transaction.state.log.num.partitions", "int", 50, validate=_at_least(1)),
    # KIP-890 part 1: a leader verifies with the coordinator a batch that starts a transaction
    # (broker.txn.verification); dynamic
    _K("transaction.partition.verification.enable", "bool", True),
    _K("transaction.state.log.replication.factor", "int", 3, validate=_at_least(1)),
    _K("transaction.state.log.min.isr", "int", 2, validate=_at_least(1)),
    _K("transaction.state.log.segment.bytes", "int", 104857600, validate=_at_least(1)),
    _K("transaction.max.timeout.ms", "int", 900000, validate=_at_least(1)),
    _K("transactional.id.expiration.ms", "int", 604800000, validate=_at_least(1)),
    _K("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000, validate=_at_least(1)),
    _K("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000, validate=_at_least(1)),
    # KRaft quorum and broker lifecycle
    _K("controller.quorum.election.timeout.ms", "int", 1000, validate=_at_least(1)),
    _K("controller.quorum.fetch.timeout.ms", "int", 2000, validate=_at_least(1)),
    _K("controller.quorum.election.backoff.max.ms", "int", 1000, validate=_at_least(1)),
    _K("controller.quorum.request.timeout.ms", "int", 2000, validate=_at_least(1)),
    _K("controller.quorum.append.linger.ms", "int", 25, validate=_at_least(0)),
    _K("broker.heartbeat.interval.ms", "int", 2000, validate=_at_least(1)),
    _K("broker.session.timeout.ms", "int", 9000, validate=_at_least(1)),
    _K("metadata.max.idle.interval.ms", "int", 500, validate=_at_least(0)),
    _K("metadata.log.max.record.bytes.between.snapshots", "int", 20971520, validate=_at_least(1)),
    _K("metadata.log.max.snapshot.interval.ms", "int", 3600000, validate=_at_least(0)),
    _K("metadata.log.segment.bytes", "int", 1073741824, validate=_at_least(14)),
    # kraft's own keys
    _K("controller.quorum.engine", "string", "kraft",
       validate=lambda v: None if v in ("kraft", "pysyncobj") else "must be kraft or pysyncobj"),
    _K("controller.quorum.pysyncobj.password", "password", None),
    _K("kraft.unsafe.ack.before.replication", "bool", False),
    _K("kraft.unsafe.read.committed.high.watermark", "bool", False),
    _K("kraft.unsafe.follower.read.log.end", "bool", False),
    _K("kraft.unsafe.consumer.group.assign.before.revocation", "bool", False),
    _K("kraft.log.open.files.max", "int", 1024, validate=_at_least(1)),
    # how long a broker's session outlives the close of the connection its heartbeats came
    # on (metadata.controller.sessions); -1: only broker.session.timeout.ms ends it
    _K("kraft.broker.session.disconnect.timeout.ms", "int", 1000, validate=_at_least(-1)),
    _K("kraft.gc.freeze.enable", "bool", True),  # kraft.loop_watchdog
    _K("kraft.fetch.sendfile.enable", "bool", True),  # broker.file_records
    # Prometheus metrics over HTTP (kraft.metrics.exporter, docs/METRICS.md); port 0: off
    _K("kraft.metrics.port", "int", 0,
       validate=lambda v: None if 0 <= v <= 65535 else "must be a port (1-65535), or 0 for off"),
    _K("kraft.metrics.host", "string", "0.0.0.0"),
    _K("kraft.metrics.partition.metrics.enable", "bool", True),
]}

# Keys of Kafka's sample server.properties (and common tuning keys) that kraft accepts and
# ignores: they tune JVM threads and buffers that have no counterpart here.
# Keys that Kafka reads per listener (``listener.name.<listener>.<key>``), besides a SASL
# mechanism's ``listener.name.<listener>.<mechanism>.sasl.jaas.config``.
LISTENER_KEYS = frozenset(k for k in KEYS if k.startswith(("ssl.", "sasl.enabled.")))
_JAAS_KEY = re.compile(r"(plain|scram-sha-256|scram-sha-512|gssapi|oauthbearer)\.sasl\.jaas\.config")


def _listener_key(name: str) -> ConfigKey | None:
    """The key behind a ``listener.name.<listener>.<key>`` override, or None if it is none."""
    parts = name.split(".", 3)
    if len(parts) < 4 or parts[:2] != ["listener", "name"] or not parts[2]:
        return None
    rest = parts[3]
    if rest in LISTENER_KEYS:
        return KEYS[rest]
    if _JAAS_KEY.fullmatch(rest):
        return ConfigKey(name, "password")
    return None


def _convert(key: ConfigKey, raw: str) -> Any:
    text = raw.strip()
    if key.type == "int":
        try:
            return int(text)
        except ValueError:
            raise ConfigError(f"{key.name}: {raw!r} is not an integer") from None
    if key.type == "double":
        try:
            return float(text)
        except ValueError:
            raise ConfigError(f"{key.name}: {raw!r} is not a number") from None
    if key.type == "bool":
        if text.lower() not in ("true", "false"):
            raise ConfigError(f"{key.name}: {raw!r} is not true or false")
        return text.lower() == "true"
    if key.type == "list":
        return [item.strip() for item in text.split(",") if item.strip()]
    return text


@dataclass(frozen=True, slots=True)
class Endpoint:
    listener: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.listener}://{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Voter:
    node_id: int
    host: str
    port: int


def parse_endpoint(text: str, key: str) -> Endpoint:
    m = re.fullmatch(r"([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:/]*):(\d+)", text)
    if not m:
        raise ConfigError(f"{key}: {text!r} is not of the form NAME://host:port")
    port = int(m.group(3))
    if port > 65535:
        raise ConfigError(f"{key}: port {port} in {text!r} is out of range")
    return Endpoint(m.group(1).upper(), m.group(2).strip("[]"), port)


def parse_voter(text: str) -> Voter:
    m = re.fullmatch(r"(\d+)@(\[[^\]]*\]|[^:@]+):(\d+)", text)
    if not m or int(m.group(3)) > 65535:
        raise ConfigError(f"controller.quorum.voters: {text!r} is not of the form id@host:port")
    return Voter(int(m.group(1)), m.group(2).strip("[]"), int(m.group(3)))


class ServerConfig:
    """Validated, typed configuration of one node."""

    def __init__(self, values: dict[str, Any], originals: dict[str, str]):
        self._values = values
        self.originals = originals
        # Keys of the file that are not kraft's (Kafka's, or a plugin's): the node logs them.
        self.not_used: tuple[str, ...] = ()
        self.roles = frozenset(values["process.roles"])
        self.node_id: int = values["node.id"]
        self.voters: tuple[Voter, ...] = tuple(parse_voter(v) for v in values["controller.quorum.voters"])
        self.listeners: tuple[Endpoint, ...] = tuple(parse_endpoint(e, "listeners") for e in values["listeners"])
        self.advertised_listeners: tuple[Endpoint, ...] = tuple(
            parse_endpoint(e, "advertised.listeners") for e in values["advertised.listeners"]
        ) or self.listeners
        self.log_dirs: tuple[str, ...] = tuple(values["log.dirs"]) or (values["log.dir"],)
        self.metadata_log_dir: str = values["metadata.log.dir"] or self.log_dirs[0]
        self._validate()

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def controller_listener_names(self) -> tuple[str, ...]:
        return tuple(n.upper() for n in self._values["controller.listener.names"])

    def listener(self, name: str) -> Endpoint | None:
        return next((e for e in self.listeners if e.listener == name), None)

    def security_protocol(self, listener: str) -> str:
        """The listener's protocol (listener.security.protocol.map): PLAINTEXT, SSL, ..."""
        return self._protocols.get(listener.upper(), "PLAINTEXT")

    @property
    def inter_broker_listener(self) -> str:
        """``inter.broker.listener.name``, else the listener named by
        ``security.inter.broker.protocol`` when set, else the first broker listener."""
        ibl = self._values["inter.broker.listener.name"]
        if ibl:
            return ibl.upper()
        sibp = self.originals.get("security.inter.broker.protocol")
        if sibp:
            return sibp.strip().upper()
        return self.broker_listeners[0].listener

    @property
    def broker_listeners(self) -> tuple[Endpoint, ...]:
        return tuple(e for e in self.listeners if e.listener not in self.controller_listener_names)

    @property
    def retention_ms(self) -> int:
        v = self._values
        if v["log.retention.ms"] is not None:
            return v["log.retention.ms"]
        if v["log.retention.minutes"] is not None:
            return v["log.retention.minutes"] * 60_000
        return v["log.retention.hours"] * 3_600_000

    @property
    def segment_ms(self) -> int:
        v = self._values
        return v["log.roll.ms"] if v["log.roll.ms"] is not None else v["log.roll.hours"] * 3_600_000

    def _validate(self) -> None:
        unknown_roles = self.roles - {"broker", "controller"}
        if unknown_roles or not self.roles:
            raise ConfigError(f"process.roles: {sorted(self._values['process.roles'])} must be "
                              "broker, controller, or both")
        names = [e.listener for e in self.listeners]
        if len(set(names)) != len(names):
            raise ConfigError(f"listeners: listener names must be unique, got {names}")
        protocols = {}
        for item in self._values["listener.security.protocol.map"]:
            name, sep, proto = item.partition(":")
            if not sep:
                raise ConfigError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL")
            protocols[name.upper()] = proto.upper()
        from kraft.security.config import PROTOCOL_IDS

        self._protocols = protocols
        for name, proto in protocols.items():
            if proto not in PROTOCOL_IDS:
                raise ConfigError(f"listener.security.protocol.map: {name}:{proto}: the protocol must be one "
                                  f"of {', '.join(PROTOCOL_IDS)}")
        for e in self.listeners + self.advertised_listeners:
            proto = protocols.get(e.listener)
            if proto is None:
                raise ConfigError(f"listeners: {e.listener} has no entry in listener.security.protocol.map")
        if not self.voters and not self._values["controller.quorum.bootstrap.servers"]:
            raise ConfigError("controller.quorum.voters: required (id@host:port,...)")
        voter_ids = [v.node_id for v in self.voters]
        if len(set(voter_ids)) != len(voter_ids):
            raise ConfigError(f"controller.quorum.voters: duplicate node ids in {voter_ids}")
        if not self.controller_listener_names:
            raise ConfigError("controller.listener.names: required (e.g. CONTROLLER)")
        if self.is_controller:
            # A controller outside the static voters is one being added (KIP-853): it follows
            # the metadata log as an observer until AddRaftVoter makes it a voter.
            if self.node_id not in voter_ids and self._values["controller.quorum.engine"] == "pysyncobj":
                raise ConfigError(f"controller.quorum.voters: node.id {self.node_id} has the controller "
                                  "role but is not among the voters (controller.quorum.engine=pysyncobj "
                                  "has a static voter set)")
            if not any(self.listener(n) for n in self.controller_listener_names):
                raise ConfigError("listeners: a controller needs a listener named in controller.listener.names")
        elif any(self.listener(n) for n in self.controller_listener_names):
            raise ConfigError("listeners: a broker-only node must not listen on a controller listener")
        wait_ms, lag_ms = self._values["replica.fetch.wait.max.ms"], self._values["replica.lag.time.max.ms"]
        if wait_ms > lag_ms:  # as Kafka's KafkaConfig: a follower parked past the lag limit leaves the ISR
            raise ConfigError(f"replica.fetch.wait.max.ms ({wait_ms}) should always be less than or equal to "
                              f"replica.lag.time.max.ms ({lag_ms}) to prevent frequent changes in ISR")
        if self.is_broker:
            if not self.broker_listeners:
                raise ConfigError("listeners: a broker needs a listener that is not a controller listener")
            ibl = self._values["inter.broker.listener.name"]
            if ibl and "security.inter.broker.protocol" in self.originals:
                raise ConfigError("inter.broker.listener.name and security.inter.broker.protocol: set one, "
                                  "not both")
            if ibl and not self.listener(ibl.upper()):
                raise ConfigError(f"inter.broker.listener.name: {ibl} is not among the listeners")
            sibp = self.originals.get("security.inter.broker.protocol")
            if sibp and not self.listener(sibp.strip().upper()):
                raise ConfigError(f"security.inter.broker.protocol: no listener is named {sibp.strip()}")
        if self._values["controller.quorum.engine"] == "pysyncobj" and not self._values[
                "controller.quorum.pysyncobj.password"]:
            raise ConfigError("controller.quorum.pysyncobj.password: required with "
                              "controller.quorum.engine=pysyncobj (pysyncobj unpickles its wire "
                              "messages and only authenticates them with a password)")

    @classmethod
    def from_properties(cls, props: dict[str, str], overrides: dict[str, str] | None = None) -> "ServerConfig":
        merged = dict(props)
        merged.update(overrides or {})
        _broker_id_synonym(merged)
        values: dict[str, Any] = {}
        not_used: list[str] = []
        for name, raw in merged.items():
            key = KEYS.get(name)
            if key is None and name.startswith("listener.name."):
                key = _listener_key(name)
                if key is not None:  # read from originals by kraft.security.config
                    problem = key.validate(_convert(key, raw)) if key.validate else None
                    if problem:
                        raise ConfigError(f"{name}: {raw!r} {problem}")
                    continue
            if key is None:
                not_used.append(_not_kraft_key(name, raw))
                continue
            value = _convert(key, raw)
            if key.validate and value is not None:
                problem = key.validate(value)
                if problem:
                    raise ConfigError(f"{name}: {raw!r} {problem}")
            values[name] = value
        for key in KEYS.values():
            if key.name not in values:
                if key.required:
                    raise ConfigError(f"{key.name}: required")
                values[key.name] = list(key.default) if isinstance(key.default, list) else key.default
        config = cls(values, merged)
        config.not_used = tuple(sorted(n for n in not_used if n))
        return config

    @classmethod
    def load(cls, path, overrides: dict[str, str] | None = None) -> "ServerConfig":
        return cls.from_properties(read_properties(path), overrides)


def _broker_id_synonym(merged: dict[str, str]) -> None:
    """Kafka's KafkaConfig.populateSynonyms: ``broker.id`` stands for ``node.id`` (a file
    from a ZooKeeper-era broker sets only it); both set, they must agree."""
    broker_id = merged.get("broker.id")
    if broker_id is None:
        return
    node_id = merged.setdefault("node.id", broker_id)
    if node_id.strip() != broker_id.strip():
        raise ConfigError(f"broker.id and node.id: {broker_id.strip()!r} and {node_id.strip()!r}: set node.id "
                          "only, or both to the same value")


def _first_word(name: str) -> str:
    return name.split(".", 1)[0]


_KNOWN_NAMES = sorted({*KEYS, *NOT_USED, *NOT_HONOURED, "broker.id"})
_KNOWN_FIRST_WORDS = frozenset(_first_word(n) for n in _KNOWN_NAMES)


def _not_kraft_key(name: str, raw: str) -> str:
    """A key outside ``KEYS``: its name when the node takes it without acting on it (logged at
    start-up), "" when it needs no mention (``broker.id``, already read as ``node.id``);
    ConfigError when kraft refuses it."""
    if name == "broker.id":
        return ""
    why = refusal(name, raw)
    if why:
        raise ConfigError(f"{name}: {raw.strip()!r}: {why}")
    if name in NOT_USED or name in NOT_HONOURED:
        return name
    if _first_word(name) in _KNOWN_FIRST_WORDS:
        close = difflib.get_close_matches(name, _KNOWN_NAMES, n=1, cutoff=0.75)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(f"{name}: unknown configuration key{hint}")
    return name


def parse_overrides(items) -> dict[str, str]:
    """``--override key=value`` arguments as a dict."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--override {item!r}: expected key=value")
        out[key.strip()] = value
    return out
