"""kraft.metrics: the histograms' quantiles and windows, error counting from responses, the
MBean-to-family naming rule."""

import math

import pytest

from kraft.metrics.exporter import family_name
from kraft.metrics.stats import Histogram, RequestMetrics, WindowedStat


def test_quantiles_are_within_a_bucket_of_the_truth():
    h = Histogram(window_s=30)
    for i in range(1, 1001):  # 1 .. 1000 ms, uniform
        h.observe(float(i), now=h._cur_start + 1)
    p50, p75, p95, p98, p99, p999 = h.quantiles(h._cur_start + 1)
    for got, want in ((p50, 500), (p75, 750), (p95, 950), (p99, 990), (p999, 999)):
        assert abs(got - want) / want < 0.13  # buckets are 25 % wide
    assert h.count == 1000 and h.sum == sum(range(1, 1001))


def test_quantiles_forget_what_is_older_than_two_windows_but_counts_do_not():
    h = Histogram(window_s=10)
    t0 = h._cur_start
    h.observe(1000.0, t0 + 1)  # a spike
    assert h.quantiles(t0 + 5)[-1] > 500
    h.observe(1.0, t0 + 12)  # next window: the spike is still within the last two
    assert h.quantiles(t0 + 12)[-1] > 500
    h.observe(1.0, t0 + 25)  # two windows on: gone from the quantiles
    assert h.quantiles(t0 + 25)[-1] < 2
    assert h.quantiles(t0 + 60) == [0.0] * 6  # nothing lately: 0, as Kafka's histograms
    assert h.count == 3


def test_windowed_average_and_maximum():
    w = WindowedStat(window_s=10)
    t0 = w._cur_start
    assert all(math.isnan(v) for v in w.avg_max(t0))
    for v in (2.0, 4.0, 9.0):
        w.record(v, t0 + 1)
    assert w.avg_max(t0 + 2) == (5.0, 9.0)
    assert all(math.isnan(v) for v in w.avg_max(t0 + 25))


def test_request_metrics_split_fetch_and_count_every_error_code():
    metrics = RequestMetrics()
    consumer = metrics.begin("Fetch", 12, {"replica_id": -1}, 100, 0.0, 0.0)
    follower = metrics.begin("Fetch", 15, {"replica_state": {"replica_id": 2}}, 100, 0.0, 0.0)
    assert (consumer.api.name, follower.api.name) == ("FetchConsumer", "FetchFollower")
    produce = metrics.begin("Produce", 9, {}, 300, 0.0, 0.001)
    produce.api.count_errors({"responses": [
        {"name": "t", "partition_responses": [{"index": 0, "error_code": 0}, {"index": 1, "error_code": 6}]},
        {"name": "u", "partition_responses": [{"index": 0, "error_code": 0}]}]})
    assert produce.api.errors == {0: 2, 6: 1}
    produce.handled = produce.ready = 0.003
    produce.done(0.004, 0.005)
    assert produce.api.requests == {9: 1}
    assert produce.api.total.count == 1 and produce.api.total.sum == pytest.approx(5.0)
    assert produce.api.request_queue.sum == pytest.approx(1.0)
    assert produce.api.local.sum == pytest.approx(2.0)
    assert produce.api.response_queue.sum == pytest.approx(1.0)
    assert produce.api.response_send.sum == pytest.approx(1.0)


@pytest.mark.parametrize("mbean, meter, family", [
    ("kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec", True,
     "kafka_server_brokertopicmetrics_messagesin"),
    ("kafka.network:type=RequestMetrics,name=TotalTimeMs", False, "kafka_network_requestmetrics_totaltimems"),
    ("kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions", False,
     "kafka_server_replicamanager_underreplicatedpartitions"),
    ("kafka.controller:type=KafkaController,name=ActiveControllerCount", False,
     "kafka_controller_kafkacontroller_activecontrollercount"),
    ("kafka.coordinator.group:type=GroupMetadataManager,name=NumGroups", False,
     "kafka_coordinator_group_groupmetadatamanager_numgroups"),
    ("kafka.server:type=raft-metrics,name=commit-latency-avg", False, "kafka_server_raft_metrics_commit_latency_avg"),
])
def test_the_naming_rule(mbean, meter, family):
    assert family_name(mbean, meter=meter) == family


def test_the_metrics_server_waits_without_polling_and_closes_at_once():
    """Its thread blocks until a connection comes (no poll interval: an idle node does not
    wake twice a second for it), so closing must wake it: a close that waited for a
    connection would hang a node's shutdown."""
    import socket
    import threading

    from kraft.metrics.exporter import MetricsServer

    before = threading.active_count()
    server = MetricsServer(node=None, host="127.0.0.1", port=0)
    assert threading.active_count() == before + 1
    with socket.create_connection(("127.0.0.1", server.port), timeout=5):
        pass  # it listens
    closer = threading.Thread(target=server.close, daemon=True)  # a hang fails, not blocks, the test
    closer.start()
    closer.join(timeout=1.0)
    assert not closer.is_alive()
    server._thread.join(timeout=1.0)
    assert not server._thread.is_alive()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=1)
