"""DescribeConfigs: a topic's, broker's or group's effective configuration and where each value
comes from (Kafka's ConfigSource), from the broker's static config and the metadata image."""

from __future__ import annotations

from broker import broker_loggers
from kraft.protocol.error_codes import ErrorCode
from kraft.server_config import KEYS, ServerConfig
from metadata.controller.configs import BROKER_CONFIGS, BROKER_LOG_SYNONYMS, GROUP_CONFIG_SYNONYMS, TOPIC_CONFIGS
from metadata.image import ConfigResourceType, MetadataImage

# Kafka's ConfigSource ids
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2  # set for this broker (its id as the resource name)
DYNAMIC_DEFAULT_BROKER_CONFIG = 3  # set for every broker (the empty resource name)
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
GROUP_CONFIG = 8  # set for one group (ConfigResource GROUP)

# config type ids (DescribeConfigs v3+)
_STRING, _INT, _LONG, _DOUBLE, _BOOLEAN, _LIST = 2, 3, 5, 6, 1, 7  # 4 is SHORT
_PASSWORD = 9
# the type names of the controller's tables and of server.properties' KEYS
_TYPE_IDS = {"boolean": _BOOLEAN, "bool": _BOOLEAN, "string": _STRING, "int": _INT, "long": _LONG, "double": _DOUBLE,
             "list": _LIST, "password": _PASSWORD}


def _type_of(table: dict, key: str) -> int:
    """A key's ConfigType, from a table of the keys: the controller's of the dynamic ones it
    accepts, or server.properties' (KEYS)."""
    spec = table.get(key)
    return _TYPE_IDS.get(spec.type, _STRING) if spec is not None else _STRING


def dynamic_log_defaults(image: MetadataImage, broker_id: int):
    """(topic key, value, source) of each dynamic broker config that is a topic default
    (``BROKER_LOG_SYNONYMS``): the cluster-wide default's, then broker ``broker_id``'s own,
    which a later one overrides."""
    for source, name in ((DYNAMIC_DEFAULT_BROKER_CONFIG, ""), (DYNAMIC_BROKER_CONFIG, str(broker_id))):
        for key, value in image.config(ConfigResourceType.BROKER, name).items():
            topic_key = BROKER_LOG_SYNONYMS.get(key)
            if topic_key is not None:
                yield topic_key, value, source


def dynamic_broker_value(image: MetadataImage, broker_id: int, key: str, static=None):
    """Broker config ``key`` as in force on broker ``broker_id``: its own dynamic value, else
    the cluster-wide dynamic default (both as the metadata holds them: strings), else
    ``static`` (server.properties), as Kafka's precedence."""
    own = image.config(ConfigResourceType.BROKER, str(broker_id)).get(key)
    if own is not None:
        return own
    default = image.config(ConfigResourceType.BROKER, "").get(key)
    return default if default is not None else static


