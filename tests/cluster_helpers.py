"""Helpers for integration tests with real ``kraftctl start`` processes on loopback.

Every cluster lives in the test's temporary directory with ephemeral ports, and its
processes are killed when the test ends, whether it passed or not.
"""

from __future__ import annotations

import time

import trio

from kraft.client import KafkaClient, NodeUnavailable
from kraft.local_cluster import LocalCluster
from kraft.trio_run import run_trio


def request(host: str, port: int, api: str, version: int, body: dict, timeout_s: float = 5.0,
            security=None) -> dict:
    """One request with kraft's own client, from synchronous test code (``security``: a
    ClientSecurity for a TLS or SASL listener)."""

    async def main():
        async with trio.open_nursery() as nursery:
            client = KafkaClient(nursery, connect_timeout_s=timeout_s,
                                 **({"security": security} if security is not None else {}))
            try:
                return await client.request(host, port, api, version, body, timeout_s=timeout_s)
            finally:
                await client.aclose()
                nursery.cancel_scope.cancel()

    return run_trio(main)


def describe_quorum(cluster: LocalCluster, node_id: int) -> dict | None:
    node = cluster.nodes[node_id]
    body = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}
    security = cluster.security.client_security("CONTROLLER") if getattr(cluster, "security", None) else None
    try:
        resp = request(node.host, node.controller_port, "DescribeQuorum", 0, body, timeout_s=2, security=security)
    except NodeUnavailable:
        return None
    return resp["topics"][0]["partitions"][0]


def wait_until(predicate, timeout_s: float = 30.0, interval_s: float = 0.1, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what} (last: {last!r})")


def active_controller(cluster: LocalCluster, exclude=()) -> tuple[int, int] | None:
    """(leader id, epoch) as every running controller reports it, when they agree."""
    views = set()
    for node in cluster.controllers:
        if not node.running or node.node_id in exclude:
            continue
        q = describe_quorum(cluster, node.node_id)
        if q is None:
            return None
        views.add((q["leader_id"], q["leader_epoch"]))
    if len(views) == 1:
        leader, epoch = views.pop()
        if leader >= 0 and leader not in exclude:
            return leader, epoch
    return None


def fast_overrides(**extra) -> dict[str, str]:
    """Settings that keep integration tests quick without changing any protocol."""
    props = {
        "controller.quorum.election.timeout.ms": "500",
        "controller.quorum.fetch.timeout.ms": "1000",
        "broker.heartbeat.interval.ms": "500",
        "broker.session.timeout.ms": "3000",
        "replica.lag.time.max.ms": "5000",
    }
    props.update({k.replace("_", "."): str(v) for k, v in extra.items()})
    return props


def start_cluster(cluster: LocalCluster) -> LocalCluster:
    """Format, start, and wait until a controller is active and every broker is unfenced."""
    cluster.format()
    cluster.start_all()
    return wait_cluster_ready(cluster)


def wait_cluster_ready(cluster: LocalCluster) -> LocalCluster:
    """Until a controller is active and every broker is unfenced."""
    wait_until(lambda: active_controller(cluster), what="an active controller")
    count = len(cluster.brokers)

    security = cluster.security.client_security() if getattr(cluster, "security", None) else None

    def unfenced():
        for b in cluster.brokers:
            try:
                md = request(b.host, b.broker_port, "Metadata", 12, {"topics": []}, security=security)
            except NodeUnavailable:
                return False
            if len(md["brokers"]) != count:
                return False
        return True

    wait_until(unfenced, what=f"{count} unfenced brokers")
    return cluster


def kraftctl(*args: str, timeout_s: float = 120) -> "subprocess.CompletedProcess":
    """Run ``kraftctl`` as a user would (``python -m cli.main``), capturing its output."""
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "cli.main", *args], capture_output=True, text=True,
                          timeout=timeout_s)


def cluster_metadata(cluster: LocalCluster, topics: list[str] | None = None) -> dict:
    """Metadata from the first running broker that answers (one just restarted may not
    listen yet); ``topics`` None asks for every topic."""
    for b in cluster.brokers:
        if b.running:
            try:
                return request(b.host, b.broker_port, "Metadata", 12,
                               {"topics": None if topics is None else [{"name": t} for t in topics]})
            except NodeUnavailable:
                continue
    raise AssertionError("no broker answers")


def partitions_of(cluster: LocalCluster, topic: str) -> dict[int, dict]:
    """Partition index -> Metadata partition of ``topic`` (empty while a broker does not know it)."""
    return {p["partition_index"]: p for p in cluster_metadata(cluster, [topic])["topics"][0]["partitions"]}


def create_led_topic(cluster: LocalCluster, name: str, partitions: int, rf: int) -> dict[int, dict]:
    """CreateTopics through the first broker, then until every partition has a leader;
    returns ``partitions_of`` then."""
    b = cluster.brokers[0]
    got = request(b.host, b.broker_port, "CreateTopics", 7, {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": rf,
                    "assignments": [], "configs": []}],
        "timeout_ms": 30000, "validate_only": False}, timeout_s=30)
    assert got["topics"][0]["error_code"] == 0, got
    wait_until(lambda: len(partitions_of(cluster, name)) == partitions and all(
        p["leader_id"] >= 0 for p in partitions_of(cluster, name).values()),
        what=f"every partition of {name} led")
    return partitions_of(cluster, name)


def led_elsewhere(cluster: LocalCluster, topic: str, indexes, gone: int) -> bool:
    """Whether each of ``topic``'s partitions ``indexes`` has a leader other than ``gone``
    (one the answering broker does not list, as around a failover, has none yet)."""
    now = partitions_of(cluster, topic)
    return all(now.get(i, {}).get("leader_id", -1) not in (gone, -1) for i in indexes)


def alter_config(cluster, resource_type: int, name: str, key: str, value: str | None) -> None:
    """IncrementalAlterConfigs through broker 1: SET ``key`` (DELETE it when ``value`` is None)."""
    node = cluster.nodes[1]
    resp = request(node.host, node.broker_port, "IncrementalAlterConfigs", 1, {"resources": [
        {"resource_type": resource_type, "resource_name": name, "configs": [
            {"name": key, "config_operation": 0 if value is not None else 1, "value": value}]}],
        "validate_only": False})
    assert resp["responses"][0]["error_code"] == 0, resp


def scrape(node) -> dict:
    """(sample name, frozenset of labels) -> value, from the node's metrics endpoint."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(node.metrics_url, timeout=10) as resp:
        text = resp.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: dict, name: str, **labels) -> float:
    return samples[(name, frozenset(labels.items()))]
