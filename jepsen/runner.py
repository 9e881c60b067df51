"""One jepsen run: a real kraft cluster, real clients, a nemesis, a history, a verdict.

Theory of operation
-------------------
``run_test(TestOptions(...))`` goes through these phases, logging each to
``<run>/jepsen.log``:

1. **store** -- ``jepsen.store`` makes ``<store>/<test-name>/<start-time>/`` and points
   ``<store>/<test-name>/latest`` at it.  The cluster is laid out inside the run folder
   (``node<i>/`` holds each node's config, log and data).
2. **cluster** -- ``jepsen.hosts.configure_kraft`` on the chosen host backend, with the
   engine (``controller.quorum.engine``) and the unsafe switch as config overrides; the
   nodes start, and the run waits (bounded by ``startup_timeout_s``) until every broker
   is registered and the workload's topics exist with a leader for every partition.  A
   cluster that does not come up ends the run with an error and verdict ``unknown``,
   quoting the tail of each node's log -- it never hangs.
3. **run** -- ``jepsen.metrics`` scrapes every node's metrics endpoint each
   ``metrics_interval_s`` into ``<run>/metrics.jsonl``, from here to the end of the drain.
   Under trio, ``concurrency`` workers each run one process at a time: take an
   operation from the workload's generator, record the invocation, run it in a thread
   (every client call is bounded by the client timeout), record the completion.  Workers
   pace themselves to ``rate`` ops/s in total (Jepsen's stagger).  An ``info`` completion
   retires the process: its clients are closed and the worker carries on as process
   ``p + concurrency``.  Meanwhile ``jepsen.nemesis.run_schedule`` plays the seeded
   fault schedule into the same history, ending with a heal and a recovery wait.
4. **drain** (queue, txn) -- a fresh consumer reads every partition from the beginning up to
   the highest offset any ok operation saw (``jepsen.workloads.queue.drain``).
5. **check** -- the history is written as JSON lines (live, flushed per record) and
   Parquet; ``jepsen.checkers.check_store`` writes results.json (Spark by default,
   in-process with ``spark=False``).
6. **report** -- node data directories are kept only when the run is invalid; plots
   and index.html come from ``jepsen.report``.

Everything the run starts is killed at the end, whatever happened.
"""

from __future__ import annotations

import logging
import random
import secrets
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from jepsen.history import INFO, INVOKE, JsonlWriter, Op, write_parquet
from jepsen.nemesis._schedule import DEFAULT_INTERVAL_S
from jepsen.workloads.clients import invoke_bounded

log = logging.getLogger("jepsen.runner")

ENGINES = ("kraft", "pysyncobj")

#: Timeouts short enough that faults show within a short run; no protocol changes.
FAST_OVERRIDES = {
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "4000",
    "replica.lag.time.max.ms": "5000",
    "unclean.leader.election.enable": "false",
}


class RunError(RuntimeError):
    """The run could not be carried out (cluster did not start, bad options)."""


class Refused(RunError):
    """The run was refused before anything started: it could not do what was asked (a
    fault the host backend cannot enforce).  A fault is never silently left out."""


def fence_time_s(overrides: dict[str, str]) -> float:
    """How long a node must stay cut off before the others have surely replaced it: a
    controller failover (the node may be the active controller: fetch timeout, then an
    election) plus the broker session timeout, plus 2 s of slack for a loaded machine."""
    ms = sum(int(overrides.get(k, FAST_OVERRIDES[k])) for k in
             ("controller.quorum.fetch.timeout.ms", "controller.quorum.election.timeout.ms",
              "broker.session.timeout.ms"))
    return ms / 1000 + 2.0


def check_supported(opts: "TestOptions", hosts) -> None:
    """Refuses (``Refused``) a nemesis the host backend cannot enforce, or an unknown one.
    Called before the run creates anything but ``hosts``."""
    from jepsen.nemesis import FAULTS, unsupported_faults

    unknown = sorted(set(opts.nemesis) - set(FAULTS))
    if unknown:
        raise Refused(f"unknown faults {unknown} (choose from {', '.join(FAULTS)})")
    missing = unsupported_faults(hosts, opts.nemesis)
    if missing:
        raise Refused("refusing to run: " + "; ".join(missing.values()))
    if opts.security != "PLAINTEXT" and opts.hosts != "local":
        raise Refused(f"--security {opts.security} needs --hosts local (the certificates name the "
                      "loopback addresses the local backend uses)")
    if opts.security != "PLAINTEXT" and opts.history_topic:
        raise Refused("--history-topic writes and reads over PLAINTEXT only: leave it out with --security")