def topic_defaults(config: ServerConfig) -> dict[str, tuple[str, int, int]]:
    """topic config key -> (value, source, type) before any topic override."""
    flush_ms = config["log.flush.interval.ms"]
    return {
        "cleanup.policy": (_as_text(config["log.cleanup.policy"]), DEFAULT_CONFIG, _LIST),
        "compression.type": (config["compression.type"], DEFAULT_CONFIG, _STRING),
        "compression.gzip.level": (str(config["compression.gzip.level"]), DEFAULT_CONFIG, _INT),
        "compression.lz4.level": (str(config["compression.lz4.level"]), DEFAULT_CONFIG, _INT),
        "compression.zstd.level": (str(config["compression.zstd.level"]), DEFAULT_CONFIG, _INT),
        "delete.retention.ms": (str(config["log.cleaner.delete.retention.ms"]), DEFAULT_CONFIG, _LONG),
        "file.delete.delay.ms": (str(config["log.segment.delete.delay.ms"]), DEFAULT_CONFIG, _LONG),
        "flush.messages": (str(config["log.flush.interval.messages"]), DEFAULT_CONFIG, _LONG),
        "flush.ms": (str(flush_ms if flush_ms is not None else 2**63 - 1), DEFAULT_CONFIG, _LONG),
        "index.interval.bytes": (str(config["log.index.interval.bytes"]), DEFAULT_CONFIG, _INT),
        "max.message.bytes": (str(config["message.max.bytes"]), DEFAULT_CONFIG, _INT),
        "message.timestamp.after.max.ms": (str(config["log.message.timestamp.after.max.ms"]), DEFAULT_CONFIG, _LONG),
        "message.timestamp.before.max.ms": (str(config["log.message.timestamp.before.max.ms"]), DEFAULT_CONFIG,
                                            _LONG),
        "message.timestamp.type": (config["log.message.timestamp.type"], DEFAULT_CONFIG, _STRING),
        "min.compaction.lag.ms": (str(config["log.cleaner.min.compaction.lag.ms"]), DEFAULT_CONFIG, _LONG),
        "max.compaction.lag.ms": (str(config["log.cleaner.max.compaction.lag.ms"]), DEFAULT_CONFIG, _LONG),
        "min.cleanable.dirty.ratio": (str(config["log.cleaner.min.cleanable.ratio"]), DEFAULT_CONFIG, _DOUBLE),
        "min.insync.replicas": (str(config["min.insync.replicas"]), DEFAULT_CONFIG, _INT),
        "retention.bytes": (str(config["log.retention.bytes"]), DEFAULT_CONFIG, _LONG),
        "retention.ms": (str(config.retention_ms), DEFAULT_CONFIG, _LONG),
        "segment.bytes": (str(config["log.segment.bytes"]), DEFAULT_CONFIG, _INT),
        "segment.index.bytes": (str(config["log.index.size.max.bytes"]), DEFAULT_CONFIG, _INT),
        "segment.ms": (str(config.segment_ms), DEFAULT_CONFIG, _LONG),
        "unclean.leader.election.enable": (_as_text(config["unclean.leader.election.enable"]),
                                           DEFAULT_CONFIG, _BOOLEAN),
        # Kafka's defaults of the topic keys with no broker key in kraft's server.properties
        # (LogConfig's, which kraft's log applies): described as Kafka describes them
        **{k: (v, DEFAULT_CONFIG, _type_of(TOPIC_CONFIGS, k)) for k, v in _FIXED_TOPIC_DEFAULTS.items()},
    }


_FIXED_TOPIC_DEFAULTS = {
    "follower.replication.throttled.replicas": "", "leader.replication.throttled.replicas": "",
    "local.retention.bytes": "-2", "local.retention.ms": "-2", "preallocate": "false", "remote.storage.enable": "false",
    "remote.log.copy.disable": "false", "remote.log.delete.on.disable": "false", "segment.jitter.ms": "0",
}


# Kafka's DynamicBrokerConfig.brokerConfigSynonyms: a broker key with the keys that stand in
# for it when it is unset, in precedence order
_RETENTION = ("log.retention.ms", "log.retention.minutes", "log.retention.hours")
_ROLL = ("log.roll.ms", "log.roll.hours")
_JITTER = ("log.roll.jitter.ms", "log.roll.jitter.hours")
_BROKER_KEY_SYNONYMS = {**dict.fromkeys(_RETENTION, _RETENTION), **dict.fromkeys(_ROLL, _ROLL),
                        **dict.fromkeys(_JITTER, _JITTER),
                        "log.flush.interval.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")}
# topic key -> its broker key (BROKER_LOG_SYNONYMS inverted)
_TOPIC_BROKER_KEY = {topic_key: broker_key for broker_key, topic_key in BROKER_LOG_SYNONYMS.items()}


