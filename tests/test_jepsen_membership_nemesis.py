"""The membership nemesis against real nodes: start-membership moves partitions and removes a
controller from the voters; stop-membership elects preferred leaders and adds it back."""

from __future__ import annotations

import random

from confluent_kafka.admin import AdminClient, NewTopic

from cluster_helpers import describe_quorum, fast_overrides, start_cluster, wait_until
from jepsen.nemesis import MembershipNemesis
from jepsen.nemesis._targets import Oracle


def voters(cluster, node_id):
    q = describe_quorum(cluster, node_id)
    return None if q is None else sorted(v["replica_id"] for v in q["current_voters"])


def test_membership_nemesis_removes_and_adds_back_a_controller(make_cluster):
    cluster = make_cluster(controllers=4, brokers=0, overrides=fast_overrides())
    start_cluster(cluster)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("jm", num_partitions=3, replication_factor=3)])["jm"].result(60)
    nemesis = MembershipNemesis(None, random.Random(5),
                                Oracle(bootstrap=cluster.bootstrap_servers, topics=[("jm", 3)]))

    start = nemesis.invoke({"type": "invoke", "f": "start-membership", "value": "all"})
    assert start["type"] == "info"
    removed = start["value"]["controllers"]["removed"]
    assert start["value"]["controllers"]["error_code"] == 0 and removed in (1, 2, 3, 4)
    rest = [n for n in (1, 2, 3, 4) if n != removed]
    wait_until(lambda: all(voters(cluster, n) == rest for n in rest), what=f"voters {rest}")
    # Three voters left: a second start removes nobody.
    again = nemesis.invoke({"type": "invoke", "f": "start-membership", "value": 1})
    assert again["value"]["controllers"]["removed"] is None

    stop = nemesis.invoke({"type": "invoke", "f": "stop-membership"})
    assert stop["value"]["controllers"] == {"added": {removed: 0}, "still_removed": []}
    wait_until(lambda: all(voters(cluster, n) == [1, 2, 3, 4] for n in (1, 2, 3, 4)),
               what="all four voters back")