def supported_hosts(opts: "TestOptions"):
    """A backend of ``opts.hosts`` that can do every fault ``opts`` asks for; raises Refused
    (closing the backend) when it cannot."""
    from jepsen.hosts import HostError, make_hosts

    try:
        hosts = make_hosts(opts.hosts, list(range(1, opts.nodes + 1)))
    except HostError as exc:
        raise Refused(f"the {opts.hosts} backend cannot run here: {exc}") from None
    try:
        check_supported(opts, hosts)
    except BaseException:
        hosts.close()
        raise
    return hosts


def refuse_unsupported(opts: "TestOptions") -> None:
    """``check_supported`` on a throwaway backend of ``opts.hosts`` (for campaigns, before
    the first run)."""
    supported_hosts(opts).close()


@dataclass
class TestOptions:
    """Everything that defines one run (the CLI's options)."""

    __test__ = False  # not a pytest class
    workload: str = "queue"
    nemesis: list[str] = field(default_factory=lambda: ["kill"])
    nodes: int = 5
    time_limit_s: float = 60.0
    rate: float = 500.0
    concurrency: int = 10
    hosts: str = "local"
    unsafe: bool = False
    seed: int | None = None
    engine: str = "kraft"
    client: str = "confluent"
    keys: int | None = None  # queue partitions / register topics
    sub_via: str = "assign"
    group_protocol: str = "classic"  # the subscribing consumers' group.protocol (queue)
    #: Nodes in racks of their own and consumers fetching from the replica in theirs (KIP-392:
    #: ``replica.selector.class``, librdkafka's ``client.rack``; queue, confluent client)
    client_rack: bool = False
    store: str = "store"
    name: str | None = None
    spark: bool = True
    spark_master: str = "local[*]"
    #: Also produce every history record to this topic of the cluster under test, as it
    #: happens (``jepsen.checkers.spark_kafka``: Spark's Kafka source reads it back).
    history_topic: str | None = None
    nemesis_interval_s: float = DEFAULT_INTERVAL_S  # Jepsen's default: 10 s
    recovery_s: float = 5.0
    drain_timeout_s: float = 30.0
    startup_timeout_s: float = 60.0
    client_timeout_s: float = 5.0
    #: Seconds between scrapes of every node's metrics endpoint (``jepsen.metrics``); 0: none.
    metrics_interval_s: float = 1.0
    overrides: dict[str, str] = field(default_factory=dict)
    #: The cluster's and clients' security protocol (``jepsen.security``).
    security: str = "PLAINTEXT"
    #: Extra ``jepsen.nemesis.ScheduleOptions`` fields (kill_targets, partition_specs, ...).
    schedule: dict[str, Any] = field(default_factory=dict)
    progress: bool = True
    keep_data: bool = False

    def test_name(self) -> str:
        if self.name:
            return self.name
        nem = "+".join(self.nemesis) if self.nemesis else "none"
        return (f"{self.workload}-{self.engine}-{nem}-n{self.nodes}"
                + (f"-{self.client}" if self.client != "confluent" else "")
                + (f"-{self.hosts}" if self.hosts != "local" else "")
                + (f"-{self.security.lower()}" if self.security != "PLAINTEXT" else "")
                + ("-rack" if self.client_rack else "")
                + ("-unsafe" if self.unsafe else ""))

    def unsafe_switch(self) -> str:
        """What ``--unsafe`` turns on: each workload's guarantee has its own switch (reading
        from followers: their high watermark as the bound of what they serve)."""
        if self.client_rack:
            return "kraft.unsafe.follower.read.log.end"
        return UNSAFE_SWITCHES.get(self.workload, "kraft.unsafe.ack.before.replication")

    def node_overrides(self) -> dict[int, dict[str, str]]:
        """Each node's own keys: with ``client_rack``, its rack (``rack<id>``)."""
        return {n: {"broker.rack": rack_of(n)} for n in range(1, self.nodes + 1)} if self.client_rack else {}

    def cluster_overrides(self) -> dict[str, str]:
        if self.engine not in ENGINES:
            raise RunError(f"unknown engine {self.engine!r} (one of {', '.join(ENGINES)})")
        o = dict(FAST_OVERRIDES)
        rf = min(3, self.nodes)
        o["min.insync.replicas"] = str(2 if rf >= 3 else 1)
        o["controller.quorum.engine"] = self.engine
        if self.engine == "pysyncobj":
            o["controller.quorum.pysyncobj.password"] = secrets.token_hex(12)
        if self.unsafe:
            o[self.unsafe_switch()] = "true"
        if self.client_rack:
            o["replica.selector.class"] = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
        if self.group_protocol in ("consumer", "mixed"):  # the classic consumers' own 6 s / 1 s, on the broker
            o["group.consumer.session.timeout.ms"] = "6000"
            o["group.consumer.heartbeat.interval.ms"] = "1000"
        o.update(self.overrides)
        return o


