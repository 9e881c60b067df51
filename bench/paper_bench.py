"""kraft against the seed paper's peers (RabbitMQ, ActiveMQ), side by side, in one run.

What one run does, on this machine only (loopback, temporary directories, every load
bounded in record count and in seconds, everything it starts stopped at the end):

1. the machine's limits: loopback TCP bandwidth (two processes), sequential disk write
   bandwidth without and with fsync, and small fsynced appends per second;
2. a single kraft node (combined mode): the paper's producer test (200-byte messages,
   batches of 1 and of 50, asynchronous: acks=1, nothing waits per message) and consumer
   test (one consumer draining what was produced);
3. RabbitMQ and ActiveMQ from Debian's packages (installed if missing) with pika and
   stomp.py: the same producer (batch 1: neither has a batching API, and the paper assumed
   batch 1 for both) and consumer tests; a broker that cannot be installed or started is
   reported in the table, the run goes on;
4. a 3-node kraft cluster (combined nodes, RF 3): Kreps' 2014 tests (100-byte records, 6
   partitions): producer without replication, 3x replication acks=1, 3x acks=all, one
   consumer, end-to-end latency; topic creation rate;
5. the metadata quorum alone (``bench/quorum_bench.py``: 3 voter processes, real fsync):
   committed appends/s and p99 commit latency, for the kraft engine and, when
   ``kraft/raft/pysyncobj_engine.py`` exists, the pysyncobj engine;
6. optionally a single node under cProfile during the batch-50 producer test (its top
   functions go to ``profile_produce.txt``).

The table (system, test, msgs/s, MB/s, ratio to kraft, kraft's share of the machine
limit: payload MB/s over min(loopback TCP, disk write + fsync) for producers, over loopback
TCP for consumers, and quorum commits/s over fsynced 4 KiB appends/s) is printed and
written with every raw figure to ``results.json`` and as a bar chart
``results.png`` in ``--out`` (default ``bench/results/``).

    python bench/paper_bench.py                    # the default full run (~10 min on 2 cores)
    python bench/paper_bench.py --scale 0.1 --skip-peers --no-profile   # a quick smoke run
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "tests", ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

PUBLISHED_2014 = {  # Kreps, "Benchmarking Apache Kafka: 2 Million Writes Per Second" (2014)
    "producer, no replication": 821_557,
    "producer, 3x replication, acks=1": 786_980,
    "producer, 3x replication, acks=all": 421_823,
    "consumer": 940_521,
}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def loadavg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


# ----------------------------------------------------------------------------- machine


def _sink(port_q, result_q):
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        port_q.put(srv.getsockname()[1])
        conn, _ = srv.accept()
        with conn:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            total = 0
            buf = bytearray(1 << 20)
            view = memoryview(buf)
            while True:
                n = conn.recv_into(view)
                if not n:
                    break
                total += n
            conn.sendall(total.to_bytes(8, "big"))
    result_q.put(total)


def loopback_bandwidth(seconds: float = 3.0, max_bytes: int = 8 << 30) -> dict:
    """One TCP stream over 127.0.0.1 between two processes, 1 MiB writes."""
    ctx = multiprocessing.get_context("spawn")
    port_q, result_q = ctx.Queue(), ctx.Queue()
    proc = ctx.Process(target=_sink, args=(port_q, result_q))
    proc.start()
    try:
        port = port_q.get(timeout=30)
        chunk = os.urandom(1 << 20)
        sent = 0
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
            start = time.perf_counter()
            while sent < max_bytes and time.perf_counter() - start < seconds:
                s.sendall(chunk)
                sent += len(chunk)
            s.shutdown(socket.SHUT_WR)
            received = int.from_bytes(s.recv(8), "big")
            elapsed = time.perf_counter() - start
        return {"bytes": received, "elapsed_s": elapsed, "mb_per_s": received / elapsed / 1e6}
    finally:
        proc.join(timeout=10)
        if proc.is_alive():
            proc.kill()


def disk_bandwidth(directory: Path, total_bytes: int = 256 << 20, seconds: float = 20.0) -> dict:
    """Sequential 1 MiB writes to a new file: page cache only, then with one fsync at the end;
    and 4 KiB appends each followed by fsync (what a log that fsyncs per write can do)."""
    directory.mkdir(parents=True, exist_ok=True)
    chunk = os.urandom(1 << 20)
    out = {}
    for mode in ("fsync", "no_fsync"):  # fsync first: no writeback of the other file pending
        path = directory / f"disk-{mode}.bin"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        written = 0
        start = time.perf_counter()
        try:
            while written < total_bytes and time.perf_counter() - start < seconds:
                written += os.write(fd, chunk)
            if mode == "fsync":
                os.fsync(fd)
            elapsed = time.perf_counter() - start
        finally:
            os.close(fd)
            path.unlink()
        out[mode] = {"bytes": written, "elapsed_s": elapsed, "mb_per_s": written / elapsed / 1e6}
    path = directory / "disk-fsync-small.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    small = os.urandom(4096)
    n = 0
    start = time.perf_counter()
    try:
        while n < 5000 and time.perf_counter() - start < 3.0:
            os.write(fd, small)
            os.fsync(fd)
            n += 1
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        path.unlink()
    out["fsync_4k_appends"] = {"count": n, "elapsed_s": elapsed, "per_s": n / elapsed,
                               "avg_ms": elapsed / n * 1000 if n else 0.0}
    return out


def page_cache_blocks(directory: Path, blocks: int = 8, block_bytes: int = 256 << 20) -> dict:
    """``blocks`` x ``block_bytes`` written to a new file in 1 MiB writes, no fsync, each block
    timed with the kernel CPU it took.  A broker writes every record into the page cache once
    per replica; on some VMs that costs several times more kernel CPU once writeback runs
    (measured here: 3-4 GB/s, then 200-300 MB/s, the difference all system time), and the
    slowest block is the ceiling a replicated produce row meets in that phase."""
    directory.mkdir(parents=True, exist_ok=True)
    chunk = os.urandom(1 << 20)
    path = directory / "page-cache.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    rates, system = [], []
    try:
        for _ in range(blocks):
            sys0, t0 = os.times().system, time.perf_counter()
            for _ in range(block_bytes >> 20):
                os.write(fd, chunk)
            elapsed = time.perf_counter() - t0
            rates.append(block_bytes / elapsed / 1e6)
            system.append((os.times().system - sys0) / (block_bytes / 1e6) * 1000)  # ms per MB
    finally:
        os.close(fd)
        path.unlink()
    return {"block_mb": block_bytes >> 20, "mb_per_s": rates, "system_ms_per_mb": system,
            "slowest_mb_per_s": min(rates), "fastest_mb_per_s": max(rates)}


# ----------------------------------------------------------------------------- kraft


def kraftctl(*args, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], check=False, capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def create_topic(bootstrap: str, topic: str, partitions: int, rf: int) -> None:
    r = kraftctl("topics", "--bootstrap-server", bootstrap, "--create", "--topic", topic,
                 "--partitions", str(partitions), "--replication-factor", str(rf), timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"creating {topic}: {r.stderr.strip()}")
    # every partition must have a leader known to the brokers before the load starts
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=5).topics.get(topic)
        if md and md.error is None and len(md.partitions) == partitions and all(
                p.leader >= 0 and len(p.isrs) == rf for p in md.partitions.values()):
            return
        time.sleep(0.2)


def perf(kind: str, bootstrap: str, topic: str, count: int, timeout_s: float, *, size: int = 100,
         props: dict | None = None) -> dict:
    args = ["perf", kind, "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(count),
            "--timeout", str(timeout_s), "--json"]
    if kind == "produce":
        args += ["--record-size", str(size), "--throughput", "-1"]
    if props:
        args += [f"--{'producer' if kind == 'produce' else 'consumer'}-props",
                 *[f"{k}={v}" for k, v in props.items()]]
    r = kraftctl(*args, timeout=timeout_s + 120)
    lines = r.stdout.strip().splitlines()
    if not lines:
        return {"error": f"kraftctl perf {kind} failed: {r.stderr.strip()[-300:]}"}
    out = json.loads(lines[-1])
    out["command"] = "kraftctl " + " ".join(args[:-1])
    return out


def end_to_end_latency(bootstrap: str, topic: str, count: int, timeout_s: float) -> dict:
    """Kafka's EndToEndLatency: send one record (acks=all), wait until the consumer has it."""
    from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"e2e-{time.time_ns()}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 500,
                         "fetch.error.backoff.ms": 10})
    consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
    latencies = []
    payload = b"x" * 100
    try:
        # warm up: connections and the consumer's position
        producer.produce(topic, payload, key=b"warmup", partition=0)
        producer.flush(10)
        warm_deadline = time.monotonic() + 15
        while time.monotonic() < warm_deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None and m.key() == b"warmup":
                break
        deadline = time.monotonic() + timeout_s
        for i in range(count):
            if time.monotonic() > deadline:
                break
            key = str(i).encode()
            t0 = time.perf_counter()
            producer.produce(topic, payload, key=key, partition=0)
            producer.poll(0)
            while time.monotonic() < deadline:
                m = consumer.poll(1.0)
                if m is not None and m.error() is None and m.key() == key:
                    latencies.append((time.perf_counter() - t0) * 1000)
                    break
        producer.flush(5)
    finally:
        consumer.close()
    lat = sorted(latencies)

    def pct(q):
        return lat[min(len(lat) - 1, round(q / 100 * (len(lat) - 1)))] if lat else 0.0

    return {"count": len(lat), "p50_ms": pct(50), "p99_ms": pct(99), "p999_ms": pct(99.9),
            "avg_ms": sum(lat) / len(lat) if lat else 0.0, "max_ms": lat[-1] if lat else 0.0}


