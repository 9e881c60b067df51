"""Running the checkers on Spark: a quiet session, stage progress and metrics, the drivers.

The queue checker (``jepsen.checkers.spark_queue``): Python tasks read the Parquet
history's row groups and send each process's records, as Arrow streams, to one Python
worker, which pairs and cuts them into rows with Arrow kernels (``queue_rows``); the rows
go by partition key to the workers again, which find every anomaly with numpy
(``queue_arrays``) and merge the statistics; the JVM only shuffles the streams.  The
driver receives counts, statistics and the few records its examples name.  The
linearizability search per key stays in Python too, as an ``applyInPandas`` call over
each bucket of keys.  The driver never holds the whole history.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from jepsen.checkers import linear, queue
from jepsen.checkers._common import (
    QUANTILES,
    Flat,
    flatten,
    quantile_rank,
    stats_dict,
    time_buckets,
)
from jepsen.history import (
    Op,
    decode_value,
    history_file,
    read_jsonl,
    row_to_op,
    write_parquet,
)

_LOG4J2 = """\
status = error
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


# ---------------------------------------------------------------- session


# A local check of at most this many history records runs on a JVM that compiles with C1
# alone (``-XX:TieredStopAtLevel=1``).  On 2 cores C2's compiler threads took about 9 s of
# CPU during the first check of a 1M-record queue history, beside the tasks.  With C1 alone
# the session starts about a second sooner, and a 1M first check took as long or up to 3 s
# less (README has the runs); at 3M records both took as long, and at 10M C1's slower code
# made the check 50 s instead of 38 s.  ``JEPSEN_SPARK_JIT`` = ``c1`` or ``c2`` overrides.
SHORT_CHECK_RECORDS = 2_000_000
JIT_ENV = "JEPSEN_SPARK_JIT"


def jit_options(records: int | None) -> str:
    """The driver JVM's compiler options for a check of ``records`` history records
    (None: not known, the JVM's default tiers)."""
    mode = os.environ.get(JIT_ENV, "auto").strip().lower()
    if mode not in ("auto", "c1", "c2"):
        raise ValueError(f"{JIT_ENV}={mode!r}: expected auto, c1 or c2")
    if mode == "c1" or (mode == "auto" and records is not None and records <= SHORT_CHECK_RECORDS):
        return "-XX:TieredStopAtLevel=1"
    return ""