def rack_of(node: int) -> str:
    """The rack of node ``node`` in a ``client_rack`` run (each node in its own)."""
    return f"rack{node}"


#: What ``--unsafe`` turns on, by workload (the default: acks=all answered before replication).
UNSAFE_SWITCHES = {
    "txn": "kraft.unsafe.read.committed.high.watermark",  # read_committed past the LSO
}


@dataclass
class RunResult:
    directory: Path
    valid: Any
    results: dict[str, Any]
    summary: dict[str, Any]

    @property
    def exit_code(self) -> int:
        return 0 if self.valid is True else (1 if self.valid is False else 2)


# ---------------------------------------------------------------- history recording


class Recorder:
    """Numbers, timestamps and writes history records as they happen (trio thread only)."""

    def __init__(self, path: Path):
        self.ops: list[Op] = []
        self._w = JsonlWriter(path)
        self._topic = None
        self.t0 = time.monotonic_ns()
        self.counts = {"ok": 0, "fail": 0, "info": 0}
        self.nemesis_state = ""

    def add(self, process: Any, type_: str, f: str, value: Any = None,
            error: str | None = None) -> Op:
        op = Op(len(self.ops), time.monotonic_ns(), type_, process, f, value, error)
        self.ops.append(op)
        self._w.append(op)
        if self._topic is not None:
            self._topic.extend([op])
        if type_ != INVOKE and isinstance(process, int):
            self.counts[type_] += 1
        return op

    def nemesis(self, d: dict) -> None:
        """The ``record`` callback of ``run_schedule``."""
        self.add(d["process"], d["type"], d["f"], d.get("value"), d.get("error"))
        if d["type"] == INVOKE:
            self.nemesis_state = f"{d['f']} {_short(d.get('value'))}"
        else:
            self.nemesis_state = f"{d['f']} -> {_short(d.get('value'))}"

    def stream_to(self, writer) -> None:
        """Sends the records so far, and every later one, to a ``TopicWriter`` too."""
        writer.extend(self.ops)
        self._topic = writer

    def close(self) -> None:
        self._w.close()
        if self._topic is not None:
            try:
                self._topic.close()
            except RuntimeError as e:  # the file history stays whole; the topic is a copy
                log.warning("history topic: %s", e)


def _short(v: Any, n: int = 60) -> str:
    s = "" if v is None else str(v)
    return s if len(s) <= n else s[:n - 3] + "..."


# ---------------------------------------------------------------- cluster control


def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    from jepsen import security

    return AdminClient(security.librdkafka({"bootstrap.servers": bootstrap, "log_level": 0,
                                            "socket.timeout.ms": 3000}))


def _log_tails(cluster, lines: int = 15) -> str:
    out = []
    for spec in cluster.nodes.values():
        try:
            tail = spec.log_path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            tail = ["(no log)"]
        out.append(f"--- node {spec.node_id} ({spec.log_path}) ---\n" + "\n".join(tail))
    return "\n".join(out)


