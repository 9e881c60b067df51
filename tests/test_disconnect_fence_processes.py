"""A SIGKILLed broker is fenced soon after the kernel closes its heartbeat connection
(``kraft.broker.session.disconnect.timeout.ms``), not a whole ``broker.session.timeout.ms``
later, and the partitions it led are led elsewhere by then (issue 19: a killed broker's
33,000 leaderships waited 7-9 s for its session to run out before the first one moved).
With the key at -1 only the session timeout fences, as in Kafka."""

import time

from cluster_helpers import (
    active_controller,
    create_led_topic,
    fast_overrides,
    led_elsewhere,
    start_cluster,
    wait_until,
)

SESSION_MS = 60_000  # far longer than any wait below
TOPIC = "spread"


def fenced(cluster, broker_id: int, since: dict[int, int] | None = None) -> bool:
    """Whether a controller logged fencing ``broker_id`` after ``since`` (node -> log length
    then): a fence while the cluster started is not the one a test waits for."""
    needle = f"fencing broker {broker_id}:"
    return any(needle in n.log_path.read_text(errors="replace")[(since or {}).get(i, 0):]
               for i, n in cluster.nodes.items())


def log_lengths(cluster) -> dict[int, int]:
    return {i: len(n.log_path.read_text(errors="replace")) for i, n in cluster.nodes.items()}


def killed_leader(make_cluster, disconnect_ms: int):
    """A 3-node cluster with a 6-partition RF 3 topic; a node that is not the active
    controller killed.  Returns (cluster, victim, partitions it led, kill time)."""
    cluster = start_cluster(make_cluster(controllers=3, overrides=fast_overrides(
        broker_session_timeout_ms=SESSION_MS,
        kraft_broker_session_disconnect_timeout_ms=disconnect_ms)))
    parts = create_led_topic(cluster, TOPIC, 6, 3)
    active, _ = active_controller(cluster)
    victim = next(i for i in sorted(cluster.nodes) if i != active)
    led = {i for i, p in parts.items() if p["leader_id"] == victim}
    assert led  # the placement spreads leaders over the three nodes
    since = log_lengths(cluster)
    killed_at = time.monotonic()
    cluster.kill(victim)
    return cluster, victim, led, killed_at, since


def test_a_killed_broker_is_fenced_when_its_connection_closes(make_cluster):
    cluster, victim, led, killed_at, since = killed_leader(make_cluster, 1000)
    wait_until(lambda: fenced(cluster, victim, since), timeout_s=20, what=f"broker {victim} fenced")
    wait_until(lambda: led_elsewhere(cluster, TOPIC, led, victim), timeout_s=20,
               what=f"broker {victim}'s partitions led elsewhere")
    # the session alone would have kept it unfenced for 60 s
    assert time.monotonic() - killed_at < 10


def test_with_the_key_off_only_the_session_timeout_fences(make_cluster):
    cluster, victim, _, killed_at, since = killed_leader(make_cluster, -1)
    time.sleep(max(0.0, killed_at + 8 - time.monotonic()))
    assert not fenced(cluster, victim, since)
