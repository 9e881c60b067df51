"""A node's metrics, named after Apache Kafka's (docs/METRICS.md has the mapping and the list).

``kraft.metrics.stats`` holds what the hot paths count: plain integer attributes and
fixed-bucket histograms, mutated on the trio thread with no locks and no allocation per
record.  ``kraft.metrics.exporter`` turns them, and the state kraft already keeps (replicas,
the metadata image, the Raft node, groups, fetch sessions), into Prometheus families at
scrape time, in the HTTP server's own thread (``prometheus_client``), so a scrape never
runs on the event loop.  Only ``exporter`` imports ``prometheus_client``.
"""
