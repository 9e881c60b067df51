"""kraft beside Apache Kafka: every row run against both, one after the other, in one run,
with the same clients; the table's main column is kraft / Kafka.

Apache Kafka is the release ``bench/kafka/pom.xml`` pins, started by
:class:`kraft.apache_kafka.ApacheKafkaCluster` with the same layout and settings as kraft's
:class:`~kraft.local_cluster.LocalCluster` (combined broker+controller nodes on loopback,
``fast_overrides``: shorter election / heartbeat timeouts only; data on the same disk).

For each cluster size (1 node; 3 nodes with RF 3) and each system in turn (Kafka first, then
kraft, each stopped before the other starts):

* start-up time: from starting the node processes to the first acknowledged record
  (acks=all) in a topic created after the cluster answered Metadata;
* resident memory (RSS of every node process and its children) idle after start-up, and the
  highest seen while the producers ran;
* produce, 100-byte records, 6 partitions, through librdkafka (``kraftctl perf produce``):
  acks=1 and acks=all, with librdkafka's defaults and with Kreps' 2014 settings
  (batch.size 8196, linger.ms 5, no compression);
* consume (``kraftctl perf consume``) of what the acks=1 producer wrote;
* the seed paper's batch-1 producer (200-byte records, one record per request, acks=1);
* Kafka's own ``kafka-producer-perf-test`` (acks=1) and ``kafka-consumer-perf-test``;
* produce (acks=1 and acks=all) with kcat, librdkafka from C with its defaults, and consume
  with it (its local queue large enough for the run) (``bench/kcat_load.py``): a load
  generator that leaves the broker most of the machine;
* every topic the kcat producers wrote read back by a fetch loop that counts records from the
  batch headers (``bench/fetch_loop.py``): the broker's consume rate without a client's
  per-record work, and each consume rate over the kcat acks=1 producer's in the same cluster;
* the nodes' CPU per record over those kcat rows (user + system, every thread and child
  process of every node): what each system spends per record whoever bounds the rate, and
  how much of it is the kernel's (page-cache writes, socket copies);
* end-to-end latency p50 / p99 (acks=all: produce one record, wait until the consumer has it);
* topic creation rate (one topic at a time, waited for).

Results go to ``--out`` (default ``bench/results/kafka/``): ``results.json`` (every raw
figure), ``results.md`` (the table) and ``results.png`` (kraft / Kafka per row).

    python bench/kafka_bench.py --quick          # small counts: a smoke run (a few minutes)
    python bench/kafka_bench.py                  # the full run, on a quiet machine
    python bench/kafka_bench.py --nodes 1        # one cluster size only
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import tempfile
import threading
import time
from pathlib import Path

import fetch_loop
import kcat_load
from paper_bench import (ROOT, create_topic, disk_bandwidth, end_to_end_latency, log, loadavg, loopback_bandwidth,
                         machine_info, page_cache_blocks, perf, topic_creation_rate)

KREPS_2014 = {"batch.size": 8196, "linger.ms": 5, "compression.type": "none"}
PAPER_BATCH_1 = {"acks": "1", "batch.num.messages": 1, "linger.ms": 0, "compression.type": "none"}

HIGHER, LOWER = "higher", "lower"  # which way is better, per row


# ----------------------------------------------------------------------------- memory


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(c) for c in text.split()]


def _tree(pids: list[int]):
    """These processes and all their descendants, each once."""
    seen, todo = set(), list(pids)
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.add(pid)
            yield pid
            todo += _children(pid)


def tree_rss_mb(pids: list[int]) -> float:
    """Resident memory of these processes and all their descendants, MB."""
    total = 0
    for pid in _tree(pids):
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
                    break
        except OSError:
            continue
    return total / 1024


def tree_cpu_s(pids: list[int]) -> tuple[float, float]:
    """CPU seconds (user, system) these processes and their live descendants have used, every
    thread included (a JVM's GC and network threads as much as a Python node's one)."""
    tick = os.sysconf("SC_CLK_TCK")
    user = system = 0.0
    for pid in _tree(pids):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        user += int(fields[11]) / tick
        system += int(fields[12]) / tick
    return user, system


class NodesCpu:
    """The nodes' CPU over a ``with`` block: ``per_record_us(records)`` is (user, system)
    microseconds of the nodes' CPU per record moved.  With the client's rate it tells a row
    bound by the brokers from one bound by the client, and how much of the brokers' time
    went to the kernel (page-cache writes, socket copies)."""

    def __init__(self, pids: list[int]):
        self.pids = pids

    def __enter__(self):
        self.start = tree_cpu_s(self.pids)
        return self

    def __exit__(self, *exc):
        end = tree_cpu_s(self.pids)
        self.user_s, self.system_s = end[0] - self.start[0], end[1] - self.start[1]

    def per_record_us(self, records: int) -> dict:
        return {"user_s": round(self.user_s, 2), "system_s": round(self.system_s, 2), "records": records,
                "us_per_record": (self.user_s + self.system_s) / records * 1e6 if records else None,
                "system_us_per_record": self.system_s / records * 1e6 if records else None}


class PeakRss:
    """The highest tree RSS sampled every 0.2 s while the ``with`` block runs."""

    def __init__(self, pids: list[int]):
        self.pids, self.peak = pids, 0.0
        self._stop = threading.Event()

    def _sample(self):
        while not self._stop.wait(0.2):
            self.peak = max(self.peak, tree_rss_mb(self.pids))

    def __enter__(self):
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


# ----------------------------------------------------------------------------- the two systems


class System:
    """One cluster of one system: start (timed), its node pids, stop."""

    name = "?"

    def __init__(self, base: Path, nodes: int):
        self.base, self.nodes = base, nodes

    def pids(self) -> list[int]:
        raise NotImplementedError


class ApacheKafka(System):
    name = "Apache Kafka"

    def start(self) -> float:
        """Format, then start; the seconds from starting the processes to Metadata answering."""
        from cluster_helpers import fast_overrides

        from kraft.apache_kafka import ApacheKafkaCluster

        self.cluster = ApacheKafkaCluster(self.base, nodes=self.nodes, overrides=fast_overrides())
        self.cluster.format()
        t0 = time.monotonic()
        self.cluster.start()
        self.started_at = t0
        try:
            self.cluster.wait_ready(timeout_s=300)
        except BaseException:
            self.cluster.stop(timeout_s=10)
            raise
        return time.monotonic() - t0

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap_servers

    def pids(self) -> list[int]:
        return [p.pid for p in self.cluster.processes.values()]

    def stop(self) -> None:
        self.cluster.stop()


class Kraft(System):
    name = "kraft"

    def start(self) -> float:
        from cluster_helpers import fast_overrides, wait_cluster_ready

        from kraft.local_cluster import LocalCluster

        self.cluster = LocalCluster(self.base, controllers=self.nodes, brokers=0, overrides=fast_overrides())
        self.cluster.format()
        t0 = time.monotonic()
        self.cluster.start_all()
        self.started_at = t0
        try:
            wait_cluster_ready(self.cluster)
        except BaseException:
            self.cluster.stop_all(timeout_s=10)
            raise
        return time.monotonic() - t0

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap_servers

    def pids(self) -> list[int]:
        return [n.process.pid for n in self.cluster.nodes.values() if n.running]

    def stop(self) -> None:
        self.cluster.stop_all()


def first_produce(bootstrap: str, topic: str, rf: int, timeout_s: float = 60.0) -> float:
    """Create ``topic`` and produce one record (acks=all) until it is acknowledged; returns
    the time it was (monotonic)."""
    from confluent_kafka import Producer

    create_topic(bootstrap, topic, 1, rf)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "message.timeout.ms": int(timeout_s * 1000)})
    acked = []
    producer.produce(topic, b"first", on_delivery=lambda err, _m: acked.append(err))
    producer.flush(timeout_s)
    if not acked or acked[0] is not None:
        raise RuntimeError(f"the first record to {topic} was not acknowledged: {acked}")
    return time.monotonic()


# ----------------------------------------------------------------------------- Kafka's own perf tools

_PRODUCER_SUMMARY = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th")


def java_producer_perf(bootstrap: str, topic: str, count: int, timeout_s: float, acks: str = "1") -> dict:
    from kraft.apache_kafka import run_tool

    r = run_tool("kafka-producer-perf-test", [
        "--topic", topic, "--num-records", str(count), "--record-size", "100", "--throughput", "-1",
        "--producer-props", f"bootstrap.servers={bootstrap}", f"acks={acks}"], timeout_s=timeout_s + 120)
    found = _PRODUCER_SUMMARY.findall(r.stdout)
    if r.returncode != 0 or not found:
        return {"error": f"kafka-producer-perf-test exit {r.returncode}: {(r.stdout + r.stderr).strip()[-300:]}"}
    sent, rate, mb, avg, mx, p50, p95, p99 = found[-1]
    return {"records": int(sent), "records_per_s": float(rate), "mb_per_s": float(mb), "avg_ms": float(avg),
            "max_ms": float(mx), "p50_ms": float(p50), "p95_ms": float(p95), "p99_ms": float(p99)}


def java_consumer_perf(bootstrap: str, topic: str, count: int, timeout_s: float) -> dict:
    """kafka-consumer-perf-test: its rate over the whole run and over fetching alone (the
    group join left out, which waits group.initial.rebalance.delay.ms on both systems)."""
    from kraft.apache_kafka import run_tool

    r = run_tool("kafka-consumer-perf-test", [
        "--bootstrap-server", bootstrap, "--topic", topic, "--messages", str(count),
        "--timeout", str(int(timeout_s * 1000)), "--group", f"perf-{time.time_ns()}"],
        timeout_s=timeout_s + 120)
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    try:
        header = [h.strip() for h in next(ln for ln in lines if ln.startswith("start.time")).split(",")]
        values = [v.strip() for v in lines[lines.index(next(ln for ln in lines if ln.startswith("start.time"))) + 1]
                  .split(",")]
        row = dict(zip(header, values))
        return {"records": int(float(row["data.consumed.in.nMsg"])), "records_per_s": float(row["nMsg.sec"]),
                "mb_per_s": float(row["MB.sec"]), "fetch_records_per_s": float(row["fetch.nMsg.sec"]),
                "rebalance_ms": float(row["rebalance.time.ms"])}
    except (StopIteration, KeyError, ValueError, IndexError):
        return {"error": f"kafka-consumer-perf-test exit {r.returncode}: {(r.stdout + r.stderr).strip()[-300:]}"}


# ----------------------------------------------------------------------------- the run


class KafkaBench:
    def __init__(self, args):
        self.args = args
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.base = Path(args.work_dir or tempfile.mkdtemp(prefix="kraft-kafka-bench-"))
        self.raw: dict = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                          "machine": machine_info(), "params": vars(args), "loadavg": {}, "results": {}}
        # (cluster size, row name) -> {"unit", "better", system -> value, system -> note}
        self.rows: dict[tuple[int, str], dict] = {}

    def n(self, count: int) -> int:
        return max(200, int(count * self.args.scale))

    def t(self, seconds: float) -> float:
        return max(5.0, seconds * min(1.0, max(self.args.scale, 0.25)))

    def kcat_records(self) -> Path:
        """The file kcat produces from: 100-byte records, written once per run."""
        return kcat_load.records_file(self.base / "records-100.txt", self.n(2_000_000), 100)

    def put(self, nodes: int, row: str, system: str, value, unit: str, better: str, note: str = "") -> None:
        entry = self.rows.setdefault((nodes, row), {"nodes": nodes, "row": row, "unit": unit, "better": better})
        entry[system] = value
        if note:
            entry[f"{system} note"] = note

    # -- one system, one cluster size --------------------------------------------------

    def measure(self, system: System) -> None:
        nodes, name = system.nodes, system.name
        key = f"{name}, {nodes} node{'s' if nodes > 1 else ''}"
        # The last phase's dirty pages would otherwise be written back while this one runs,
        # charged to whichever system is next.
        t0 = time.monotonic()
        os.sync()
        self.raw.setdefault("sync_s", {})[key] = round(time.monotonic() - t0, 2)
        log(f"{key}: starting (sync before it took {self.raw['sync_s'][key]:.2f} s)")
        self.raw["loadavg"][key] = loadavg()
        res = self.raw["results"][key] = {}
        ready_s = system.start()
        try:
            bs, rf = system.bootstrap, nodes
            first = first_produce(bs, "first", rf)
            res["startup"] = {"ready_s": ready_s, "first_produce_s": first - system.started_at}
            self.put(nodes, "start-up to first acknowledged produce", name, first - system.started_at, "s", LOWER,
                     f"answering Metadata after {ready_s:.1f} s")
            time.sleep(2)  # settle: the idle figure is not the start-up peak
            res["rss_idle_mb"] = tree_rss_mb(system.pids())
            self.put(nodes, "resident memory, idle", name, res["rss_idle_mb"], "MB", LOWER)
            with PeakRss(system.pids()) as peak:
                self.producers(system, res)
            res["rss_load_mb"] = peak.peak
            self.put(nodes, "resident memory, under produce load (peak)", name, peak.peak, "MB", LOWER)
            self.consumers(system, res)
            self.latency_and_topics(system, res)
        finally:
            log(f"{key}: stopping")
            system.stop()

    def producers(self, system: System, res: dict) -> None:
        nodes, name, bs = system.nodes, system.name, system.bootstrap
        for settings, extra in (("librdkafka defaults", {}), ("2014 settings", KREPS_2014)):
            for acks in ("1", "all"):
                topic = f"p-{'def' if not extra else 'k14'}-{acks}"
                create_topic(bs, topic, 6, nodes)
                row = f"produce acks={acks}, {settings} (librdkafka)"
                log(f"  {name}: {row}")
                r = perf("produce", bs, topic, self.n(2_000_000), self.t(30), size=100,
                         props={**extra, "acks": acks})
                res[row] = r
                self._rate_row(nodes, row, name, r)
        for acks in ("1", "all"):
            topics = [f"c-{acks}-{i}" for i in range(self.args.kcat_repeats)]
            for topic in topics:
                create_topic(bs, topic, 6, nodes)
            row = f"produce acks={acks}, librdkafka defaults (kcat, C)"
            log(f"  {name}: {row}")
            with NodesCpu(system.pids()) as cpu:
                r = kcat_load.produce(bs, topics, self.kcat_records(), self.n(2_000_000), acks, self.t(120))
            res[row] = r
            self._rate_row(nodes, row, name, r)
            self._cpu_row(nodes, f"nodes' CPU per record, produce acks={acks} (kcat)", name, r, cpu)
        if nodes == 1:
            create_topic(bs, "paper-b1", 1, 1)
            row = "paper batch-1 producer, 200 B, acks=1 (librdkafka)"
            log(f"  {name}: {row}")
            r = perf("produce", bs, "paper-b1", self.n(40_000), self.t(25), size=200, props=PAPER_BATCH_1)
            res[row] = r
            self._rate_row(nodes, row, name, r)
        create_topic(bs, "java-perf", 6, nodes)
        row = "kafka-producer-perf-test acks=1"
        log(f"  {name}: {row}")
        # 2M records: kafka-consumer-perf-test reads them back after, and at 1M its fetch
        # window was about a second on either system, too short to compare (kraft measured
        # 0.64x and then 1.1-1.3x Kafka's on three nodes within one afternoon).
        r = java_producer_perf(bs, "java-perf", self.n(2_000_000), self.t(60))
        res[row] = r
        self._rate_row(nodes, row, name, r)

    def consumers(self, system: System, res: dict) -> None:
        nodes, name, bs = system.nodes, system.name, system.bootstrap
        produced = res.get("produce acks=1, librdkafka defaults (librdkafka)", {}).get("records_acked", 0)
        row = "consume (librdkafka)"
        log(f"  {name}: {row}")
        r = perf("consume", bs, "p-def-1", max(1, produced), self.t(30))
        res[row] = r
        self._rate_row(nodes, row, name, r)
        if "error" not in res.get("produce acks=1, librdkafka defaults (kcat, C)", {"error": ""}):
            row = "consume (kcat, C, its queue holding the run)"
            log(f"  {name}: {row}")
            with NodesCpu(system.pids()) as cpu:
                r = kcat_load.consume(bs, "c-1-0", self.n(2_000_000), self.args.kcat_repeats, self.t(120))
            res[row] = r
            self._rate_row(nodes, row, name, r)
            self._cpu_row(nodes, "nodes' CPU per record, consume (kcat)", name, r, cpu)
            self._over_produce(nodes, "consume over produce acks=1, same cluster (kcat both)", name, r, res)
            self.fetch_loop(system, res)
        java_produced = res.get("kafka-producer-perf-test acks=1", {}).get("records", 0)
        row = "kafka-consumer-perf-test (fetch rate, group join left out)"
        log(f"  {name}: {row}")
        r = java_consumer_perf(bs, "java-perf", max(1, java_produced), self.t(60))
        res[row] = r
        if "error" in r:
            self.put(nodes, row, name, None, "records/s", HIGHER, r["error"][:150])
        else:
            self.put(nodes, row, name, r["fetch_records_per_s"], "records/s", HIGHER,
                     f"{r['records']} records; whole run {r['records_per_s']:,.0f}/s with a "
                     f"{r['rebalance_ms']:.0f} ms group join")

    def fetch_loop(self, system: System, res: dict) -> None:
        """Every topic the kcat producers wrote, read back by ``bench/fetch_loop.py``: the
        broker's consume rate with a client that does not decode records (kcat's own
        decoding is what bounds its row on this machine)."""
        nodes, name, bs = system.nodes, system.name, system.bootstrap
        topics = [f"c-{acks}-{i}" for acks in ("1", "all") for i in range(self.args.kcat_repeats)]
        if any("error" in res.get(f"produce acks={acks}, librdkafka defaults (kcat, C)", {"error": ""})
               for acks in ("1", "all")):
            return
        row = "consume, batches only (fetch loop, records counted from batch headers)"
        log(f"  {name}: {row}")
        with NodesCpu(system.pids()) as cpu:
            r = fetch_loop.consume(bs, topics, len(topics) * self.n(2_000_000), self.args.kcat_repeats,
                                   self.t(120))
        res[row] = r
        self._rate_row(nodes, row, name, r)
        self._cpu_row(nodes, "nodes' CPU per record, consume (fetch loop)", name, r, cpu)
        self._over_produce(nodes, "consume over produce acks=1, same cluster (fetch loop over kcat)", name, r,
                          res)

    def _over_produce(self, nodes, row, name, consumed: dict, res: dict) -> None:
        """The issue's "consume >= 1.5x produce in the same run": a consume row's rate over
        the kcat acks=1 producer's, both against this cluster."""
        produced = res.get("produce acks=1, librdkafka defaults (kcat, C)", {})
        if "error" in consumed or not produced.get("records_per_s"):
            return
        self.put(nodes, row, name, consumed["records_per_s"] / produced["records_per_s"],
                 "x", HIGHER, f"{consumed['records_per_s']:,.0f} / {produced['records_per_s']:,.0f} records/s")

    def latency_and_topics(self, system: System, res: dict) -> None:
        nodes, name, bs = system.nodes, system.name, system.bootstrap
        log(f"  {name}: end-to-end latency")
        create_topic(bs, "e2e", 1, nodes)
        e2e = end_to_end_latency(bs, "e2e", self.n(2000), self.t(20))
        res["end_to_end"] = e2e
        note = f"{e2e['count']} round trips, acks=all"
        self.put(nodes, "end-to-end latency p50", name, e2e["p50_ms"], "ms", LOWER, note)
        self.put(nodes, "end-to-end latency p99", name, e2e["p99_ms"], "ms", LOWER, note)
        log(f"  {name}: topic creation")
        tc = topic_creation_rate(bs, self.n(100), self.t(30), rf=nodes)
        res["topic_creation"] = tc
        self.put(nodes, f"topic creation (1 partition, RF {nodes}, one at a time)", name, tc["per_s"], "topics/s",
                 HIGHER, f"p50 {tc['p50_ms']:.0f} ms, {tc['created']} topics, {tc['errors']} errors")

    def _rate_row(self, nodes, row, name, r) -> None:
        if "error" in r:
            self.put(nodes, row, name, None, "records/s", HIGHER, r["error"][:150])
            return
        count = r.get("records_acked", r.get("records"))
        note = f"{count:,} records"
        if r.get("p99_ms") is not None and "produce" in row:
            note += f", p99 {r['p99_ms']:.0f} ms"
        if r.get("timed_out"):
            note += ", time cap hit"
        if r.get("errors"):
            note += f", {r['errors']} errors"
        self.put(nodes, row, name, r["records_per_s"], "records/s", HIGHER, note)

    def _cpu_row(self, nodes, row, name, r, cpu: NodesCpu) -> None:
        """The nodes' CPU per record over every run of a kcat row (all ``repeats`` runs)."""
        if "error" in r:
            return
        r["nodes_cpu"] = used = cpu.per_record_us(len(r["runs"]) * r["records"])
        self.put(nodes, row, name, used["us_per_record"], "us", LOWER,
                 f"system {used['system_us_per_record']:.2f} us; {used['user_s'] + used['system_s']:.1f} s "
                 f"of the nodes' CPU for {used['records']:,} records")

    # -- the whole run ---------------------------------------------------------------

    def run(self) -> None:
        from kraft.apache_kafka import ensure_libs

        ensure_libs()
        started = time.monotonic()
        self.machine_limits()
        for nodes in self.args.nodes:
            for cls in (ApacheKafka, Kraft):
                system = cls(self.base / f"{cls.__name__.lower()}{nodes}", nodes)
                try:
                    self.measure(system)
                except Exception as exc:  # noqa: BLE001 - one system failing must not lose the rest
                    log(f"{cls.name}, {nodes} nodes failed: {exc!r}")
                    self.raw.setdefault("errors", {})[f"{cls.name}, {nodes}"] = repr(exc)
        self.raw["total_seconds"] = round(time.monotonic() - started, 1)
        self.finish()
        if not self.args.keep:
            shutil.rmtree(self.base, ignore_errors=True)

    def machine_limits(self) -> None:
        """What the machine itself can move, measured in this run before either system starts:
        the ceiling every row is under (the data directories are on this disk)."""
        log("machine limits: loopback TCP, disk, page cache")
        self.raw["loadavg"]["machine limits"] = loadavg()
        self.raw["machine_limits"] = {
            "loopback": loopback_bandwidth(seconds=3.0),
            "disk": disk_bandwidth(self.base / "disk", total_bytes=256 << 20),
            "page_cache": page_cache_blocks(self.base / "disk"),
        }

    def finish(self) -> None:
        rows = sorted(self.rows.values(), key=lambda r: (r["nodes"], _row_order(r["row"])))
        with_ratios(rows)
        self.raw["rows"] = rows
        self.raw["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.raw["loadavg"]["end"] = loadavg()
        text = format_table(rows) + "\n\n" + limits_table(self.raw) + footer(self.raw)
        print(text)
        (self.out / "results.md").write_text(text + "\n")
        (self.out / "results.json").write_text(json.dumps(self.raw, indent=2, default=str) + "\n")
        chart(rows, self.out / "results.png", self.raw)
        log(f"wrote {self.out / 'results.md'}, {self.out / 'results.json'}, {self.out / 'results.png'}")


_ORDER = ("produce acks=1, librdkafka", "produce acks=all, librdkafka", "produce acks=1, 2014",
          "produce acks=all, 2014", "paper batch-1", "kafka-producer-perf-test", "consume (", "consume, batches",
          "consume over produce",
          "kafka-consumer-perf-test", "end-to-end latency p50", "end-to-end latency p99", "topic creation",
          "start-up", "resident memory, idle", "resident memory, under", "nodes' CPU per record, produce acks=1",
          "nodes' CPU per record, produce acks=all", "nodes' CPU per record, consume (kcat",
          "nodes' CPU per record, consume (fetch")


def with_ratios(rows: list[dict]) -> list[dict]:
    """Each row's "kraft / Kafka".  A row in "x" is each system against itself (consume over
    its own produce): a quotient of two such quotients says nothing, so it gets none."""
    for r in rows:
        k, o = r.get("Apache Kafka"), r.get("kraft")
        r["kraft / Kafka"] = (o / k) if (k and o is not None and r["unit"] != "x") else None
    return rows


def _row_order(row: str) -> int:
    return next((i for i, prefix in enumerate(_ORDER) if row.startswith(prefix)), len(_ORDER))


def _fmt(v, unit: str) -> str:
    if v is None:
        return "-"
    if unit == "us":
        return f"{v:,.2f} us"
    if unit == "x":
        return f"{v:.2f}x"
    if unit in ("s", "ms"):
        return f"{v:,.2f} {unit}" if v < 100 else f"{v:,.0f} {unit}"
    if unit == "MB":
        return f"{v:,.0f} MB"
    return f"{v:,.0f}" if v >= 100 else f"{v:,.1f}"


def format_table(rows: list[dict]) -> str:
    head = ["nodes", "test", "kraft / Kafka", "better", "Apache Kafka", "kraft", "unit", "notes"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ratio = r.get("kraft / Kafka")
        notes = "; ".join(f"{s}: {r[f'{s} note']}" for s in ("Apache Kafka", "kraft") if r.get(f"{s} note"))
        lines.append("| " + " | ".join([
            str(r["nodes"]), r["row"], "-" if ratio is None else f"**{ratio:.2f}**", r["better"],
            _fmt(r.get("Apache Kafka"), r["unit"]), _fmt(r.get("kraft"), r["unit"]), r["unit"], notes]) + " |")
    return "\n".join(lines)


def limits_table(raw: dict) -> str:
    """The machine's limits from the same run (empty for a run from before they were kept)."""
    limits = raw.get("machine_limits")
    if not limits:
        return ""
    lo, disk = limits["loopback"], limits["disk"]
    small = disk["fsync_4k_appends"]
    lines = ["| machine limit, same run | MB/s | records/s of 100 B |", "|---|---|---|"]
    for name, mb in (("loopback TCP, one stream (1 MiB writes)", lo["mb_per_s"]),
                     ("disk, sequential write (page cache)", disk["no_fsync"]["mb_per_s"]),
                     ("disk, sequential write + fsync", disk["fsync"]["mb_per_s"])):
        lines.append(f"| {name} | {mb:,.0f} | {mb * 1e6 / 100:,.0f} |")
    lines.append(f"| disk, 4 KiB append + fsync ({small['avg_ms']:.2f} ms each) | "
                 f"{small['per_s'] * 4096 / 1e6:,.1f} | - |")
    cache = limits.get("page_cache")
    if cache:
        slow = cache["mb_per_s"].index(cache["slowest_mb_per_s"])
        lines.append(f"| page cache, {len(cache['mb_per_s'])} x {cache['block_mb']} MiB written in a row: the "
                     f"slowest block ({cache['system_ms_per_mb'][slow]:.2f} ms of kernel CPU per MB; fastest "
                     f"{cache['fastest_mb_per_s']:,.0f} MB/s) | {cache['slowest_mb_per_s']:,.0f} | "
                     f"{cache['slowest_mb_per_s'] * 1e6 / 100:,.0f} |")
    return "\n".join(lines) + "\n\n"


def footer(raw: dict) -> str:
    m = raw.get("machine", {})
    loads = ", ".join(f"{k} {v[0]}" for k, v in raw.get("loadavg", {}).items() if v)
    return (f"kraft / Kafka: kraft's figure over Apache Kafka's in the same row (for rates higher is "
            f"better, for times and memory lower).  Apache Kafka {kafka_version()} (bench/kafka/pom.xml), "
            f"JVM heap -Xmx512m; both with the same layout and settings (kraft.apache_kafka), "
            f"the same clients (librdkafka through `kraftctl perf`, Kafka's own perf tools), one "
            f"after the other.  Machine: {m.get('cpus')} CPUs ({m.get('cpu')}), Python {m.get('python')}; "
            f"1-min load average at each phase: {loads}; each phase starts after a sync (the last one's dirty "
            f"pages written back).  Run {raw.get('started')} to "
            f"{raw.get('finished')}, {raw.get('total_seconds')} s"
            f"{' (--quick: small counts, not figures to quote)' if raw['params'].get('quick') else ''}.")


def kafka_version() -> str:
    from kraft.apache_kafka import kafka_version as version

    return version()


def chart(rows: list[dict], path: Path, raw: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plotted = [r for r in rows if r.get("kraft / Kafka")]
    if not plotted:
        return
    labels = [f"{r['nodes']}n: {r['row']}" for r in plotted]
    values = [r["kraft / Kafka"] for r in plotted]
    # green where kraft does better than Kafka, whichever way "better" points
    colors = ["#2ca02c" if (v >= 1) == (r["better"] == HIGHER) else "#d62728" for v, r in zip(values, plotted)]
    fig, ax = plt.subplots(figsize=(11, 0.36 * len(labels) + 1.8))
    y = list(range(len(labels)))
    ax.barh(y, values, color=colors)
    ax.axvline(1.0, color="#333333", linewidth=1)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("kraft / Apache Kafka, log scale (green: kraft better; rates: higher is better, "
                  "times and memory: lower)")
    for yi, v in zip(y, values):
        ax.text(v, yi, f" {v:.2f}", va="center", fontsize=7)
    la = raw.get("machine", {}).get("loadavg_at_start") or []
    ax.set_title(f"kraft vs Apache Kafka {kafka_version()}, same machine, same clients, one after the other\n"
                 f"{raw['machine']['cpus']} CPUs shared, 1-min load average at start {la[0] if la else '?'}; "
                 f"{raw.get('started', '')}{' (--quick)' if raw['params'].get('quick') else ''}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "kafka"))
    ap.add_argument("--work-dir", default=None, help="data directories (default: a new temporary one)")
    ap.add_argument("--nodes", type=int, nargs="+", default=[1, 3], choices=(1, 3),
                    help="cluster sizes to run (default: 1 3)")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiply every record count (and, down to a quarter, every time cap)")
    ap.add_argument("--quick", action="store_true", help="small record counts (--scale 0.005): a smoke run")
    ap.add_argument("--keep", action="store_true", help="keep the data directories")
    ap.add_argument("--kcat-repeats", type=int, default=3,
                    help="runs of each kcat row (the row is their median)")
    ap.add_argument("--replot", action="store_true", help="only redraw results.md / .png from results.json")
    args = ap.parse_args(argv)
    if args.quick:
        args.scale = min(args.scale, 0.005)
    if args.replot:
        raw = json.loads((Path(args.out) / "results.json").read_text())
        with_ratios(raw["rows"])
        (Path(args.out) / "results.md").write_text(format_table(raw["rows"]) + "\n\n" + limits_table(raw) + footer(raw)
                                                   + "\n")
        chart(raw["rows"], Path(args.out) / "results.png", raw)
        print((Path(args.out) / "results.md").read_text())
        return
    KafkaBench(args).run()


if __name__ == "__main__":
    main()
