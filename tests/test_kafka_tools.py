"""Apache Kafka's own command-line tools, with their usual flags, against a 3-node kraft
cluster: the rows of docs/KAFKA_TOOLS.md.

The tools run from the jars bench/kafka/pom.xml pins (kraft.apache_kafka, by main class);
the tests skip, saying why, without java / mvn.  The default run checks the tools that
needed a fix in kraft; ``-m slow`` runs every row of the table."""

import json
import re
import uuid

import pytest

from cluster_helpers import (
    alter_config,
    create_led_topic,
    fast_overrides,
    request,
    start_cluster,
    wait_until,
)
from kafka_helpers import kafka_libs, run_tool
from kraft.local_cluster import LocalCluster
from kraft.protocol.error_codes import ErrorCode


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = LocalCluster(tmp_path_factory.mktemp("kafka-tools"), controllers=3, brokers=0,
                     overrides=fast_overrides())
    try:
        yield start_cluster(c)
    finally:
        c.stop_all()


def ok(result) -> str:
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def controllers(cluster) -> str:
    return ",".join(f"{n.host}:{n.controller_port}" for n in cluster.controllers)


def test_controller_answers_describe_cluster_with_the_controllers(cluster):
    """KIP-919: how an admin client given --bootstrap-controller finds the quorum."""
    node = cluster.controllers[0]
    resp = request(node.host, node.controller_port, "DescribeCluster", 1,
                   {"include_cluster_authorized_operations": False, "endpoint_type": 2})
    assert resp["error_code"] == 0 and resp["endpoint_type"] == 2
    assert resp["cluster_id"] == cluster.cluster_id
    assert [(b["broker_id"], b["port"]) for b in resp["brokers"]] == [
        (n.node_id, n.controller_port) for n in cluster.controllers]
    assert resp["controller_id"] in cluster.nodes
    # Each listener describes only its own kind of endpoint.
    wrong = request(node.host, node.controller_port, "DescribeCluster", 1, {"endpoint_type": 1})
    assert wrong["error_code"] == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
    wrong = request(node.host, node.broker_port, "DescribeCluster", 1, {"endpoint_type": 2})
    assert wrong["error_code"] == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE


def test_broker_configs_carry_kafkas_config_source(cluster):
    """kafka-configs --describe --entity-name 1 shows what DescribeConfigs marks
    DYNAMIC_BROKER_CONFIG (2), --entity-default what it marks DYNAMIC_DEFAULT_BROKER_CONFIG (3)."""
    node = cluster.nodes[1]
    for name, key, value in (("1", "log.retention.bytes", "1073741824"), ("", "log.retention.ms", "604800000")):
        resp = request(node.host, node.broker_port, "IncrementalAlterConfigs", 1, {"resources": [
            {"resource_type": 4, "resource_name": name,
             "configs": [{"name": key, "config_operation": 0, "value": value}]}], "validate_only": False})
        assert resp["responses"][0]["error_code"] == 0, resp

    def described():
        resp = request(node.host, node.broker_port, "DescribeConfigs", 4, {"resources": [
            {"resource_type": 4, "resource_name": "1",
             "configuration_keys": ["log.retention.bytes", "log.retention.ms", "num.partitions",
                                    "log.retention.hours", "ssl.key.password"]}],
            "include_synonyms": True, "include_documentation": False})
        return {c["name"]: c for c in resp["results"][0]["configs"]}

    def sources():
        return {name: c["config_source"] for name, c in described().items()}

    wait_until(lambda: sources()["log.retention.ms"] == 3, what="both changes applied on broker 1")
    # and the keys its file left out, with their defaults (DEFAULT_CONFIG, 5), as Kafka's broker
    # describes every config it has; a password is sensitive, its value never sent
    assert sources() == {"log.retention.bytes": 2, "log.retention.ms": 3, "num.partitions": 4,
                         "log.retention.hours": 5, "ssl.key.password": 5}
    configs = described()
    assert configs["log.retention.hours"]["value"] == "168" and configs["log.retention.hours"]["config_type"] == 3
    assert configs["ssl.key.password"]["is_sensitive"] and configs["ssl.key.password"]["value"] is None


