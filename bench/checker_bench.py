"""Checker benchmark: Spark (``local[2]`` by default) beside the single-process path.

Generates a clean queue history and a clean cas-register history (sizes count history
records, invocations and completions both, as Jepsen counts history operations), writes
them as Parquet, then checks each in a fresh child process per engine and prints the
wall time and peak memory of every run::

    python bench/checker_bench.py                       # 1,000,000 / 100,000 over 1,000 keys
    python bench/checker_bench.py --queue-ops 200000 --register-ops 20000

Peak memory is the child's peak resident set (``VmHWM``; ``ru_maxrss`` would include the
parent's, which Linux carries across fork and exec) for the Python path; for
Spark it is the driver's, plus the JVM's high-water mark (``VmHWM``) and the sum of the
Python workers' high-water marks, sampled when the check ends.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _hwm_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2:].split()[1]) == pid:
                out.append(int(d.name))
    return out


def _descendants(pid: int) -> list[int]:
    todo, out = [pid], []
    while todo:
        for c in _children(todo.pop()):
            out.append(c)
            todo.append(c)
    return out


def run_child(mode: str, path: str, master: str, keys: int) -> dict:
    """One measurement, in this (fresh) process."""
    from jepsen.checkers import check_linearizable, check_queue
    from jepsen.history import read_parquet

    out: dict = {"mode": mode}
    if mode.startswith("python"):
        t = time.monotonic()
        ops = read_parquet(path)
        out["load-s"] = time.monotonic() - t
        t = time.monotonic()
        r = check_queue(ops) if mode == "python-queue" else check_linearizable(ops)
        out["check-s"] = time.monotonic() - t
        out["peak-mb"] = _hwm_kb(os.getpid()) / 1024
    else:
        from jepsen.checkers.spark import (
            spark_check_linearizable,
            spark_check_queue,
            spark_session,
        )

        t = time.monotonic()
        spark = spark_session(master)
        out["session-s"] = time.monotonic() - t
        t = time.monotonic()
        if mode == "spark-queue":
            r = spark_check_queue(spark, path)
        else:
            r = spark_check_linearizable(spark, path)
        out["check-s"] = time.monotonic() - t
        out["driver-peak-mb"] = _hwm_kb(os.getpid()) / 1024
        procs = _descendants(os.getpid())
        java = [p for p in procs if "java" in Path(f"/proc/{p}/comm").read_text()]
        workers = [p for p in procs if p not in java]
        out["jvm-peak-mb"] = sum(_hwm_kb(p) for p in java) / 1024
        out["workers-peak-mb"] = sum(_hwm_kb(p) for p in workers) / 1024
        out["peak-mb"] = out["driver-peak-mb"] + out["jvm-peak-mb"] + out["workers-peak-mb"]
        spark.stop()
    out["valid"] = r["valid"]
    if mode.endswith("queue"):
        out["anomalies"] = r["anomaly-types"]
    else:
        out["keys"] = r["keys"]
    return out


def measure(mode: str, path: Path, master: str, keys: int) -> dict:
    cmd = [sys.executable, __file__, "--child", mode, "--path", str(path), "--master", master,
           "--keys", str(keys)]
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        return {"mode": mode, "error": p.stderr.strip().splitlines()[-3:]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queue-ops", type=int, default=1_000_000)
    ap.add_argument("--register-ops", type=int, default=100_000)
    ap.add_argument("--keys", type=int, default=1000, help="register keys")
    ap.add_argument("--partitions", type=int, default=16, help="queue partitions")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-spark", action="store_true")
    ap.add_argument("--skip-python", action="store_true")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(run_child(a.child, a.path, a.master, a.keys)))
        return

    from jepsen.checkers.synth import queue_history, register_history
    from jepsen.history import write_parquet

    d = Path(tempfile.mkdtemp(prefix="checker-bench-"))
    t = time.monotonic()
    q = queue_history(a.queue_ops, partitions=a.partitions, producers=12, consumers=8,
                      seed=a.seed)
    write_parquet(q, d / "queue.parquet")
    nq = len(q)
    del q
    r = register_history(a.register_ops, keys=a.keys, processes=20, seed=a.seed)
    write_parquet(r, d / "register.parquet")
    nr = len(r)
    del r
    print(f"generated {nq} queue records ({a.partitions} partitions) and {nr} register "
          f"records ({a.keys} keys) in {time.monotonic() - t:.1f}s -> {d}")
    engines = ([] if a.skip_python else ["python"]) + ([] if a.skip_spark else ["spark"])
    rows = []
    for kind, path, n in (("queue", d / "queue.parquet", nq),
                          ("register", d / "register.parquet", nr)):
        for eng in engines:
            m = measure(f"{eng}-{kind}", path, a.master, a.keys)
            rows.append((kind, n, eng, m))
            if "error" in m:
                print(f"{kind:8} {n:>9} {eng:6} ERROR {m['error']}")
                continue
            extra = (f"load {m['load-s']:.1f}s" if eng == "python" else
                     f"session {m['session-s']:.1f}s, driver {m['driver-peak-mb']:.0f} MB, "
                     f"JVM {m['jvm-peak-mb']:.0f} MB, workers {m['workers-peak-mb']:.0f} MB")
            print(f"{kind:8} {n:>9} records  {eng:6} check {m['check-s']:7.1f}s  "
                  f"peak {m['peak-mb']:7.0f} MB  valid={m['valid']}  ({extra})", flush=True)


if __name__ == "__main__":
    main()
