"""A server.properties written for Apache Kafka starts a kraft node (``kraftctl start``):
the keys kraft has no counterpart for are named once in its log, the log-cleaner defaults of
topic keys reach the topics (DescribeConfigs, as a Kafka admin reads them), and a key kraft
cannot honour stops the node with one line saying why."""

import subprocess
import sys

from cluster_helpers import fast_overrides, start_cluster, wait_until

KAFKA_ONLY = {"num.replica.alter.log.dirs.threads": "2", "log.cleaner.threads": "2", "group.max.size": "100",
              "controlled.shutdown.enable": "true", "metric.reporters": ""}


def test_kafka_keys_load_and_log_cleaner_defaults_reach_topics(make_cluster):
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    cluster = start_cluster(make_cluster(controllers=1, brokers=0, overrides=fast_overrides(
        **KAFKA_ONLY, **{"log.cleaner.delete.retention.ms": "3600000", "log.cleaner.min.cleanable.ratio": "0.1"})))
    node = next(iter(cluster.nodes.values()))
    wait_until(lambda: "ignored: " in node.log_path.read_text(), what="the not-used keys logged")
    line = next(ln for ln in node.log_path.read_text().splitlines() if "ignored: " in ln)
    assert "WARNING" in line and line.endswith(", ".join(sorted(KAFKA_ONLY))), line

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("t", 1, 1, config={"cleanup.policy": "compact"})])["t"].result(30)
    described = admin.describe_configs([ConfigResource("topic", "t")])
    entries = next(iter(described.values())).result(30)
    assert entries["delete.retention.ms"].value == "3600000"
    assert entries["min.cleanable.dirty.ratio"].value == "0.1"
    assert entries["min.compaction.lag.ms"].value == "0"


def test_a_key_kraft_cannot_honour_stops_the_node_saying_why(make_cluster):
    cluster = make_cluster(controllers=1, brokers=0, overrides=fast_overrides())
    cluster.format()
    node = next(iter(cluster.nodes.values()))
    started = subprocess.run(
        [sys.executable, "-m", "cli.main", "start", str(node.config_path),
         "--override", "create.topic.policy.class.name=com.example.TopicPolicy"],
        capture_output=True, text=True, timeout=60)
    assert started.returncode == 1
    assert started.stderr.strip() == ("Error: create.topic.policy.class.name: 'com.example.TopicPolicy': kraft runs "
                                      "no Java classes: the policy would not be enforced")