def test_metadata_quorum_tool_with_bootstrap_controller_and_server(cluster):
    kafka_libs()
    for flag, servers in (("--bootstrap-controller", controllers(cluster)),
                          ("--bootstrap-server", cluster.bootstrap_servers)):
        status = ok(run_tool("kafka-metadata-quorum", flag, servers, "describe", "--status"))
        assert f"ClusterId:              {cluster.cluster_id}" in status
        assert re.search(r"LeaderId:\s+[123]\n", status), status
        # Each voter with its directory id and controller endpoint (DescribeQuorum v2, KIP-853).
        voters = re.search(r"CurrentVoters:\s+(\[.*\])\n", status)
        assert voters, status
        listed = json.loads(voters.group(1))
        assert [v["id"] for v in listed] == [1, 2, 3], status
        assert all(len(v["directoryId"]) == 22 and v["endpoints"][0].startswith("CONTROLLER://")
                   for v in listed), status
    replication = ok(run_tool("kafka-metadata-quorum", "--bootstrap-controller", controllers(cluster),
                              "describe", "--replication"))
    assert len(re.findall(r"\t(Leader|Follower)\s*\t", replication)) == 3, replication


def test_reassign_partitions_with_a_throttle_and_verify_clearing_it(cluster, tmp_path):
    """kafka-reassign-partitions --execute --throttle sets the throttled replicas and rates,
    --verify deletes them, replica.alter.log.dirs.io.max.bytes.per.second included (kraft
    refused that key as unknown, so the tool's --verify failed)."""
    kafka_libs()
    bs = cluster.bootstrap_servers
    topic = f"reassign-{uuid.uuid4().hex[:8]}"
    ok(run_tool("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", topic,
                "--replica-assignment", "1:2"))
    plan = tmp_path / "plan.json"
    plan.write_text('{"version": 1, "partitions": [{"topic": "%s", "partition": 0, "replicas": [1, 2, 3]}]}' % topic)
    out = ok(run_tool("kafka-reassign-partitions", "--bootstrap-server", bs, "--reassignment-json-file", str(plan),
                      "--execute", "--throttle", "50000000"))
    assert "The inter-broker throttle limit was set to 50000000 B/s" in out
    described = ok(run_tool("kafka-configs", "--bootstrap-server", bs, "--describe", "--entity-type", "topics",
                            "--entity-name", topic))
    assert "leader.replication.throttled.replicas=0:1,0:2" in described
    assert "follower.replication.throttled.replicas=0:3" in described

    def verified():
        out = ok(run_tool("kafka-reassign-partitions", "--bootstrap-server", bs, "--reassignment-json-file",
                          str(plan), "--verify"))
        return "Clearing topic-level throttles on topic" in out and out
    assert "Clearing broker-level throttles on brokers 1,2,3" in wait_until(verified, timeout_s=60, interval_s=1)
    assert "throttled" not in ok(run_tool("kafka-configs", "--bootstrap-server", bs, "--describe",
                                          "--entity-type", "topics", "--entity-name", topic))
    assert "throttled" not in ok(run_tool("kafka-configs", "--bootstrap-server", bs, "--describe",
                                          "--entity-type", "brokers", "--entity-name", "3"))


