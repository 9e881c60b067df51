"""Transactions on real nodes (KIP-98, the partition side): transactional batches and
COMMIT/ABORT markers written with raw Produce and WriteTxnMarkers requests (the transaction
coordinator is not needed for this side), read by confluent-kafka (librdkafka) and
kafka-python consumers.  READ_COMMITTED sees committed data only, and nothing past an open
transaction; READ_UNCOMMITTED sees everything; the LSO survives a restart (1 node) and a
leader change (3 nodes, RF 3)."""

from __future__ import annotations

import time

import pytest

from cluster_helpers import fast_overrides, request, start_cluster, wait_until
from kraft.records import build_batch

TOPIC = "txn"
COMMITTED, UNCOMMITTED = 1, 0
RETRIABLE = (3, 6, 19)  # UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS
# These raw producers have no transaction coordinator, so the leaders must not ask one
# (KIP-890's verification: test_transactions_processes.py runs with it on)
NO_VERIFICATION = {"transaction_partition_verification_enable": "false"}


class Writer:
    """Raw requests to the partition's leader: transactional data and markers."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.seqs: dict[int, int] = {}

    def leader(self) -> int:
        for node in self.cluster.brokers:
            if not node.running:
                continue
            try:
                md = request(node.host, node.broker_port, "Metadata", 12, {"topics": [{"name": TOPIC}]})
            except Exception:  # noqa: BLE001 - a node still starting
                continue
            parts = md["topics"][0]["partitions"]
            if parts and parts[0]["leader_id"] >= 0 and self.cluster.nodes[parts[0]["leader_id"]].running:
                return parts[0]["leader_id"]
        return -1

    def _call(self, api, version, body):
        node = self.cluster.nodes[wait_until(lambda: max(self.leader(), 0) or None, what="a leader")]
        return request(node.host, node.broker_port, api, version, body, timeout_s=30)

    def produce(self, values, pid: int = -1, transactional: bool = False) -> int:
        seq = self.seqs.get(pid, 0) if pid >= 0 else -1
        records = build_batch([(None, v) for v in values], timestamp=int(time.time() * 1000), producer_id=pid,
                              producer_epoch=0 if pid >= 0 else -1, base_sequence=seq, transactional=transactional)
        body = {"transactional_id": "tx-%d" % pid if transactional else None, "acks": -1, "timeout_ms": 30000,
                "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": records}]}]}

        def attempt():  # a new leader may not have opened its replica yet
            part = self._call("Produce", 9, body)["responses"][0]["partition_responses"][0]
            return part if part["error_code"] not in RETRIABLE else None
        part = wait_until(attempt, timeout_s=60, what="a produce")
        assert part["error_code"] == 0, part
        if pid >= 0:
            self.seqs[pid] = seq + len(values)
        return part["base_offset"]

    def end(self, pid: int, commit: bool) -> None:
        body = {"markers": [{"producer_id": pid, "producer_epoch": 0, "transaction_result": commit,
                             "coordinator_epoch": 0, "topics": [{"name": TOPIC, "partition_indexes": [0]}]}]}

        def attempt():
            result = self._call("WriteTxnMarkers", 1, body)
            return result if result["markers"][0]["topics"][0]["partitions"][0]["error_code"] \
                not in RETRIABLE else None
        result = wait_until(attempt, timeout_s=60, what="a marker")
        assert result["markers"][0]["topics"][0]["partitions"][0]["error_code"] == 0, result

    def latest(self, isolation: int) -> int:
        body = {"replica_id": -1, "isolation_level": isolation, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}
        part = self._call("ListOffsets", 4, body)["topics"][0]["partitions"][0]
        return part["offset"] if part["error_code"] == 0 else -1


def read_until_quiet(poll, expected: int, settle_s: float = 3.0) -> list[bytes]:
    """Values from ``poll()`` (a list per call) until ``expected`` came and ``settle_s``
    brought no more: a consumer that shows too much shows it by then."""
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    quiet_since = None
    while time.monotonic() < deadline:
        got = poll()
        values.extend(got)
        if got:
            quiet_since = None
        elif len(values) >= expected:
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since >= settle_s:
                break
    return values


def read_confluent(bootstrap: str, isolation: str, expected: int) -> list[bytes]:
    """Every value from offset 0, with librdkafka."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-check-" + isolation,
                         "enable.auto.commit": False, "isolation.level": isolation,
                         "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])

    def poll():
        msg = consumer.poll(0.2)
        return [msg.value()] if msg is not None and not msg.error() else []
    try:
        return read_until_quiet(poll, expected)
    finally:
        consumer.close()


def read_kafka_python(bootstrap: str, isolation: str, expected: int) -> list[bytes]:
    """Every value from offset 0, with kafka-python."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False,
                             fetch_max_wait_ms=100)
    tp = TopicPartition(TOPIC, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)

    def poll():
        return [r.value for records in consumer.poll(timeout_ms=200).values() for r in records]
    try:
        return read_until_quiet(poll, expected)
    finally:
        consumer.close()


def check_reads(bootstrap: str, committed: list[bytes], everything: list[bytes]) -> None:
    """Both clients at both isolation levels, side by side: each read ends with
    ``read_until_quiet``'s settling wait, and one after another those were most of a test."""
    from concurrent.futures import ThreadPoolExecutor

    reads = [(read, isolation, expected) for isolation, expected in (("read_committed", committed),
                                                                      ("read_uncommitted", everything))
             for read in (read_confluent, read_kafka_python)]
    with ThreadPoolExecutor(len(reads)) as pool:
        got = list(pool.map(lambda r: r[0](bootstrap, r[1], len(r[2])), reads))
    for (read, isolation, expected), values in zip(reads, got):
        assert values == expected, (read.__name__, isolation)


