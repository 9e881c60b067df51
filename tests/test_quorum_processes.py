"""A real 3-controller quorum as 3 ``kraftctl start`` processes on loopback."""

import os
import time

from cluster_helpers import active_controller, describe_quorum, fast_overrides, request, wait_until

ELECTION_TIMEOUT_MS = 500


def test_leader_sigkill_elects_a_new_leader_and_the_old_one_catches_up(make_cluster):
    cluster = make_cluster(controllers=3, brokers=1, overrides=fast_overrides())
    cluster.format()
    cluster.start_all()
    leader, epoch = wait_until(lambda: active_controller(cluster), what="a leader")
    broker = cluster.brokers[0]
    # Commit something through the quorum: a topic (the broker forwards to the controller).
    create = {"topics": [{"name": "before", "num_partitions": 1, "replication_factor": 1,
                          "assignments": [], "configs": []}], "timeout_ms": 10000, "validate_only": False}
    wait_until(lambda: request(broker.host, broker.broker_port, "CreateTopics", 7, create)["topics"][0]["error_code"] in (0, 36),
               what="topic creation")

    killed_at = time.monotonic()
    cluster.kill(leader)
    new = wait_until(lambda: active_controller(cluster, exclude={leader}), timeout_s=10, interval_s=0.02,
                     what="a new leader")
    elected_after_s = time.monotonic() - killed_at
    assert new[0] != leader and new[1] > epoch
    create["topics"][0]["name"] = "after"
    wait_until(lambda: request(broker.host, broker.broker_port, "CreateTopics", 7, create)["topics"][0]["error_code"] == 0,
               timeout_s=10, what="commits under the new leader")
    committing_after_s = time.monotonic() - killed_at
    # New leader elected and committing within 2x the election timeout (plus detection:
    # followers notice a dead leader after controller.quorum.fetch.timeout.ms).
    print(f"elected after {elected_after_s:.2f}s, committing after {committing_after_s:.2f}s")
    assert elected_after_s < (1000 + 2 * ELECTION_TIMEOUT_MS) / 1000 + 1.0

    # The old leader rejoins as a follower and catches up: all logs agree.
    cluster.start(leader)

    def caught_up():
        views = [describe_quorum(cluster, n.node_id) for n in cluster.controllers]
        if any(v is None for v in views):
            return False
        hws = {v["high_watermark"] for v in views}
        return len(hws) == 1 and views[0]["leader_id"] == new[0]

    wait_until(caught_up, timeout_s=15, what="the old leader to catch up")
    cluster.stop_all()
    logs = []
    for n in cluster.controllers:
        d = n.data_dir / "__cluster_metadata-0"
        segments = sorted(p for p in os.listdir(d) if p.endswith(".log"))
        logs.append(b"".join((d / s).read_bytes() for s in segments))
    shortest = min(len(x) for x in logs)
    assert shortest > 0
    assert all(x[:shortest] == logs[0][:shortest] for x in logs)
