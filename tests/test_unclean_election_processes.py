"""Unclean leader election on real nodes (issue 22): when every ISR member of a partition is
gone and only a replica outside the ISR is alive, no clean election can lead it;
``kraftctl leader-election --election-type unclean``, confluent-kafka's ``elect_leaders``
(ElectLeaders, UNCLEAN) and ``unclean.leader.election.enable=true`` on the topic (the
controller's periodic check) each make that replica the leader.  What only the lost ISR had
is gone, as in Kafka; records produced afterwards are read back, and the old leader, once
restarted, truncates to the new leader's log and rejoins the ISR."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, ElectionType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster_helpers import fast_overrides, kraftctl, partitions_of, start_cluster, wait_until
from kraft.local_cluster import LocalCluster

TOPICS = ("by-tool", "by-admin", "by-config")


@pytest.fixture
def cluster(tmp_path):
    # Node 1 is the controller; brokers 2 and 3.  The controller looks for leaderless
    # partitions of topics that allow unclean elections every second (Kafka: 5 minutes).
    c = LocalCluster(tmp_path, controllers=1, brokers=2, overrides=fast_overrides(**{
        "auto.leader.rebalance.enable": "false", "unclean.leader.election.interval.ms": "1000"}))
    try:
        start_cluster(c)
        yield c
    finally:
        c.stop_all()


def produce(cluster, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": True})
    for v in values:
        p.produce(topic, value=v, partition=0)
    assert p.flush(60) == 0
    del p


def read_all(cluster, topic: str) -> list[bytes]:
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": f"read-{topic}",
                  "enable.auto.commit": False})
    try:
        end = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=20)[1]
        c.assign([TopicPartition(topic, 0, 0)])
        values, position = [], 0
        while position < end:
            msg = c.poll(10)
            assert msg is not None, f"{topic}: nothing after offset {position} of {end}"
            if not msg.error():
                values.append(msg.value())
                position = msg.offset() + 1
        return values
    finally:
        c.close()


def leaders(cluster) -> dict[str, int] | None:
    try:
        return {t: partitions_of(cluster, t).get(0, {}).get("leader_id", -1) for t in TOPICS}
    except AssertionError:  # broker 3, just started, does not answer yet
        return None


def test_only_an_unclean_election_leads_a_partition_whose_isr_is_gone(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for t in TOPICS:
        admin.create_topics([NewTopic(t, num_partitions=1, replica_assignment=[[2, 3]])])[t].result(60)
    wait_until(lambda: all(partitions_of(cluster, t).get(0, {}).get("isr_nodes") == [2, 3] for t in TOPICS),
               what="every topic in sync on 2 and 3")
    for t in TOPICS:
        produce(cluster, t, [b"before %d" % i for i in range(10)])

    cluster.stop(3)  # broker 3 leaves every ISR; 2 goes on alone
    wait_until(lambda: all(partitions_of(cluster, t)[0]["isr_nodes"] == [2] for t in TOPICS), what="ISR [2]")
    for t in TOPICS:
        produce(cluster, t, [b"only on 2 %d" % i for i in range(10)])
    cluster.kill(2)  # the last ISR member dies
    cluster.start(3)  # the only live replica is outside the ISR
    wait_until(lambda: leaders(cluster) == {t: -1 for t in TOPICS}, timeout_s=60,
               what="every partition leaderless once broker 2 is fenced")

    r = kraftctl("leader-election", "--bootstrap-server", cluster.bootstrap_servers,
                 "--election-type", "preferred", "--topic", "by-tool", "--partition", "0")
    assert r.returncode == 1 and "by-tool-0: PREFERRED_LEADER_NOT_AVAILABLE" in r.stderr, r.stderr
    r = kraftctl("leader-election", "--bootstrap-server", cluster.bootstrap_servers,
                 "--election-type", "unclean", "--topic", "by-tool", "--partition", "0")
    assert r.returncode == 0, r.stderr
    assert "Successfully completed leader election (UNCLEAN) for partitions by-tool-0" in r.stdout

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    refused = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("by-admin", 0)]).result(30)
    assert refused[TopicPartition("by-admin", 0)].name() == "PREFERRED_LEADER_NOT_AVAILABLE"
    assert admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition("by-admin", 0)]).result(30) == {
        TopicPartition("by-admin", 0): None}
    del admin
    wait_until(lambda: leaders(cluster) == {"by-tool": 3, "by-admin": 3, "by-config": -1},
               what="by-tool and by-admin led by 3")

    # by-config allows no unclean election: the controller's periodic check (every second
    # here) passes it by until the topic says otherwise.
    assert leaders(cluster)["by-config"] == -1
    r = kraftctl("configs", "--bootstrap-server", cluster.bootstrap_servers, "--entity-type", "topics",
                 "--entity-name", "by-config", "--alter", "--add-config", "unclean.leader.election.enable=true")
    assert r.returncode == 0, r.stderr
    wait_until(lambda: leaders(cluster)["by-config"] == 3, timeout_s=15, what="by-config led by 3 on its own")

    for t in TOPICS:
        assert partitions_of(cluster, t)[0]["isr_nodes"] == [3]
        produce(cluster, t, [b"after %d" % i for i in range(10)])
        # What only broker 2 had is lost, as with Kafka's unclean election.
        assert read_all(cluster, t) == [b"before %d" % i for i in range(10)] + [b"after %d" % i for i in range(10)]

    cluster.start(2)  # the old leader truncates its divergent records and follows 3
    wait_until(lambda: all(partitions_of(cluster, t)[0]["isr_nodes"] == [2, 3] for t in TOPICS), timeout_s=60,
               what="broker 2 back in every ISR")
