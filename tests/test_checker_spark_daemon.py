"""The checkers' Spark sessions fork their Python workers from ``jepsen.checkers.spark_daemon``
with the checker modules already imported, and with no thread running in the daemon at the
fork, started before the session is returned; ``JEPSEN_SPARK_PRELOAD=off`` gives pyspark's
own daemon back."""

from __future__ import annotations

import json
import os
import subprocess
import sys


sys.path.insert(0, os.path.dirname(__file__))

from conftest import REPO  # noqa: E402

# A child session: what its workers found imported when their first task began, and the
# daemon they were forked from (its command line and OS thread count).
_CHILD = """
import json, os, sys
from jepsen.checkers.spark import spark_session
spark = spark_session("local[2]", log_dir=sys.argv[1])
at_start = {int(p) for p in os.listdir("/proc") if p.isdigit()}  # when the session is returned

def found():
    return int("jepsen.checkers.queue_rows" in sys.modules), os.getppid()

def probe(batches):
    import pyarrow as pa
    for _ in batches:
        preloaded, daemon = found()
        yield pa.RecordBatch.from_pydict({"preloaded": [preloaded], "daemon": [daemon]})

# RDD jobs (the queue checker's) and SQL's Python UDFs (the others')
rdd = spark.sparkContext.parallelize([0, 1], 2).mapPartitions(lambda _: [found()]).collect()
sql = spark.range(4).repartition(2).mapInArrow(probe, "preloaded long, daemon long").collect()
got = {}
for kind, rows in (("rdd", [tuple(r) for r in rdd]), ("sql", [tuple(r) for r in sql])):
    daemon = rows[0][1]
    with open(f"/proc/{daemon}/cmdline", "rb") as f:
        cmdline = f.read().replace(b"\\0", b" ").decode()
    got[kind] = {"preloaded": sorted({r[0] for r in rows}), "cmdline": cmdline,
                 "threads": len(os.listdir(f"/proc/{daemon}/task")),
                 "started_with_session": daemon in at_start, "pid": daemon}
spark.stop()
print(json.dumps(got))
"""


def run_child(tmp_path, **env) -> dict:
    tmp_path.mkdir(parents=True, exist_ok=True)
    out = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path)], cwd=REPO,
                         env={**os.environ, **env}, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_workers_fork_from_a_daemon_that_imported_the_checkers(tmp_path):
    """Both settings, each in a session of its own, run side by side (each is mostly a JVM
    starting)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        runs = {preload: pool.submit(run_child, tmp_path / preload, JEPSEN_SPARK_PRELOAD=preload)
                for preload in ("on", "off")}
        for preload, run in runs.items():
            check_daemon(run.result(), preload)


def check_daemon(got: dict, preload: str) -> None:
    # spark_session ran one task per core before returning the session: the RDD jobs'
    # daemon was already up
    assert got["rdd"]["started_with_session"]
    # and SQL's Python UDFs fork from the same daemon (not one started at their first use)
    assert got["sql"]["started_with_session"] and got["sql"]["pid"] == got["rdd"]["pid"]
    for kind in ("rdd", "sql"):
        if preload == "on":
            assert "jepsen.checkers.spark_daemon" in got[kind]["cmdline"]
            assert got[kind]["preloaded"] == [1]
            # the settings kept pyarrow's and OpenBLAS's threads from starting: a fork
            # copies only the calling thread
            assert got[kind]["threads"] == 1
        else:
            assert "pyspark.daemon" in got[kind]["cmdline"]
            assert got[kind]["preloaded"] == [0]


def test_the_daemon_imports_nothing_without_the_settings_that_keep_threads_off():
    code = ("import os, sys; os.environ.pop('JE_ARROW_MALLOC_CONF', None); "
            "os.environ['OPENBLAS_NUM_THREADS'] = '1'; "
            "from jepsen.checkers import spark_daemon; "
            "print(spark_daemon.preload(), 'pyarrow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         timeout=60)
    assert out.stdout.split() == ["[]", "False"], out.stderr