@pytest.mark.slow
def test_every_tool_in_the_table(cluster):
    """Every row of docs/KAFKA_TOOLS.md that passes (about 2 minutes: one JVM per command)."""
    kafka_libs()
    bs = cluster.bootstrap_servers
    topic, group = f"tools-{uuid.uuid4().hex[:8]}", f"tools-group-{uuid.uuid4().hex[:8]}"

    def tool(name, *args, **kw):
        return ok(run_tool(name, *args, **kw))

    # kafka-topics
    assert "Created topic" in tool("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", topic,
                                   "--partitions", "3", "--replication-factor", "3",
                                   "--config", "retention.ms=3600000")
    tool("kafka-topics", "--bootstrap-server", bs, "--alter", "--topic", topic, "--partitions", "4")
    described = tool("kafka-topics", "--bootstrap-server", bs, "--describe", "--topic", topic)
    assert "PartitionCount: 4" in described and "retention.ms=3600000" in described
    assert topic in tool("kafka-topics", "--bootstrap-server", bs, "--list").split()
    assert tool("kafka-topics", "--bootstrap-server", bs, "--describe",
                "--under-replicated-partitions").strip() == ""

    # kafka-console-producer / kafka-console-consumer (keys, a classic group)
    lines = "".join(f"k{i}:v{i}\n" for i in range(50))
    tool("kafka-console-producer", "--bootstrap-server", bs, "--topic", topic, "--property", "parse.key=true",
         "--property", "key.separator=:", "--producer-property", "acks=all", input=lines)
    consumed = tool("kafka-console-consumer", "--bootstrap-server", bs, "--topic", topic, "--group", group,
                    "--from-beginning", "--max-messages", "50", "--property", "print.key=true",
                    "--timeout-ms", "30000")
    assert sorted(consumed.splitlines()) == sorted(f"k{i}\tv{i}" for i in range(50))

    # kafka-get-offsets
    ends = tool("kafka-get-offsets", "--bootstrap-server", bs, "--topic", topic)
    assert sum(int(line.rsplit(":", 1)[1]) for line in ends.split()) == 50
    assert all(line.endswith(":0") for line in
               tool("kafka-get-offsets", "--bootstrap-server", bs, "--topic", topic, "--time", "-2").split())

    # kafka-consumer-groups: list, describe, reset offsets, delete offsets, delete
    assert group in tool("kafka-consumer-groups", "--bootstrap-server", bs, "--list")
    described = tool("kafka-consumer-groups", "--bootstrap-server", bs, "--describe", "--group", group)
    assert sum(int(row.split()[3]) for row in described.splitlines() if row.startswith(group)) == 50
    assert "Empty" in tool("kafka-consumer-groups", "--bootstrap-server", bs, "--describe", "--group", group,
                           "--state")
    reset = tool("kafka-consumer-groups", "--bootstrap-server", bs, "--group", group, "--reset-offsets",
                 "--to-earliest", "--topic", topic, "--execute")
    assert [row.split()[3] for row in reset.splitlines() if row.startswith(group)] == ["0"] * 4
    tool("kafka-consumer-groups", "--bootstrap-server", bs, "--group", group, "--reset-offsets",
         "--shift-by", "2", "--all-topics", "--execute")
    assert "Successful" in tool("kafka-consumer-groups", "--bootstrap-server", bs, "--delete-offsets",
                                "--group", group, "--topic", topic)
    assert "was successful" in tool("kafka-consumer-groups", "--bootstrap-server", bs, "--delete",
                                    "--group", group)
    assert group not in tool("kafka-consumer-groups", "--bootstrap-server", bs, "--list")

    # kafka-configs: topics and brokers (kraft's dynamic subset)
    tool("kafka-configs", "--bootstrap-server", bs, "--alter", "--entity-type", "topics", "--entity-name", topic,
         "--add-config", "max.message.bytes=200000,retention.ms=86400000")
    tool("kafka-configs", "--bootstrap-server", bs, "--alter", "--entity-type", "topics", "--entity-name", topic,
         "--delete-config", "retention.ms")
    configs = tool("kafka-configs", "--bootstrap-server", bs, "--describe", "--entity-type", "topics",
                   "--entity-name", topic)
    assert "max.message.bytes=200000" in configs and "retention.ms" not in configs
    tool("kafka-configs", "--bootstrap-server", bs, "--alter", "--entity-type", "brokers", "--entity-default",
         "--add-config", "log.retention.ms=604800000")
    tool("kafka-configs", "--bootstrap-server", bs, "--alter", "--entity-type", "brokers", "--entity-name", "1",
         "--add-config", "log.retention.bytes=1073741824")
    assert "log.retention.bytes=1073741824" in tool(
        "kafka-configs", "--bootstrap-server", bs, "--describe", "--entity-type", "brokers", "--entity-name", "1")

    # kafka-producer-perf-test / kafka-consumer-perf-test
    perf = tool("kafka-producer-perf-test", "--topic", topic, "--num-records", "20000", "--record-size", "100",
                "--throughput", "-1", "--producer-props", f"bootstrap.servers={bs}", "acks=all",
                "enable.idempotence=true")
    assert "20000 records sent" in perf
    perf = tool("kafka-consumer-perf-test", "--bootstrap-server", bs, "--topic", topic, "--messages", "20000",
                "--timeout", "30000")
    assert int(perf.strip().splitlines()[-1].split(",")[4]) >= 20000

    # verifiable clients, both group protocols; the copier's transactions read back read_committed
    produced = tool("kafka-verifiable-producer", "--bootstrap-server", bs, "--topic", topic, "--max-messages", "300")
    assert '"acked":300' in produced
    for protocol in ("classic", "consumer"):
        consumed = tool("kafka-verifiable-consumer", "--bootstrap-server", bs, "--topic", topic, "--group-id",
                        f"{group}-{protocol}", "--group-protocol", protocol, "--max-messages", "300")
        assert sum(json.loads(line)["count"] for line in consumed.splitlines()
                   if '"records_consumed"' in line) >= 300, consumed
    copy = f"{topic}-copy"
    tool("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", copy, "--partitions", "4",
         "--replication-factor", "3")
    copied = 0
    for partition in range(4):
        copier = tool("kafka-transactional-message-copier", "--broker-list", bs, "--input-topic", topic,
                      "--input-partition", str(partition), "--output-topic", copy, "--transactional-id",
                      f"copier-{partition}", "--consumer-group", f"{group}-copier", "--transaction-size", "20",
                      "--enable-random-aborts")
        copied += json.loads(copier.strip().splitlines()[-1])["totalProcessed"]
    read = tool("kafka-console-consumer", "--bootstrap-server", bs, "--topic", copy, "--from-beginning",
                "--isolation-level", "read_committed", "--timeout-ms", "10000", "--max-messages", "100000")
    assert len(read.splitlines()) == copied >= 300
    # the rest of the table's one-liners
    assert "ApiVersions(18)" in tool("kafka-broker-api-versions", "--bootstrap-server", bs)
    assert "Cluster ID:" in tool("kafka-cluster", "cluster-id", "--bootstrap-server", bs)
    assert f"{group}-consumer" in tool("kafka-groups", "--bootstrap-server", bs, "--list")
    assert topic in tool("kafka-log-dirs", "--bootstrap-server", bs, "--describe", "--topic-list", topic)
    assert "Avg latency" in tool("kafka-e2e-latency", bs, f"{topic}-latency", "100", "all", "100")
    assert "Done." in tool("kafka-streams-application-reset", "--bootstrap-server", bs, "--application-id",
                           f"{group}-classic", "--input-topics", topic, "--dry-run")
    tool("kafka-leader-election", "--bootstrap-server", bs, "--election-type", "preferred", "--all-topic-partitions")

    tool("kafka-topics", "--bootstrap-server", bs, "--delete", "--topic", topic)


