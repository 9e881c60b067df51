"""Checking on a real Spark standalone cluster: a master and two workers on this machine.

`python -m jepsen check --spark-master spark://...` must give the verdict, the anomalies
and the non-linearizable keys that `--spark-master local[2]` gives, on one history that
holds every seeded queue anomaly, a clean synthetic queue run and a register history with
one bad read.  Six JVMs on a small machine: outside the default run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("pyspark")

from conftest import REPO  # noqa: E402
from test_checker_histories import all_scenarios  # noqa: E402

from jepsen.checkers.standalone import StandaloneCluster  # noqa: E402
from jepsen.checkers.synth import queue_history, register_history  # noqa: E402
from jepsen.history import Op, write_history  # noqa: E402

pytestmark = pytest.mark.slow


def seeded_history() -> tuple[list[Op], str]:
    """Every queue scenario, a clean queue run on keys 200.., registers with a bad read."""
    ops, _ = all_scenarios()

    def shifted(more, key_of, p0):
        i0, t0 = len(ops), ops[-1].time + 1000
        for o in more:
            p = o.process + p0 if isinstance(o.process, int) else o.process
            ops.append(Op(o.index + i0, o.time + t0, o.type, p, o.f, key_of(o), o.error))

    def queue_keys(o):
        v = o.value
        if o.f == "send" and v is not None:
            return [v[0] + 200, v[1]]
        if o.f == "poll" and isinstance(v, dict):
            return {k + 200: pairs for k, pairs in v.items()}
        if o.f == "assign":
            return [k + 200 for k in v]
        return v

    shifted(queue_history(3000, seed=3), queue_keys, 5000)
    reg = register_history(2000, keys=20, seed=7)
    bad = next(i for i, o in enumerate(reg) if o.f == "read" and o.type == "ok"
               and o.value[1] is not None and i > 500)
    o = reg[bad]
    reg[bad] = Op(o.index, o.time, o.type, o.process, o.f, [f"r{o.value[0]}", 999])
    shifted(reg, lambda o: [f"r{o.value[0]}", o.value[1]] if o.value is not None else None,
            9000)
    return ops, f"r{o.value[0]}"


def check_cli(store, master: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.run([sys.executable, "-m", "jepsen", "check", str(store), "--spark-master",
                        master, "-q"], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=1200, check=False)
    assert p.returncode == 1, p.stdout + p.stderr  # invalid
    r = json.loads((store / "results.json").read_text())
    for k in ("elapsed-s", "history"):
        r.pop(k)
    return r


def test_standalone_cluster_gives_the_local_verdicts(tmp_path):
    ops, bad_key = seeded_history()
    local, remote = tmp_path / "local", tmp_path / "standalone"
    write_history(ops, local)
    shutil.copytree(local, remote)
    with StandaloneCluster(workers=2, cores=1, memory="1g", work_dir=tmp_path / "spark") as c:
        assert c.alive_workers() == 2
        on_cluster = check_cli(remote, c.url)
    on_local = check_cli(local, "local[2]")
    assert on_cluster["engine"] == "spark" and on_cluster["valid"] is False
    assert on_cluster == on_local
    q = on_cluster["checkers"]["queue"]
    assert len(q["bad-anomaly-types"]) == 13
    lin = on_cluster["checkers"]["linearizable"]
    assert [f["key"] for f in lin["failures"]["examples"]] == [bad_key]
    assert lin["keys"] == 20
