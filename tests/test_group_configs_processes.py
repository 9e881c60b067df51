"""A KIP-848 consumer group's own configs (ConfigResource GROUP, Kafka's GroupConfig), set and
read with librdkafka's admin client and applied by the coordinator: a group's
consumer.heartbeat.interval.ms is what its members are told to heartbeat at, and a member that
stops heartbeating is removed after that group's consumer.session.timeout.ms while a member of
a group without configs keeps the broker's session."""

import time
import uuid

import pytest

from cluster_helpers import fast_overrides, request, start_cluster, wait_until

TOPIC = "gcfg"


def _heartbeat(node, group: str, member_id: str, epoch: int) -> dict:
    body = {"group_id": group, "member_id": member_id, "member_epoch": epoch, "instance_id": None,
            "rack_id": None, "rebalance_timeout_ms": 30000 if epoch == 0 else -1,
            "subscribed_topic_names": [TOPIC] if epoch == 0 else None, "subscribed_topic_regex": None,
            "server_assignor": None, "topic_partitions": [] if epoch == 0 else None}
    return request(node.host, node.broker_port, "ConsumerGroupHeartbeat", 1, body)


def _members(node, group: str) -> int:
    described = request(node.host, node.broker_port, "ConsumerGroupDescribe", 0,
                        {"group_ids": [group], "include_authorized_operations": False})["groups"][0]
    return len(described["members"]) if described["error_code"] == 0 else -1


@pytest.fixture
def cluster(make_cluster):
    overrides = fast_overrides(offsets_topic_num_partitions=1, offsets_topic_replication_factor=1,
                               group_consumer_session_timeout_ms=20000, group_consumer_heartbeat_interval_ms=3000,
                               group_consumer_min_session_timeout_ms=1000, group_consumer_min_heartbeat_interval_ms=100)
    return start_cluster(make_cluster(controllers=1, brokers=0, overrides=overrides))


def test_a_groups_own_session_timeout_and_heartbeat_interval(cluster):
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, \
        NewTopic, ResourceType
    from confluent_kafka import KafkaException

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result()
    short, plain = f"short-{uuid.uuid4().hex[:6]}", f"plain-{uuid.uuid4().hex[:6]}"

    def alter(group, **values):
        entries = [ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
                   for k, v in values.items()]
        res = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
        return admin.incremental_alter_configs([res])[res].result()

    alter(short, consumer_session_timeout_ms="1500", consumer_heartbeat_interval_ms="200")
    with pytest.raises(KafkaException, match="must be less than or equal to group.consumer.max.session"):
        alter(short, consumer_session_timeout_ms="600000")
    with pytest.raises(KafkaException, match="kraft has no share groups"):
        alter(short, share_session_timeout_ms="50000")

    def described(group):
        res = ConfigResource(ResourceType.GROUP, group)
        return {k: (e.value, ConfigSource(e.source).name)
                for k, e in admin.describe_configs([res])[res].result().items()}

    assert described(short) == {"consumer.session.timeout.ms": ("1500", "GROUP_CONFIG"),
                                "consumer.heartbeat.interval.ms": ("200", "GROUP_CONFIG")}
    assert described(plain) == {"consumer.session.timeout.ms": ("20000", "DEFAULT_CONFIG"),
                                "consumer.heartbeat.interval.ms": ("3000", "DEFAULT_CONFIG")}

    node = cluster.nodes[1]
    wait_until(lambda: request(node.host, node.broker_port, "FindCoordinator", 4,
                               {"key_type": 0, "coordinator_keys": [short]})["coordinators"][0]["error_code"] == 0,
               what="the group coordinator")
    joined = {}
    for group in (short, plain):
        answer = wait_until(lambda: (lambda a: a if a["error_code"] == 0 else None)(
            _heartbeat(node, group, uuid.uuid4().hex, 0)), what=f"{group} joined")
        joined[group] = answer
    assert joined[short]["heartbeat_interval_ms"] == 200
    assert joined[plain]["heartbeat_interval_ms"] == 3000
    # Neither member heartbeats again: the short group's session (1.5 s) ends, the other's
    # (20 s) does not.
    started = time.monotonic()
    wait_until(lambda: _members(node, short) == 0, timeout_s=10, what="the short group's member expired")
    assert time.monotonic() - started < 10
    assert _members(node, plain) == 1
    # The interval deleted alone would be the broker's 3 s, longer than the group's session.
    def delete(*keys):
        res = ConfigResource(ResourceType.GROUP, short, incremental_configs=[
            ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in keys])
        return admin.incremental_alter_configs([res])[res].result()

    with pytest.raises(KafkaException, match=r"consumer.session.timeout.ms \(1500\) must be greater than"):
        delete("consumer.heartbeat.interval.ms")
    # Both deleted: back to the broker's values.
    delete("consumer.heartbeat.interval.ms", "consumer.session.timeout.ms")
    wait_until(lambda: described(short)["consumer.heartbeat.interval.ms"] == ("3000", "DEFAULT_CONFIG"),
               what="the deleted config described as the broker's")
    again = _heartbeat(node, short, uuid.uuid4().hex, 0)
    assert again["error_code"] == 0 and again["heartbeat_interval_ms"] == 3000
