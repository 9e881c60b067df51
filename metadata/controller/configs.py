"""Configuration keys the controller accepts, with Kafka's names, types and bounds.

Topic configs are checked on CreateTopics and IncrementalAlterConfigs; broker configs
(resource name "" for the cluster default, or a broker id) only on the latter.  A value
is validated by its type and bound; list-typed keys are the only ones APPEND and SUBTRACT
apply to.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from kraft.log.config import COMPRESSION_TYPES, TIMESTAMP_TYPES
from kraft.server_config import KEYS
from kraft.quotas.replication import THROTTLED_REPLICAS_FORMAT, valid_throttled_replicas


class ConfigError(ValueError):
    """A config key or value the controller refuses (INVALID_CONFIG)."""


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    type: str  # int long double boolean string list password
    check: Callable[[object], bool] | None = None
    valid: str = ""  # what check accepts, for the error message

    def parse(self, text: str):
        try:
            value = _PARSERS[self.type](text)
        except ValueError:
            raise ConfigError(f"invalid value {text!r} for configuration {self.name}: "
                              f"expected a {self.type}") from None
        if self.check is not None and not self.check(value):
            raise ConfigError(f"invalid value {text!r} for configuration {self.name}: "
                              f"value must be {self.valid}")
        return value


def _bool(text: str) -> bool:
    t = text.strip().lower()
    if t not in ("true", "false"):
        raise ValueError(text)
    return t == "true"


def _int(bits: int):
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    def parse(text: str) -> int:
        v = int(text.strip())
        if not lo <= v <= hi:
            raise ValueError(text)
        return v
    return parse


def _list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()] if text.strip() else []


_PARSERS = {
    "int": _int(32), "long": _int(64), "double": lambda t: float(t.strip()), "boolean": _bool,
    "string": str, "password": str, "list": _list,
}


def _at_least(n):
    return (lambda v: v >= n), f"at least {n}"


def _between(lo, hi):
    return (lambda v: lo <= v <= hi), f"between {lo} and {hi}"


def _one_of(*choices):
    return (lambda v: v in choices), f"one of {', '.join(choices)}"


def _each_of(*choices):
    return (lambda v: all(x in choices for x in v)), f"a list of {', '.join(choices)}"


def _key(name, type_, bound=None):
    check, valid = bound if bound else (None, "")
    return ConfigKey(name, type_, check, valid)


# Kafka's ThrottledReplicaListValidator
_THROTTLED_REPLICAS = (valid_throttled_replicas, THROTTLED_REPLICAS_FORMAT)


TOPIC_CONFIGS: dict[str, ConfigKey] = {k.name: k for k in [
    _key("cleanup.policy", "list", _each_of("delete", "compact")),
    _key("compression.type", "string", _one_of(*COMPRESSION_TYPES)),
    _key("compression.gzip.level", "int", _between(-1, 9)),
    _key("compression.lz4.level", "int", _between(1, 17)),
    _key("compression.zstd.level", "int", _between(-131072, 22)),
    _key("delete.retention.ms", "long", _at_least(0)),
    _key("file.delete.delay.ms", "long", _at_least(0)),
    _key("flush.messages", "long", _at_least(1)),
    _key("flush.ms", "long", _at_least(0)),
    _key("follower.replication.throttled.replicas", "list", _THROTTLED_REPLICAS),
    _key("index.interval.bytes", "int", _at_least(0)),
    _key("leader.replication.throttled.replicas", "list", _THROTTLED_REPLICAS),
    _key("local.retention.bytes", "long", _at_least(-2)),
    _key("local.retention.ms", "long", _at_least(-2)),
    _key("max.compaction.lag.ms", "long", _at_least(1)),
    _key("max.message.bytes", "int", _at_least(0)),
    _key("message.downconversion.enable", "boolean"),
    _key("message.format.version", "string"),
    _key("message.timestamp.after.max.ms", "long", _at_least(0)),
    _key("message.timestamp.before.max.ms", "long", _at_least(0)),
    _key("message.timestamp.difference.max.ms", "long", _at_least(0)),
    _key("message.timestamp.type", "string", _one_of(*TIMESTAMP_TYPES)),
    _key("min.cleanable.dirty.ratio", "double", _between(0.0, 1.0)),
    _key("min.compaction.lag.ms", "long", _at_least(0)),
    _key("min.insync.replicas", "int", _at_least(1)),
    _key("preallocate", "boolean"),
    _key("remote.storage.enable", "boolean"),
    # tiered storage's (KIP-405, KIP-950), stored and described as Kafka's; kraft's log keeps
    # every segment locally, so neither changes what it does
    _key("remote.log.copy.disable", "boolean"),
    _key("remote.log.delete.on.disable", "boolean"),
    _key("retention.bytes", "long"),
    _key("retention.ms", "long", _at_least(-1)),
    _key("segment.bytes", "int", _at_least(14)),
    _key("segment.index.bytes", "int", _at_least(4)),
    _key("segment.jitter.ms", "long", _at_least(0)),
    _key("segment.ms", "long", _at_least(1)),
    _key("unclean.leader.election.enable", "boolean"),
]}

# A dynamic broker config that is a topic config's default (Kafka's
# ServerTopicConfigSynonyms): broker key -> topic key.  A broker applies the cluster-wide
# default (resource name "") and then its own over its static file, under every topic's
# own overrides, as Kafka's DynamicLogConfig does.
BROKER_LOG_SYNONYMS: dict[str, str] = {
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.roll.jitter.ms": "segment.jitter.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.cleanup.policy": "cleanup.policy",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.preallocate": "preallocate",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "log.local.retention.ms": "local.retention.ms",
    "log.local.retention.bytes": "local.retention.bytes",
    "compression.type": "compression.type",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
    "message.max.bytes": "max.message.bytes",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}

# Broker configs that may change at run time: the log defaults (each validated as its
# topic key is) and these.
BROKER_CONFIGS: dict[str, ConfigKey] = {
    **{broker_key: replace(TOPIC_CONFIGS[topic_key], name=broker_key)
       for broker_key, topic_key in BROKER_LOG_SYNONYMS.items()},
    **{k.name: k for k in [
        _key("num.io.threads", "int", _at_least(1)),
        _key("num.network.threads", "int", _at_least(1)),
        _key("num.replica.fetchers", "int", _at_least(1)),
        _key("background.threads", "int", _at_least(1)),
        _key("leader.replication.throttled.rate", "long", _at_least(0)),
        _key("follower.replication.throttled.rate", "long", _at_least(0)),
        # Stored, bounding nothing: a kraft broker has one log directory, so no moves between
        # them; kafka-reassign-partitions --verify deletes it with the two rates above.
        _key("replica.alter.log.dirs.io.max.bytes.per.second", "long", _at_least(0)),
        _key("max.connections", "int", _at_least(0)),
        _key("max.connections.per.ip", "int", _at_least(0)),
        _key("max.connections.per.ip.overrides", "string"),
        # Kafka's other dynamic broker configs, stored and described so its tools and scripts
        # work unchanged; a kraft node has no thread pools to resize and one cleaner task.
        _key("log.cleaner.threads", "int", _at_least(0)),
        _key("log.cleaner.dedupe.buffer.size", "long", _at_least(0)),
        _key("log.cleaner.dedupe.buffer.load.factor", "double"),
        _key("log.cleaner.io.buffer.size", "int", _at_least(0)),
        _key("log.cleaner.io.max.bytes.per.second", "double"),
        _key("log.cleaner.backoff.ms", "long", _at_least(0)),
        _key("num.recovery.threads.per.data.dir", "int", _at_least(1)),
        _key("max.connection.creation.rate", "int", _at_least(0)),
        _key("producer.id.expiration.ms", "int", _at_least(1)),
        _key("transaction.partition.verification.enable", "boolean"),
        _key("metric.reporters", "list"),
    ]},
}


# A KIP-848 group's own configs (ConfigResource GROUP, Kafka's GroupConfig): each overrides,
# for that group only, the broker config named here, and must lie within the two broker
# configs bounding it.  Kafka's share.* and streams.* group keys are refused: kraft has
# neither kind of group.
GROUP_CONFIG_SYNONYMS: dict[str, str] = {
    "consumer.session.timeout.ms": "group.consumer.session.timeout.ms",
    "consumer.heartbeat.interval.ms": "group.consumer.heartbeat.interval.ms",
}
GROUP_CONFIG_BOUNDS: dict[str, tuple[str, str]] = {
    "consumer.session.timeout.ms": ("group.consumer.min.session.timeout.ms",
                                    "group.consumer.max.session.timeout.ms"),
    "consumer.heartbeat.interval.ms": ("group.consumer.min.heartbeat.interval.ms",
                                       "group.consumer.max.heartbeat.interval.ms"),
}
GROUP_CONFIGS: dict[str, ConfigKey] = {name: _key(name, "int", _at_least(1)) for name in GROUP_CONFIG_SYNONYMS}
# The broker configs above with their defaults (server.properties' table, Kafka's)
_GROUP_BROKER_KEYS = (*GROUP_CONFIG_SYNONYMS.values(), *(key for low_high in GROUP_CONFIG_BOUNDS.values()
                                                            for key in low_high))
GROUP_BROKER_DEFAULTS: dict[str, int] = {key: KEYS[key].default for key in _GROUP_BROKER_KEYS}


def unknown_group_config(name: str) -> str:
    """The error for a key no group config has."""
    if name.startswith(("share.", "streams.")):
        return f"unknown group config name {name!r}: kraft has no {name.split('.')[0]} groups"
    return f"unknown group config name {name!r} (group configs: {', '.join(GROUP_CONFIGS)})"


def check_group_configs(values, broker) -> None:
    """Raise ConfigError unless a group's configs ``values`` (key -> text, each already
    parsed by GROUP_CONFIGS) fit the bounds of the broker configs ``broker`` (key -> int,
    GROUP_BROKER_DEFAULTS' keys), with the session longer than the heartbeat interval once
    the broker's values fill in the keys the group leaves out."""
    for name, (low, high) in GROUP_CONFIG_BOUNDS.items():
        if name in values:
            value = int(values[name])
            if value < broker[low]:
                raise ConfigError(f"{name} must be greater than or equal to {low} ({broker[low]})")
            if value > broker[high]:
                raise ConfigError(f"{name} must be less than or equal to {high} ({broker[high]})")
    effective = {name: int(values[name]) if name in values else broker[synonym]
                 for name, synonym in GROUP_CONFIG_SYNONYMS.items()}
    session, interval = effective["consumer.session.timeout.ms"], effective["consumer.heartbeat.interval.ms"]
    if session <= interval:
        raise ConfigError(f"consumer.session.timeout.ms ({session}) must be greater than "
                          f"consumer.heartbeat.interval.ms ({interval})")


def validate(table: dict[str, ConfigKey], name: str, value: str | None):
    """Parse ``value`` for key ``name``; raises ConfigError for an unknown key or bad value."""
    key = table.get(name)
    if key is None:
        raise ConfigError(f"unknown configuration {name!r}")
    if value is None:
        raise ConfigError(f"null value not supported for configuration {name}")
    return key.parse(value)


def parse_bool(value: str | None, default: bool) -> bool:
    if value is None:
        return default
    try:
        return _bool(value)
    except ValueError:
        return default
