"""broker.replication_quotas: a broker's replication quotas follow the metadata image, its
own throttled rate before the cluster default, the throttled replicas that name it."""

from __future__ import annotations

from broker.replication_quotas import ReplicationQuotas
from metadata.image import ConfigResourceType, MetadataImage
from metadata.serde import make


def image(*configs: tuple[int, str, str, str | None]) -> MetadataImage:
    return MetadataImage.from_records([make("ConfigRecord", resource_type=t, resource_name=n, name=k, value=v)
                                       for t, n, k, v in configs], len(configs) - 1)


TOPIC, BROKER = ConfigResourceType.TOPIC, ConfigResourceType.BROKER


def test_rates_come_from_the_broker_then_the_cluster_default():
    quotas = ReplicationQuotas(broker_id=2)
    quotas.apply(image((BROKER, "", "leader.replication.throttled.rate", "500"),
                       (BROKER, "", "follower.replication.throttled.rate", "600"),
                       (BROKER, "2", "follower.replication.throttled.rate", "700"),
                       (BROKER, "3", "leader.replication.throttled.rate", "800")))
    assert (quotas.leader.bound, quotas.follower.bound) == (500, 700)
    quotas.apply(image((BROKER, "3", "leader.replication.throttled.rate", "800")))
    assert (quotas.leader.bound, quotas.follower.bound) == (None, None)  # unbounded


def test_throttled_replicas_are_the_ones_naming_this_broker():
    quotas = ReplicationQuotas(broker_id=2)
    quotas.apply(image((TOPIC, "t", "leader.replication.throttled.replicas", "0:2,1:3,2:2"),
                       (TOPIC, "t", "follower.replication.throttled.replicas", "1:2"),
                       (TOPIC, "u", "follower.replication.throttled.replicas", "*"),
                       (TOPIC, "v", "leader.replication.throttled.replicas", "0:3")))
    assert [quotas.leader.is_throttled("t", p) for p in range(3)] == [True, False, True]
    assert not quotas.leader.is_throttled("v", 0)
    assert quotas.follower.is_throttled("t", 1) and quotas.follower.is_throttled("u", 9)
    quotas.apply(image())
    assert not quotas.leader.active and not quotas.follower.active
