"""The real ``kraftctl`` binary against a real cluster: topics, configs, metadata-quorum."""

import json
import subprocess
import sys
import time

from cluster_helpers import fast_overrides, start_cluster


def kraftctl(*args):
    return subprocess.run([sys.executable, "-m", "cli.main", *args], capture_output=True, text=True, timeout=60)


def test_topics_configs_and_quorum_commands(make_cluster):
    cluster = start_cluster(make_cluster(controllers=1, brokers=0, overrides=fast_overrides()))
    bs = f"--bootstrap-server={cluster.bootstrap_servers}"

    created = kraftctl("topics", bs, "--create", "--topic", "orders", "--partitions", "3",
                       "--replication-factor", "1", "--config", "retention.ms=1000000")
    assert created.returncode == 0 and created.stdout.strip() == "Created topic orders.", created.stderr
    again = kraftctl("topics", bs, "--create", "--topic", "orders")
    assert again.returncode == 1 and "TOPIC_ALREADY_EXISTS" in again.stderr
    assert kraftctl("topics", bs, "--create", "--topic", "orders", "--if-not-exists").returncode == 0
    bad = kraftctl("topics", bs, "--create", "--topic", "bad name!", "--partitions", "1")
    assert bad.returncode == 1 and "INVALID_TOPIC_EXCEPTION" in bad.stderr

    assert kraftctl("topics", bs, "--list").stdout.split() == ["orders"]
    described = kraftctl("topics", bs, "--describe", "--topic", "orders").stdout.splitlines()
    assert described[0].startswith("Topic: orders\tTopicId: ") and "PartitionCount: 3" in described[0]
    assert "Configs: retention.ms=1000000" in described[0]
    assert described[1] == "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1"

    altered = kraftctl("configs", bs, "--entity-type", "topics", "--entity-name", "orders", "--alter",
                       "--add-config", "min.insync.replicas=1,retention.bytes=1000")
    assert altered.returncode == 0, altered.stderr
    configs = json.loads(kraftctl("configs", bs, "--entity-type", "topics", "--entity-name", "orders",
                                  "--describe", "--output", "json").stdout)
    assert configs == {"min.insync.replicas": "1", "retention.bytes": "1000", "retention.ms": "1000000"}
    invalid = kraftctl("configs", bs, "--entity-type", "topics", "--entity-name", "orders", "--alter",
                       "--add-config", "no.such.config=1")
    assert invalid.returncode == 1 and "INVALID_CONFIG" in invalid.stderr

    grown = kraftctl("topics", bs, "--alter", "--topic", "orders", "--partitions", "5")
    assert grown.returncode == 0, grown.stderr
    shrink = kraftctl("topics", bs, "--alter", "--topic", "orders", "--partitions", "2")
    assert shrink.returncode == 1 and "INVALID_PARTITIONS" in shrink.stderr
    desc = json.loads(kraftctl("topics", bs, "--describe", "--topic", "orders", "--output", "json").stdout)
    assert desc[0]["partition_count"] == 5

    status = json.loads(kraftctl("metadata-quorum", bs, "describe", "--status", "--output", "json").stdout)
    assert status["LeaderId"] == 1 and status["CurrentVoters"] == [1] and status["HighWatermark"] > 0

    assert kraftctl("topics", bs, "--delete", "--topic", "orders").returncode == 0
    missing = kraftctl("topics", bs, "--describe", "--topic", "orders")
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    unreachable = kraftctl("topics", "--bootstrap-server", "127.0.0.1:1", "--list")
    assert unreachable.returncode == 1 and "no broker reachable" in unreachable.stderr
    internal = kraftctl("topics", bs, "--delete", "--topic", "__consumer_offsets")
    assert internal.returncode == 1 and "internal topic" in internal.stderr
    for result in (again, bad, invalid, shrink, missing, unreachable, internal):
        assert "Traceback" not in result.stderr
    cluster.stop_all()