def spark_session(master: str = "local[*]", app_name: str = "jepsen-check",
                  shuffle_partitions: int | None = None, log_dir: str | None = None,
                  driver_memory: str | None = None, jars: list[str] | None = None,
                  java_options: str = "", records: int | None = None,
                  start_workers: bool = True):
    """Builds (or returns the running) SparkSession, quietly.

    The JVM logs only errors (a log4j2 config passed as a system property), the web UI
    and console progress bar are off, and whatever the JVM writes to stderr while it
    starts (and after) goes to ``<log_dir>/spark-jvm.log`` instead of the terminal.

    Args:
        master: a Spark master URL; ``local[*]`` by default.
        app_name: the application name.
        shuffle_partitions: ``spark.sql.shuffle.partitions``; for local masters by
            default four per core (a 10M-record history's sorts then fit in memory;
            adaptive execution coalesces the partitions of small ones), Spark's
            default otherwise.
        log_dir: where the JVM log and the log4j2 config go (a temp dir by default).
        driver_memory: ``spark.driver.memory`` (Spark's default when None); in local
            mode the driver JVM runs the tasks too.
        jars: more jars for the driver and executors (``spark.jars``), e.g. Spark's
            Kafka source from ``jepsen.checkers.spark_kafka.connector_jars``.
        java_options: more options for the driver's JVM.  A local session also maps
            the class archive of ``jepsen.checkers.spark_cds`` when one was built for
            this PySpark, JDK and jars (``python -m jepsen spark-archive``): its JVM
            starts in about half the time.
        records: how many history records the session will check, when known: a local
            session for a short check compiles with C1 alone (``SHORT_CHECK_RECORDS``).
        start_workers: run one Python task per core before returning, so that the
            session's Python workers are up before its first check (``_start_workers``).
    """
    local = master.startswith("local")
    if local:  # a cluster master needs the driver reachable from its executors
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from jepsen.checkers import spark_daemon, spark_queue

    d = Path(log_dir or tempfile.mkdtemp(prefix="jepsen-spark-"))
    d.mkdir(parents=True, exist_ok=True)
    cfg = d / "log4j2.properties"
    cfg.write_text(_LOG4J2)
    # a JVM that crashes writes hs_err_pid<N>.log to its working directory (the user's, or
    # a checkout's) unless told otherwise: beside the session's log instead
    java_opts = (f"-Dlog4j2.configurationFile=file:{cfg} -Dlog4j.configurationFile=file:{cfg}"
                 f" -XX:ErrorFile={d}/hs_err_pid%p.log")
    driver_opts = java_opts
    if local and "Archive" not in java_options:  # unless the caller chose one
        from jepsen.checkers import spark_cds

        java_options = f"{java_options} {spark_cds.java_options(jars)}"
    if local:
        java_options = f"{java_options} {jit_options(records)}"
    if java_options.strip():
        driver_opts = f"{java_opts} {java_options.strip()}"
    b = (SparkSession.builder.master(master).appName(app_name)
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.driver.extraJavaOptions", driver_opts)
         .config("spark.executor.extraJavaOptions", java_opts)
         .config("spark.sql.adaptive.enabled", "true")
         # a cached frame is read a few times within seconds: building it
         # uncompressed costs a third less than compressing it
         .config("spark.sql.inMemoryColumnarStorage.compressed", "false")
         # checksums of every shuffled row guard retries of nondeterministic stages;
         # a checker's plans are deterministic
         .config("spark.sql.shuffle.orderIndependentChecksum.enabled", "false")
         .config("spark.python.worker.reuse", "true"))
    if os.environ.get("JEPSEN_SPARK_PRELOAD", "on") != "off":
        # workers forked with pyarrow, pandas and the checkers imported (spark_daemon)
        b = b.config("spark.python.daemon.module", "jepsen.checkers.spark_daemon")
        for key, value in spark_daemon.SETTINGS.items():
            b = b.config(f"spark.executorEnv.{key}", value)
    if local:
        b = b.config("spark.driver.bindAddress", os.environ["SPARK_LOCAL_IP"])
    if driver_memory:
        b = b.config("spark.driver.memory", driver_memory)
    if jars:
        b = b.config("spark.jars", ",".join(jars))
    cores = spark_queue.local_threads(master)
    if shuffle_partitions is None and cores:
        shuffle_partitions = max(2, 4 * cores)
    if shuffle_partitions:
        b = b.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        b = b.config("spark.default.parallelism", str(shuffle_partitions))
    with _stderr_to(d / "spark-jvm.log"):
        spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if not local:
        _ship_package(spark, d)
    if spark.conf.get("spark.sql.execution.pyspark.udf.simplifiedTraceback.enabled",
                      "true").lower() == "true":
        # SQL's Python UDFs run their workers with this variable set: an executor keeps
        # one worker daemon per set of variables, so RDD jobs (the queue checker's)
        # without it would fork theirs from a second daemon, started and paid apart
        spark.sparkContext.environment["SPARK_SIMPLIFIED_TRACEBACK"] = "1"
    if start_workers:
        _start_workers(spark, spark_queue.task_slots(spark))
    return spark