def topic_creation_rate(bootstrap: str, count: int, timeout_s: float, rf: int) -> dict:
    """CreateTopics one topic (1 partition, RF ``rf``) at a time, each waited for."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    latencies = []
    errors = []
    start = time.perf_counter()
    prefix = f"create-{time.time_ns() % 10**8}-"
    for i in range(count):
        if time.perf_counter() - start > timeout_s:
            break
        t0 = time.perf_counter()
        fut = admin.create_topics([NewTopic(f"{prefix}{i}", 1, rf)], operation_timeout=30)
        try:
            next(iter(fut.values())).result(timeout=60)
            latencies.append((time.perf_counter() - t0) * 1000)
        except Exception as exc:  # noqa: BLE001
            errors.append(str(exc))
    elapsed = time.perf_counter() - start
    lat = sorted(latencies)

    def pct(q):
        return lat[min(len(lat) - 1, round(q / 100 * (len(lat) - 1)))] if lat else 0.0

    return {"created": len(lat), "errors": len(errors), "first_error": errors[0] if errors else None,
            "elapsed_s": elapsed, "per_s": len(lat) / elapsed if elapsed else 0.0,
            "p50_ms": pct(50), "p99_ms": pct(99)}


def start_kraft(base: Path, nodes: int, profile: Path | None = None):
    from cluster_helpers import fast_overrides, start_cluster

    from kraft.local_cluster import LocalCluster

    # fast_overrides only shortens election / heartbeat / session timeouts (quicker start);
    # nothing on the data path changes.  Data on the same filesystem as the machine test.
    cluster = LocalCluster(base, controllers=nodes, brokers=0, overrides=fast_overrides())
    if profile is None:
        return start_cluster(cluster)
    original = cluster.start

    def start(node_id, extra_args=()):
        return original(node_id, extra_args=(*extra_args, "--profile", str(profile)))

    cluster.start = start
    return start_cluster(cluster)


# ----------------------------------------------------------------------------- the run


class Bench:
    def __init__(self, args):
        self.args = args
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.base = Path(args.work_dir or tempfile.mkdtemp(prefix="kraft-paper-bench-"))
        self.base.mkdir(parents=True, exist_ok=True)
        self.raw: dict = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                          "machine": machine_info(), "params": vars(args), "loadavg": {}}
        self.rows: list[dict] = []

    def n(self, count: int) -> int:
        return max(100, int(count * self.args.scale))

    def t(self, seconds: float) -> float:
        return max(5.0, seconds * min(1.0, max(self.args.scale, 0.25)))

    def row(self, system, test, msgs=None, mb=None, *, group, note="", **extra):
        self.rows.append({"system": system, "test": test, "msgs_per_s": msgs, "mb_per_s": mb,
                          "group": group, "note": note, **extra})

    # -- phases ---------------------------------------------------------------------

    def machine(self):
        log("machine limits: loopback TCP, disk")
        self.raw["loadavg"]["machine"] = loadavg()
        lo = loopback_bandwidth(seconds=3.0)
        disk = disk_bandwidth(self.base / "disk", total_bytes=self.args.disk_mb << 20)
        self.raw["machine_limits"] = {"loopback": lo, "disk": disk}
        self.row("machine", "loopback TCP, 1 stream", None, lo["mb_per_s"], group="machine")
        self.row("machine", "disk seq. write, no fsync", None, disk["no_fsync"]["mb_per_s"], group="machine")
        self.row("machine", "disk seq. write + fsync", None, disk["fsync"]["mb_per_s"], group="machine")
        self.row("machine", "4 KiB append + fsync", disk["fsync_4k_appends"]["per_s"],
                 disk["fsync_4k_appends"]["per_s"] * 4096 / 1e6, group="machine",
                 note=f"{disk['fsync_4k_appends']['avg_ms']:.2f} ms per fsync")

    def kraft_single(self):
        log("kraft, 1 combined node: the paper's producer and consumer tests")
        self.raw["loadavg"]["kraft_single"] = loadavg()
        cluster = start_kraft(self.base / "kraft1", 1)
        try:
            bs = cluster.bootstrap_servers
            res = {}
            for batch, count, secs in ((1, self.n(40_000), self.t(25)), (50, self.n(3_000_000), self.t(30))):
                topic = f"paper-b{batch}"
                create_topic(bs, topic, 1, 1)
                props = {"acks": "1", "batch.num.messages": batch, "linger.ms": 0 if batch == 1 else 5,
                         "compression.type": "none"}
                r = perf("produce", bs, topic, count, secs, size=200, props=props)
                res[f"produce_batch{batch}"] = r
                self._kraft_row(f"paper producer, batch {batch}", r, group="paper", size=200)
            drained = res["produce_batch50"].get("records_acked", 0)
            r = perf("consume", bs, "paper-b50", max(1, drained), self.t(30))
            res["consume"] = r
            self._kraft_row("paper consumer", r, group="paper", size=200)
            self.raw["kraft_single"] = res
        finally:
            cluster.stop_all()

    def _kraft_row(self, test, r, *, group, size, system="kraft (1 node)"):
        if "error" in r:
            self.row(system, test, group=group, note=r["error"])
            return
        count = r.get("records_acked", r.get("records"))
        note = f"p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms" if r["test"] == "produce" else ""
        if r.get("client_cpu_cores") is not None:
            note += f"{'; ' if note else ''}client {r['client_cpu_cores']:.2f} cores"
        if r.get("timed_out"):
            note += f"{'; ' if note else ''}time cap hit after {count} records"
        self.row(system, test, r["records_per_s"], r["mb_per_s"], group=group, note=note,
                 p50_ms=r.get("p50_ms"), p99_ms=r.get("p99_ms"), records=count)

    def peers(self):
        from peers import ActiveMQ, RabbitMQ

        for cls in (RabbitMQ, ActiveMQ):
            log(f"{cls.name}: starting (installs the Debian package if missing)")
            self.raw["loadavg"][cls.name] = loadavg()
            peer = cls(self.base / cls.name) if cls is RabbitMQ else cls(self.base / cls.name,
                                                                         sync=self.args.activemq_sync)
            res = {}
            try:
                if not peer.start():
                    res["error"] = peer.error
                    for test in ("paper producer, batch 1", "paper producer, batch 50", "paper consumer"):
                        self.row(cls.name, test, group="paper", note=f"not run: {peer.error}")
                    continue
                log(f"{cls.name}: producer and consumer tests")
                p = peer.produce("paper", self.n(300_000), 200, self.t(25))
                res["produce_batch1"] = p
                self.row(cls.name, "paper producer, batch 1", p["records_per_s"], p["mb_per_s"], group="paper",
                         note=peer_note(p), records=p["records"])
                self.row(cls.name, "paper producer, batch 50", group="paper",
                         note="n/a: no batching API (the paper ran both at batch 1)")
                c = peer.consume("paper", p["records"], 200, self.t(30))
                res["consume"] = c
                self.row(cls.name, "paper consumer", c["records_per_s"], c["mb_per_s"], group="paper",
                         note=peer_note(c), records=c["records"])
            except Exception as exc:  # noqa: BLE001 - a peer's failure is a table entry
                res["error"] = repr(exc)
                self.row(cls.name, "paper tests", group="paper", note=f"failed: {exc!r}"[:200])
            finally:
                peer.stop()
                self.raw[cls.name] = res

    def kraft_cluster(self):
        log("kraft, 3 combined nodes: Kreps 2014 tests, end-to-end latency, topic creation")
        self.raw["loadavg"]["kraft_cluster"] = loadavg()
        cluster = start_kraft(self.base / "kraft3", 3)
        try:
            bs = cluster.bootstrap_servers
            res = {}
            props = {"batch.size": 8196, "linger.ms": 5, "compression.type": "none"}  # Kreps' batch.size
            for name, topic, rf, acks in (("producer, no replication", "kreps-rf1", 1, "1"),
                                          ("producer, 3x replication, acks=1", "kreps-rf3a", 3, "1"),
                                          ("producer, 3x replication, acks=all", "kreps-rf3b", 3, "all")):
                create_topic(bs, topic, 6, rf)
                log(f"  {name}")
                r = perf("produce", bs, topic, self.n(3_000_000), self.t(30), size=100, props={**props, "acks": acks})
                res[name] = r
                self._kraft_row(f"Kreps 2014: {name}", r, group="kreps", size=100, system="kraft (3 nodes)")
            log("  consumer")
            drained = res["producer, no replication"].get("records_acked", 0)
            r = perf("consume", bs, "kreps-rf1", max(1, drained), self.t(30))
            res["consumer"] = r
            self._kraft_row("Kreps 2014: consumer", r, group="kreps", size=100, system="kraft (3 nodes)")
            log("  end-to-end latency")
            create_topic(bs, "kreps-e2e", 1, 3)
            e2e = end_to_end_latency(bs, "kreps-e2e", self.n(2000), self.t(20))
            res["end_to_end"] = e2e
            self.row("kraft (3 nodes)", "Kreps 2014: end-to-end latency", None, None, group="kreps",
                     note=f"median {e2e['p50_ms']:.2f} ms, p99 {e2e['p99_ms']:.2f} ms over {e2e['count']} "
                          "round trips (acks=all, RF 3); published: 2 ms median", **e2e)
            log("  topic creation")
            tc = topic_creation_rate(bs, self.n(100), self.t(30), rf=3)
            res["topic_creation"] = tc
            self.row("kraft (3 nodes)", "topic creation (1 partition, RF 3, one at a time)", tc["per_s"], None,
                     group="quorum", note=f"p50 {tc['p50_ms']:.1f} ms, p99 {tc['p99_ms']:.1f} ms, "
                                          f"{tc['created']} topics, {tc['errors']} errors")
            self.raw["kraft_cluster"] = res
        finally:
            cluster.stop_all()
        for name, value in PUBLISHED_2014.items():
            self.row("Kafka 2014 (published)", f"Kreps 2014: {name}", value, value * 100 / 1e6, group="kreps",
                     note="published on three 2014 servers, not measured here")

    def quorum(self):
        import quorum_bench

        for engine in ("kraft", "pysyncobj"):
            log(f"metadata quorum alone, engine {engine}: 3 voter processes, real fsync")
            self.raw["loadavg"][f"quorum_{engine}"] = loadavg()
            r = quorum_bench.run(engine, seconds=self.t(10), concurrency=self.args.quorum_concurrency,
                                 base_dir=str(self.base / f"quorum-{engine}"))
            self.raw[f"quorum_{engine}"] = r
            system = f"quorum ({engine} engine)"
            if "error" in r:
                self.row(system, "metadata quorum appends", group="quorum", note=f"not run: {r['error']}")
                continue
            self.row(system, "metadata quorum committed appends (3 voters)", r["commits_per_s"],
                     r["commits_per_s"] * r["record_size"] * r["batch_records"] / 1e6, group="quorum",
                     note=f"p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms commit latency, "
                          f"{r['concurrency']} in flight", p50_ms=r["p50_ms"], p99_ms=r["p99_ms"])

    def profile(self):
        import pstats

        log("profile: 1 node under cProfile, paper producer batch 50")
        prof = self.out / "profile_produce.prof"
        cluster = start_kraft(self.base / "kraft-prof", 1, profile=prof)
        try:
            bs = cluster.bootstrap_servers
            create_topic(bs, "prof", 1, 1)
            r = perf("produce", bs, "prof", self.n(1_000_000), self.t(25), size=200,
                     props={"acks": "1", "batch.num.messages": 50, "linger.ms": 5})
            self.raw["profile_run"] = r
        finally:
            cluster.stop_all(timeout_s=60)
        if not prof.exists():
            self.raw["profile"] = "no profile written"
            return
        import io

        text = io.StringIO()
        stats = pstats.Stats(str(prof), stream=text)
        stats.sort_stats("tottime").print_stats(30)
        stats.sort_stats("cumulative").print_stats(40)
        header = (f"kraft 1 node under cProfile, paper producer batch 50 (200 B, acks=1): "
                  f"{r.get('records_per_s', 0):.0f} records/s under the profiler\n")
        (self.out / "profile_produce.txt").write_text(header + text.getvalue())
        top = []
        stats.sort_stats("tottime")
        for func in stats.fcn_list[:15]:
            _cc, nc, tt, ct, _ = stats.stats[func]
            top.append({"function": f"{func[0]}:{func[1]}({func[2]})", "calls": nc, "tottime_s": round(tt, 3),
                        "cumtime_s": round(ct, 3)})
        self.raw["profile_top"] = top

    # -- the table ------------------------------------------------------------------

    def finish(self):
        limits = self.raw.get("machine_limits", {})
        lo = limits.get("loopback", {}).get("mb_per_s")
        disk = limits.get("disk", {}).get("fsync", {}).get("mb_per_s")
        produce_limit = min(x for x in (lo, disk) if x) if (lo or disk) else None
        fsyncs = limits.get("disk", {}).get("fsync_4k_appends", {}).get("per_s")
        kraft_by_test = {r["test"]: r["msgs_per_s"] for r in self.rows
                         if (r["system"].startswith("kraft") or r["system"] == "quorum (kraft engine)")
                         and r["msgs_per_s"]}
        for r in self.rows:
            base = kraft_by_test.get(r["test"])
            r["ratio_to_kraft"] = (r["msgs_per_s"] / base) if (base and r["msgs_per_s"]) else None
            r["kraft_share_of_machine"] = None
            if r["system"].startswith("kraft") and r["mb_per_s"]:
                limit = lo if "consumer" in r["test"] else produce_limit
                if limit:
                    r["kraft_share_of_machine"] = r["mb_per_s"] / limit
            if r["system"] == "quorum (kraft engine)" and r["msgs_per_s"] and fsyncs:
                # committed appends per second against fsynced 4 KiB appends per second
                r["kraft_share_of_machine"] = r["msgs_per_s"] / fsyncs
        self.raw["rows"] = self.rows
        self.raw["limits_used"] = {"producer": "min(loopback TCP, disk seq. write + fsync)",
                                   "consumer": "loopback TCP", "loopback_mb_per_s": lo,
                                   "quorum": "4 KiB append + fsync per second", "fsyncs_per_s": fsyncs,
                                   "disk_fsync_mb_per_s": disk}
        self.raw["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.raw["loadavg"]["end"] = loadavg()
        table = format_table(self.rows) + "\n\n" + table_footer(self.raw)
        print(table)
        (self.out / "results.md").write_text(table + "\n")
        (self.out / "results.json").write_text(json.dumps(self.raw, indent=2, default=str) + "\n")
        chart(self.rows, self.out / "results.png", self.raw)
        log(f"wrote {self.out / 'results.json'}, {self.out / 'results.md'}, {self.out / 'results.png'}")

    def run(self):
        phases = [("machine", self.machine), ("kraft_single", self.kraft_single)]
        if not self.args.skip_peers:
            phases.append(("peers", self.peers))
        phases += [("kraft_cluster", self.kraft_cluster), ("quorum", self.quorum)]
        if not self.args.no_profile:
            phases.append(("profile", self.profile))
        started = time.monotonic()
        for name, phase in phases:
            t0 = time.monotonic()
            try:
                phase()
            except Exception as exc:  # noqa: BLE001 - one phase failing must not lose the rest
                log(f"phase {name} failed: {exc!r}")
                self.raw.setdefault("phase_errors", {})[name] = repr(exc)
                self.row(name, f"phase {name}", group="error", note=f"failed: {exc!r}"[:200])
            self.raw.setdefault("phase_seconds", {})[name] = round(time.monotonic() - t0, 1)
        self.raw["total_seconds"] = round(time.monotonic() - started, 1)
        self.finish()
        if not self.args.keep:
            shutil.rmtree(self.base, ignore_errors=True)


def peer_note(r: dict) -> str:
    note = f"client {r['client_cpu_cores']:.2f} cores (pure-Python client)"
    return note + ("; time cap hit" if r["timed_out"] else "")


def machine_info() -> dict:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "cpu": cpu, "python": platform.python_version(),
            "kernel": platform.release(), "loadavg_at_start": loadavg()}


def _fmt(x, digits=0):
    if x is None:
        return "-"
    if digits == 0:
        return f"{x:,.0f}"
    return f"{x:,.{digits}f}"


def format_table(rows) -> str:
    head = ["system", "test", "msgs/s", "MB/s", "ratio to kraft", "kraft share of machine", "note"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ratio = r.get("ratio_to_kraft")
        share = r.get("kraft_share_of_machine")
        lines.append("| " + " | ".join([
            r["system"], r["test"], _fmt(r["msgs_per_s"]), _fmt(r["mb_per_s"], 2),
            "-" if ratio is None else f"{ratio:.3g}",
            "-" if share is None else (f"{share * 100:.0f}%" if share >= 0.1 else f"{share * 100:.2g}%"),
            r.get("note", "")]) + " |")
    return "\n".join(lines)


def table_footer(raw) -> str:
    m = raw.get("machine", {})
    loads = ", ".join(f"{k} {v[0]}" for k, v in raw.get("loadavg", {}).items() if v)
    lim = raw.get("limits_used", {})
    return (f"Machine: {m.get('cpus')} CPUs ({m.get('cpu')}), Python {m.get('python')}, kernel "
            f"{m.get('kernel')}; shared with other jobs: 1-min load average at each phase: {loads}.  "
            f"Run {raw.get('started')} to {raw.get('finished')}, {raw.get('total_seconds')} s.  "
            f"kraft share of machine: producers over {lim.get('producer')}, consumers over "
            f"{lim.get('consumer')}, quorum over {lim.get('quorum')} (measured minutes apart on a "
            "shared disk, so it can exceed 100%).  Ratio to kraft: the row's msgs/s over kraft's in "
            "the same test (quorum rows: over the kraft engine).")


def chart(rows, path: Path, raw) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plotted = [r for r in rows if r["msgs_per_s"] and r["group"] in ("paper", "kreps", "quorum")]
    if not plotted:
        return
    colors = {"kraft": "#1f77b4", "RabbitMQ": "#ff7f0e", "ActiveMQ": "#2ca02c", "Kafka": "#999999",
              "quorum": "#9467bd"}
    labels, values, cols = [], [], []
    for r in plotted:
        labels.append(f"{r['system']}: {r['test']}")
        values.append(r["msgs_per_s"])
        cols.append(next((c for k, c in colors.items() if r["system"].startswith(k)), "#333333"))
    fig, ax = plt.subplots(figsize=(11, 0.38 * len(labels) + 1.6))
    y = range(len(labels))
    ax.barh(list(y), values, color=cols)
    ax.set_yticks(list(y))
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("messages (records, appends, topics) per second, log scale")
    for yi, v in zip(y, values):
        ax.text(v, yi, f" {v:,.0f}", va="center", fontsize=7)
    la = raw.get("machine", {}).get("loadavg_at_start") or []
    ax.set_title(f"kraft vs RabbitMQ / ActiveMQ (measured together) and Kreps 2014 (published)\n"
                 f"one machine, {raw['machine']['cpus']} CPUs shared, 1-min load average at start "
                 f"{la[0] if la else '?'}; {raw.get('started', '')}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"), help="where the results go")
    ap.add_argument("--work-dir", default=None, help="data directories (default: a new temporary one)")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiply every record count (and, down to a quarter, every time cap)")
    ap.add_argument("--disk-mb", type=int, default=512, help="bytes written by the disk test, MiB")
    ap.add_argument("--quorum-concurrency", type=int, default=32)
    ap.add_argument("--activemq-sync", default="periodic", choices=["always", "periodic", "never"],
                    help="KahaDB journalDiskSyncStrategy (ActiveMQ's own default is always)")
    ap.add_argument("--skip-peers", action="store_true", help="no RabbitMQ / ActiveMQ")
    ap.add_argument("--no-profile", action="store_true", help="no cProfile run")
    ap.add_argument("--keep", action="store_true", help="keep the data directories")
    ap.add_argument("--replot", action="store_true", help="only redraw results.png from results.json")
    args = ap.parse_args(argv)
    if args.replot:
        raw = json.loads((Path(args.out) / "results.json").read_text())
        (Path(args.out) / "results.md").write_text(format_table(raw["rows"]) + "\n\n" + table_footer(raw) + "\n")
        chart(raw["rows"], Path(args.out) / "results.png", raw)
        print((Path(args.out) / "results.md").read_text())
        return
    Bench(args).run()


if __name__ == "__main__":
    main()
