"""A broker's requests to the controller do not queue behind one another's, and do not
wait for controllers that are gone.

The controller answers a connection's requests in order.  When the broker's heartbeats,
ISR changes and forwarded admin requests shared one connection, a forwarded request that
legitimately waits (AddRaftVoter waits up to its ``timeout_ms`` for the new voter to catch
up) held the heartbeats behind it, and the broker was fenced by its own controller while
perfectly alive (found by the request fuzzer sending its frames on four connections at
once), and every forwarded request behind it waited too.  Kafka's broker keeps a channel
per purpose ("heartbeat", "alter-partition", "forwarding"); so does kraft's (cli/node.py),
with one more for the voter changes, which Kafka's controller answers at once where
kraft's waits for the new voter to catch up.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid

from cluster_helpers import active_controller, fast_overrides, request, start_cluster


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_long_forwarded_request_does_not_fence_the_broker(make_cluster):
    cluster = start_cluster(make_cluster(controllers=1, brokers=0, overrides=fast_overrides()))
    node = cluster.brokers[0]
    answer: dict = {}

    def add_a_voter_that_never_catches_up():
        # Forwarded to the controller, which retries until timeout_ms: the voter at a
        # closed port never fetches.
        answer.update(request(node.host, node.broker_port, "AddRaftVoter", 0, {
            "cluster_id": cluster.cluster_id, "timeout_ms": 12000, "voter_id": 99,
            "voter_directory_id": uuid.uuid4(),
            "listeners": [{"name": "CONTROLLER", "host": "127.0.0.1", "port": _closed_port()}]},
            timeout_s=60))

    waiting = threading.Thread(target=add_a_voter_that_never_catches_up, daemon=True)
    waiting.start()
    # broker.session.timeout.ms is 3 s here: more than two sessions' worth of heartbeats
    # must get through while the AddRaftVoter waits.
    seen = []
    deadline = time.monotonic() + 7
    while time.monotonic() < deadline:
        brokers = request(node.host, node.broker_port, "Metadata", 12, {"topics": []})["brokers"]
        seen.append([b["node_id"] for b in brokers])
        time.sleep(0.5)
    # A forwarded admin request meanwhile is answered at once, not after the AddRaftVoter.
    asked = time.monotonic()
    created = request(node.host, node.broker_port, "CreateTopics", 7, {
        "topics": [{"name": "while-a-voter-waits", "num_partitions": 1, "replication_factor": 1,
                    "assignments": [], "configs": []}], "timeout_ms": 20000, "validate_only": False},
        timeout_s=30)
    took = time.monotonic() - asked
    assert [t["error_code"] for t in created["topics"]] == [0], created
    assert took < 4, f"CreateTopics waited {took:.1f}s behind the AddRaftVoter"
    assert waiting.is_alive(), "the AddRaftVoter was answered before its timeout: nothing waited"
    assert all(ids == [node.node_id] for ids in seen), f"the broker was fenced meanwhile: {seen}"
    waiting.join(60)
    assert answer and answer["error_code"] != 0, answer  # refused in the end, as it should be
    assert node.process.poll() is None


def test_a_node_whose_controllers_are_all_gone_stops_at_once(make_cluster):
    """The other two combined nodes crashed (or were stopped first: Ctrl-C on a local
    cluster stops all three together): the last node's controlled shutdown cannot be granted
    by anyone, and it stops asking once it has seen every other controller refuse its
    connections, instead of waiting out its 10 s (Kafka's broker waits up to 5 minutes)."""
    cluster = start_cluster(make_cluster(controllers=3, brokers=0, overrides=fast_overrides()))
    leader = active_controller(cluster)[0]
    last = min(n for n in cluster.nodes if n != leader)  # a follower: it saw the leader go
    others = [n for n in cluster.nodes if n != last]
    for node_id in others:
        cluster.kill(node_id)
    started = time.monotonic()
    assert cluster.stop(last) == 0
    took = time.monotonic() - started
    assert took < 5, f"stopping the last node took {took:.1f}s"
