"""Checker benchmark: Spark (``local[2]`` by default) beside the single-process path.

Generates clean queue histories of the given sizes (records: invocations and completions
both, as Jepsen counts history operations; written as Parquet in chunks, so a 50M-record
history never sits in memory) and a clean cas-register history over many keys, checks
each in a fresh child process per engine, and prints, per run: records/s of the check
(the Spark session's start excluded and reported apart; up to ``--warm-max-records``,
also of a second check in the same session, once the JVM has compiled Spark's code),
peak memory of the driver, the JVM and the Python workers, and where the time went by
Spark's own per-stage metrics (task run time, CPU, GC, shuffle, spill), summed per
checker phase::

    python bench/checker_bench.py                                  # 1M, 10M; 1M/10k keys
    python bench/checker_bench.py --queue-records 1000000,10000000,50000000
    python bench/checker_bench.py --queue-records 200000 --register-records 20000 --keys 200

The table goes to ``bench/results/checker.md`` and the raw figures to
``bench/results/checker.json``.  Peak memory is each process's high-water resident set
(``VmHWM``; ``ru_maxrss`` would include the parent's, which Linux carries across fork
and exec).  The single-process path holds the whole history, so it runs only up to
``--python-max-records``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results"


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


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def phases(metrics: list[dict]) -> list[dict]:
    """Spark's stage metrics summed per phase (the job description they ran under) and
    the stage's place in it (a phase's first stage, second, ...)."""
    out: dict[str, dict] = {}
    seen: dict[str, int] = {}
    for m in metrics:
        k = seen[m["name"]] = seen.get(m["name"], 0) + 1
        name = f"{m['name']}, stage {k}"
        p = out.setdefault(name, {"phase": name, "stages": 0, "tasks": 0,
                                       "run-s": 0.0, "cpu-s": 0.0, "gc-s": 0.0,
                                       "shuffle-write-mb": 0.0, "spill-mb": 0.0,
                                       "peak-execution-mb": 0.0})
        p["stages"] += 1
        p["tasks"] += m["tasks"]
        p["run-s"] += m["run-ms"] / 1000
        p["cpu-s"] += m["cpu-ms"] / 1000
        p["gc-s"] += m["gc-ms"] / 1000
        p["shuffle-write-mb"] += m["shuffle-write-mb"]
        p["spill-mb"] += m["spill-mb"]
        p["peak-execution-mb"] = max(p["peak-execution-mb"], m["peak-execution-mb"])
    return [{k: round(v, 2) if isinstance(v, float) else v for k, v in p.items()}
            for p in out.values()]


def run_child(mode: str, path: str, master: str, driver_memory: str, warm: bool) -> dict:
    """One measurement, in this (fresh) process; with ``warm``, the Spark check runs a
    second time in the same session (its JVM has compiled Spark's code by then)."""
    from jepsen.checkers import check_linearizable, check_queue

    out: dict = {"mode": mode}
    if mode.startswith("python"):
        from jepsen.history import read_parquet

        t = time.monotonic()
        ops = read_parquet(path)
        out["load-s"] = time.monotonic() - t
        t = time.monotonic()
        r = check_queue(ops) if mode == "python-queue" else check_linearizable(ops)
        out["check-s"] = time.monotonic() - t
        out["driver-peak-mb"] = _hwm_kb(os.getpid()) / 1024
    else:
        from jepsen.checkers.spark import (
            spark_check_linearizable,
            spark_check_queue,
            spark_session,
            stage_metrics,
        )

        t = time.monotonic()
        from jepsen.history import history_size

        # sized as ``python -m jepsen check`` sizes it (the JVM's compiler by history size)
        spark = spark_session(master, driver_memory=driver_memory, records=history_size(path))
        out["session-s"] = time.monotonic() - t
        started = stage_metrics(spark)  # the session's own jobs (its Python workers' start)
        out["session-phases"] = phases(started)
        check = spark_check_queue if mode == "spark-queue" else spark_check_linearizable
        t = time.monotonic()
        r = check(spark, path)
        out["check-s"] = time.monotonic() - t
        first = stage_metrics(spark)
        session_stages = {m["stage"] for m in started}
        out["phases"] = phases([m for m in first if m["stage"] not in session_stages])
        if warm:
            t = time.monotonic()
            check(spark, path)
            out["warm-check-s"] = time.monotonic() - t
            seen = {m["stage"] for m in first}
            out["warm-phases"] = phases([m for m in stage_metrics(spark)
                                         if m["stage"] not in seen])
        out["driver-peak-mb"] = _hwm_kb(os.getpid()) / 1024
        procs = _descendants(os.getpid())
        java = [p for p in procs if _comm(p) == "java"]
        workers = [p for p in procs if p not in java]
        out["jvm-peak-mb"] = sum(_hwm_kb(p) for p in java) / 1024
        out["workers-peak-mb"] = sum(_hwm_kb(p) for p in workers) / 1024
        spark.stop()
    out["valid"] = r["valid"]
    if mode.endswith("queue"):
        out["anomalies"] = r["anomaly-types"]
    else:
        out["keys"] = r["keys"]
    return out


def measure(mode: str, path: Path, master: str, driver_memory: str, warm: bool,
            class_archive: bool = True) -> dict:
    cmd = [sys.executable, __file__, "--child", mode, "--path", str(path), "--master", master,
           "--driver-memory", driver_memory, *(["--warm"] if warm else [])]
    env = {**os.environ, **({} if class_archive else {"JEPSEN_SPARK_CLASS_ARCHIVE": "off"})}
    p = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if p.returncode != 0:
        return {"mode": mode, "error": p.stderr.strip().splitlines()[-3:]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def _class_archive() -> dict | None:
    """The Spark class archive local sessions start from: built now when missing."""
    from jepsen.checkers import spark_cds

    path = spark_cds.archive_path()
    if path is None:
        return None
    if spark_cds.sealed(path):  # what sessions map; an unsealed file is built again
        return {"path": str(path), "mb": path.stat().st_size / 1e6, "built-s": None}
    got = spark_cds.build(path)
    print(f"built the Spark class archive {path} ({got['mb']:.0f} MB) in "
          f"{got['seconds']:.1f}s", flush=True)
    return {"path": str(path), "mb": got["mb"], "built-s": got["seconds"]}


def _load() -> float:
    return os.getloadavg()[0]


def plan(a) -> list[tuple[str, int]]:
    """The histories in the order they run: the smallest queue, the register, the rest."""
    out = [("queue", n) for n in sorted(a.queue_records)]
    if a.register_records:
        out.insert(1 if out else 0, ("register", a.register_records))
    return out


def generate(d: Path, kind: str, n: int, a) -> tuple[str, Path, int]:
    from jepsen.checkers.synth import iter_queue_history, register_history
    from jepsen.history import history_size, write_parquet, write_parquet_chunks

    t = time.monotonic()
    if kind == "queue":
        p = d / f"queue-{n}-p{a.partitions}-s{a.seed}.parquet"
        if a.histories and p.exists():
            got = history_size(p)
            print(f"reusing {p} ({got} queue records)", flush=True)
            return "queue", p, got
        got = write_parquet_chunks(iter_queue_history(n, partitions=a.partitions,
                                                      producers=12, consumers=8,
                                                      seed=a.seed), p)
        print(f"generated {got} queue records ({a.partitions} partitions) in "
              f"{time.monotonic() - t:.0f}s", flush=True)
        return "queue", p, got
    p = d / f"register-{n}-k{a.keys}-s{a.seed}.parquet"
    if a.histories and p.exists():
        got = history_size(p)
        print(f"reusing {p} ({got} register records)", flush=True)
        return f"register ({a.keys} keys)", p, got
    r = register_history(n, keys=a.keys, processes=20, seed=a.seed)
    write_parquet(r, p)
    print(f"generated {len(r)} register records ({a.keys} keys) in "
          f"{time.monotonic() - t:.0f}s", flush=True)
    return f"register ({a.keys} keys)", p, len(r)


def table(rows: list[dict]) -> list[str]:
    lines = ["| history | records | engine | check s | records/s | warm check s | "
             "warm records/s | session s | driver peak MB | JVM peak MB | workers peak MB | "
             "valid | load |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        m = r["m"]
        if "error" in m:
            lines.append(f"| {r['kind']} | {r['n']:,} | {r['engine']} | error: "
                         f"{' '.join(m['error'])[-120:]} | | | | | | | | | |")
            continue
        sess = f"{m['session-s']:.1f}" if "session-s" in m else "-"
        jvm = f"{m['jvm-peak-mb']:,.0f}" if "jvm-peak-mb" in m else "-"
        wk = f"{m['workers-peak-mb']:,.0f}" if "workers-peak-mb" in m else "-"
        warm = (f"{m['warm-check-s']:.1f} | {r['n'] / m['warm-check-s']:,.0f}"
                if "warm-check-s" in m else "- | -")
        lines.append(f"| {r['kind']} | {r['n']:,} | {r['engine']} | {m['check-s']:.1f} | "
                     f"{r['n'] / m['check-s']:,.0f} | {warm} | {sess} | "
                     f"{m['driver-peak-mb']:,.0f} | {jvm} | {wk} | {m['valid']} | "
                     f"{r['load']:.1f} |")
    return lines


def where(rows: list[dict]) -> list[str]:
    lines = []
    for r in rows:
        for key, which in (("session-phases", "session start"), ("phases", "first check"),
                           ("warm-phases", "second check")):
            ph = r["m"].get(key)
            if ph:
                lines += _phase_table(f"{r['kind']}, {r['n']:,} records, {r['engine']}, "
                                      f"{which}", ph)
    return lines


def _phase_table(title: str, ph: list[dict]) -> list[str]:
    lines = ["", f"{title}: Spark stage metrics per phase and stage "
             "(task time summed over tasks)", "",
             "| phase | stages | tasks | task run s | task CPU s | GC s | "
             "shuffle write MB | spill MB | peak execution MB |",
             "|---|---|---|---|---|---|---|---|---|"]
    for p in ph:
        lines.append(f"| {p['phase']} | {p['stages']} | {p['tasks']} | {p['run-s']} | "
                     f"{p['cpu-s']} | {p['gc-s']} | {p['shuffle-write-mb']} | "
                     f"{p['spill-mb']} | {p['peak-execution-mb']} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queue-records", default="1000000,10000000",
                    type=lambda s: [int(x) for x in s.split(",") if x])
    ap.add_argument("--register-records", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=10_000, help="register keys")
    ap.add_argument("--partitions", type=int, default=16, help="queue partitions")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--driver-memory", default="2g",
                    help="spark.driver.memory (in local mode the driver JVM runs the tasks)")
    ap.add_argument("--python-max-records", type=int, default=1_000_000,
                    help="the single-process path runs only on histories this large or less")
    ap.add_argument("--warm-max-records", type=int, default=10_000_000,
                    help="Spark checks histories this large or less a second time in the "
                         "same session, to tell the JVM's warm-up from the check")
    ap.add_argument("--no-class-archive-max-records", type=int, default=1_000_000,
                    help="Spark checks histories this large or less also without the class "
                         "archive (python -m jepsen spark-archive; built first when missing)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--histories", type=Path,
                    help="keep the generated histories in this folder and reuse those "
                         "found there (a 50M-record history takes minutes to generate; its "
                         "file's name holds its size, partitions or keys, and seed)")
    ap.add_argument("--skip-spark", action="store_true")
    ap.add_argument("--skip-python", action="store_true")
    ap.add_argument("--no-write", action="store_true", help="do not write bench/results")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--warm", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(run_child(a.child, a.path, a.master, a.driver_memory, a.warm)))
        return

    started = time.time()
    a.archive = None
    if not a.skip_spark and "local" in a.master:
        a.archive = _class_archive()
    d = a.histories or Path(tempfile.mkdtemp(prefix="checker-bench-"))
    d.mkdir(parents=True, exist_ok=True)
    rows = []
    for spec in plan(a):
        kind, path, n = generate(d, *spec, a)
        engines = [] if a.skip_spark else [("spark", a.archive is not None)]
        if a.archive and spec[1] <= a.no_class_archive_max_records:  # the size asked for
            engines.append(("spark", False))
        if not a.skip_python and spec[1] <= a.python_max_records:
            engines.insert(0, ("python", False))
        for eng, archive in engines:
            load = _load()
            m = measure(f"{eng}-{kind.split()[0]}", path, a.master, a.driver_memory,
                        spec[1] <= a.warm_max_records, archive)
            name = "python" if eng == "python" else (
                f"spark {a.master}" + ("" if archive else ", no class archive"))
            rows.append({"kind": kind, "n": n, "engine": name, "m": m, "load": load})
            print(table(rows[-1:])[-1], flush=True)
            if not a.no_write:  # after every run, so a cut-short benchmark leaves its rows
                write(a, rows, started)
        if not a.histories:
            path.unlink()
    print("\n".join(where(rows)))


def _archive_lines(a) -> list[str]:
    if not a.archive:
        return []
    built = (f", built by this run in {a.archive['built-s']:.1f} s"
             if a.archive["built-s"] is not None else ", built before this run")
    return ["", f"Spark rows use the class archive of `python -m jepsen spark-archive` "
                f"({a.archive['mb']:.0f} MB{built}) unless they say otherwise: the JVM maps "
                "the classes an earlier session loaded instead of loading them again."]


def write(a, rows: list[dict], started: float) -> None:
    lines = ["# Checker benchmark", "",
             f"`python bench/checker_bench.py --queue-records "
             f"{','.join(str(n) for n in a.queue_records)} --register-records "
             f"{a.register_records} --keys {a.keys} --master {a.master}`", "",
             *table(rows), "",
             f"Machine: {os.cpu_count()} CPUs, Python {platform.python_version()}; shared "
             "with other jobs (load: 1-minute load average when the run started). Records/s "
             "is records over check time; the Spark session's start is apart. A warm check "
             "is the same check run again in the same session: the difference is the JVM "
             "compiling Spark's code (and Spark generating its own) on first use. Peak memory: "
             "driver = the Python process that drives the check; JVM = the Spark JVM (in "
             "local mode it runs the tasks too); workers = Spark's Python workers.",
             *_archive_lines(a), *where(rows)]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "checker.md").write_text("\n".join(lines) + "\n")
    (RESULTS / "checker.json").write_text(json.dumps(
        {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
         "args": {k: v for k, v in vars(a).items() if k not in ("child", "path", "warm")},
         "runs": rows}, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
