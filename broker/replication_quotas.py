"""This broker's replication quotas (``kraft.quotas.replication``), kept in step with the
metadata image: the throttled-replicas topic configs and the throttled-rate broker configs
apply from the next fetch after the image that carries them, without a restart.

A rate is this broker's own dynamic config (``kafka-configs --entity-type brokers
--entity-name N``), else the cluster-wide default (``--entity-default``), else unbounded.
"""

from __future__ import annotations

from broker.config_defaults import dynamic_broker_value
from kraft.quotas.replication import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    ReplicationQuota,
    parse_rate,
    throttled_partitions,
)
from kraft.server_config import ServerConfig
from metadata.image import ConfigResourceType, MetadataImage


class ReplicationQuotas:
    """The leader-side and follower-side quotas of one broker."""

    def __init__(self, broker_id: int, samples: int = 11, window_s: int = 1):
        self.broker_id = broker_id
        self.leader = ReplicationQuota(samples, window_s * 1000)
        self.follower = ReplicationQuota(samples, window_s * 1000)
        self._configs = None  # the image configs applied last

    @classmethod
    def from_config(cls, config: ServerConfig) -> "ReplicationQuotas":
        return cls(config.node_id, config["replication.quota.window.num"],
                   config["replication.quota.window.size.seconds"])

    def apply(self, image: MetadataImage) -> None:
        """Take the image's configs (a no-op when they did not change)."""
        if image.configs is self._configs:
            return
        self._configs = image.configs
        leader: dict = {}
        follower: dict = {}
        for (rtype, topic), values in image.configs.items():
            if rtype != ConfigResourceType.TOPIC:
                continue
            if values.get(LEADER_REPLICAS):
                leader[topic] = throttled_partitions(values[LEADER_REPLICAS], self.broker_id)
            if values.get(FOLLOWER_REPLICAS):
                follower[topic] = throttled_partitions(values[FOLLOWER_REPLICAS], self.broker_id)
        self.leader.update(parse_rate(dynamic_broker_value(image, self.broker_id, LEADER_RATE)), leader)
        self.follower.update(parse_rate(dynamic_broker_value(image, self.broker_id, FOLLOWER_RATE)), follower)