def wait_ready(hosts, cluster, topics: list[tuple[str, int]], rf: int, min_isr: int,
               timeout_s: float) -> dict[str, float]:
    """Waits until every broker is registered and ``topics`` exist with leaders.

    Raises:
        RunError: not ready within ``timeout_s`` (with each node's log tail), or every
            node process died.
    """
    from confluent_kafka.admin import NewTopic

    started = time.monotonic()
    deadline = started + timeout_s
    admin = _admin(cluster.bootstrap_servers)
    want = len(cluster.brokers)
    marks: dict[str, float] = {}
    last = "no metadata yet"

    def dead() -> list[int]:
        return [n for n in hosts.nodes if not hosts.is_running(n)]

    while time.monotonic() < deadline:
        if len(dead()) == len(hosts.nodes):
            raise RunError("every node process exited during startup\n" + _log_tails(cluster))
        try:
            md = admin.list_topics(timeout=2)
        except Exception as exc:  # noqa: BLE001
            last = f"metadata: {exc}"
            time.sleep(0.3)
            continue
        if len(md.brokers) < want or md.controller_id is None or md.controller_id < 0:
            last = f"{len(md.brokers)}/{want} brokers, controller {md.controller_id}"
            time.sleep(0.3)
            continue
        marks.setdefault("brokers-s", round(time.monotonic() - started, 3))
        missing = [(t, n) for t, n in topics if t not in md.topics]
        if missing:
            fs = admin.create_topics(
                [NewTopic(t, n, rf, config={"min.insync.replicas": str(min_isr)})
                 for t, n in missing], request_timeout=10)
            for t, fut in fs.items():
                try:
                    fut.result(timeout=15)
                except Exception as exc:  # noqa: BLE001
                    if "ALREADY_EXISTS" not in str(exc):
                        last = f"create {t}: {exc}"
            time.sleep(0.3)
            continue
        leaderless = [f"{t}-{p}" for t, _ in topics
                      for p, pm in md.topics[t].partitions.items()
                      if pm.leader is None or pm.leader < 0 or pm.error is not None]
        short = [t for t, n in topics if len(md.topics[t].partitions) < n]
        if leaderless or short:
            last = f"partitions without a leader: {(leaderless + short)[:5]}"
            time.sleep(0.3)
            continue
        marks["topics-s"] = round(time.monotonic() - started, 3)
        return marks
    raise RunError(f"the cluster was not ready within {timeout_s:.0f} s ({last})\n"
                   + _log_tails(cluster))


