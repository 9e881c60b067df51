"""Per-log configuration under Kafka's topic-level names and defaults.

``LogConfig`` is frozen: changing a topic's configuration builds a new one and hands it to
``Log.update_config``.  ``from_properties`` takes the topic configuration as Kafka spells it
(``segment.bytes``, ``retention.ms``, ...); keys that are valid Kafka topic configuration but
concern other layers (``compression.type``, ``min.insync.replicas``, ...) are accepted and
ignored, anything else is an error naming the key.  Almost every setting is an integer; the
exceptions are ``cleanup.policy`` (a comma-separated subset of ``delete`` and ``compact``,
kept normalised as ``"delete"``, ``"compact"``, ``"compact,delete"`` or ``""``, which as in
Kafka 4 means neither: no compaction and no time or size retention) and
``min.cleanable.dirty.ratio`` (a number in [0, 1]).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields

from kraft.log.errors import LogConfigError
from kraft.records.compression import GZIP, LZ4, ZSTD, codec_from_name

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

# Topic-level keys Kafka accepts that the log itself does not act on.  They are legal in a
# topic's configuration, so a caller may pass the whole configuration through.
_OTHER_TOPIC_KEYS = frozenset({
    "follower.replication.throttled.replicas",
    "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
    "message.downconversion.enable", "message.format.version",
    "message.timestamp.difference.max.ms",
    "min.insync.replicas", "preallocate",
    "remote.storage.enable", "remote.log.copy.disable", "remote.log.delete.on.disable",
    "segment.jitter.ms", "unclean.leader.election.enable",
})


TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
# compression.type: what a leader writes client batches in ("producer": as they came).
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


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
    cleanup_policy: str = "delete"
    delete_retention_ms: int = 24 * 3600 * 1000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = INT64_MAX
    min_cleanable_dirty_ratio: float = 0.5
    # LogAppendTime: a leader stamps each client batch with its append time (the batch's
    # max timestamp, with the timestamp-type attribute bit) before writing it.
    message_timestamp_type: str = "CreateTime"
    # A CreateTime record more than this far behind or ahead of the leader's clock is
    # refused (INVALID_TIMESTAMP).  Kafka 4's defaults (KIP-1030): any age, at most an hour
    # ahead (Kafka 3 bounded neither); the headers' maxTimestamp checks the second.
    message_timestamp_before_max_ms: int = INT64_MAX
    message_timestamp_after_max_ms: int = 3_600_000
    # Not "producer": a leader rewrites each client batch in another codec in this one (at
    # its level: gzip's -1 is zlib's default, 6), as Kafka does; the records are not read.
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3

    def __post_init__(self) -> None:
        if self.message_timestamp_type not in TIMESTAMP_TYPES:
            raise LogConfigError(f"invalid value {self.message_timestamp_type!r} for message.timestamp.type: "
                                 f"must be one of {', '.join(TIMESTAMP_TYPES)}")
        if self.compression_type not in COMPRESSION_TYPES:
            raise LogConfigError(f"invalid value {self.compression_type!r} for compression.type: "
                                 f"must be one of {', '.join(COMPRESSION_TYPES)}")
        object.__setattr__(self, "cleanup_policy", _parse_policy(self.cleanup_policy))
        ratio = self.min_cleanable_dirty_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 <= ratio <= 1:
            raise LogConfigError(
                f"invalid value {ratio!r} for min.cleanable.dirty.ratio: must be in [0, 1]")
        object.__setattr__(self, "min_cleanable_dirty_ratio", float(ratio))
        for f in fields(self):
            if f.name not in _RANGES:
                continue
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
            if key == "cleanup.policy":
                values["cleanup_policy"] = _parse_policy(raw)
            elif key == "min.cleanable.dirty.ratio":
                values["min_cleanable_dirty_ratio"] = _parse_ratio(raw)
            elif key in ("message.timestamp.type", "compression.type"):
                values[known[key]] = str(raw).strip()
            else:
                values[known[key]] = _parse_int(key, raw)
        return cls(**values)

    def to_properties(self) -> dict[str, str]:
        """The configuration as Kafka topic-config keys and string values."""
        return {_key(f.name): str(getattr(self, f.name)) for f in fields(self)}

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def compression_codec(self) -> int | None:
        """The codec id client batches are written in; None: each as its producer sent it."""
        return None if self.compression_type == "producer" else codec_from_name(self.compression_type)

    def compression_level(self, codec: int) -> int | None:
        """The topic's level for ``codec`` (None: the codec has none)."""
        return {GZIP: self.compression_gzip_level, LZ4: self.compression_lz4_level,
                ZSTD: self.compression_zstd_level}.get(codec)

    @property
    def timestamps_bounded(self) -> bool:
        """Whether a CreateTime record's timestamp is checked (see ``timestamp_bounds``)."""
        return self.message_timestamp_before_max_ms != INT64_MAX or self.message_timestamp_after_max_ms != INT64_MAX

    def timestamp_bounds(self, now_ms: int) -> tuple[int | None, int | None]:
        """The range a CreateTime record's timestamp must be in at ``now_ms`` (None: that
        side is unbounded, as with the defaults)."""
        before, after = self.message_timestamp_before_max_ms, self.message_timestamp_after_max_ms
        return (None if before == INT64_MAX else now_ms - before,
                None if after == INT64_MAX else now_ms + after)

    @property
    def compact(self) -> bool:
        """``cleanup.policy`` includes ``compact``: the log cleaner works on this log."""
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        """``cleanup.policy`` includes ``delete``: ``retention.ms``/``retention.bytes`` apply."""
        return "delete" in self.cleanup_policy.split(",")

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
    "delete_retention_ms": (0, INT64_MAX),
    "min_compaction_lag_ms": (0, INT64_MAX),
    "max_compaction_lag_ms": (1, INT64_MAX),
    "message_timestamp_before_max_ms": (0, INT64_MAX),
    "message_timestamp_after_max_ms": (0, INT64_MAX),
    "compression_gzip_level": (-1, 9),
    "compression_lz4_level": (1, 17),
    "compression_zstd_level": (-131072, 22),
}
_POLICIES = ("delete", "compact")


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


def _parse_policy(raw: object) -> str:
    """``cleanup.policy`` normalised: a comma-separated string or a list of policies."""
    if isinstance(raw, str):
        items = [p.strip() for p in raw.split(",")]
    elif isinstance(raw, (list, tuple, set, frozenset)) and all(isinstance(p, str) for p in raw):
        items = [p.strip() for p in raw]
    else:
        raise LogConfigError(f"cleanup.policy must be a list of policies, got {raw!r}")
    chosen = {p for p in items if p}
    if not chosen <= set(_POLICIES):
        raise LogConfigError(
            f"invalid value {raw!r} for cleanup.policy: must be a subset of [delete, compact]")
    return ",".join(p for p in ("compact", "delete") if p in chosen)


def _parse_ratio(raw: object) -> float:
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return float(raw)
    if isinstance(raw, str):
        try:
            return float(raw.strip())
        except ValueError:
            pass
    raise LogConfigError(f"min.cleanable.dirty.ratio must be a number, got {raw!r}")
