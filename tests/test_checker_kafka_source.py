"""A history that lives in a kraft topic, checked through Spark's own Kafka source.

The records of every seeded queue anomaly are recorded by the harness's ``Recorder``,
which also produces each to a topic of a real kraft node (``jepsen test --history-topic``); a Spark session with the ``spark-sql-kafka-0-10`` jars (the JVM
Kafka client) reads the topic back and the queue checker finds exactly the seeded
anomalies, as the single-process path does on the same records -- called as a library,
and as ``python -m jepsen check --history-topic``.  Needs Maven Central the first time
(the jars are cached); slow: a kraft node and a Spark JVM per check.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("pyspark")

from checker_helpers import as_json  # noqa: E402
from cluster_helpers import fast_overrides, start_cluster  # noqa: E402
from conftest import REPO  # noqa: E402
from test_checker_histories import all_scenarios, shown  # noqa: E402

from jepsen.checkers import check_queue  # noqa: E402
from jepsen.checkers.spark_kafka import (  # noqa: E402
    ConnectorUnavailable,
    TopicWriter,
    connector_jars,
)
from jepsen.history import read_history  # noqa: E402
from jepsen.runner import Recorder  # noqa: E402
from kraft.local_cluster import LocalCluster  # noqa: E402

pytestmark = pytest.mark.slow

TOPIC = "jepsen-history"

# A child process: a Spark session is created with its jars only once per process.
CHECK = textwrap.dedent("""
    import json, sys
    from jepsen.checkers.spark import spark_check_queue, spark_session
    from jepsen.checkers.spark_kafka import connector_jars, topic_frame
    bootstrap, topic = sys.argv[1], sys.argv[2]
    spark = spark_session("local[2]", shuffle_partitions=4, jars=connector_jars())
    try:
        df = topic_frame(spark, bootstrap, topic)
        n = df.count()
        r = spark_check_queue(spark, df)
    finally:
        spark.stop()
    print(json.dumps({"records": n, "result": r}))
""")


@pytest.fixture(scope="module")
def history_topic(tmp_path_factory):
    """A kraft node whose topic ``TOPIC`` holds every anomaly scenario, as a run records
    it (numbered and timed by the harness, to a file and the topic); yields
    ``(cluster, ops, expected anomalies)``."""
    try:
        connector_jars()
    except ConnectorUnavailable as e:
        pytest.skip(str(e))
    tmp = tmp_path_factory.mktemp("history-topic")
    cluster = LocalCluster(tmp / "cluster", controllers=1, brokers=0,
                           overrides=fast_overrides())
    try:
        start_cluster(cluster)
        scenario, expected = all_scenarios()
        rec = Recorder(tmp / "history.jsonl")
        rec.stream_to(TopicWriter(cluster.bootstrap_servers, TOPIC, partitions=3))
        for o in scenario:
            rec.add(o.process, o.type, o.f, o.value, o.error)
        rec.close()
        yield cluster, rec.ops, expected
    finally:
        cluster.stop_all()


def _python(*args: str, env: dict | None = None, timeout_s: float = 900):
    return subprocess.run([sys.executable, *args], cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
                          capture_output=True, text=True, timeout=timeout_s, check=False)


def test_queue_history_read_from_a_kraft_topic(history_topic):
    cluster, ops, expected = history_topic
    p = _python("-c", CHECK, cluster.bootstrap_servers, TOPIC)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["records"] == len(ops)
    r = got["result"]
    assert shown(r) == expected
    assert r == as_json(check_queue(ops))


def test_cli_checks_a_history_topic_into_a_run_folder(history_topic, tmp_path):
    cluster, ops, expected = history_topic
    out = tmp_path / "checked"
    p = _python("-m", "jepsen", "check", "--history-topic", TOPIC,
                "--bootstrap-server", cluster.bootstrap_servers, "--spark-master", "local[2]",
                str(out))
    assert p.returncode == 1, p.stderr[-3000:]  # the seeded anomalies: invalid
    assert f"[check] topic {TOPIC} ->" in p.stderr and "valid: False" in p.stdout
    res = json.loads((out / "results.json").read_text())
    assert res["engine"] == "spark" and res["records"] == len(ops)
    assert shown(res["checkers"]["queue"]) == expected
    assert res["checkers"]["queue"] == as_json(
        {k: v for k, v in check_queue(ops).items() if k != "stats"})
    # the folder is a run folder: its history is the topic's, in history order
    assert read_history(out) == ops
    p = _python("-m", "jepsen", "check", "--no-spark", "-q", str(out))
    assert p.returncode == 1, p.stderr[-3000:]
    again = json.loads((out / "results.json").read_text())
    assert again["checkers"] == res["checkers"] and again["stats"] == res["stats"]


def test_cli_history_topic_errors_exit_2(history_topic, tmp_path):
    cluster, _, _ = history_topic
    bootstrap = cluster.bootstrap_servers
    p = _python("-m", "jepsen", "check", "--history-topic", "no-such-topic",
                "--bootstrap-server", bootstrap, str(tmp_path / "a"))
    assert p.returncode == 2 and "has no topic 'no-such-topic'" in p.stderr, p.stderr[-3000:]
    # Maven offline, nothing cached: the connector cannot be had
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mvn = bin_dir / "mvn"
    mvn.write_text(f"#!/bin/sh\nexec /usr/bin/mvn --offline "
                   f"-Dmaven.repo.local={tmp_path / 'm2'} \"$@\"\n")
    mvn.chmod(0o755)
    p = _python("-m", "jepsen", "check", "--history-topic", TOPIC,
                "--bootstrap-server", bootstrap, str(tmp_path / "b"),
                env={"PATH": f"{bin_dir}:/usr/bin:/bin",
                     "KRAFT_SPARK_KAFKA_LIBS": str(tmp_path / "libs")})
    assert p.returncode == 2, p.stderr[-3000:]
    assert "Kafka source (spark-sql-kafka-0-10) is not available" in p.stderr
    assert not (tmp_path / "b").exists()
