"""After the active controller dies, every broker heartbeats to the new one at once, not at
its next ``broker.heartbeat.interval.ms``: a newly active controller starts every broker's
session afresh and cannot tell a live broker from a dead one until it hears from it
(issue 19's row: every broker heartbeating within 3 s of the controller's SIGKILL)."""

import datetime
import time

from cluster_helpers import active_controller, fast_overrides, start_cluster, wait_until

# An interval far longer than the wait below: a broker that kept to it would not heartbeat
# to the new controller in time, whenever in the interval the kill lands.
HEARTBEAT_MS = 90_000
SESSION_MS = 300_000


def answered_by(node, controller: int) -> list[float]:
    """Wall times at which ``node`` logged a heartbeat answered by a newly answering ``controller``."""
    needle = f"heartbeat answered by the active controller {controller}"
    return [datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            for line in node.log_path.read_text(errors="replace").splitlines() if needle in line]


def test_brokers_heartbeat_to_a_new_active_controller_at_once(make_cluster):
    cluster = start_cluster(make_cluster(controllers=3, overrides=fast_overrides(
        broker_heartbeat_interval_ms=HEARTBEAT_MS, broker_session_timeout_ms=SESSION_MS)))
    old, _ = active_controller(cluster)
    for node in cluster.nodes.values():  # each unfenced, so on the long interval from now
        wait_until(lambda: answered_by(node, old), what=f"node {node.node_id}'s first heartbeat")
    survivors = [n for i, n in cluster.nodes.items() if i != old]
    killed_at = time.time()
    cluster.kill(old)
    new, _ = wait_until(lambda: active_controller(cluster, exclude=(old,)), timeout_s=30,
                        what="a new active controller")
    for node in survivors:
        wait_until(lambda: [t for t in answered_by(node, new) if t >= killed_at], timeout_s=20,
                   what=f"node {node.node_id}'s heartbeat answered by the new controller {new}")
    assert time.time() - killed_at < HEARTBEAT_MS / 1000 / 2
