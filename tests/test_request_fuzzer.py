"""A live node outlives random requests: frames generated from the schema table for every API
and version it advertises (valid-shaped with random values, and mutated), on its client and
controller ports.  Meanwhile another connection keeps being served, and afterwards the node
is up, a new client produces and consumes, and records acknowledged before the run read
back unchanged.  ``-m slow`` sends over 100,000 frames."""

from __future__ import annotations

import random
import re
import threading
import time
import uuid

import pytest

from cluster_helpers import fast_overrides, request, start_cluster, wait_until
from kraft.client import NodeUnavailable
from request_fuzzer import FuzzSession, RequestFuzzer, advertised_apis, fuzz_topics

SENTINEL_RECORDS = 200
# The node's one line for a request it failed (broker.network): any is a bug the run found.
FAILURE_LINE = re.compile(r"WARNING broker\.network: .* failed: ")


class Watcher(threading.Thread):
    """Asks for Metadata every 50 ms on its own connection while the fuzzer runs."""

    def __init__(self, host: str, port: int):
        super().__init__(daemon=True)
        self.host, self.port = host, port
        self.answers = 0
        self.failures: list[str] = []
        self.stopping = threading.Event()

    def run(self):
        while not self.stopping.is_set():
            try:
                request(self.host, self.port, "Metadata", 9, {"topics": None}, timeout_s=20)
                self.answers += 1
            except (NodeUnavailable, OSError, TimeoutError) as exc:
                self.failures.append(repr(exc))
            time.sleep(0.05)


def produce_sentinel(bootstrap: str, topic: str) -> list[bytes]:
    from confluent_kafka import Producer

    values = [b"sentinel-%d-" % i + uuid.uuid4().bytes for i in range(SENTINEL_RECORDS)]
    acked = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for v in values:
        producer.produce(topic, v, on_delivery=lambda err, msg: err is None and acked.append(msg.value()))
    assert producer.flush(30) == 0
    assert acked == values
    return values


def consume_all(bootstrap: str, topic: str, count: int) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = []
    deadline = time.monotonic() + 30
    while len(seen) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen.append(msg.value())
    consumer.close()
    return seen


def fuzz_a_node(make_cluster, seeds: list[int], frames_per_seed: int, controller_frames: int) -> dict:
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = start_cluster(make_cluster(controllers=1, brokers=0, overrides=fast_overrides()))
    node = cluster.brokers[0]
    bootstrap = cluster.bootstrap_servers
    sentinel = f"acknowledged-{uuid.uuid4().hex}"  # no name the fuzzer makes can reach it
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(sentinel, 1, 1)])[sentinel].result(30)
    values = produce_sentinel(bootstrap, sentinel)

    watcher = Watcher(node.host, node.broker_port)
    watcher.start()
    totals, by_seed, bad = {}, {}, []
    started = time.monotonic()
    try:
        apis = advertised_apis(node.host, node.broker_port)
        for seed in seeds:
            session = FuzzSession(node.host, node.broker_port,
                                  RequestFuzzer(random.Random(seed), apis, fuzz_topics()))
            by_seed[seed] = dict(session.run(frames_per_seed))
            bad += session.bad_answers
            assert node.process.poll() is None, f"the node died under seed {seed}: {list(session.recent)[-5:]}"
        if controller_frames:
            controller_apis = advertised_apis(node.host, node.controller_port)
            session = FuzzSession(node.host, node.controller_port,
                                  RequestFuzzer(random.Random(seeds[0]), controller_apis, fuzz_topics()))
            by_seed["controller"] = dict(session.run(controller_frames))
            bad += session.bad_answers
    finally:
        watcher.stopping.set()
        watcher.join()
    elapsed = time.monotonic() - started
    for counts in by_seed.values():
        for k, v in counts.items():
            totals[k] = totals.get(k, 0) + v

    assert node.process.poll() is None, "the node died"
    assert not bad, [(fz.api, fz.version, fz.mutated, why) for fz, why in bad[:10]]
    failures = [line for line in node.log_path.read_text(errors="replace").splitlines()
                if FAILURE_LINE.search(line)]
    assert not failures, failures[:10]
    assert watcher.answers > 0 and not watcher.failures, watcher.failures[:5]

    # Frames on the controller's port may legitimately disturb the cluster (a Vote or
    # BeginQuorumEpoch of a later epoch, an UnregisterBroker): it must come back by itself.
    wait_until(lambda: len(request(node.host, node.broker_port, "Metadata", 12, {"topics": []})["brokers"]) == 1,
               timeout_s=30, what="the broker back in the cluster")
    # A new client works, and what was acknowledged before the run is still there.
    fresh = f"after-{uuid.uuid4().hex}"
    admin.create_topics([NewTopic(fresh, 1, 1)])[fresh].result(30)
    new_values = produce_sentinel(bootstrap, fresh)
    assert consume_all(bootstrap, fresh, len(new_values)) == new_values
    assert consume_all(bootstrap, sentinel, len(values)) == values
    cluster.stop_all()
    print(f"\nfuzzed {sum(totals.values())} frames in {elapsed:.1f} s: {totals}; by seed: {by_seed}; "
          f"watcher answered {watcher.answers} Metadata requests")
    return totals