def broker_synonyms(config: ServerConfig, image: MetadataImage, key: str, sensitive: bool = False) -> list[dict]:
    """DescribeConfigs' synonyms of broker key ``key`` on this node, as Kafka's configSynonyms:
    every setting of it and of the keys standing in for it, this broker's dynamic ones first,
    then the cluster-wide dynamic defaults, the file, the defaults; from ``key``'s own first."""
    names = _BROKER_KEY_SYNONYMS.get(key, (key,))
    layers = ((DYNAMIC_BROKER_CONFIG, image.config(ConfigResourceType.BROKER, str(config.node_id))),
              (DYNAMIC_DEFAULT_BROKER_CONFIG, image.config(ConfigResourceType.BROKER, "")),
              (STATIC_BROKER_CONFIG, config.originals),
              (DEFAULT_CONFIG, {n: _as_text(KEYS[n].default) for n in names
                                if n in KEYS and KEYS[n].default is not None}))
    out = [{"name": n, "value": None if sensitive else _as_text(values[n]), "source": source}
           for source, values in layers for n in names if n in values]
    while out and out[0]["name"] != key:  # Kafka drops what precedes the key's own
        out.pop(0)
    return out


def _entry(name, value, source, type_, sensitive=False, read_only=False) -> dict:
    return {"name": name, "value": None if sensitive else value, "read_only": read_only,
            "is_default": source == DEFAULT_CONFIG, "config_source": source, "is_sensitive": sensitive,
            "synonyms": [], "config_type": type_, "documentation": None}


