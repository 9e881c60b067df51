"""The web console's cores without a cluster: rates from scrapes (``throughput``) and the
HTML they and a snapshot render to (``page``)."""

from __future__ import annotations

from cli.web_console import page
from cli.web_console.throughput import BYTES_IN, MESSAGES_IN, TOPIC_CHART, Throughput


def scrape(messages: float, orders: float | None = None, bytes_in: float = 0.0) -> dict:
    samples = {MESSAGES_IN: [({}, messages)], BYTES_IN: [({}, bytes_in)]}
    if orders is not None:
        samples[MESSAGES_IN].append(({"topic": "orders"}, orders))
    return samples


def test_rates_per_node_and_per_topic_between_scrapes():
    t = Throughput(window_s=60)
    t.add_round(100.0, {"1": scrape(1000, 600), "2": scrape(50, None)})
    assert t.chart("messages in") == {}  # one scrape: no rate yet
    t.add_round(102.0, {"1": scrape(1400, 900, bytes_in=2000), "2": scrape(250, 100)})
    assert t.chart("messages in") == {"1": [(102.0, 200.0)], "2": [(102.0, 100.0)]}
    # node 2's first "orders" record came between the scrapes: its series starts from 0
    assert t.chart(TOPIC_CHART) == {"orders": [(102.0, (300 + 100) / 2)]}
    # node 2 down, then back with its counters reset: no rate, never a negative one
    t.add_round(104.0, {"1": scrape(1600, 1100), "2": None})
    t.add_round(106.0, {"1": scrape(1800, 1300), "2": scrape(10, 0)})
    assert [p[0] for p in t.chart("messages in")["2"]] == [102.0]
    t.add_round(108.0, {"1": scrape(1800, 1300), "2": scrape(30, 0)})
    assert t.chart("messages in")["2"][-1] == (108.0, 10.0)
    # points older than the window go
    t.add_round(170.0, {"1": scrape(1900, 1300), "2": scrape(30, 0)})
    assert [p[0] for p in t.chart("messages in")["1"]] == [170.0]


def snapshot(**over) -> dict:
    snap = {
        "time_ms": 1_700_000_000_000, "cluster_id": "abc", "errors": {},
        "brokers": [{"node_id": 1, "host": "h", "port": 1, "rack": None, "registered": True, "active_controller": True},
                    {"node_id": 2, "host": "h", "port": 2, "rack": None, "registered": False, "active_controller": False}],
        "quorum": {"leader_id": 1, "leader_epoch": 4, "high_watermark": 9, "replicas": [
            {"node_id": 1, "status": "Leader", "log_end_offset": 9, "lag": 0, "last_fetch_ago_ms": 0,
             "last_caught_up_ago_ms": 0}]},
        "topics": [{"name": "orders", "internal": False, "under_replicated": 1, "offline": 1, "partitions": [
            {"partition": 0, "leader": 1, "leader_epoch": 2, "replicas": [1, 2], "isr": [1], "offline": [2],
             "under_replicated": True},
            {"partition": 1, "leader": -1, "leader_epoch": 3, "replicas": [2], "isr": [2], "offline": [2],
             "under_replicated": False}]}],
        "groups": [{"group": "<b>x</b>", "state": "Stable", "protocol": "range", "coordinator": "h:1",
                    "members": [], "partitions": [], "lag": None}],
    }
    snap.update(over)
    return snap


def test_panels_mark_under_replicated_and_offline_partitions_and_escape_names():
    html = page.panels(snapshot(), Throughput(), 0.0, "metrics from 1/2 nodes")
    assert "<tr class='partition under-replicated' data-topic='orders' data-partition='0'>" in html
    assert "<tr class='partition offline' data-topic='orders' data-partition='1'>" in html
    assert "<td data-field='leader'>none</td>" in html
    assert "<tr class='broker down' data-node='2'>" in html
    assert "1 under-replicated" in html and "1 offline" in html
    assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html
    assert "waiting for two scrapes" in html  # charts without points say so


def test_a_failed_section_shows_its_error_and_the_rest_still_renders():
    html = page.panels(snapshot(quorum=None, errors={"quorum": "no broker reachable"}), Throughput(), 0.0, "")
    assert "no broker reachable" in html and "data-partition='0'" in html


def test_chart_lines_follow_the_points():
    svg = page.svg_chart("messages in", "msg/s", {"node 1": [(90.0, 0.0), (100.0, 50.0)]}, 100.0, 100.0)
    assert "data-line='node 1'" in svg and "data-last='50.0'" in svg
    # the newest point at the right edge and the top of the scale (peak * 1.1)
    left, width, top, height = 46, 420 - 46 - 8, 34, 170 - 34 - 20
    assert f"{left + width:.1f},{top + height * (1 - 50 / 55):.1f}" in svg