def test_kafka_configs_reads_and_sets_a_nodes_log_levels(cluster):
    """kafka-configs --entity-type broker-loggers: DescribeConfigs and IncrementalAlterConfigs
    of BROKER_LOGGER on the node named (once refused with INVALID_REQUEST)."""
    kafka_libs()
    bs = cluster.bootstrap_servers
    args = ("kafka-configs", "--bootstrap-server", bs, "--entity-type", "broker-loggers", "--entity-name", "2")
    described = ok(run_tool(*args, "--describe"))
    assert "root=INFO" in described and "broker.replica_fetcher=INFO" in described
    ok(run_tool(*args, "--alter", "--add-config", "broker.replica_fetcher=DEBUG,kraft.raft=WARN"))
    described = ok(run_tool(*args, "--describe"))
    for line in ("broker.replica_fetcher=DEBUG", "kraft.raft=WARN", "kraft.raft.driver=WARN", "root=INFO"):
        assert line in described, described
    node = cluster.nodes[2]
    resp = request(node.host, node.broker_port, "DescribeConfigs", 4, {"resources": [
        {"resource_type": 8, "resource_name": "2", "configuration_keys": ["broker.replica_fetcher"]}],
        "include_synonyms": False, "include_documentation": False})
    assert resp["results"][0]["configs"][0]["value"] == "DEBUG"
    ok(run_tool(*args, "--alter", "--delete-config", "broker.replica_fetcher,kraft.raft"))
    assert "broker.replica_fetcher=INFO" in ok(run_tool(*args, "--describe"))
    refused = run_tool(*args, "--alter", "--add-config", "root=LOUD")
    assert refused.returncode != 0 and "not a supported log level" in refused.stdout + refused.stderr
    # a controller's own, through its controller listener (--bootstrap-controller)
    node = cluster.nodes[3]
    args = ("kafka-configs", "--bootstrap-controller", f"{node.host}:{node.controller_port}",
            "--entity-type", "broker-loggers", "--entity-name", "3")
    ok(run_tool(*args, "--alter", "--add-config", "metadata=DEBUG"))
    assert "metadata.controller_server=DEBUG" in ok(run_tool(*args, "--describe"))
    ok(run_tool(*args, "--alter", "--delete-config", "metadata"))