def test_a_node_outlives_random_requests(make_cluster):
    totals = fuzz_a_node(make_cluster, seeds=[11, 12], frames_per_seed=800, controller_frames=400)
    # The frames reached the handlers, not just the decoder: most were answered.
    assert totals.get("answered", 0) + totals.get("refused", 0) > totals.get("closed", 0)


@pytest.mark.slow
def test_a_node_outlives_100k_random_requests(make_cluster):
    fuzz_a_node(make_cluster, seeds=[101, 102, 103, 104, 105], frames_per_seed=20000, controller_frames=10000)


def test_requests_the_fuzzer_found(make_cluster):
    """Each of these once cost the node (an encoding error in the answer) or the connection
    (a handler's exception); each now gets Kafka's answer."""
    cluster = start_cluster(make_cluster(controllers=1, brokers=0, overrides=fast_overrides()))
    node = cluster.brokers[0]

    def ask(api, version, body):
        return request(node.host, node.broker_port, api, version, body)

    # Metadata before v12 cannot name a topic by id, nor answer a null name.
    md = ask("Metadata", 11, {"topics": [{"name": None, "topic_id": uuid.uuid4()}]})
    assert [(t["error_code"], t["name"]) for t in md["topics"]] == [(42, "")]  # INVALID_REQUEST
    md = ask("Metadata", 12, {"topics": [{"name": None, "topic_id": uuid.uuid4()}]})
    assert [(t["error_code"], t["name"]) for t in md["topics"]] == [(100, None)]  # UNKNOWN_TOPIC_ID
    ask("CreateTopics", 7, {"topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1}],
                            "timeout_ms": 10000})
    wait_for_leader = time.monotonic() + 20
    while ask("Metadata", 12, {"topics": [{"name": "t"}]})["topics"][0]["error_code"]:
        assert time.monotonic() < wait_for_leader
        time.sleep(0.1)
    # A negative timestamp that names no special offset is a search every record passes.
    lo = ask("ListOffsets", 5, {"replica_id": -1, "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "timestamp": -(2**63) + 1, "current_leader_epoch": -1}]}]})
    part = lo["topics"][0]["partitions"][0]
    assert part["error_code"] == 0
    # A retention that reaches past int64's end keeps the offset forever.
    deadline = time.monotonic() + 30
    while True:  # NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS while __consumer_offsets comes up
        ask("FindCoordinator", 1, {"key": "g", "key_type": 0})  # as clients do: it creates the topic
        commit = ask("OffsetCommit", 2, {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
                                         "retention_time_ms": 2**63 - 1, "topics": [
                                             {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 0}]}]})
        codes = [p["error_code"] for t in commit["topics"] for p in t["partitions"]]
        if codes != [14] and codes != [15] and codes != [16] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert codes == [0]
    # A quorum request with impossible values is INVALID_REQUEST, on the controller's port.
    snap = request(node.host, node.controller_port, "FetchSnapshot", 1, {"replica_id": 5, "topics": [
        {"name": "__cluster_metadata", "partitions": [{"partition": 0, "current_leader_epoch": 1,
                                                       "snapshot_id": {"end_offset": 664, "epoch": -5},
                                                       "position": 0}]}]})
    assert snap["error_code"] == 42
    cluster.stop_all()
