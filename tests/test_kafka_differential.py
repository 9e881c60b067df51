"""The same raw requests to Apache Kafka (the oracle) and to kraft, answers compared field
by field (tests/differential.py); every difference must be one docs/DIFFERENCES.md explains.

Skips, saying why, without java / javac / mvn or when the pinned Kafka cannot be fetched."""

import time

from differential import DIFFERENCES_MD, Clusters, KnownDifference, diff, known_differences, normalise, report, run
from kafka_helpers import kafka_libs


def test_kraft_answers_as_apache_kafka_does(tmp_path):
    kafka_libs()
    known = known_differences()
    started = time.monotonic()
    with Clusters(tmp_path, kafka_nodes=1, kraft_nodes=1) as clusters:
        comparison = run(clusters.kafka.bootstrap_servers, clusters.kraft.bootstrap_servers, known=known)
    text = report(comparison, known)
    print(f"{comparison.steps} steps in {time.monotonic() - started:.1f}s "
          f"(start-up: {clusters.startup_s})\n{text}")
    assert comparison.steps > 90
    assert not comparison.unexplained, text


def test_the_documented_differences_parse_and_match_what_they_name():
    rows = known_differences(DIFFERENCES_MD)
    assert len(rows) >= 5 and all(r.step and r.path and r.reason for r in rows)
    row = KnownDifference("Fetch *", "responses[0].partitions[*].error_code", "why")
    assert row.matches("Fetch v4 (older)", "responses[0].partitions[3].error_code")
    assert not row.matches("Fetch v4 (older)", "responses[0].partitions[3].high_watermark")
    assert not row.matches("Fetch v4 (older)", "responses[0]xpartitions[3].error_code")  # brackets are literal


def test_the_normaliser_masks_ids_but_not_their_absence():
    kafka = normalise({"throttle_time_ms": 5, "topics": [
        {"name": "b", "topic_id": "x", "error_code": 0, "error_message": None},
        {"name": "a", "topic_id": "y", "error_code": 3, "error_message": "gone"}]})
    kraft = normalise({"throttle_time_ms": 0, "topics": [
        {"name": "a", "topic_id": "z", "error_code": 3, "error_message": None},
        {"name": "b", "topic_id": -1, "error_code": 0, "error_message": "fine"}]})
    assert diff(kafka, kraft) == [("topics[1].topic_id", "<topic id>", -1)]