def test_kafka_configs_sets_a_groups_own_configs(cluster):
    """kafka-configs --entity-type groups --alter: IncrementalAlterConfigs of a GROUP resource
    (once refused: unsupported resource type 32), bounded by group.consumer.max.*."""
    kafka_libs()
    bs, group = cluster.bootstrap_servers, f"cfg-group-{uuid.uuid4().hex[:8]}"
    args = ("kafka-configs", "--bootstrap-server", bs, "--entity-type", "groups", "--entity-name", group, "--alter")
    assert "Completed updating config for group" in ok(run_tool(*args, "--add-config",
                                                               "consumer.heartbeat.interval.ms=6000"))
    refused = run_tool(*args, "--add-config", "consumer.session.timeout.ms=600000")
    assert refused.returncode != 0 and "group.consumer.max.session.timeout.ms" in refused.stdout + refused.stderr
    node = cluster.nodes[1]

    def described():
        resp = request(node.host, node.broker_port, "DescribeConfigs", 4, {"resources": [
            {"resource_type": 32, "resource_name": group, "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False})
        return {c["name"]: (c["value"], c["config_source"]) for c in resp["results"][0]["configs"]}

    wait_until(lambda: described() == {"consumer.heartbeat.interval.ms": ("6000", 8),
                                       "consumer.session.timeout.ms": ("45000", 5)}, what="the group's configs")


def test_kafka_features_describes_and_updates_feature_levels(cluster):
    """kafka-features: ApiVersions' supported and finalized features (describe printed nothing:
    kraft sent neither) and UpdateFeatures (once unknown), through a broker and a controller."""
    kafka_libs()
    bs = cluster.bootstrap_servers
    for args in (("--bootstrap-server", bs), ("--bootstrap-controller", controllers(cluster))):
        described = ok(run_tool("kafka-features", *args, "describe"))
        assert re.search(r"Feature: metadata.version\tSupportedMinVersion: 3.3-IV3\tSupportedMaxVersion: 3.9-IV0\t"
                         r"FinalizedVersionLevel: 3.9-IV0\tEpoch: \d+", described), described
        assert re.search(r"Feature: group.version\tSupportedMinVersion: 1\tSupportedMaxVersion: 1\t"
                         r"FinalizedVersionLevel: 1", described), described
    # the release's levels again: nothing to change, and kraft.version named at its level
    ok(run_tool("kafka-features", "--bootstrap-server", bs, "upgrade", "--release-version", "3.9"))
    refused = run_tool("kafka-features", "--bootstrap-server", bs, "downgrade", "--metadata", "3.8")
    assert refused.returncode != 0 and "might delete metadata information" in refused.stdout + refused.stderr
    refused = run_tool("kafka-features", "--bootstrap-server", bs, "upgrade", "--feature", "transaction.version=2")
    assert refused.returncode != 0 and "only supports versions 0-0" in refused.stdout + refused.stderr
    assert "FinalizedVersionLevel: 3.9-IV0" in ok(run_tool("kafka-features", "--bootstrap-server", bs, "describe"))


def test_console_consumer_with_the_consumer_group_protocol(cluster):
    """Kafka 4.1's consumer with ``group.protocol=consumer`` (KIP-848: ConsumerGroupHeartbeat,
    OffsetCommit by member epoch), then kafka-consumer-groups reading the group through
    ConsumerGroupDescribe and ListGroups' group type."""
    kafka_libs()
    bs = cluster.bootstrap_servers
    topic, group = f"kip848-{uuid.uuid4().hex[:8]}", f"kip848-group-{uuid.uuid4().hex[:8]}"
    ok(run_tool("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", topic, "--partitions", "3",
                "--replication-factor", "3"))
    ok(run_tool("kafka-console-producer", "--bootstrap-server", bs, "--topic", topic,
                input="".join(f"v{i}\n" for i in range(30))))
    consumed = ok(run_tool("kafka-console-consumer", "--bootstrap-server", bs, "--topic", topic, "--group", group,
                           "--consumer-property", "group.protocol=consumer", "--from-beginning",
                           "--max-messages", "30", "--timeout-ms", "30000"))
    assert sorted(consumed.split()) == sorted(f"v{i}" for i in range(30))
    listed = ok(run_tool("kafka-consumer-groups", "--bootstrap-server", bs, "--list", "--type"))
    assert re.search(rf"^{group}\s+Consumer\s*$", listed, re.M), listed
    state = ok(run_tool("kafka-consumer-groups", "--bootstrap-server", bs, "--describe", "--group", group,
                        "--state"))
    assert re.search(rf"^{group}\s+\S+\s+\(\d\)\s+uniform\s+Empty\s+0\s*$", state, re.M), state
    offsets = ok(run_tool("kafka-consumer-groups", "--bootstrap-server", bs, "--describe", "--group", group))
    assert sum(int(row.split()[3]) for row in offsets.splitlines() if row.startswith(group)) == 30


def test_a_dynamic_broker_log_default_applies_to_topics_under_their_own_overrides(cluster):
    """kafka-configs --entity-type brokers --entity-default --add-config message.max.bytes=...:
    Kafka applies a dynamic broker log config (a topic key's synonym) as every topic's
    default at once; a topic's own value still wins.  Before, kraft stored it and applied
    nothing."""
    from confluent_kafka import KafkaError, Producer

    topic = "dynamic-log-defaults"
    leader = cluster.nodes[create_led_topic(cluster, topic, 1, 3)[0]["leader_id"]]

    def max_message_bytes() -> tuple[str, int]:
        resp = request(leader.host, leader.broker_port, "DescribeConfigs", 4, {"resources": [
            {"resource_type": 2, "resource_name": topic, "configuration_keys": ["max.message.bytes"]}],
            "include_synonyms": False, "include_documentation": False})
        c = resp["results"][0]["configs"][0]
        return c["value"], c["config_source"]

    def produce(size: int):
        errors = []
        p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "message.max.bytes": 100_000,
                      "message.send.max.retries": 0})
        p.produce(topic, b"x" * size, on_delivery=lambda err, msg: errors.append(err))
        p.flush(30)
        return errors[0].code() if errors[0] is not None else None

    try:
        alter_config(cluster, 4, "", "message.max.bytes", "2000")
        wait_until(lambda: max_message_bytes() == ("2000", 3), what="the cluster-wide default seen by the leader")
        assert produce(5000) == KafkaError.MSG_SIZE_TOO_LARGE
        assert produce(1000) is None
        alter_config(cluster, 2, topic, "max.message.bytes", "10000")  # the topic's own beats the broker default
        wait_until(lambda: max_message_bytes() == ("10000", 1), what="the topic override seen by the leader")
        assert produce(5000) is None
    finally:
        alter_config(cluster, 2, topic, "max.message.bytes", None)
        alter_config(cluster, 4, "", "message.max.bytes", None)
