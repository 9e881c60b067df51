"""``replica.fetch.wait.max.ms`` and ``replica.fetch.min.bytes`` reach the followers' fetches,
as in Kafka: the leader answers a follower's fetch once it holds ``min.bytes`` for it or the
wait has passed.  With a minimum no one-record batch reaches, every acks=all produce (with
``min.insync.replicas`` = RF) waits for the followers' fetch deadlines, about the wait each;
with the defaults (500 ms, 1 byte) it takes milliseconds."""

from __future__ import annotations

import socket
import time

from cluster_helpers import (active_controller, create_led_topic, fast_overrides, request, start_cluster,
                             wait_until)

WAIT_MS = 1500
TOPIC = "slow-followers"


def acks_all_times(cluster, count: int) -> list[float]:
    """Seconds each of ``count`` one-record acks=all produces took, one after the other."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "3"})])[TOPIC].result(60)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 0})
    times = []
    for i in range(count):
        failed = []
        started = time.monotonic()
        producer.produce(TOPIC, b"%d" % i, on_delivery=lambda err, msg: err and failed.append(err))
        assert producer.flush(60) == 0 and failed == []
        times.append(time.monotonic() - started)
    return times


def test_followers_fetch_with_the_configured_wait_and_minimum(make_cluster):
    cluster = start_cluster(make_cluster(controllers=3, overrides=fast_overrides(**{
        "replica.fetch.wait.max.ms": WAIT_MS, "replica.fetch.min.bytes": 1 << 20})))
    times = acks_all_times(cluster, 4)
    # The first produce may meet a fetch near its deadline; each later one arrives just
    # after the fetch that acknowledged the one before was parked for the whole wait.
    assert sum(times[1:]) >= 3 * WAIT_MS / 1000 * 0.8, times
    assert max(times[1:]) < 3 * WAIT_MS / 1000, times  # the wait bounds each: nothing is stuck


def test_the_defaults_answer_a_follower_at_once(make_cluster):
    cluster = start_cluster(make_cluster(controllers=3, overrides=fast_overrides()))
    times = acks_all_times(cluster, 4)
    assert sum(times[1:]) < 1.0, times


def test_a_follower_whose_leader_is_gone_retries_every_replica_fetch_backoff_ms(make_cluster):
    """``replica.fetch.backoff.ms``: a follower whose fetch failed waits that long before it
    asks again (Kafka's default 1,000 ms), not in a tight loop.  The leader of a partition is
    SIGKILLed while its session lasts (it is not fenced yet, so the followers keep asking
    it); a listener on its port counts their connections."""
    backoff_ms, window_s = 1500, 4.5
    cluster = start_cluster(make_cluster(controllers=3, overrides=fast_overrides(**{
        "replica.fetch.backoff.ms": backoff_ms, "broker.session.timeout.ms": 30000,
        "kraft.broker.session.disconnect.timeout.ms": 30000})))
    # Created with one request, not an AdminClient: a client library left alive reconnects
    # to the killed node's port too, and its connections would be counted as the followers'.
    create_led_topic(cluster, TOPIC, 3, 3)
    controller = active_controller(cluster)[0]

    def leaders():
        b = cluster.brokers[0]
        md = request(b.host, b.broker_port, "Metadata", 12, {"topics": [{"name": TOPIC}]})
        return {p["leader_id"] for p in md["topics"][0]["partitions"]}

    wait_until(lambda: -1 not in leaders() and leaders() - {controller}, what="a leader other than the controller")
    victim = cluster.nodes[min(leaders() - {controller})]
    cluster.kill(victim.node_id)
    listener = socket.create_server((victim.host, victim.broker_port), reuse_port=False)
    listener.settimeout(0.2)
    connections = 0
    end = time.monotonic() + window_s
    try:
        while time.monotonic() < end:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            connections += 1
            conn.close()  # the fetch fails: the follower backs off
    finally:
        listener.close()
    # Two followers, each asking once per backoff (1.5 s) and once at once: 8 at most in
    # 4.5 s.  Without the backoff read from the config (200 ms) it was about 40.
    assert 2 <= connections <= 8, connections