def write_scenario(w: Writer) -> tuple[int, list[bytes], list[bytes]]:
    """A committed and an aborted transaction, plain data, then an open transaction
    followed by more plain data.  Returns (the open transaction's first offset, what
    READ_COMMITTED may see, everything)."""
    w.produce([b"c0", b"c1"], pid=1001, transactional=True)
    w.produce([b"a0", b"a1"], pid=1002, transactional=True)
    w.produce([b"c2"], pid=1001, transactional=True)
    w.end(1001, commit=True)
    w.end(1002, commit=False)
    w.produce([b"p0"])
    open_first = w.produce([b"o0"], pid=1003, transactional=True)
    w.produce([b"p1"])
    committed = [b"c0", b"c1", b"c2", b"p0"]
    everything = [b"c0", b"c1", b"a0", b"a1", b"c2", b"p0", b"o0", b"p1"]
    return open_first, committed, everything


def create_topic(bootstrap: str, replication_factor: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=replication_factor)])[TOPIC].result(30)


def test_read_committed_on_one_node_and_the_lso_survives_a_restart(make_cluster):
    cluster = start_cluster(make_cluster(controllers=1, overrides=fast_overrides(**NO_VERIFICATION)))
    create_topic(cluster.bootstrap_servers, 1)
    w = Writer(cluster)
    wait_until(lambda: w.leader() >= 0, what="a leader")
    open_first, committed, everything = write_scenario(w)
    assert w.latest(COMMITTED) == open_first
    assert w.latest(UNCOMMITTED) == open_first + 2
    check_reads(cluster.bootstrap_servers, committed, everything)

    cluster.stop(1)
    cluster.start(1)
    wait_until(lambda: w.latest(COMMITTED) == open_first, timeout_s=60, what="the LSO after a restart")
    assert read_confluent(cluster.bootstrap_servers, "read_committed", len(committed)) == committed
    w.end(1003, commit=True)
    end = w.latest(UNCOMMITTED)
    assert w.latest(COMMITTED) == end
    check_reads(cluster.bootstrap_servers, committed + [b"o0", b"p1"], everything)
    # The aborted transaction's marker filled the .txnindex of the segment it landed in.
    txnindex = list((cluster.nodes[1].data_dir / f"{TOPIC}-0").glob("*.txnindex"))
    assert [p.stat().st_size for p in txnindex] == [34]


def test_read_committed_on_three_nodes_and_the_lso_survives_a_leader_change(make_cluster):
    cluster = start_cluster(make_cluster(controllers=3,
                                         overrides=fast_overrides(min_insync_replicas=2, **NO_VERIFICATION)))
    create_topic(cluster.bootstrap_servers, 3)
    w = Writer(cluster)
    wait_until(lambda: w.leader() >= 0, what="a leader")
    open_first, committed, everything = write_scenario(w)
    assert w.latest(COMMITTED) == open_first
    check_reads(cluster.bootstrap_servers, committed, everything)

    old = w.leader()
    cluster.kill(old)
    wait_until(lambda: w.leader() not in (-1, old), timeout_s=60, what="a new leader")
    # The new leader knows the open transaction from the batches it replicated.
    wait_until(lambda: w.latest(UNCOMMITTED) == open_first + 2, timeout_s=60, what="the new leader's HW")
    assert w.latest(COMMITTED) == open_first
    assert read_confluent(cluster.bootstrap_servers, "read_committed", len(committed)) == committed
    w.end(1003, commit=False)  # aborted on the new leader
    w.produce([b"p2"])
    check_reads(cluster.bootstrap_servers, committed + [b"p1", b"p2"], everything + [b"p2"])
    cluster.start(old)


@pytest.mark.parametrize("unsafe", [True])
def test_the_unsafe_switch_serves_read_committed_up_to_the_high_watermark(make_cluster, unsafe):
    overrides = fast_overrides(**NO_VERIFICATION)
    overrides["kraft.unsafe.read.committed.high.watermark"] = "true"
    cluster = start_cluster(make_cluster(controllers=1, overrides=overrides))
    create_topic(cluster.bootstrap_servers, 1)
    w = Writer(cluster)
    wait_until(lambda: w.leader() >= 0, what="a leader")
    open_first, committed, everything = write_scenario(w)
    assert w.latest(COMMITTED) == open_first + 2
    # Aborted and open transactions' data reach READ_COMMITTED consumers: the fault
    # suite must catch this.
    assert read_confluent(cluster.bootstrap_servers, "read_committed", len(everything)) == everything
    log_text = cluster.nodes[1].log_path.read_text()
    assert "UNSAFE MODE: kraft.unsafe.read.committed.high.watermark=true" in log_text
