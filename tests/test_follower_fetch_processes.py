"""Fetching from the closest replica (KIP-392) on a 3-node cluster whose brokers sit in racks
a, b and c with ``replica.selector.class`` set to Kafka's RackAwareReplicaSelector: the leader
(rack a) sends a consumer in rack b to the rack-b follower without records, a follower answers a
Fetch v11+ consumer up to its own high watermark (and refuses an older one), and librdkafka
with ``client.rack=c`` reads every record from the rack-c follower, whose BytesOut counts them
while the leader's does not."""

import time

import pytest

from cluster_helpers import fast_overrides, request, scrape, start_cluster, wait_until
from kraft.protocol import codec
from kraft.protocol.error_codes import ErrorCode
from kraft.records.header import iter_batches

TOPIC, RECORDS = "closest", 200
RACKS = {1: "a", 2: "b", 3: "c"}
RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout_total"


@pytest.fixture
def cluster(make_cluster):
    overrides = fast_overrides(replica_selector_class=RACK_AWARE, offsets_topic_num_partitions=1)
    return start_cluster(make_cluster(controllers=3, brokers=0, overrides=overrides,
                                      node_overrides={n: {"broker.rack": r} for n, r in RACKS.items()}))


def _fetch(node, version: int, rack: str, offset: int = 0) -> dict:
    body = codec.default_message("Fetch", "request")
    body.update(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
                session_epoch=-1, rack_id=rack, topics=[{"topic": TOPIC, "partitions": [{
                    "partition": 0, "fetch_offset": offset, "current_leader_epoch": -1, "last_fetched_epoch": -1,
                    "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}])
    resp = request(node.host, node.broker_port, "Fetch", version, body)
    return resp["responses"][0]["partitions"][0]


def _count(records) -> int:
    return sum(h.last_offset_delta + 1 for _, h in iter_batches(bytes(records or b""), check_crc=True))


def _bytes_out(node) -> float:
    return sum(v for (name, labels), v in scrape(node).items() if name == BYTES_OUT and ("topic", TOPIC) in labels)


def test_consumers_read_from_a_replica_in_their_rack(cluster):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[1, 2, 3]])])[TOPIC].result()
    leader, follower_b = cluster.nodes[1], cluster.nodes[2]
    wait_until(lambda: _fetch(leader, 12, "")["error_code"] == 0, what="node 1 leading the topic")
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(TOPIC, value=b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    # every replica has every record and knows they are committed
    wait_until(lambda: all(_fetch(n, 12, "")["high_watermark"] == RECORDS for n in cluster.nodes.values()),
               what="every replica's high watermark at the end")

    sent = _fetch(leader, 12, "b")
    assert sent["preferred_read_replica"] == 2 and _count(sent["records"]) == 0, sent
    assert sent["high_watermark"] == RECORDS
    own_rack = _fetch(leader, 12, "a")
    assert own_rack["preferred_read_replica"] == -1 and _count(own_rack["records"]) == RECORDS
    no_rack_here = _fetch(leader, 12, "z")  # no replica in that rack: the leader serves
    assert no_rack_here["preferred_read_replica"] == -1 and _count(no_rack_here["records"]) == RECORDS
    there = _fetch(follower_b, 12, "b")
    assert there["error_code"] == 0 and _count(there["records"]) == RECORDS and there["high_watermark"] == RECORDS
    assert there["preferred_read_replica"] == -1  # a follower never redirects
    assert _fetch(follower_b, 10, "")["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER  # before KIP-392

    # librdkafka in rack c: every record, from node 3
    before = {n: _bytes_out(cluster.nodes[n]) for n in RACKS}
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "closest-group",
                         "client.rack": "c", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    got, deadline = [], time.monotonic() + 30
    try:
        while len(got) < RECORDS and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                got.append(int(m.value()))
    finally:
        consumer.close()
    assert got == list(range(RECORDS))
    served = {n: _bytes_out(cluster.nodes[n]) - before[n] for n in RACKS}
    assert served[3] > RECORDS and served[1] == 0 and served[2] == 0, served


def test_an_unknown_replica_selector_is_refused_at_start(tmp_path):
    from cluster_helpers import kraftctl

    props = tmp_path / "server.properties"
    props.write_text("process.roles=broker,controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:1\n"
                     "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:1\n"
                     "controller.listener.names=CONTROLLER\n"
                     f"log.dirs={tmp_path / 'data'}\nreplica.selector.class=com.example.MySelector\n")
    result = kraftctl("format", "--config", str(props), "--cluster-id", "q1Sh-9_ISia_zwGINzRvyQ")
    assert result.returncode != 0 and "replica.selector.class" in result.stderr and RACK_AWARE in result.stderr