def test_console_tools_and_consumer_groups(make_cluster):
    cluster = start_cluster(make_cluster(controllers=1, brokers=0, overrides=fast_overrides(
        group_initial_rebalance_delay_ms=0)))
    bs = f"--bootstrap-server={cluster.bootstrap_servers}"
    assert kraftctl("topics", bs, "--create", "--topic", "lines", "--partitions", "1").returncode == 0
    produced = subprocess.run([sys.executable, "-m", "cli.main", "console-producer", bs, "--topic", "lines",
                               "--property", "parse.key=true"], input="k1\tone\nk2\ttwo\nk3\tthree\n",
                              capture_output=True, text=True, timeout=60)
    assert produced.returncode == 0, produced.stderr
    consumed = kraftctl("console-consumer", bs, "--topic", "lines", "--from-beginning", "--group", "readers",
                        "--max-messages", "3", "--property", "print.key=true", "--property", "print.offset=true")
    assert consumed.stdout.splitlines() == ["Offset:0\tk1\tone", "Offset:1\tk2\ttwo", "Offset:2\tk3\tthree"]

    assert kraftctl("consumer-groups", bs, "--list").stdout.split() == ["readers"]
    described = json.loads(kraftctl("consumer-groups", bs, "--describe", "--group", "readers",
                                    "--output", "json").stdout)
    assert described["state"] == "Empty"
    assert [(p["topic"], p["current_offset"], p["log_end_offset"], p["lag"]) for p in described["partitions"]] == \
        [("lines", 3, 3, 0)]
    dry = kraftctl("consumer-groups", bs, "--reset-offsets", "--group", "readers", "--to-earliest")
    assert "dry run" in dry.stdout
    reset = kraftctl("consumer-groups", bs, "--reset-offsets", "--group", "readers", "--to-offset", "1", "--execute")
    assert reset.returncode == 0, reset.stderr
    again = kraftctl("console-consumer", bs, "--topic", "lines", "--group", "readers", "--max-messages", "2")
    assert again.stdout.splitlines() == ["two", "three"]
    missing = kraftctl("consumer-groups", bs, "--describe", "--group", "nobody")
    assert missing.returncode == 1 and "does not exist" in missing.stderr and "Traceback" not in missing.stderr
    # a KIP-848 group: described through ConsumerGroupDescribe
    modern = kraftctl("console-consumer", bs, "--topic", "lines", "--from-beginning", "--group", "modern",
                      "--max-messages", "3", "--consumer-property", "group.protocol=consumer")
    assert modern.stdout.splitlines() == ["one", "two", "three"], modern.stderr
    described = json.loads(kraftctl("consumer-groups", bs, "--describe", "--group", "modern",
                                    "--output", "json").stdout)
    assert described["type"] == "consumer" and described["state"] == "Empty"
    assert [p["current_offset"] for p in described["partitions"]] == [3]
    cluster.stop_all()


def test_a_group_member_s_host_is_its_address_as_kafka_reports_it(make_cluster):
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient

    cluster = start_cluster(make_cluster(controllers=1, brokers=0, overrides=fast_overrides(
        group_initial_rebalance_delay_ms=0)))
    bs = cluster.bootstrap_servers
    assert kraftctl("topics", f"--bootstrap-server={bs}", "--create", "--topic", "hosts").returncode == 0
    consumer = Consumer({"bootstrap.servers": bs, "group.id": "where", "client.id": "member-1"})
    consumer.subscribe(["hosts"])
    try:
        deadline = time.monotonic() + 60
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.5)
        admin = AdminClient({"bootstrap.servers": bs})
        group = admin.describe_consumer_groups(["where"])["where"].result(30)
        assert [(m.client_id, m.host) for m in group.members] == [("member-1", "/127.0.0.1")]
        described = json.loads(kraftctl("consumer-groups", f"--bootstrap-server={bs}", "--describe",
                                        "--group", "where", "--members", "--output", "json").stdout)
        assert "/127.0.0.1" in json.dumps(described)
    finally:
        consumer.close()
        cluster.stop_all()
