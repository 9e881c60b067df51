"""The console's throughput history: rates per second between consecutive scrapes of each
node's metrics, kept for the last ``window_s`` seconds (no I/O: scrapes come in, series go
out; a node that restarts resets its counters, which shows as no rate rather than a dip).
"""

from __future__ import annotations

from collections import deque

from cli.top import value

MESSAGES_IN = "kafka_server_brokertopicmetrics_messagesin_total"
BYTES_IN = "kafka_server_brokertopicmetrics_bytesin_total"
BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout_total"

#: chart name -> (counter, unit): all-topics counters, one line per node
NODE_CHARTS = {
    "messages in": (MESSAGES_IN, "msg/s"),
    "bytes in": (BYTES_IN, "B/s"),
    "bytes out": (BYTES_OUT, "B/s"),
}
TOPIC_CHART = "messages in by topic"  # summed over the nodes, one line per topic


def topic_counters(samples: dict, name: str) -> dict[str, float]:
    """topic -> value of a per-topic counter (the sample without a topic is all topics)."""
    return {labels["topic"]: v for labels, v in samples.get(name, ()) if set(labels) == {"topic"}}


class Throughput:
    def __init__(self, window_s: float = 300.0):
        self.window_s = window_s
        self._last: dict[str, tuple[float, dict]] = {}  # node -> (time_s, samples)
        #: (chart, line) -> deque[(time_s, rate)]; a line is a node id or a topic name
        self.series: dict[tuple[str, str], deque] = {}

    def add_round(self, time_s: float, scrapes: dict[str, dict | None]) -> None:
        """One scrape of every node (node -> samples; None: it did not answer)."""
        topics: dict[str, float] = {}
        for node, samples in scrapes.items():
            before = self._last.pop(node, None)
            if samples is None:
                continue
            self._last[node] = (time_s, samples)
            if before is None or time_s <= before[0]:
                continue
            seconds = time_s - before[0]
            for chart, (counter, _) in NODE_CHARTS.items():
                now, then = value(samples, counter), value(before[1], counter)
                if now is not None and then is not None and now >= then:
                    self._point((chart, node), time_s, (now - then) / seconds)
            # a topic's rate is the sum over the nodes that lead its partitions
            then_topics = topic_counters(before[1], MESSAGES_IN)
            for topic, now in topic_counters(samples, MESSAGES_IN).items():
                then = then_topics.get(topic, 0.0)  # its series appears with its first record
                if now >= then:
                    topics[topic] = topics.get(topic, 0.0) + (now - then) / seconds
        for topic, rate in topics.items():
            self._point((TOPIC_CHART, topic), time_s, rate)

    def _point(self, key: tuple[str, str], time_s: float, rate: float) -> None:
        points = self.series.setdefault(key, deque())
        points.append((time_s, rate))
        while points and points[0][0] < time_s - self.window_s:
            points.popleft()

    def chart(self, chart: str) -> dict[str, list[tuple[float, float]]]:
        """line -> [(time_s, rate)] of one chart (``NODE_CHARTS`` or ``TOPIC_CHART``)."""
        return {line: list(points) for (c, line), points in sorted(self.series.items())
                if c == chart and points}
