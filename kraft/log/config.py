"""Per-log configuration under Kafka's topic-level names and defaults.

``LogConfig`` is frozen: changing a topic's configuration builds a new one and hands it to
``Log.update_config``.  ``from_properties`` takes the topic configuration as Kafka spells it
(``segment.bytes``, ``retention.ms``, ...); keys that are valid Kafka topic configuration but
concern other layers (``cleanup.policy``, ``compression.type``, ...) are accepted and
ignored, anything else is an error naming the key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields

from kraft.log.errors import LogConfigError

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

# Topic-level keys Kafka accepts that the log itself does not act on.  They are legal in a
# topic's configuration, so a caller may pass the whole configuration through.
_OTHER_TOPIC_KEYS = frozenset({
    "cleanup.policy", "compression.type", "compression.gzip.level", "compression.lz4.level",
    "compression.zstd.level", "delete.retention.ms", "follower.replication.throttled.replicas",
    "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
    "max.compaction.lag.ms", "message.downconversion.enable", "message.format.version",
    "message.timestamp.after.max.ms", "message.timestamp.before.max.ms",
    "message.timestamp.difference.max.ms", "message.timestamp.type",
    "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
    "remote.storage.enable", "remote.log.copy.disable", "remote.log.delete.on.disable",
    "segment.jitter.ms", "unclean.leader.election.enable",
})


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Configuration of one log.  Attribute names are Kafka's keys with ``_`` for ``.``.

    Durations are milliseconds and sizes bytes; ``-1`` means unlimited for the retention
    settings, as in Kafka.  The flush settings default to Kafka's "never" (Long.MAX_VALUE):
    durability comes from replication unless a topic asks for fsync.
    """

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    flush_messages: int = INT64_MAX
    flush_ms: int = INT64_MAX
    max_message_bytes: int = 1024 * 1024 + 12
    file_delete_delay_ms: int = 60_000

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if type(value) is not int:
                raise LogConfigError(f"{_key(f.name)} must be an integer, got {value!r}")
            low, high = _RANGES[f.name]
            if not low <= value <= high:
                raise LogConfigError(
                    f"invalid value {value} for {_key(f.name)}: must be in [{low}, {high}]"
                )

    @classmethod
    def from_properties(cls, props: Mapping[str, object], base: LogConfig | None = None) -> LogConfig:
        """Build a config from Kafka topic-config keys, overriding ``base`` (or the defaults).

        Values may be ints or decimal strings.  Raises LogConfigError naming the key for an
        unknown key, a non-integer value, or a value out of Kafka's range.
        """
        known = {_key(f.name): f.name for f in fields(cls)}
        values = {f.name: getattr(base, f.name) for f in fields(cls)} if base else {}
        for key, raw in props.items():
            if key in _OTHER_TOPIC_KEYS:
                continue
            if key not in known:
                raise LogConfigError(f"unknown topic configuration key {key!r}")
            values[known[key]] = _parse_int(key, raw)
        return cls(**values)

    def to_properties(self) -> dict[str, str]:
        """The configuration as Kafka topic-config keys and string values."""
        return {_key(f.name): str(getattr(self, f.name)) for f in fields(self)}

    @property
    def max_offset_index_entries(self) -> int:
        return self.segment_index_bytes // 8

    @property
    def max_time_index_entries(self) -> int:
        return self.segment_index_bytes // 12


_RANGES = {
    "segment_bytes": (14, INT32_MAX),  # 14: Kafka's smallest legal message
    "segment_ms": (1, INT64_MAX),
    "segment_index_bytes": (4, INT32_MAX),
    "index_interval_bytes": (0, INT32_MAX),
    "retention_ms": (-1, INT64_MAX),
    "retention_bytes": (-1, INT64_MAX),
    "flush_messages": (1, INT64_MAX),
    "flush_ms": (0, INT64_MAX),
    "max_message_bytes": (0, INT32_MAX),
    "file_delete_delay_ms": (0, INT64_MAX),
}


def _key(attribute: str) -> str:
    return attribute.replace("_", ".")


def _parse_int(key: str, raw: object) -> int:
    if isinstance(raw, bool):
        raise LogConfigError(f"{key} must be an integer, got {raw!r}")
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str):
        text = raw.strip()
        if re.fullmatch(r"-?[0-9]+", text):
            return int(text)
    raise LogConfigError(f"{key} must be an integer, got {raw!r}")
