"""When the active controller's process is killed, the other voters elect a new leader as
soon as its connections close (the Raft driver's ``PeerGone``), not once
``controller.quorum.fetch.timeout.ms`` has passed since they last heard from it (issue 19:
a new controller active within 3 s of the SIGKILL; the fetch timeout alone made that 2-3 s
with Kafka's 2 s default, sometimes more), and the new controller fences the broker that
died with it once the disconnect timeout passes, not a whole session later."""

import time

from cluster_helpers import (
    active_controller,
    create_led_topic,
    fast_overrides,
    led_elsewhere,
    start_cluster,
    wait_until,
)

FETCH_TIMEOUT_MS = 8000  # longer than the wait below: only the closed connections can do it


def test_a_killed_leaders_followers_elect_before_the_fetch_timeout(make_cluster):
    cluster = start_cluster(make_cluster(controllers=3, overrides=fast_overrides(
        controller_quorum_fetch_timeout_ms=FETCH_TIMEOUT_MS,
        broker_session_timeout_ms=30_000)))
    old, epoch = active_controller(cluster)
    time.sleep(1)  # every follower fetching, in this epoch
    killed_at = time.monotonic()
    cluster.kill(old)
    new, new_epoch = wait_until(lambda: active_controller(cluster, exclude=(old,)),
                                timeout_s=30, interval_s=0.05, what="a new active controller")
    elapsed = time.monotonic() - killed_at
    assert new != old and new_epoch > epoch
    assert elapsed < 4, f"a new controller only after {elapsed:.1f}s"


def test_the_broker_that_died_with_the_controller_loses_its_leaderships_soon(make_cluster):
    cluster = start_cluster(make_cluster(controllers=3, overrides=fast_overrides(
        broker_session_timeout_ms=60_000)))
    parts = create_led_topic(cluster, "t", 6, 3)
    old, _ = active_controller(cluster)
    led = {i for i, p in parts.items() if p["leader_id"] == old}
    assert led
    killed_at = time.monotonic()
    cluster.kill(old)
    wait_until(lambda: led_elsewhere(cluster, "t", led, old), timeout_s=60,
               what=f"node {old}'s partitions led elsewhere")
    elapsed = time.monotonic() - killed_at
    assert elapsed < 15, f"led elsewhere only after {elapsed:.1f}s (the session is 60 s)"
