"""Histories as a stream: records produced to a kraft topic as they happen, and read back
by Spark's own Kafka source (``spark-sql-kafka-0-10``, a JVM Kafka client), so a history
that lives in the cluster is checked without a file.

Each record is one Kafka message whose value is a JSON object with the columns of the
Parquet schema (``jepsen.history``: ``key`` and ``value`` hold JSON *text*, so a string
value and a number keep their difference).  Messages are keyed by process; the checkers
order records by ``index``, not by offset, so the topic may have any number of partitions.

``python -m jepsen check --history-topic TOPIC --bootstrap-server HOST:PORT DIR`` checks
such a topic: :func:`require_topic` asks the cluster first (before any download or
JVM), :func:`save_topic` reads the topic in one batch into ``DIR/history.parquet``, and
the folder is then checked, and can be re-checked, like any run folder.

The connector's jars come from Maven Central with ``mvn dependency:copy-dependencies``
(``bench/kafka/spark-kafka/pom.xml``, the way ``kraft.apache_kafka`` fetches Kafka's) into
``~/.cache/kraft/spark-kafka-<version>``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from jepsen.history import Op, parquet_schema, to_columns

POM = Path(__file__).resolve().parents[2] / "bench" / "kafka" / "spark-kafka" / "pom.xml"


class ConnectorUnavailable(Exception):
    """Maven, Java or the download is missing; the message says which."""


class TopicUnavailable(Exception):
    """The cluster cannot be reached, has no such topic, or the topic holds no history;
    the message says which."""


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
            r = subprocess.run(["mvn", "-q", "-B", "-Dstyle.color=never", "-f", str(POM), "dependency:copy-dependencies",
                                f"-DoutputDirectory={d}", "-DincludeScope=runtime"],
                               capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise ConnectorUnavailable(f"mvn took over {timeout_s:.0f}s") from None
        if r.returncode != 0:
            raise ConnectorUnavailable("mvn dependency:copy-dependencies failed (offline, or "
                                       f"Maven Central unreachable?): {_maven_error(r)}")
        marker.write_text(connector_version() + "\n")
    return sorted(str(p) for p in d.glob("*.jar"))


def _maven_error(r: subprocess.CompletedProcess) -> str:
    """Maven's first error line (the cause; the rest is advice), without colour codes."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", x).strip()
             for x in (r.stdout + r.stderr).splitlines()]
    errors = [x.removeprefix("[ERROR]").strip() for x in lines if x.startswith("[ERROR]")]
    first = next((x for x in errors if x), None)
    return first or " | ".join(x for x in lines if x)[-500:] or f"exit status {r.returncode}"


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


def require_topic(bootstrap: str, topic: str, timeout_s: float = 10.0) -> int:
    """The number of partitions of ``topic``; raises ``TopicUnavailable`` when the
    cluster does not answer within ``timeout_s`` or has no such topic.

    Asks for every topic's metadata: a Metadata request naming the topic would create it
    on brokers with ``auto.create.topics.enable``.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    _connectable(bootstrap, timeout_s)
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    try:
        md = admin.list_topics(timeout=timeout_s)
    except KafkaException as e:
        err = e.args[0] if e.args else e
        raise TopicUnavailable(f"no answer from the cluster at {bootstrap} within "
                               f"{timeout_s:.0f}s ({getattr(err, 'str', lambda: err)()})"
                               ) from None
    t = md.topics.get(topic)
    if t is None:
        raise TopicUnavailable(f"the cluster at {bootstrap} has no topic {topic!r}")
    if t.error is not None:
        raise TopicUnavailable(f"topic {topic!r} at {bootstrap}: {t.error.str()}")
    return len(t.partitions)


def _connectable(bootstrap: str, timeout_s: float) -> None:
    """Raises ``TopicUnavailable`` at once when no bootstrap server accepts a TCP
    connection (librdkafka would retry until the metadata timeout)."""
    errors = []
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
                return
        except (OSError, ValueError) as e:
            errors.append(f"{server.strip()}: {e.strerror or e}" if isinstance(e, OSError)
                          else f"{server.strip()}: not HOST:PORT")
    raise TopicUnavailable("cannot connect to the cluster (" + "; ".join(errors) + ")")


def save_topic(spark, bootstrap: str, topic: str, directory: str | os.PathLike[str]) -> Path:
    """Reads every history record in ``topic`` (Spark's Kafka source, in one batch) into
    ``<directory>/history.parquet``, in history order, so the folder is a run folder that
    ``check_store`` and ``read_history`` take like any other; returns the file.

    Raises ``ConnectorUnavailable`` when the session has no Kafka source, and
    ``TopicUnavailable`` when the topic holds no records, or records that are not
    history records (no ``index``).
    """
    import pyarrow.parquet as pq
    from pyspark.errors import AnalysisException

    from jepsen.history import PARQUET_FILE

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / f".{PARQUET_FILE}.{uuid.uuid4().hex}"
    try:
        try:
            frame = topic_frame(spark, bootstrap, topic)
        except AnalysisException as e:
            if "kafka" in str(e).lower():
                raise ConnectorUnavailable("this Spark session has no Kafka source "
                                           "(its spark.jars lack spark-sql-kafka-0-10)"
                                           ) from None
            raise
        # one sorted file: range-partitioned sort, then its partitions concatenated
        (frame.orderBy("index").coalesce(1).write.option("compression", "zstd")
         .parquet(str(tmp)))
        parts = sorted(tmp.glob("part-*.parquet"))
        rows = sum(pq.ParquetFile(p).metadata.num_rows for p in parts)
        if rows == 0:
            raise TopicUnavailable(f"topic {topic!r} at {bootstrap} holds no records")
        strays = pq.read_table(parts[0], columns=["index"]).column("index").null_count
        if strays:
            raise TopicUnavailable(f"{strays} of the {rows} records in topic {topic!r} are "
                                   "not history records (JSON objects with an index)")
        out = d / PARQUET_FILE
        os.replace(parts[0], out)
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
