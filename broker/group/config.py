"""The group coordinator's settings, by Kafka's config names."""

from __future__ import annotations

from dataclasses import dataclass

from broker.group.assignors import assignor_names


def setting(config, name: str, default):
    """A setting by Kafka's name from a ServerConfig or a plain mapping (missing or None:
    ``default``), for the coordinators' configs."""
    try:
        value = config[name]
    except (KeyError, TypeError):
        return default
    return default if value is None else value


def int_setting(config, name: str, default: int) -> int:
    return int(setting(config, name, default))


@dataclass(frozen=True, slots=True)
class GroupConfig:
    num_partitions: int = 50
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_size: int = 2**31 - 1
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    # KIP-848's consumer groups (broker.group.consumer_group)
    consumer_heartbeat_interval_ms: int = 5000
    consumer_session_timeout_ms: int = 45000
    consumer_max_size: int = 2**31 - 1
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    # group.consumer.migration.policy: whether a non-empty classic group becomes a consumer
    # group when a ConsumerGroupHeartbeat joins it (upgrade) and back when its last member
    # using that protocol leaves (downgrade)
    consumer_migration_policy: str = "bidirectional"
    consumer_regex_refresh_interval_ms: int = 600000  # (with ACLs on: a regex's matches re-checked)
    # authorizer.class.name is set: a KIP-848 regex takes in only topics its member may DESCRIBE
    acls: bool = False
    # UNSAFE (kraft.unsafe.consumer.group.assign.before.revocation): hand a partition to its
    # new owner before the old one revoked it, so two members consume it at once
    unsafe_assign_before_revocation: bool = False

    @property
    def upgrade_enabled(self) -> bool:
        return self.consumer_migration_policy in ("bidirectional", "upgrade")

    @property
    def downgrade_enabled(self) -> bool:
        return self.consumer_migration_policy in ("bidirectional", "downgrade")

    @classmethod
    def from_config(cls, config) -> GroupConfig:
        """From Kafka's config names in a ServerConfig or a plain mapping (missing: defaults)."""
        def get(name, default):
            return int_setting(config, name, default)

        d = cls()
        return cls(
            num_partitions=get("offsets.topic.num.partitions", d.num_partitions),
            initial_rebalance_delay_ms=get("group.initial.rebalance.delay.ms", d.initial_rebalance_delay_ms),
            min_session_timeout_ms=get("group.min.session.timeout.ms", d.min_session_timeout_ms),
            max_session_timeout_ms=get("group.max.session.timeout.ms", d.max_session_timeout_ms),
            max_size=get("group.max.size", d.max_size),
            offsets_retention_ms=get("offsets.retention.minutes", d.offsets_retention_ms // 60000) * 60000,
            offsets_retention_check_interval_ms=get("offsets.retention.check.interval.ms",
                                                    d.offsets_retention_check_interval_ms),
            offset_metadata_max_bytes=get("offset.metadata.max.bytes", d.offset_metadata_max_bytes),
            consumer_heartbeat_interval_ms=get("group.consumer.heartbeat.interval.ms",
                                               d.consumer_heartbeat_interval_ms),
            consumer_session_timeout_ms=get("group.consumer.session.timeout.ms", d.consumer_session_timeout_ms),
            consumer_max_size=get("group.consumer.max.size", d.consumer_max_size),
            consumer_assignors=tuple(assignor_names(setting(config, "group.consumer.assignors",
                                                             d.consumer_assignors))),
            consumer_regex_refresh_interval_ms=get("group.consumer.regex.refresh.interval.ms",
                                                   d.consumer_regex_refresh_interval_ms),
            consumer_migration_policy=str(setting(config, "group.consumer.migration.policy",
                                                  d.consumer_migration_policy)).strip().lower(),
            acls=bool(str(setting(config, "authorizer.class.name", "")).strip()),
            unsafe_assign_before_revocation=str(setting(config, "kraft.unsafe.consumer.group.assign.before.revocation",
                                                        False)).lower() == "true",
        )
