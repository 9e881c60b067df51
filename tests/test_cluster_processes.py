"""3 controllers + 3 brokers as real processes: admin clients, controller failover, broker
fencing and unfencing."""

import time

import pytest

from cluster_helpers import active_controller, fast_overrides, request, start_cluster, wait_until

SESSION_MS = 3000
HEARTBEAT_MS = 500


def metadata(node, topics=None):
    body = {"topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": False}
    return request(node.host, node.broker_port, "Metadata", 12, body)


def partitions_of(md, topic):
    for t in md["topics"]:
        if t["name"] == topic and t["error_code"] == 0:
            return {p["partition_index"]: p for p in t["partitions"]}
    return None


@pytest.fixture
def cluster(make_cluster):
    return start_cluster(make_cluster(controllers=3, brokers=3, overrides=fast_overrides(
        broker_session_timeout_ms=SESSION_MS, broker_heartbeat_interval_ms=HEARTBEAT_MS)))


def test_admin_clients_failover_and_fencing(cluster):
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic as PyNewTopic

    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("orders", num_partitions=6, replication_factor=3)])["orders"].result(30)
    py_admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    py_admin.create_topics([PyNewTopic("payments", 6, 3)])

    # Metadata from every broker agrees.
    def agreed():
        views = [partitions_of(metadata(b), "orders") for b in cluster.brokers]
        views2 = [partitions_of(metadata(b), "payments") for b in cluster.brokers]
        ok = all(v is not None and len(v) == 6 and all(p["leader_id"] >= 0 for p in v.values()) for v in views + views2)
        return ok and all(v == views[0] for v in views) and all(v == views2[0] for v in views2)

    wait_until(agreed, what="all brokers to agree on the metadata")

    # The legacy AlterConfigs (what kafka-python 2.x's alter_configs sends; 3.x with
    # incremental=False) replaces a topic's whole dynamic config: a key left out is gone.
    from confluent_kafka.admin import ConfigResource
    from kafka.admin import ConfigResource as PyConfigResource, ConfigResourceType

    def dynamic_configs():
        resource = ConfigResource("topic", "payments")
        entries = admin.describe_configs([resource])[resource].result(30)
        return {k: e.value for k, e in entries.items() if e.source == 1}  # DYNAMIC_TOPIC_CONFIG

    py_admin.alter_configs([PyConfigResource(ConfigResourceType.TOPIC, "payments", configs={
        "retention.ms": "3600000", "max.message.bytes": "65536"})], incremental=False)
    wait_until(lambda: dynamic_configs() == {"retention.ms": "3600000", "max.message.bytes": "65536"},
               what="the altered configs")
    host, port = cluster.bootstrap_servers.split(",")[0].split(":")
    answer = request(host, int(port), "AlterConfigs", 1, {"validate_only": False, "resources": [{
        "resource_type": 2, "resource_name": "payments",
        "configs": [{"name": "retention.ms", "value": "7200000"}]}]}, timeout_s=30)
    assert [r["error_code"] for r in answer["responses"]] == [0]
    wait_until(lambda: dynamic_configs() == {"retention.ms": "7200000"}, what="the replaced configs")

    parts = partitions_of(metadata(cluster.brokers[0]), "orders")
    assert all(sorted(p["replica_nodes"]) == [4, 5, 6] and sorted(p["isr_nodes"]) == [4, 5, 6] for p in parts.values())
    assert sorted(p["leader_id"] for p in parts.values()) == [4, 4, 5, 5, 6, 6]  # leaders spread

    # SIGKILL the active controller: a new one is elected and topic creation keeps working.
    leader, _ = active_controller(cluster)
    cluster.kill(leader)
    wait_until(lambda: active_controller(cluster, exclude={leader}), what="a new controller")
    admin.create_topics([NewTopic("after-failover", num_partitions=2, replication_factor=3)])["after-failover"].result(30)
    assert sorted(py_admin.list_topics()) >= ["after-failover", "orders", "payments"]
    py_admin.close()

    # SIGKILL a broker: fenced within session timeout + one heartbeat, its partitions get new
    # leaders from their ISRs with bumped leader epochs.
    victim = cluster.nodes[4]
    observer = cluster.nodes[5]
    before = partitions_of(metadata(observer), "orders")
    led = {i: p for i, p in before.items() if p["leader_id"] == 4}
    killed_at = time.monotonic()
    cluster.kill(4)

    def fenced():
        md = metadata(observer)
        if any(b["node_id"] == 4 for b in md["brokers"]):
            return None
        now = partitions_of(md, "orders")
        if all(now[i]["leader_id"] in (5, 6) for i in led):
            return now
        return None

    after = wait_until(fenced, timeout_s=20, what="broker 4 fenced and its partitions moved")
    fenced_after_s = time.monotonic() - killed_at
    print(f"fenced and re-led after {fenced_after_s:.2f}s")
    assert fenced_after_s < (SESSION_MS + HEARTBEAT_MS) / 1000 + 2.0
    for i, p in led.items():
        assert after[i]["leader_epoch"] > p["leader_epoch"]
        assert 4 not in after[i]["isr_nodes"] and after[i]["leader_id"] in p["isr_nodes"]

    # The broker restarts and is unfenced.
    cluster.start(4)
    wait_until(lambda: any(b["node_id"] == 4 for b in metadata(observer)["brokers"]), timeout_s=20,
               what="broker 4 unfenced")
    cluster.stop_all()