def _as_text(value) -> str | None:
    """A typed server.properties value as Kafka's DescribeConfigs writes it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def broker_key_defaults(config: ServerConfig) -> dict[str, tuple[str | None, int, int]]:
    """Every server.properties key kraft knows that this node's file left out: (value,
    DEFAULT_CONFIG, type).  A broker describes all its configs, as Kafka's does
    (kafka-configs --describe --all, admin UIs), not only the keys its file set."""
    return {name: (_as_text(config[name]), DEFAULT_CONFIG, _type_of(KEYS, name))
            for name in KEYS if name not in config.originals}


def topic_values(config: ServerConfig, image: MetadataImage, overrides: dict[str, str]):
    """Every config of a topic whose own overrides are ``overrides``, as this broker sees it:
    (topic key -> (value, source, type), topic key -> its broker key's synonyms)."""
    values = topic_defaults(config)
    # A dynamic broker log default is the topic's default: Kafka reports it with its source.
    for topic_key, v, source in dynamic_log_defaults(image, config.node_id):
        values[topic_key] = (v, source, values[topic_key][2] if topic_key in values
                             else _type_of(TOPIC_CONFIGS, topic_key))
    for k, v in overrides.items():
        values[k] = (v, DYNAMIC_TOPIC_CONFIG, values[k][2] if k in values else _type_of(TOPIC_CONFIGS, k))
    # A default's source is its broker key's first synonym's, as Kafka's (STATIC_BROKER_CONFIG
    # for a key server.properties sets)
    inherited = {k: broker_synonyms(config, image, _TOPIC_BROKER_KEY[k]) for k in values if k in _TOPIC_BROKER_KEY}
    for k, found in inherited.items():
        v, source, type_ = values[k]
        if source == DEFAULT_CONFIG and found:
            values[k] = (v, found[0]["source"], type_)
    return values, inherited


def created_topic_configs(config: ServerConfig, image: MetadataImage, requested: list[dict]) -> list[dict]:
    """CreateTopics v5+'s answer for a topic created (or validated) with ``requested``
    configs: every config the new topic has, with its source, as Kafka's controller lists it
    (``CreateTopicsResult.config()`` in the Java admin client)."""
    values, _ = topic_values(config, image, {c["name"]: c["value"] for c in requested})
    return [{"name": k, "value": v, "read_only": False, "config_source": source, "is_sensitive": False}
            for k, (v, source, _type) in sorted(values.items())]


def with_created_configs(config: ServerConfig, image: MetadataImage, body: dict, response: dict) -> dict:
    """A CreateTopics v5+ ``response`` to ``body`` with each topic created (or validated)
    given its configs (:func:`created_topic_configs`) and a refused one an empty list, as
    Kafka's answer, from a broker or a controller listener alike."""
    requested = {t["name"]: t["configs"] for t in body["topics"]}
    for t in response.get("topics") or ():
        ok = not t["error_code"] and t["name"] in requested
        t["configs"] = created_topic_configs(config, image, requested[t["name"]]) if ok else []
    return response


def describe_resource(config: ServerConfig, image: MetadataImage, res: dict, include_synonyms: bool = False) -> dict:
    rtype, name = res["resource_type"], res["resource_name"]
    keys = res["configuration_keys"]
    out = {"error_code": 0, "error_message": None, "resource_type": rtype, "resource_name": name, "configs": []}
    inherited: dict[str, list[dict]] = {}  # a topic key -> its broker key's synonyms
    if rtype == ConfigResourceType.TOPIC:
        if image.topic(name) is None:
            out.update(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                       error_message=f"Topic '{name}' does not exist.")
            return out
        values, inherited = topic_values(config, image, image.config(ConfigResourceType.TOPIC, name))
    elif rtype == ConfigResourceType.BROKER:
        if name not in ("", str(config.node_id)):
            out.update(error_code=ErrorCode.INVALID_REQUEST,
                       error_message=f"broker {name!r} cannot be described by broker {config.node_id}")
            return out
        # The cluster-wide default (no name) is only what was set dynamically for every broker,
        # as Kafka's; a broker's own view adds its defaults and its file.
        values = broker_key_defaults(config) if name else {}
        if name:
            values.update((k, (v, STATIC_BROKER_CONFIG, _type_of(KEYS, k))) for k, v in config.originals.items())
        # Kafka's precedence: this broker's dynamic value, the cluster-wide dynamic default,
        # the static file.  kafka-configs --describe shows each by its source.
        for k, v in image.config(ConfigResourceType.BROKER, "").items():
            values[k] = (v, DYNAMIC_DEFAULT_BROKER_CONFIG, _type_of(BROKER_CONFIGS, k))
        if name:
            for k, v in image.config(ConfigResourceType.BROKER, name).items():
                values[k] = (v, DYNAMIC_BROKER_CONFIG, _type_of(BROKER_CONFIGS, k))
    elif rtype == ConfigResourceType.GROUP:
        if not name:
            out.update(error_code=ErrorCode.INVALID_REQUEST, error_message="Group name must not be empty")
            return out
        # Every group config, as Kafka's: the group's own value, else this broker's setting.
        own = image.config(ConfigResourceType.GROUP, name)
        values = {k: (own[k], GROUP_CONFIG, _INT) if k in own else (str(config[broker_key]), DEFAULT_CONFIG, _INT)
                  for k, broker_key in GROUP_CONFIG_SYNONYMS.items()}
    elif rtype == broker_loggers.BROKER_LOGGER:  # this node's loggers (KIP-412)
        try:
            broker_loggers.check_node(config.node_id, name)
        except broker_loggers.LoggerConfigError as exc:
            out.update(error_code=int(exc.error_code), error_message=str(exc))
            return out
        values = {k: (level, broker_loggers.DYNAMIC_BROKER_LOGGER_CONFIG, _STRING)
                  for k, level in broker_loggers.loggers().items()}
    else:
        out.update(error_code=ErrorCode.INVALID_REQUEST, error_message=f"unsupported resource type {rtype}")
        return out
    # A broker key that cannot be changed while the broker runs is read-only (Kafka: not one of
    # its dynamic broker configs); a topic's every key can be.  A password is never sent.
    broker = rtype == ConfigResourceType.BROKER
    for k in sorted(values):
        if keys is None or k in keys:
            v, source, type_ = values[k]
            sensitive = broker and (type_ == _PASSWORD or "password" in k)
            entry = _entry(k, v, source, type_, sensitive=sensitive, read_only=broker and k not in BROKER_CONFIGS)
            if include_synonyms and rtype == ConfigResourceType.TOPIC:  # its own override, then its broker key's
                own = [{"name": k, "value": v, "source": source}] if source == DYNAMIC_TOPIC_CONFIG else []
                entry["synonyms"] = own + inherited.get(k, [])
            elif include_synonyms and broker:  # for the cluster-wide default, only the dynamic default's
                found = broker_synonyms(config, image, k, sensitive)
                entry["synonyms"] = found if name else [s for s in found
                                                        if s["source"] == DYNAMIC_DEFAULT_BROKER_CONFIG]
            out["configs"].append(entry)
    return out