def _start_workers(spark, tasks: int) -> None:
    """Runs ``tasks`` trivial Python tasks of an RDD at once.  An executor starts a
    Python worker daemon (``spark_daemon``) at its first Python task and forks a worker
    for each task that finds none idle: about 2 s on this project's 2-core machine (the
    daemon's imports, and the JVM's first use of its Python runner), paid once per
    session.  Paid here, a session is ready to check when it is returned, and a check's
    first run times the check alone (SQL's Python UDFs, ``applyInPandas`` and
    ``mapInArrow``, fork from the same daemon: see ``SPARK_SIMPLIFIED_TRACEBACK``)."""
    with phase(spark, "start the Python workers"):
        spark.sparkContext.parallelize(list(range(tasks)), tasks).map(_worker_pid).collect()


def _worker_pid(_: int) -> int:
    return os.getpid()


@contextlib.contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """Points file descriptor 2 at ``path`` while the JVM is launched (it inherits it)."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


def _ship_package(spark, d: Path) -> None:
    """Sends the ``jepsen`` package to remote executors."""
    root = Path(__file__).resolve().parents[1]
    z = d / "jepsen.zip"
    with zipfile.ZipFile(z, "w") as zf:
        for p in root.rglob("*.py"):
            zf.write(p, Path("jepsen") / p.relative_to(root))
    spark.sparkContext.addPyFile(str(z))


class StageProgress:
    """Prints one line per finished Spark stage of the jobs started inside it, named by
    the :func:`phase` its job ran under.  A thread polls Spark's status store: every stage
    of a new job is printed once it has completed (or failed), however briefly it ran, so
    a stage that starts and ends between two polls is not missed; stages Spark skipped
    (a shuffle reused) are not printed."""

    def __init__(self, spark, out=None, interval_s: float = 0.2) -> None:
        self._tracker = spark.sparkContext.statusTracker()
        self._store = spark.sparkContext._jsc.sc().statusStore()
        self._out = out or sys.stderr
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._earlier_jobs = set(self._tracker.getJobIdsForGroup())
        self._printed: set[int] = set()
        self._thread = threading.Thread(target=self._run, daemon=True, name="stage-progress")

    def __enter__(self) -> StageProgress:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        # Spark's listener bus records the last stages' ends a little after the job returns.
        deadline = time.monotonic() + FINAL_WAIT_S
        while not self._poll() and time.monotonic() < deadline:
            time.sleep(0.05)

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._poll()

    def _poll(self) -> bool:
        """Prints the stages that have ended since the last poll; True when no stage of
        the new jobs is still running or waiting."""
        try:
            jobs = sorted(j for j in self._tracker.getJobIdsForGroup() if j not in self._earlier_jobs)
            settled = True
            for job in jobs:
                info = self._tracker.getJobInfo(job)
                for sid in (info.stageIds if info is not None else ()):
                    if sid in self._printed:
                        continue
                    ended = self._ended(sid)
                    if ended is None:
                        settled = False
                        continue
                    self._printed.add(sid)
                    if ended:
                        print(ended, file=self._out, flush=True)
            return settled
        except Exception:  # the context is shutting down
            return True

    def _ended(self, sid: int) -> str | None:
        """The line of a stage that completed or failed, "" for one Spark skipped, None
        while it is running or waiting (or not yet in the store)."""
        try:
            data = self._store.lastStageAttempt(sid)
        except Exception:
            return None
        status = data.status().toString()
        if status == "SKIPPED":
            return ""
        if status not in ("COMPLETE", "FAILED"):
            return None
        name = data.name().split(" at ")[0].strip()
        desc = data.description()
        if desc.isDefined():
            name = f"{desc.get()} ({name})"
        start, end = data.submissionTime(), data.completionTime()
        took = (end.get().getTime() - start.get().getTime()) / 1000 \
            if start.isDefined() and end.isDefined() else 0.0
        verb = "done" if status == "COMPLETE" else "failed"
        return f"[spark] stage {sid} {name}: {data.numTasks()} tasks {verb} in {took:.1f}s"


FINAL_WAIT_S = 2.0  # how long StageProgress waits at the end for the last stages' ends


@contextlib.contextmanager
def phase(spark, name: str) -> Iterator[None]:
    """Names the Spark jobs this thread starts inside (stage metrics and progress lines
    show ``name``); job descriptions are per thread, so phases may run at once."""
    sc = spark.sparkContext
    before = sc.getLocalProperty("spark.job.description")
    sc.setJobDescription(name)
    try:
        yield
    finally:
        sc.setJobDescription(before)


def stage_metrics(spark) -> list[dict[str, Any]]:
    """Spark's own metrics of every finished stage of this application, oldest first.

    Each entry: ``stage``, ``name`` (the job description the stage ran under, see
    :func:`phase`), ``tasks``, ``run-ms`` and ``cpu-ms`` (summed over tasks),
    ``gc-ms``, ``input-mb``, ``shuffle-read-mb``, ``shuffle-write-mb``, ``spill-mb`` and
    ``peak-execution-mb`` (the largest of any task).
    """
    store = spark.sparkContext._jsc.sc().statusStore()
    seq = store.stageList(None, False, False, getattr(store, "stageList$default$4")(), None)
    mb = 1024 * 1024
    out = []
    for i in range(seq.size()):
        s = seq.apply(i)
        if str(s.status()) != "COMPLETE":
            continue
        desc = s.description()
        out.append({
            "stage": s.stageId(),
            "name": desc.get() if desc.isDefined() else s.name().split(" at ")[0],
            "tasks": s.numTasks(),
            "run-ms": s.executorRunTime(),
            "cpu-ms": s.executorCpuTime() // 1_000_000,
            "gc-ms": s.jvmGcTime(),
            "input-mb": round(s.inputBytes() / mb, 1),
            "shuffle-read-mb": round(s.shuffleReadBytes() / mb, 1),
            "shuffle-write-mb": round(s.shuffleWriteBytes() / mb, 1),
            "spill-mb": round(s.diskBytesSpilled() / mb, 1),
            "peak-execution-mb": round(s.peakExecutionMemory() / mb, 1),
        })
    out.sort(key=lambda m: m["stage"])
    return out


# ---------------------------------------------------------------- loading


def parquet_source(source: str | os.PathLike[str] | Iterable[Op]) -> str:
    """The Parquet file to read for a run folder, a history file, or ops in memory.

    JSON-lines histories and ops in memory are written to a temporary Parquet file.
    """
    if not isinstance(source, (str, os.PathLike)):
        return temp_parquet(source)
    p = Path(source)
    if p.is_dir():
        p = history_file(p)
    if p.suffix == ".jsonl":
        return temp_parquet(read_jsonl(p))
    return str(p.resolve())


def history_frame(spark, source: str | os.PathLike[str] | Iterable[Op]):
    """A DataFrame of history records in the Parquet schema (see ``parquet_source``);
    a DataFrame (such as ``spark_kafka.topic_frame``'s) is taken as it is."""
    if _is_frame(source):
        return source
    return spark.read.parquet(parquet_source(source))


def temp_parquet(ops: Iterable[Op]) -> str:
    """Writes ops to a temporary Parquet file, removed when this process exits."""
    fd, tmp = tempfile.mkstemp(suffix=".parquet", prefix="history-")
    os.close(fd)
    atexit.register(_unlink, tmp)
    write_parquet(ops, tmp)
    return tmp


def _unlink(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def paired_frame(df, resets: Iterable[str] = (), values: bool = True):
    """Invocations joined with their completions (the next record of their process).

    With ``resets`` (function names), a ``reset`` column holds the invocation index of
    the process's latest operation of those functions before this one (or null); it
    comes out of the same window, so it costs no second sort.  Without ``values``, the
    value and error columns are null: the shuffle then moves only numbers and short
    names (timing statistics need no more).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if not values:
        df = df.select("process", "actor", "f", "type", "index", "time",
                       *(F.lit(None).cast("string").alias(c) for c in ("value", "key",
                                                                       "error")))
    w = Window.partitionBy("process", "actor").orderBy("index")
    lead = F.lead(F.struct("type", "index", "time", "value", "error")).over(w)
    nx = F.col("nx")
    done = nx["type"].isNotNull() & (nx["type"] != "invoke")
    extra = []
    if resets:
        before = w.rowsBetween(Window.unboundedPreceding, -1)
        mark = F.when((F.col("type") == "invoke") & F.col("f").isin(*resets), F.col("index"))
        extra.append(F.last(mark, ignorenulls=True).over(before).alias("reset"))
    return (df.select("process", "actor", "f", "type", "index", "time", "value", "key",
                      lead.alias("nx"), *extra)
            .filter(F.col("type") == "invoke")
            .select("process", "actor", "f",
                    F.col("index").alias("i_index"), F.col("time").alias("i_time"),
                    F.col("value").alias("i_value"), "key",
                    F.when(done, nx["index"]).alias("c_index"),
                    F.when(done, nx["time"]).alias("c_time"),
                    F.when(done, nx["type"]).otherwise(F.lit("info")).alias("c_type"),
                    F.when(done, nx["value"]).alias("c_value"),
                    F.when(done, nx["error"]).alias("error"),
                    *(["reset"] if resets else [])))


_FLAT_COLS = ("process", "actor", "f", "i_index", "i_time", "i_value", "c_index", "c_time",
              "c_type", "c_value", "error")


_NULLABLE_LONGS = ("process", "c_index", "c_time")
_NULL_LONG = -(2**63)


def _flats(rows: Iterable[Any], _nan_free: bool = False) -> Iterator[Flat]:
    """Flat operations from rows of ``_FLAT_COLS`` (Spark rows, or with ``_nan_free``
    pandas tuples: numpy integers, ``_NULL_LONG`` for a missing number)."""
    if _nan_free:
        rows = (tuple(_plain(x) for x in r) for r in rows)
    for r in rows:
        p = r[0] if r[0] is not None else r[1]
        yield Flat(p, r[2], r[3], r[4], decode_value(r[5]), r[6], r[7], r[8],
                   decode_value(r[9]), r[10])


def _plain(x: Any) -> Any:
    """A pandas cell as a plain Python value (a missing string is NaN in pandas 3)."""
    if x is None or isinstance(x, str):
        return x
    if isinstance(x, float) and x != x:
        return None
    if hasattr(x, "__index__"):
        x = int(x)
        return None if x == _NULL_LONG else x
    return x


def _counts_and_grid(paired) -> tuple[dict[str, dict[str, int]], int, int]:
    """ok/fail/info counts per f, and the time grid, in one job over paired ops."""
    from pyspark.sql import functions as F

    last = F.greatest(F.col("i_time"), F.coalesce(F.col("c_time"), F.col("i_time")))
    rows = (paired.groupBy("f", "c_type")
            .agg(F.count(F.lit(1)), F.min("i_time"), F.max(last)).collect())
    counts: dict[str, dict[str, int]] = {}
    for r in rows:
        counts.setdefault(r[0], {"ok": 0, "fail": 0, "info": 0})[r[1]] = int(r[2])
    if not rows:
        return counts, 0, 1
    t0 = min(int(r[3]) for r in rows)
    t1 = max(int(r[4]) for r in rows)
    return counts, t0, time_buckets(t0, t1)


def spark_stats(paired, t0: int, bucket_ns: int, counts=None) -> dict[str, Any]:
    """The statistics of ``basic_stats``, aggregated by Spark, with the same figures.

    Throughput is a count per time bucket and completion type.  Latency quantiles are
    nearest-rank, as ``basic_stats`` takes them, in two passes: the first counts each
    f's latencies per log-spaced bin (1/256 of a doubling wide; one job with the
    throughput, as two grouping sets), which tells in which bin and at which place in
    it each quantile falls; the second reads just those bins' latencies.  Cheaper than
    ``percentile_approx``, and exact.
    """
    from pyspark.sql import functions as F

    if counts is None:
        counts, _, _ = _counts_and_grid(paired)
    c = F.col
    lat = c("c_time") - c("i_time")
    b = F.floor((c("c_time") - F.lit(t0)) / F.lit(bucket_ns)).cast("long")
    # monotonic in the latency, so each bin holds one range of latencies
    log_bin = F.when(lat >= 0, F.floor(F.log2(lat + 1) * 256)).otherwise(
        -1 - F.floor(F.log2(-lat) * 256)).cast("long")
    done = (paired.filter(c("c_time").isNotNull())
            .select("f", "c_type", b.alias("b"), lat.alias("lat"), log_bin.alias("bin")))
    rows = (done.groupingSets([["f", "bin"], ["b", "c_type"]], "f", "bin", "b", "c_type")
            .agg(F.count(F.lit(1)).alias("n")).collect())
    bins: dict[str, list[tuple[int, int]]] = {}
    thru: dict[int, dict[str, int]] = {}
    for f, lb, bucket, ctype, n in rows:
        if lb is not None:
            bins.setdefault(f, []).append((int(lb), int(n)))
        elif bucket is not None:
            thru.setdefault(int(bucket), {})[ctype] = int(n)
    wanted: dict[tuple[str, int], list[tuple[float, int]]] = {}  # (f, bin) -> (q, place)
    for f, fb in bins.items():
        fb.sort()
        total = sum(n for _, n in fb)
        for q in QUANTILES:
            k, before = quantile_rank(total, q), 0
            for lb, n in fb:
                if k < before + n:
                    wanted.setdefault((f, lb), []).append((q, k - before))
                    break
                before += n
    latency: dict[str, dict[str, int]] = {}
    if wanted:
        which = functools.reduce(lambda x, y: x | y, (
            (c("f") == f) & (c("bin") == lb) for f, lb in wanted))
        got: dict[tuple[str, int], list[int]] = {}
        for f, lb, x in done.filter(which).select("f", "bin", "lat").collect():
            got.setdefault((f, lb), []).append(int(x))
        for (f, lb), places in wanted.items():
            xs = sorted(got[(f, lb)])
            for q, k in places:
                latency.setdefault(f, {})[str(q)] = xs[k]
    latency = {f: {str(q): v[str(q)] for q in QUANTILES} for f, v in latency.items()}
    return stats_dict(counts, latency, thru, t0, bucket_ns)


def by_key(frame, to_records, analyse, partitions: int) -> list[Any]:
    """Keys records of flat operations, groups them by key, analyses each group.

    ``to_records(flat)`` yields ``(key, record)`` pairs (records are named tuples) and
    ``analyse(key, records)`` returns one picklable result per key; it receives the
    records as plain tuples.  The first stage packs each input partition's
    records into one chunk per key, so the shuffle moves a few large objects rather than
    a pair per record; the second joins each key's chunks and analyses it, one Spark task
    per group of keys.  (``mapInArrow`` would spare the row conversion but needs pandas.)
    """

    def pack(rows):
        groups: dict[Any, list] = {}
        for fl in _flats(rows):
            for key, rec in to_records(fl):
                groups.setdefault(key, []).append(tuple(rec))  # plain tuples pickle fast
        return iter(groups.items())

    def unpack(chunks):
        for key, parts in chunks:
            recs = []
            for part in parts:
                recs.extend(part)
            yield analyse(key, recs)

    return (frame.select(*_FLAT_COLS).rdd.mapPartitions(pack)
            .groupByKey(partitions).mapPartitions(unpack).collect())


# ---------------------------------------------------------------- drivers


def spark_check_queue(spark, source, sub_via: str | None = None,
                      max_examples: int = queue.DEFAULT_MAX_EXAMPLES,
                      partitions: int | None = None) -> dict[str, Any]:
    """The queue checker on Spark; returns what ``queue.check_queue`` returns.

    The analysis is ``jepsen.checkers.spark_queue``: one job pairs, reads and analyses
    the records, and returns counts, statistics and at most ``max_examples`` anomaly
    rows of each type; a second reads the few records the examples name.  The time grid
    comes from the records (the Parquet footer's statistics, else one aggregation);
    when the operations' own grid differs (a stray completion at an end), the check
    runs again on it.  ``partitions``: how many partitions each shuffle makes
    (``spark_queue.buckets`` by default).
    """
    from jepsen.checkers import spark_queue

    source = source if _is_frame(source) else parquet_source(source)
    grid = _record_grid(spark, source)

    def records(pairs):
        with phase(spark, "queue: read the examples' records"):
            return flats_at(spark, source, pairs)

    with phase(spark, "queue: pair, cut rows, find anomalies"):
        for _ in range(2):
            result, own = spark_queue.check(spark, source, *grid, sub_via, max_examples,
                                            records, partitions)
            if own == grid:
                break
            grid = own
    return {"checker": "queue", **result}


def _is_frame(source) -> bool:
    from pyspark.sql import DataFrame

    return isinstance(source, DataFrame)


def _record_grid(spark, source) -> tuple[int, int]:
    """``(t0, bucket_ns)`` over the records' first and last time (a Parquet file's
    footer statistics, else one aggregation): those of the operations unless a
    completion without invocation lies outside them."""
    from pyspark.sql import functions as F

    path = None if _is_frame(source) else source
    span = _footer_times(path) if path else None
    if span is None:
        df = source if path is None else spark.read.parquet(path)
        span = df.agg(F.min("time"), F.max("time")).first()
    if span[0] is None:
        return 0, 1
    return int(span[0]), time_buckets(int(span[0]), int(span[1]))


def _footer_times(path: str) -> tuple[int, int] | None:
    """The least and greatest ``time`` a Parquet file's footer records (None when a row
    group lacks them, or the file has none)."""
    import pyarrow.parquet as pq

    try:
        md = pq.ParquetFile(path).metadata
        col = md.schema.names.index("time")
        stats = [md.row_group(g).column(col).statistics for g in range(md.num_row_groups)]
    except (OSError, ValueError):
        return None
    if not stats or any(st is None or not st.has_min_max for st in stats):
        return None
    return min(st.min for st in stats), max(st.max for st in stats)


def flats_at(spark, source, pairs: Iterable[tuple[int, int | None]]) -> list[Flat]:
    """The flat operations of ``(invoke index, completion index or None)`` pairs, from
    their records in a Parquet path (Python tasks over its row groups, skipping those
    whose footer statistics hold none of them) or a frame (a filter when they are few,
    one job; else a broadcast join: a literal per index would make a huge plan)."""
    from pyspark.sql import functions as F

    from jepsen.checkers import spark_queue

    pairs = set(pairs)
    indexes = sorted({i for p in pairs for i in p if i is not None})
    if not indexes:
        return []
    if isinstance(source, str):
        tasks = spark_queue.row_group_tasks(source, spark_queue.task_slots(spark),
                                            _groups_holding(source, indexes))
        rows = spark.sparkContext.parallelize(tasks, len(tasks)).mapPartitions(
            functools.partial(_records_at, indexes=indexes)).collect()
    elif len(indexes) <= 256:
        rows = [r.asDict() for r in source.filter(F.col("index").isin(indexes)).collect()]
    else:
        want = spark.createDataFrame([(i,) for i in indexes], "index long")
        rows = [r.asDict() for r in source.join(F.broadcast(want), "index").collect()]
    # the records of the operations only: a completion is the next of its process
    # among them, so the single-process path's pairing reads them as the whole history
    ops = sorted((row_to_op(r) for r in rows), key=lambda o: o.index)
    wanted = {i for i, _ in pairs}
    return [fl for fl in flatten(ops) if fl.i_index in wanted]


def f_counts(spark, path: str) -> dict[str, int]:
    """How many records each ``f`` of a Parquet history has: Python tasks over its row
    groups, the ``f`` column only."""
    from jepsen.checkers import spark_queue

    tasks = spark_queue.row_group_tasks(path, spark_queue.task_slots(spark))
    counts: dict[str, int] = {}
    for f, n in spark.sparkContext.parallelize(tasks, len(tasks)).mapPartitions(
            _f_counts).collect():
        counts[f] = counts.get(f, 0) + n
    return counts


def _f_counts(tasks) -> Iterator[tuple[str, int]]:
    import pyarrow.compute as pc

    from jepsen.checkers import spark_queue

    for b in spark_queue.read_row_groups(tasks, ["f"]):
        for c in pc.value_counts(b.column("f")).to_pylist():
            yield c["values"], c["counts"]


def _groups_holding(path: str, indexes: list[int]) -> list[int]:
    """The row groups of a Parquet file whose footer statistics of ``index`` do not rule
    out all of ``indexes`` (sorted)."""
    import bisect

    import pyarrow.parquet as pq

    md = pq.ParquetFile(path).metadata
    col = md.schema.names.index("index")
    out = []
    for g in range(md.num_row_groups):
        st = md.row_group(g).column(col).statistics
        if st is None or not st.has_min_max or \
                bisect.bisect_left(indexes, st.min) < bisect.bisect_right(indexes, st.max):
            out.append(g)
    return out


def _records_at(tasks, indexes: list[int]) -> Iterator[dict[str, Any]]:
    """The records of read tasks (``spark_queue.row_group_tasks``) whose index is one of
    ``indexes``, as dicts."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from jepsen.checkers import spark_queue

    want = pa.array(indexes, pa.int64())
    for b in spark_queue.read_row_groups(tasks, None):
        yield from b.filter(pc.is_in(b.column("index"), value_set=want)).to_pylist()


