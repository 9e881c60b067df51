"""A history that lives in a kraft topic, checked through Spark's own Kafka source.

The records of every seeded queue anomaly are recorded by the harness's ``Recorder``,
which also produces each to a topic of a real kraft node (``jepsen test --history-topic``); a Spark session with the ``spark-sql-kafka-0-10`` jars (the JVM
Kafka client) reads the topic back and the queue checker finds exactly the seeded
anomalies, as the single-process path does on the same records.  Needs Maven Central the
first time (the jars are cached); slow: a kraft node and a Spark JVM.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("pyspark")

from cluster_helpers import fast_overrides, start_cluster  # noqa: E402
from conftest import REPO  # noqa: E402
from test_checker_histories import all_scenarios, shown  # noqa: E402

from jepsen.checkers import check_queue  # noqa: E402
from jepsen.checkers.spark_kafka import (  # noqa: E402
    ConnectorUnavailable,
    TopicWriter,
    connector_jars,
)
from jepsen.runner import Recorder  # noqa: E402

pytestmark = pytest.mark.slow

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


def test_queue_history_read_from_a_kraft_topic(make_cluster, tmp_path):
    try:
        connector_jars()
    except ConnectorUnavailable as e:
        pytest.skip(str(e))
    cluster = start_cluster(make_cluster(controllers=1, brokers=0, overrides=fast_overrides()))
    scenario, expected = all_scenarios()
    # as a run records them: numbered and timed by the harness, to a file and the topic
    rec = Recorder(tmp_path / "history.jsonl")
    rec.stream_to(TopicWriter(cluster.bootstrap_servers, "jepsen-history", partitions=3))
    for o in scenario:
        rec.add(o.process, o.type, o.f, o.value, o.error)
    rec.close()
    ops = rec.ops
    p = subprocess.run([sys.executable, "-c", CHECK, cluster.bootstrap_servers,
                        "jepsen-history"], cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)),
                       capture_output=True, text=True, timeout=900, check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["records"] == len(ops)
    r = got["result"]
    assert shown(r) == expected
    assert r == json.loads(json.dumps(check_queue(ops)))
