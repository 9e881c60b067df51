"""The checkers' Spark sessions fork their Python workers from ``jepsen.checkers.spark_daemon``
with the checker modules already imported, and with no thread running in the daemon at the
fork; ``JEPSEN_SPARK_PRELOAD=off`` gives pyspark's own daemon back."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from conftest import REPO  # noqa: E402

# A child session: what its workers found imported when their first task began, and the
# daemon they were forked from (its command line and OS thread count).
_CHILD = """
import json, os, sys
from jepsen.checkers.spark import spark_session
spark = spark_session("local[2]", log_dir=sys.argv[1])

def probe(batches):
    import pyarrow as pa
    preloaded = int("jepsen.checkers.queue_rows" in sys.modules)
    for _ in batches:
        yield pa.RecordBatch.from_pydict({"preloaded": [preloaded], "daemon": [os.getppid()]})

rows = spark.range(4).repartition(2).mapInArrow(probe, "preloaded long, daemon long").collect()
daemon = rows[0]["daemon"]
with open(f"/proc/{daemon}/cmdline", "rb") as f:
    cmdline = f.read().replace(b"\\0", b" ").decode()
threads = len(os.listdir(f"/proc/{daemon}/task"))
spark.stop()
print(json.dumps({"preloaded": sorted({r["preloaded"] for r in rows}), "cmdline": cmdline,
                  "threads": threads}))
"""


def run_child(tmp_path, **env) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path)], cwd=REPO,
                         env={**os.environ, **env}, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("preload", ["on", "off"])
def test_workers_fork_from_a_daemon_that_imported_the_checkers(tmp_path, preload):
    got = run_child(tmp_path, JEPSEN_SPARK_PRELOAD=preload)
    if preload == "on":
        assert "jepsen.checkers.spark_daemon" in got["cmdline"]
        assert got["preloaded"] == [1]
        # the settings kept pyarrow's and OpenBLAS's threads from starting: a fork copies
        # only the calling thread
        assert got["threads"] == 1
    else:
        assert "pyspark.daemon" in got["cmdline"]
        assert got["preloaded"] == [0]


def test_the_daemon_imports_nothing_without_the_settings_that_keep_threads_off():
    code = ("import os, sys; os.environ.pop('JE_ARROW_MALLOC_CONF', None); "
            "os.environ['OPENBLAS_NUM_THREADS'] = '1'; "
            "from jepsen.checkers import spark_daemon; "
            "print(spark_daemon.preload(), 'pyarrow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         timeout=60)
    assert out.stdout.split() == ["[]", "False"], out.stderr
