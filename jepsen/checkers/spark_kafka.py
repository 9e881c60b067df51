"""Histories as a stream: records produced to a kraft topic as they happen, and read back
by Spark's own Kafka source (``spark-sql-kafka-0-10``, a JVM Kafka client), so a history
that lives in the cluster is checked without a file.

Each record is one Kafka message whose value is a JSON object with the columns of the
Parquet schema (``jepsen.history``: ``key`` and ``value`` hold JSON *text*, so a string
value and a number keep their difference).  Messages are keyed by process; the checkers
order records by ``index``, not by offset, so the topic may have any number of partitions.

The connector's jars come from Maven Central with ``mvn dependency:copy-dependencies``
(``bench/kafka/spark-kafka/pom.xml``, the way ``kraft.apache_kafka`` fetches Kafka's) into
``~/.cache/kraft/spark-kafka-<version>``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from jepsen.history import Op, parquet_schema, to_columns

POM = Path(__file__).resolve().parents[2] / "bench" / "kafka" / "spark-kafka" / "pom.xml"


class ConnectorUnavailable(Exception):
    """Maven, Java or the download is missing; the message says which."""


def connector_version() -> str:
    m = re.search(r"<spark\.kafka\.version>([^<]+)</", POM.read_text())
    if not m:
        raise ConnectorUnavailable(f"no <spark.kafka.version> in {POM}")
    return m.group(1)


def connector_jars(timeout_s: float = 900.0) -> list[str]:
    """The jars of Spark's Kafka source, downloaded the first time."""
    d = Path(os.environ.get("KRAFT_SPARK_KAFKA_LIBS")
             or Path.home() / ".cache" / "kraft" / f"spark-kafka-{connector_version()}")
    marker = d / ".complete"
    if not marker.exists():
        missing = [p for p in ("java", "mvn") if shutil.which(p) is None]
        if missing:
            raise ConnectorUnavailable(f"{', '.join(missing)} not on PATH")
        d.mkdir(parents=True, exist_ok=True)
        try:
            r = subprocess.run(["mvn", "-q", "-B", "-f", str(POM), "dependency:copy-dependencies",
                                f"-DoutputDirectory={d}", "-DincludeScope=runtime"],
                               capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise ConnectorUnavailable(f"mvn took over {timeout_s:.0f}s") from None
        if r.returncode != 0:
            tail = (r.stdout + r.stderr).strip().splitlines()[-5:]
            raise ConnectorUnavailable("mvn dependency:copy-dependencies failed: "
                                       + " | ".join(tail))
        marker.write_text(connector_version() + "\n")
    return sorted(str(p) for p in d.glob("*.jar"))


# ---------------------------------------------------------------- writing


def record_json(op: Op) -> bytes:
    """One history record as the JSON object of its Parquet row."""
    row = {k: v[0] for k, v in to_columns([op]).items()}
    return json.dumps(row, separators=(",", ":")).encode()


class TopicWriter:
    """Produces history records to a topic as they happen (a context manager).

    Args:
        bootstrap: the cluster's bootstrap servers.
        topic: the history topic (created with ``partitions`` partitions and
            ``replication`` replicas if missing).
        config: more librdkafka producer settings.
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int = 1,
                 replication: int = 1, config: dict[str, Any] | None = None) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        _ensure_topic(bootstrap, topic, partitions, replication)
        self._p = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                            "enable.idempotence": True, "linger.ms": 5, "log_level": 0,
                            **(config or {})})
        self.errors: list[str] = []

    def _done(self, err, _msg) -> None:
        if err is not None:
            self.errors.append(str(err))

    def append(self, op: Op) -> None:
        self._p.produce(self.topic, record_json(op), str(op.process).encode(),
                        on_delivery=self._done)
        self._p.poll(0)

    def extend(self, ops: Iterable[Op]) -> None:
        for op in ops:
            while True:
                try:
                    self.append(op)
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    self._p.poll(0.1)

    def close(self, timeout_s: float = 60.0) -> None:
        """Waits until every record is acknowledged; raises if any was not."""
        left = self._p.flush(timeout_s)
        if left or self.errors:
            raise RuntimeError(f"{left} history records unsent, errors: {self.errors[:3]}")

    def __enter__(self) -> TopicWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _ensure_topic(bootstrap: str, topic: str, partitions: int, replication: int) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    fut = admin.create_topics([NewTopic(topic, partitions, replication)], operation_timeout=30)[topic]
    try:
        fut.result(timeout=60)
    except KafkaException as e:
        if "TOPIC_ALREADY_EXISTS" not in str(e) and "already exists" not in str(e):
            raise


# ---------------------------------------------------------------- reading


def topic_frame(spark, bootstrap: str, topic: str):
    """The history in ``topic`` as a DataFrame in the Parquet schema (a batch read of
    everything written so far), for ``spark_check_queue`` and the other checkers."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    fields = []
    for f in parquet_schema():
        fields.append(StructField(f.name, LongType() if str(f.type) == "int64"
                                  else StringType()))
    schema = StructType(fields)
    raw = (spark.read.format("kafka")
           .option("kafka.bootstrap.servers", bootstrap)
           .option("subscribe", topic)
           .option("startingOffsets", "earliest")
           .option("endingOffsets", "latest")
           .load())
    return (raw.select(F.from_json(F.col("value").cast("string"), schema).alias("r"))
            .select("r.*"))
