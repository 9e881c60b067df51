"""The Spark class archive (``python -m jepsen spark-archive``): built from nothing, mapped
by a local session's JVM, the same verdicts with it, and an archive cut short is not
used (a JVM mapping it would crash).  Slow: building the archive runs a Spark session
(about 40 s).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from conftest import REPO  # noqa: E402
from test_checker_standalone import seeded_history  # noqa: E402

from jepsen.history import write_history  # noqa: E402

pytestmark = pytest.mark.slow

# a child session: the check's results and whether its JVM mapped the archive
_CHILD = """
import json, sys
from jepsen.checkers.report import check_store
from jepsen.checkers.spark import spark_session
spark = spark_session("local[2]", log_dir=sys.argv[2])
pid = spark.sparkContext._gateway.proc.pid
with open(f"/proc/{pid}/maps") as f:
    mapped = sys.argv[3].endswith(".jsa") and sys.argv[3] in f.read()
r = check_store(sys.argv[1], spark=spark, progress=False)
spark.stop()
for k in ("elapsed-s", "history"):
    r.pop(k, None)
print(json.dumps({"mapped": mapped, "results": r}, default=str))
"""


def _env(archive) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO), JEPSEN_SPARK_CLASS_ARCHIVE=str(archive))


def check_with(store, archive, logs) -> dict:
    p = subprocess.run([sys.executable, "-c", _CHILD, str(store), str(logs), str(archive)],
                       cwd=REPO, env=_env(archive), capture_output=True, text=True,
                       timeout=600, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_archive_is_built_mapped_and_changes_no_verdict(tmp_path):
    archive = tmp_path / "cache" / "spark.jsa"
    p = subprocess.run([sys.executable, "-m", "jepsen", "spark-archive", "--path",
                        str(archive)], cwd=REPO, env=_env(archive), capture_output=True,
                       text=True, timeout=600, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    assert archive.stat().st_size > 10_000_000
    assert not list(archive.parent.glob("*.tmp"))  # the half-written file is renamed

    ops, _ = seeded_history()
    store = tmp_path / "store"
    write_history(ops, store)
    with_archive = check_with(store, archive, tmp_path / "logs-a")
    without = check_with(store, "off", tmp_path / "logs-off")
    assert with_archive["mapped"] and not without["mapped"]
    assert with_archive["results"] == without["results"]
    assert without["results"]["valid"] is False
    assert len(without["results"]["checkers"]["queue"]["bad-anomaly-types"]) == 13

    # truncated (a full disk, a copy cut short): a JVM mapping it would die of SIGBUS,
    # so a session does not use an archive its seal does not vouch for
    data = archive.read_bytes()
    archive.chmod(0o644)
    archive.write_bytes(data[:1_000_000])
    got = check_with(store, archive, tmp_path / "logs-d")
    assert not got["mapped"]
    assert got["results"] == without["results"]
