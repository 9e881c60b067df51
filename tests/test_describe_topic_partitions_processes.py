"""DescribeTopicPartitions (KIP-966), which Kafka 4's admin client uses for describeTopics:
pages that follow the cursor cover every partition once, in name and partition order; a named
topic that does not exist is an error of its own; a cursor outside the named topics is refused;
kafka-python's describe_topic_partitions and Kafka's own kafka-topics --describe read it."""

import pytest

from cluster_helpers import create_led_topic, fast_overrides, request, start_cluster
from kraft.protocol.error_codes import ErrorCode

TOPICS = {"dtp-a": 3, "dtp-b": 2, "dtp-c": 4}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from kraft.local_cluster import LocalCluster

    c = LocalCluster(tmp_path_factory.mktemp("dtp"), controllers=1, brokers=0,
                     overrides=fast_overrides(max_request_partition_size_limit=3))
    try:
        start_cluster(c)
        for name, count in TOPICS.items():
            create_led_topic(c, name, count, 1)
        yield c
    finally:
        c.stop_all()


def _describe(cluster, names, limit=2000, cursor=None) -> dict:
    node = cluster.nodes[1]
    return request(node.host, node.broker_port, "DescribeTopicPartitions", 0, {
        "topics": [{"name": n} for n in names], "response_partition_limit": limit, "cursor": cursor})


@pytest.mark.parametrize("names", [list(TOPICS), []], ids=["named", "every-topic"])
def test_pages_follow_the_cursor_over_every_partition_once(cluster, names):
    seen, cursor, pages = [], None, 0
    while True:
        answer = _describe(cluster, names, limit=2, cursor=cursor)
        pages += 1
        for t in answer["topics"]:
            assert t["error_code"] == 0 and t["topic_id"].int, t
            seen += [(t["name"], p["partition_index"]) for p in t["partitions"]]
            assert all(p["leader_id"] == 1 and p["eligible_leader_replicas"] == [] for p in t["partitions"])
        cursor = answer["next_cursor"]
        if cursor is None:
            break
        assert pages < 20
    expected = [(name, i) for name in sorted(TOPICS) for i in range(TOPICS[name])]
    assert [s for s in seen if s[0].startswith("dtp-")] == expected
    assert pages >= 5  # at most 2 partitions a page


def test_the_broker_limit_caps_a_page(cluster):
    answer = _describe(cluster, list(TOPICS), limit=100)
    assert sum(len(t["partitions"]) for t in answer["topics"]) == 3  # max.request.partition.size.limit
    assert answer["next_cursor"] == {"topic_name": "dtp-b", "partition_index": 0}


def test_missing_topics_and_bad_cursors(cluster):
    answer = _describe(cluster, ["dtp-b", "no-such-topic", "bad/name"])
    errors = {t["name"]: t["error_code"] for t in answer["topics"]}
    assert errors == {"dtp-b": 0, "no-such-topic": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                      "bad/name": ErrorCode.INVALID_TOPIC_EXCEPTION}
    # a full page ends before the next topic, existing or not
    full = _describe(cluster, ["dtp-a", "no-such-topic"])
    assert [t["name"] for t in full["topics"]] == ["dtp-a"]
    assert full["next_cursor"] == {"topic_name": "no-such-topic", "partition_index": 0}
    refused = _describe(cluster, ["dtp-a"], cursor={"topic_name": "dtp-b", "partition_index": 0})
    assert [t["error_code"] for t in refused["topics"]] == [ErrorCode.INVALID_REQUEST]
    refused = _describe(cluster, ["dtp-a"], cursor={"topic_name": "dtp-a", "partition_index": -1})
    assert [t["error_code"] for t in refused["topics"]] == [ErrorCode.INVALID_REQUEST]
    past = _describe(cluster, ["dtp-a"], cursor={"topic_name": "dtp-a", "partition_index": 7})
    assert past["topics"][0]["partitions"] == [] and past["next_cursor"] is None


def test_kafka_python_and_kafka_topics_describe(cluster):
    """kafka-python takes one page (3 partitions: the broker's limit here); Kafka's admin
    client behind kafka-topics --describe follows the cursor to the fourth."""
    from kafka import KafkaAdminClient

    from kafka_helpers import kafka_libs, run_tool

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        described = admin.describe_topic_partitions(["dtp-c"])
    finally:
        admin.close()
    assert [len(t["partitions"]) for t in described["topics"]] == [3]
    assert described["next_cursor"] == {"topic_name": "dtp-c", "partition_index": 3}
    kafka_libs()
    result = run_tool("kafka-topics", "--bootstrap-server", cluster.bootstrap_servers, "--describe",
                      "--topic", "dtp-c")
    assert result.returncode == 0, result.stderr
    assert "PartitionCount: 4" in result.stdout
    assert sorted(line.split("Partition: ")[1].split()[0] for line in result.stdout.splitlines()
                  if "Partition: " in line) == ["0", "1", "2", "3"], result.stdout