def make_oracle(bootstrap: str, topics: list[tuple[str, int]]):
    from jepsen.nemesis import Oracle

    admin = _admin(bootstrap)

    def controller():
        # Not Metadata's controller_id: under KRaft (here as in Kafka) that is just some
        # alive broker, for old admin clients.  The metadata quorum's leader is the active
        # controller.
        from cli.admin_client import AdminClient as QuorumAdmin

        from jepsen import security

        resp = QuorumAdmin(bootstrap, timeout_s=2, security=security.kraft_client()).call("DescribeQuorum", {"topics": [
            {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]})
        part = resp["topics"][0]["partitions"][0] if not resp.get("error_code") else {}
        leader = part.get("leader_id", -1)
        return leader if leader >= 0 and not part.get("error_code") else None

    def leader(topic, partition):
        md = admin.list_topics(topic=topic, timeout=2)
        pm = md.topics[topic].partitions.get(partition)
        return pm.leader if pm is not None and pm.leader >= 0 else None

    parts = [(t, p) for t, n in topics[:4] for p in range(min(n, 4))]
    return Oracle(controller=controller, leader=leader, partitions=parts, bootstrap=bootstrap,
                  topics=list(topics))


# ---------------------------------------------------------------- the run


def run_test(opts: TestOptions, spark: Any = None) -> RunResult:
    """Runs one test and returns its verdict; see the module docstring.

    ``spark``: a SparkSession to check on (reused across a campaign); with ``opts.spark``
    and none given, one is made for this run and stopped after.
    """
    from jepsen import report, store
    from jepsen.hosts import configure_kraft
    from jepsen.workloads import make_workload

    hosts = supported_hosts(opts)
    if opts.seed is None:
        opts.seed = random.randrange(2**31)
    run_dir = store.new_run_dir(opts.store, opts.test_name())
    handler = store.attach_log(run_dir)
    say = _Say(opts.progress)
    say(f"jepsen {opts.test_name()} seed={opts.seed} -> {run_dir}")
    log.info("options: %s", asdict(opts))
    started = time.monotonic()
    summary: dict[str, Any] = {"test": opts.test_name(), "options": asdict(opts),
                               "directory": str(run_dir)}
    store.write_json(run_dir / "test.json", summary)

    rf = min(3, opts.nodes)
    min_isr = 2 if rf >= 3 else 1
    expected = opts.rate * opts.time_limit_s
    if opts.workload == "register":
        from jepsen.workloads.register import keys_needed
        keys = opts.keys or keys_needed(expected, 200, 2)
    else:
        keys = opts.keys or 4
    workload = make_workload(opts.workload, keys=keys, client=opts.client, sub_via=opts.sub_via,
                             group_protocol=opts.group_protocol, timeout_s=opts.client_timeout_s,
                             racks=[rack_of(n) for n in range(1, opts.nodes + 1)] if opts.client_rack else None)
    recorder = Recorder(run_dir / "history.jsonl")
    results: dict[str, Any] = {}
    error: str | None = None
    cluster = None
    try:
        from jepsen import security

        cluster_security = security.cluster_security(opts.security)
        security.use(cluster_security)
        cluster = configure_kraft(hosts, run_dir, overrides=opts.cluster_overrides(),
                                  security=cluster_security, node_overrides=opts.node_overrides())
        say(f"cluster: {opts.nodes} nodes ({opts.hosts}), engine {opts.engine}"
            + (f", UNSAFE: {opts.unsafe_switch()}" if opts.unsafe else "")
            + (f", {opts.security}" if opts.security != "PLAINTEXT" else "") + f", {cluster.bootstrap_servers}")
        hosts.start_all()
        marks = wait_ready(hosts, cluster, workload.topics(), rf, min_isr,
                           opts.startup_timeout_s)
        summary["startup"] = marks
        say(f"cluster ready in {marks['topics-s']:.1f}s")
        if opts.history_topic:
            from jepsen.checkers.spark_kafka import TopicWriter
            recorder.stream_to(TopicWriter(cluster.bootstrap_servers, opts.history_topic,
                                           replication=rf))
        phase = _Phase(opts, hosts, cluster, workload, recorder, say, run_dir)
        from kraft.trio_run import run_trio
        summary["drain"] = run_trio(phase.main)
        summary["ops-per-s"] = phase.ops_per_s
    except RunError as exc:
        error = str(exc)
        say(f"ERROR: {error.splitlines()[0]}")
        log.error("%s", error)
    except Exception as exc:  # noqa: BLE001 - a broken run still gets a store
        error = f"{type(exc).__name__}: {exc}"
        say(f"ERROR: {error}")
        log.exception("run failed")
    finally:
        recorder.close()
        hosts.close()  # SIGKILL: the data stays as the run left it, and nothing waits
        from jepsen import security

        security.use(None)

    ops = recorder.ops
    summary["records"] = len(ops)
    summary["run-s"] = round(time.monotonic() - started, 3)
    try:
        write_parquet(ops, run_dir / "history.parquet")
        if error is None:
            say(f"checking {len(ops)} records ({'spark' if opts.spark else 'python'})")
            results = _check(run_dir, workload, opts, spark)
        else:
            results = {"valid": "unknown", "error": error, "checkers": {}, "records": len(ops)}
            from jepsen.checkers import write_results
            write_results(results, run_dir)
    except Exception as exc:  # noqa: BLE001
        log.exception("checking failed")
        error = error or f"check failed: {type(exc).__name__}: {exc}"
        results = {"valid": "unknown", "error": error, "checkers": {}, "records": len(ops)}
        from jepsen.checkers import write_results
        write_results(results, run_dir)
    valid = results.get("valid", "unknown")
    summary["valid"] = valid
    summary["error"] = error
    summary["total-s"] = round(time.monotonic() - started, 3)
    summary["anomalies"] = _anomaly_counts(results)
    if cluster is not None:
        store.tidy_nodes(run_dir, cluster, keep_data=(valid is not True) or opts.keep_data)
    try:
        report.write_report(run_dir, ops, results, summary)
    except Exception:  # noqa: BLE001
        log.exception("report failed")
    store.write_json(run_dir / "test.json", summary)
    say(f"valid: {valid}" + (f" ({', '.join(summary['anomalies'])})"
                             if summary["anomalies"] else "")
        + f"  ->  {run_dir}/index.html")
    store.detach_log(handler)
    return RunResult(run_dir, valid, results, summary)


def _check(run_dir: Path, workload, opts: TestOptions, spark: Any) -> dict[str, Any]:
    from jepsen.checkers import check_store

    kw = dict(workload=workload.checker, model="register",
              sub_via=opts.sub_via if opts.workload in ("queue", "txn") else None,
              progress=opts.progress)
    if not opts.spark:
        return check_store(run_dir, spark=None, **kw)
    owned = spark is None
    if owned:
        from jepsen.checkers.spark import spark_session
        from jepsen.history import history_size
        spark = spark_session(opts.spark_master, records=history_size(run_dir))
    try:
        return check_store(run_dir, spark=spark, **kw)
    finally:
        if owned:
            spark.stop()


def _anomaly_counts(results: dict[str, Any]) -> dict[str, int]:
    out = {}
    for r in results.get("checkers", {}).values():
        for k, a in r.get("anomalies", {}).items():
            out[k] = a["count"]
        if r.get("failures", {}).get("count"):
            out["nonlinearizable-keys"] = r["failures"]["count"]
    return out


class _Say:
    def __init__(self, on: bool):
        self.on = on

    def __call__(self, msg: str) -> None:
        log.info("%s", msg)
        if self.on:
            print(f"[jepsen] {msg}", file=sys.stderr, flush=True)


class _Phase:
    """The trio part of a run: workers, nemesis, status line, drain."""

    def __init__(self, opts, hosts, cluster, workload, recorder, say, run_dir: Path):
        from jepsen.metrics import FILE, Scraper
        from jepsen.nemesis import make_nemesis, options_for, schedule

        self.opts, self.hosts, self.cluster = opts, hosts, cluster
        self.workload, self.rec, self.say = workload, recorder, say
        self.bootstrap = cluster.bootstrap_servers
        faults = list(opts.nemesis)  # check_supported refused any the hosts cannot do
        self.faults = faults
        options = options_for(hosts, **{"interval_s": opts.nemesis_interval_s,
                                        "recovery_s": opts.recovery_s,
                                        "min_hold_s": fence_time_s(opts.cluster_overrides()),
                                        **opts.schedule})
        if "packet" in faults and "packet" not in hosts.capabilities:
            say(f"the {hosts.kind} backend drops packets at random but cannot delay, duplicate "
                "or reorder them: packet faults are loss only (--hosts netns has netem)")
        want = options.min_hold_s or options.interval_s
        hold = min(want, 2 * options.interval_s, opts.time_limit_s / max(1, len(faults)))
        if faults and hold < want:
            say(f"each fault is held {hold:.1f} s at first, less than the {want:g} s a "
                f"cut-off leader needs to be replaced (raise --time-limit or --interval)")
        self.steps = schedule(opts.seed, faults, opts.time_limit_s, options)
        oracle = make_oracle(self.bootstrap, workload.topics())
        self.nemesis = make_nemesis(hosts, faults, seed=opts.seed, oracle=oracle)
        self.gen = workload.generator(opts.seed)
        self.next_process = opts.concurrency
        self.ops_per_s = None
        urls = {n.node_id: n.metrics_url for n in cluster.nodes.values() if n.metrics_url}
        self.scraper = (Scraper(urls, run_dir / FILE, opts.metrics_interval_s)
                        if urls and opts.metrics_interval_s > 0 else None)

    def fresh_process(self) -> int:
        p = self.next_process
        self.next_process += 1
        return p

    async def worker(self, slot: int, end: float, limiter) -> None:
        import trio

        rng = random.Random(f"{self.opts.seed}:worker:{slot}")
        interval = self.opts.concurrency / max(self.opts.rate, 0.001)
        process, client = slot, None
        await trio.sleep(rng.uniform(0, interval))
        while trio.current_time() < end:
            if client is None:
                try:
                    client = await trio.to_thread.run_sync(
                        self.workload.open_client, self.bootstrap, process, limiter=limiter)
                except Exception as exc:  # noqa: BLE001
                    log.warning("process %s: cannot open a client: %s", process, exc)
                    await trio.sleep(0.5)
                    continue
            f, value = self.gen.next(process)
            self.rec.add(process, INVOKE, f, value)
            t, v, err, abandoned = await invoke_bounded(self.workload, client, f, value,
                                                        self.opts.client_timeout_s, limiter)
            self.rec.add(process, t, f, v, err)
            if t == INFO:
                old = client
                client = None
                self.gen.retire(process)
                process = self.fresh_process()
                if not abandoned:  # else its thread is still inside it
                    trio.lowlevel.spawn_system_task(_close_async, old)
            await trio.sleep(rng.uniform(0, 2 * interval))
        if client is not None:
            await trio.to_thread.run_sync(_close_quietly, client, limiter=limiter)

    async def status(self, t0: float, end: float) -> None:
        import trio

        tty = sys.stderr.isatty()
        last_print = 0.0
        while True:
            await trio.sleep(1.0)
            now = trio.current_time()
            c = self.rec.counts
            done = sum(c.values())
            line = (f"t={now - t0:6.1f}s ops={done} ok={c['ok']} fail={c['fail']} "
                    f"info={c['info']} rate={done / max(now - t0, 1e-9):.0f}/s "
                    f"nemesis: {self.rec.nemesis_state or '-'}")
            if not self.opts.progress:
                continue
            if tty:
                print("\r" + line[:150].ljust(150), end="", file=sys.stderr, flush=True)
            elif now - last_print >= 5:
                print(f"[jepsen] {line}", file=sys.stderr, flush=True)
                last_print = now

    async def main(self) -> dict[str, Any]:
        import trio

        from jepsen.nemesis import run_schedule

        limiter = trio.CapacityLimiter(self.opts.concurrency + 8)
        await trio.to_thread.run_sync(self.nemesis.setup)
        t0 = trio.current_time()
        end = t0 + self.opts.time_limit_s
        try:
            async with trio.open_nursery() as outer:
                outer.start_soon(self.status, t0, end)
                if self.scraper is not None:
                    outer.start_soon(self.scraper.run)
                async with trio.open_nursery() as n:
                    n.start_soon(run_schedule, self.nemesis, self.steps, self.rec.nemesis)
                    for slot in range(self.opts.concurrency):
                        n.start_soon(self.worker, slot, end, limiter)
                elapsed = trio.current_time() - t0
                client_ops = sum(self.rec.counts.values())
                self.ops_per_s = round(client_ops / max(self.opts.time_limit_s, 1e-9), 1)
                if sys.stderr.isatty() and self.opts.progress:
                    print(file=sys.stderr)
                self.say(f"workload and nemesis done after {elapsed:.1f}s: {client_ops} ops "
                         f"({self.ops_per_s}/s) {self.rec.counts}")
                drained = None
                if self.workload.name in ("queue", "txn"):
                    deadline = time.monotonic() + self.opts.drain_timeout_s
                    drained = await _drain(self, deadline)
                    self.say(f"drain: complete={drained['complete']} "
                             f"targets={drained['targets']} reached={drained['reached']}")
                outer.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self.nemesis.teardown)
        return drained


async def _drain(phase: _Phase, deadline: float):
    if phase.workload.name == "txn":
        from jepsen.workloads.txn import drain
    else:
        from jepsen.workloads.queue import drain

    def record(process, type_, f, value, error=None):
        phase.rec.add(process, type_, f, value, error)

    return await drain(phase.workload, phase.bootstrap, lambda: phase.rec.ops, record,
                       phase.fresh_process, deadline, phase.say)


def _close_quietly(client) -> None:
    try:
        client.close()
    except Exception:  # noqa: BLE001
        pass


async def _close_async(client) -> None:
    import trio

    await trio.to_thread.run_sync(_close_quietly, client)


__all__ = ["ENGINES", "FAST_OVERRIDES", "Recorder", "Refused", "RunError", "check_supported",
           "fence_time_s", "refuse_unsupported", "RunResult", "TestOptions",
           "make_oracle", "run_test", "wait_ready"]