def spark_check_linearizable(spark, source, model: str | linear.Model = "cas-register",
                             keyed: bool = True, budget: int = linear.DEFAULT_BUDGET,
                             max_examples: int = 100,
                             partitions: int | None = None) -> dict[str, Any]:
    """The linearizability checker on Spark: the JVM pairs the operations and groups
    them by bucket of keys; one ``applyInPandas`` call per bucket (an Arrow batch in)
    splits it by key and runs the search per key, returning one pickled ``check_key``
    result per key.  Buckets, not keys, are the groups: a pandas group costs
    milliseconds, and a history may have many thousand small keys.

    ``partitions``: how many buckets (four per default parallelism by default).
    """
    import pickle

    from pyspark.sql import functions as F

    m = linear.model_named(model)
    df = history_frame(spark, source)
    buckets = partitions or 4 * max(1, spark.sparkContext.defaultParallelism)
    group = F.col("key") if keyed else F.lit("")
    # nullable longs travel as a sentinel: pandas would make them lossy floats
    cols = [F.coalesce(F.col(c), F.lit(_NULL_LONG)).alias(c) if c in _NULLABLE_LONGS
            else F.col(c) for c in _FLAT_COLS]
    ops = (paired_frame(df).filter(F.col("f").isin(*m.fs) & (F.col("c_type") != "fail"))
           .select(F.pmod(F.hash(group), F.lit(buckets)).alias("b"), *cols))

    def analyse(pdf):
        import pandas as pd

        keys: dict[Any, list] = {}
        for fl in _flats(pdf[list(_FLAT_COLS)].itertuples(index=False, name=None),
                         _nan_free=True):
            r = linear.lin_record(m, fl, keyed)
            if r is not None:
                keys.setdefault(r[0], []).append(r[1])
        out = [pickle.dumps(linear.check_key(m, k, v, budget)) for k, v in keys.items()]
        return pd.DataFrame({"result": pd.Series(out, dtype=object)})

    with phase(spark, f"linearizable: search keys ({m.name})"):
        rows = ops.groupBy("b").applyInPandas(analyse, "result binary").collect()
    return linear.merge_keys(m, (pickle.loads(r[0]) for r in rows), max_examples)
