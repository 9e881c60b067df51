"""Many partitions under a small open files limit (issues 15 and 19): 3 combined nodes started
under ``ulimit -n`` (default 4096) host TOPICS x PARTITIONS partitions at RF 3, created
with confluent-kafka's admin client; then every partition must have a leader, one
message produced to each must be acknowledged (acks=all) and read back.  Then the SIGKILL
rows: a broker that is not the active controller (every partition it led must have a new
leader within 10 s; it is restarted and must rejoin every ISR), then the active controller
(a new one active and every surviving broker's heartbeat answered by it within 3 s).

Prints (and writes to ``--out``, by default ``bench/results/many_partitions/<partitions>.md``,
a table of): creation time and time until every partition is led (must be within 30 s), open
descriptors, RSS and idle CPU per node, the quorum leader/epoch before and after (must not
change), produce (acks=all, idempotent) and consume counts and times, and the kill rows.
Exits non-zero when a node died or a check failed.

    python3 bench/many_partitions.py                    # 20 topics x 1000, ulimit 4096
    python3 bench/many_partitions.py --topics 100 --no-produce   # 100,000 partitions
    python3 bench/many_partitions.py --topics 2 --partitions 500 --hold 60   # py-spy it idle
    python3 bench/many_partitions.py --apache-kafka --nofile 100000 --no-produce   # the same on Kafka

With ``--apache-kafka`` the same rows are measured on Apache Kafka (``kraft.apache_kafka``:
the pinned release, the same layout and settings), as far as Kafka shows them from outside:
a killed broker's partitions are seen led elsewhere by Metadata polls (Kafka's brokers log no
line this bench reads for it), the fence by its controller's "Fencing broker N" line, and no
heartbeat row for the controller kill.  Kafka keeps a descriptor open per segment, so it
needs a ``--nofile`` above its partitions (its documentation asks for 100,000).
"""

from __future__ import annotations

import argparse
import datetime
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from cluster_helpers import active_controller as cluster_active_controller, describe_quorum, request, start_cluster, wait_until  # noqa: E402

from kraft.local_cluster import LocalCluster  # noqa: E402


def node_stats(cluster: LocalCluster) -> dict[int, tuple[int, int]]:
    """node id -> (open descriptors, RSS in MiB)."""
    out = {}
    for node_id, node in cluster.nodes.items():
        if not node.running:
            out[node_id] = (-1, -1)
            continue
        pid = node.process.pid
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        rss_kb = 0
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss_kb = int(line.split()[1])
        out[node_id] = (fds, rss_kb // 1024)
    return out


def cpu_seconds(cluster: LocalCluster) -> dict[int, float]:
    """node id -> CPU seconds (user + system) used so far."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for node_id, node in cluster.nodes.items():
        if node.running:
            fields = Path(f"/proc/{node.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
            out[node_id] = (int(fields[11]) + int(fields[12])) / tick
    return out


# A bare Python process beside the idle nodes, for scale: it wakes twice a second (as an
# idle node's NoOpRecords and long polls do) and touches 1 MiB of its own memory.  On this
# machine memory touched after a sleep costs far more than warm (the longer the sleep, the
# more): an idle node's CPU is mostly that, not the Python it runs.
IDLE_REFERENCE = """
import resource, sys, time
buf = bytearray(8 << 20)
def touch():
    return sum(buf[i] for i in range(0, 1 << 20, 4096))
touch()
warm = []
for _ in range(200):
    t = time.perf_counter(); touch(); warm.append(time.perf_counter() - t)
cold, end = [], time.monotonic() + float(sys.argv[1])
r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
while time.monotonic() < end:
    time.sleep(0.5)
    t = time.perf_counter(); touch(); cold.append(time.perf_counter() - t)
r1 = resource.getrusage(resource.RUSAGE_SELF)
cpu = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
warm.sort(); cold.sort()
print(100 * cpu / (time.monotonic() - t0), cold[len(cold) // 2] * 1000, warm[len(warm) // 2] * 1e6)
"""


def start_idle_reference(seconds: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", IDLE_REFERENCE, str(seconds)], stdout=subprocess.PIPE, text=True)


def idle_reference_row(process: subprocess.Popen) -> str:
    try:
        cpu, cold_ms, warm_us = (float(x) for x in process.communicate(timeout=60)[0].split())
    except (ValueError, subprocess.TimeoutExpired):
        process.kill()
        return "not measured"
    return f"{cpu:.1f}% CPU; 1 MiB touched after 0.5 s asleep: {cold_ms:.1f} ms (warm: {warm_us:.0f} us)"


def kafka_active_controller(cluster: LocalCluster, exclude=()) -> tuple[int, int] | None:
    """(leader id, epoch) as Apache Kafka's active controller describes its quorum: Kafka's
    other controllers answer DescribeQuorum with NOT_LEADER_OR_FOLLOWER and no leader."""
    for node in cluster.controllers:
        if node.running and node.node_id not in exclude:
            q = describe_quorum(cluster, node.node_id)
            if q and q.get("error_code", 0) == 0 and q["leader_id"] >= 0 and q["leader_id"] not in exclude:
                return q["leader_id"], q["leader_epoch"]
    return None


def quorum(cluster: LocalCluster) -> dict[int, tuple[int, int] | None]:
    out = {}
    for node_id in cluster.nodes:
        q = describe_quorum(cluster, node_id)
        out[node_id] = (q["leader_id"], q["leader_epoch"]) if q else None
    return out


def metadata(cluster: LocalCluster, topics: list[str]) -> list[dict]:
    for node in cluster.nodes.values():
        if not node.running:
            continue
        try:
            md = request(node.host, node.broker_port, "Metadata", 12,
                         {"topics": [{"name": t} for t in topics]}, timeout_s=60)
            return md["topics"]
        except Exception:  # noqa: BLE001 - try the next node
            continue
    return []


def all_led(cluster: LocalCluster, topics: list[str], per_topic: int) -> tuple[int, int]:
    """(partitions with a leader, partitions known) across ``topics``."""
    led = known = 0
    for t in metadata(cluster, topics):
        parts = t["partitions"] if t["error_code"] == 0 else []
        known += len(parts)
        led += sum(1 for p in parts if p["leader_id"] >= 0)
    return led, known


def replicas_hosted(cluster: LocalCluster) -> dict[int, int]:
    """node id -> replicas its log directory holds (DescribeLogDirs): a partition is led as
    soon as the metadata says so, but its followers still have to create their replicas."""
    out = {}
    for node_id, node in cluster.nodes.items():
        try:
            dirs = request(node.host, node.broker_port, "DescribeLogDirs", 1, {"topics": None},
                           timeout_s=60)["results"]
            out[node_id] = sum(len(t["partitions"]) for d in dirs for t in d["topics"])
        except Exception:  # noqa: BLE001 - a node that does not answer holds none we know of
            out[node_id] = -1
    return out


class LedWatcher(threading.Thread):
    """Polls Metadata for the topics created so far and notes, for each, how long after its
    CreateTopics answered all of its partitions had a leader (the issue's "every created
    topic fully led within 30 s")."""

    def __init__(self, cluster: LocalCluster, per_topic: int):
        super().__init__(daemon=True)
        self.cluster = cluster
        self.per_topic = per_topic
        self.created_at: dict[str, float] = {}
        self.latency: dict[str, float] = {}
        self._done = threading.Event()

    def created(self, name: str) -> None:
        self.created_at[name] = time.monotonic()

    def stop(self) -> None:
        self._done.set()
        self.join(10)

    def run(self) -> None:
        while not self._done.wait(0.5):
            pending = [t for t in list(self.created_at) if t not in self.latency]
            if not pending:
                continue
            for t in metadata(self.cluster, pending):
                parts = t["partitions"] if t["error_code"] == 0 else []
                if len(parts) == self.per_topic and all(p["leader_id"] >= 0 for p in parts):
                    self.latency[t["name"]] = time.monotonic() - self.created_at[t["name"]]


def leaders(cluster: LocalCluster, topics: list[str]) -> dict[tuple[str, int], int]:
    """(topic, partition) -> leader id (-1 for none), as a running node's Metadata has it."""
    return {(t["name"], p["partition_index"]): p["leader_id"]
            for t in metadata(cluster, topics) if t["error_code"] == 0 for p in t["partitions"]}


def wait_new_leaders(cluster: LocalCluster, topics: list[str], led: set, victim: int,
                     t0: float, timeout_s: float = 120) -> tuple[float, float]:
    """Poll Metadata until none of ``led`` is led by ``victim`` or by nobody; returns (seconds
    after ``t0`` when seen so, seconds when the poll before it started)."""
    before = 0.0
    while time.monotonic() - t0 < timeout_s:
        polled = time.monotonic() - t0
        now = leaders(cluster, topics)
        if now and all(now.get(k, -1) not in (victim, -1) for k in led):
            return time.monotonic() - t0, before
        before = polled
        time.sleep(0.2)
    return float("inf"), before


def _stamp(line: str) -> float | None:
    """The time a log line starts with: kraft's ``2026-11-25 16:20:00,123`` or Kafka's
    ``[2026-11-25 16:20:00,123]``."""
    if line.startswith("["):
        line = line[1:]
    try:
        return datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    except ValueError:
        return None


def first_logged(cluster: LocalCluster, node_ids, needle: str, after_wall: float) -> float | None:
    """Wall time of the first line holding ``needle`` that one of ``node_ids`` logged after
    ``after_wall`` (each log in turn); None if none did."""
    for node_id in node_ids:
        for line in cluster.nodes[node_id].log_path.read_text(errors="replace").splitlines():
            if needle in line and (stamp := _stamp(line)) is not None and stamp >= after_wall:
                return stamp
    return None


def fence_logged(cluster: LocalCluster, broker_id: int, after_wall: float) -> float:
    """Seconds after ``after_wall`` when an active controller logged fencing ``broker_id``."""
    needle = (f"Fencing broker {broker_id} " if isinstance(cluster, KafkaNodes)
              else f"fencing broker {broker_id}:")
    stamp = first_logged(cluster, list(cluster.nodes), needle, after_wall)
    return float("inf") if stamp is None else stamp - after_wall


def heartbeat_seen(cluster: LocalCluster, node_id: int, controller: int, after_wall: float) -> float | None:
    """Wall time at which ``node_id`` logged its first heartbeat answered by ``controller``
    after ``after_wall`` (broker/lifecycle.py logs each change of answering controller)."""
    return first_logged(cluster, [node_id], f"heartbeat answered by the active controller {controller}", after_wall)


class LeadershipLog:
    """The new leaders' own account of a leadership move: each broker logs "<topic>-<p>:
    leader in epoch" (broker/partition.py) as it becomes a partition's leader, as Apache
    Kafka's brokers log "Leader <topic>-<p> with topic id ... starts at leader epoch".  Read from
    where each node's log ended at the kill, as it grows: a Metadata poll of 100,000
    partitions takes seconds under this load, and is itself work for the nodes it measures."""

    def __init__(self, cluster: LocalCluster, nodes: list[int], led: set):
        self.paths = {i: cluster.nodes[i].log_path for i in nodes}
        self.offsets = {i: p.stat().st_size for i, p in self.paths.items()}
        self.pending = {f"{t}-{p}" for t, p in led}
        self.last: float | None = None

    def read(self) -> None:
        for node_id, path in self.paths.items():
            with open(path, "rb") as f:
                f.seek(self.offsets[node_id])
                data = f.read()
            end = data.rfind(b"\n") + 1  # a line still being written is read next time
            self.offsets[node_id] += end
            for line in data[:end].decode(errors="replace").splitlines():
                if (at := line.find(": leader in epoch ")) >= 0:
                    name = line[:at].rsplit(" ", 1)[-1]
                elif (at := line.find("] Leader ")) >= 0 and " starts at leader epoch " in line:
                    name = line[at + 9:].split(" ", 1)[0]
                else:
                    continue
                if name in self.pending and (stamp := _stamp(line)) is not None:
                    self.pending.discard(name)
                    self.last = stamp if self.last is None else max(self.last, stamp)

    def wait(self, timeout_s: float) -> float | None:
        """Wall time of the last of them, once every one is logged; None after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.read()
            if not self.pending:
                return self.last
            if time.monotonic() > deadline:
                return None
            time.sleep(0.2)


def kill_rows(cluster: LocalCluster, topics: list[str], total: int, failures: list[str],
              results: "Results") -> None:
    """The issue's two SIGKILL rows: a broker (every partition it led has a new leader within
    10 s), then, after it is back, the active controller (a new one active and every broker
    heartbeating to it within 3 s)."""
    kafka = isinstance(cluster, KafkaNodes)
    active_controller = kafka_active_controller if kafka else cluster_active_controller
    active = active_controller(cluster)
    victim = next(i for i in sorted(cluster.nodes) if i != (active[0] if active else -1))
    led = {k for k, leader in leaders(cluster, topics).items() if leader == victim}
    leadership_log = LeadershipLog(cluster, [i for i in cluster.nodes if i != victim], led)
    wall0, t0 = time.time(), time.monotonic()
    cluster.kill(victim)
    if kafka:  # Kafka answers Metadata from memory, in Java: polled from the kill on
        polled_s, before_s = wait_new_leaders(cluster, topics, led, victim, t0, timeout_s=300)
        polled = f"Metadata polls every 0.2 s: not yet at {before_s:.1f}s, every one led elsewhere at {polled_s:.1f}s"
    logged = leadership_log.wait(timeout_s=300)
    logged_s = float("inf") if logged is None else logged - wall0
    if not kafka:
        polled_s, _ = wait_new_leaders(cluster, topics, led, victim, t0)
        polled = f"Metadata, asked after that, said every one led elsewhere at {polled_s:.1f}s"
    fenced_s = fence_logged(cluster, victim, wall0)
    print(f"SIGKILL broker {victim} (not the active controller), leading {len(led)} partitions: fenced "
          f"{fenced_s:.1f}s after the kill (kraft.broker.session.disconnect.timeout.ms after its heartbeat "
          f"connection closed, on Kafka broker.session.timeout.ms); the last of them logged as led by a "
          f"new leader {logged_s:.1f}s after the kill; {polled}", flush=True)
    seen_by = "Metadata polled from the kill on" if kafka else "Metadata asked after that"
    results.add(f"SIGKILL a broker leading {len(led):,} partitions: fenced / every one led elsewhere, "
                f"by the new leaders' logs / by {seen_by}", f"{fenced_s:.1f} s / {logged_s:.1f} s / {polled_s:.1f} s",
                "<= 10 s", logged_s <= 10)
    if logged_s > 10:
        failures.append(f"partitions of the killed broker {victim} got new leaders only after {logged_s:.1f}s")
    t1 = time.monotonic()
    cluster.start(victim)
    wait_until(lambda: replicas_hosted(cluster).get(victim, -1) >= total, timeout_s=900, interval_s=5,
               what=f"node {victim} hosting its {total} replicas again")
    hosted_s = time.monotonic() - t1

    def back_in_every_isr() -> bool:
        for t in metadata(cluster, topics):
            for p in t["partitions"]:
                if victim not in p["isr_nodes"]:
                    return False
        return True

    wait_until(back_in_every_isr, timeout_s=900, interval_s=2, what=f"node {victim} back in every ISR")
    isr_s = time.monotonic() - t1
    print(f"node {victim} restarted: all {total} replicas open after {hosted_s:.1f}s, back in every ISR after "
          f"{isr_s:.1f}s; quorum {quorum(cluster)}", flush=True)
    results.add("the killed broker restarted: every replica open / back in every ISR",
                f"{hosted_s:.1f} s / {isr_s:.1f} s", "-", None)

    active = active_controller(cluster)
    if active is None:
        failures.append("no active controller before the controller kill")
        return
    old = active[0]
    survivors = [i for i in cluster.nodes if i != old]
    led = {k for k, leader in leaders(cluster, topics).items() if leader == old}
    wall0, t0 = time.time(), time.monotonic()
    cluster.kill(old)
    new = wait_until(lambda: active_controller(cluster, exclude=(old,)), timeout_s=60, interval_s=0.05,
                     what="a new active controller")
    active_s = time.monotonic() - t0
    heard: dict[int, float] = {}
    while not kafka and len(heard) < len(survivors) and time.monotonic() - t0 < 60:
        for i in survivors:
            if i not in heard and (stamp := heartbeat_seen(cluster, i, new[0], wall0)) is not None:
                heard[i] = stamp - wall0
        time.sleep(0.1)
    last_s = max(heard.values(), default=float("inf")) if len(heard) == len(survivors) else float("inf")
    new_leaders_s, _ = wait_new_leaders(cluster, topics, led, old, t0)
    print(f"SIGKILL the active controller {old}: controller {new[0]} active (as its quorum describes it) "
          f"{active_s:.2f}s after the kill; every broker's heartbeat answered by it at "
          f"{', '.join(f'{i}: {s:.2f}s' for i, s in sorted(heard.items()))}; the {len(led)} partitions "
          f"{old} led were led elsewhere {new_leaders_s:.1f}s after the kill", flush=True)
    if kafka:  # its brokers log no line for the heartbeat's answerer
        results.add("SIGKILL the active controller: a new one active", f"{active_s:.2f} s", "<= 3 s",
                    active_s <= 3)
    else:
        results.add("SIGKILL the active controller: a new one active / every broker's heartbeat answered by it",
                    f"{active_s:.2f} s / {last_s:.2f} s", "<= 3 s", last_s <= 3)
    results.add(f"SIGKILL the active controller: the {len(led):,} partitions its node led led elsewhere",
                f"{new_leaders_s:.1f} s", "-", None)
    if last_s > 3 and not kafka:
        failures.append(f"after the controller kill, a broker's heartbeat reached the new controller only "
                        f"after {last_s:.2f}s")


class KafkaNodes:
    """An Apache Kafka cluster (``kraft.apache_kafka``) as this bench uses a ``LocalCluster``:
    its nodes (the same layout, each with its process), kill, start again, stop."""

    def __init__(self, base: Path, overrides: dict[str, str], heap: str):
        from kraft.apache_kafka import ApacheKafkaCluster

        self.kafka = ApacheKafkaCluster(base, nodes=3, overrides=overrides, heap=heap)
        self.layout = self.kafka.layout
        self.nodes = self.layout.nodes
        self.controllers = self.layout.controllers
        self.bootstrap_servers = self.kafka.bootstrap_servers

    def __enter__(self) -> "KafkaNodes":
        self.kafka.format()
        self.kafka.start()
        self.kafka.wait_ready()
        return self

    def __exit__(self, *exc) -> None:
        self.stop_all()

    def kill(self, node_id: int) -> None:
        self.layout.kill(node_id)

    def start(self, node_id: int) -> None:
        self.kafka.start(node_id)

    def stop_all(self, timeout_s: float = 60.0) -> None:
        self.kafka.stop(timeout_s)


class Results:
    """The run's rows, printed at the end and written as a table to ``--out``."""

    def __init__(self, title: str):
        self.title = title
        self.rows: list[tuple[str, str, str, bool | None]] = []
        self.started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.load = [os.getloadavg()[0]]

    def add(self, measure: str, figure: str, goal: str, met: bool | None) -> None:
        self.rows.append((measure, figure, goal, met))

    def table(self, commit: str) -> str:
        lines = [f"# {self.title}", "",
                 f"`python bench/many_partitions.py {' '.join(sys.argv[1:])}` at {commit}, "
                 f"{self.started} to {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}; {os.cpu_count()} CPUs; "
                 f"1-min load average {', '.join(f'{x:.1f}' for x in self.load)} (start, after creation, end).", "",
                 "| measure | figure | goal | met |", "|---|---|---|---|"]
        for measure, figure, goal, met in self.rows:
            lines.append(f"| {measure} | {figure} | {goal} | {'-' if met is None else 'yes' if met else 'no'} |")
        return "\n".join(lines) + "\n"


def git_commit() -> str:
    r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).resolve().parents[1],
                       capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


def produce_and_consume(cluster: LocalCluster, topics: list[str], per_topic: int, failures: list[str],
                        results: Results) -> None:
    """One message to each partition (acks=all, idempotent), then each read back."""
    from confluent_kafka import Producer

    total = len(topics) * per_topic
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 50,
                         "message.timeout.ms": 300000})
    acked = []
    t1 = time.monotonic()
    for name in topics:
        for p in range(per_topic):
            producer.produce(name, value=f"{name}/{p}".encode(), partition=p,
                             on_delivery=lambda err, msg: err is None and acked.append(msg.value()))
            if p % 200 == 0:
                producer.poll(0)
    producer.flush(600)
    producer = None
    produced_s = time.monotonic() - t1
    print(f"produced {len(acked)}/{total} acks=all in {produced_s:.1f}s", flush=True)
    results.add("one record to every partition, acks=all, idempotent", f"{len(acked):,}/{total:,} in {produced_s:.1f} s",
                "all", len(acked) == total)
    if len(acked) != total:
        failures.append(f"only {len(acked)}/{total} produced")

    # The read-back runs in a child process: librdkafka 2.x has crashed (SIGSEGV in
    # rd_kafka_topic_find_by_topic_id, walking its topic list unlocked while a Fetch v13+
    # answer is handled) with 10,000 topics assigned at once, and a crashed client must
    # cost the run its row, not the whole table.
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    parent_end, child_end = ctx.Pipe(duplex=False)
    reader = ctx.Process(target=_read_back, args=(cluster.bootstrap_servers, topics, per_topic, acked, child_end))
    reader.start()
    child_end.close()
    reader.join(900)
    if reader.is_alive():
        reader.kill()
        reader.join()
    outcome = parent_end.recv() if parent_end.poll() else None
    if outcome is None:
        why = f"the consumer process died (exit {reader.exitcode}: librdkafka, not a node)"
        print(why, flush=True)
        results.add("every record read back", why, "all", None)
        failures.append(why)
        return
    seen_count, all_seen, consumed_s = outcome
    print(f"consumed {seen_count}/{len(acked)} in {consumed_s:.1f}s", flush=True)
    results.add("every record read back", f"{seen_count:,}/{len(acked):,} in {consumed_s:.1f} s", "all", all_seen)
    if not all_seen:
        failures.append(f"consumed {seen_count} of {len(acked)}")


def _read_back(bootstrap: str, topics: list[str], per_topic: int, acked: list[bytes], out) -> None:
    """In a child process: every partition from offset 0 until each acknowledged record is
    seen (or 600 s); sends (records seen, all seen, seconds)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "many", "enable.auto.commit": False})
    consumer.assign([TopicPartition(name, p, 0) for name in topics for p in range(per_topic)])
    seen = set()
    t2 = time.monotonic()
    while len(seen) < len(acked) and time.monotonic() - t2 < 600:
        for msg in consumer.consume(1000, 1.0):
            if not msg.error():
                seen.add(msg.value())
    consumer.close()
    out.send((len(seen), seen == set(acked), time.monotonic() - t2))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", type=int, default=20)
    ap.add_argument("--partitions", type=int, default=1000, help="partitions per topic")
    ap.add_argument("--nofile", type=int, default=4096, help="ulimit -n for the nodes (soft and hard)")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--timeout", type=float, default=1800, help="seconds to wait for every leader")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="a server.properties override for every node (e.g. kraft.gc.freeze.enable=false)")
    ap.add_argument("--no-kill", action="store_true",
                    help="leave out the SIGKILL rows (a broker, then the active controller)")
    ap.add_argument("--no-produce", action="store_true",
                    help="leave out producing to and consuming from every partition")
    ap.add_argument("--out", default=None,
                    help="the table of this run's rows (default: bench/results/many_partitions/<partitions>.md)")
    ap.add_argument("--apache-kafka", action="store_true",
                    help="run it all on Apache Kafka instead (see above; results to <partitions>-kafka.md)")
    ap.add_argument("--kafka-heap", default="4g",
                    help="Kafka's -Xmx (kafka_bench.py gives it 512m; at 15,000 partitions that ran out)")
    ap.add_argument("--idle-seconds", type=float, default=10,
                    help="how long idle CPU is measured (after 20 s of settling)")
    ap.add_argument("--hold", type=float, default=0,
                    help="seconds to keep the idle cluster before producing (to profile it, e.g. py-spy)")
    args = ap.parse_args()

    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    # As `ulimit -n N`: both limits, inherited by the nodes started below.
    resource.setrlimit(resource.RLIMIT_NOFILE, (args.nofile, args.nofile))
    base = Path(args.data_dir or tempfile.mkdtemp(prefix="kafka-many-" if args.apache_kafka else "kraft-many-"))
    total = args.topics * args.partitions
    topics = [f"many{i:02d}" for i in range(args.topics)]
    print(f"{args.topics} topics x {args.partitions} partitions x RF 3 = {total} partitions, "
          f"{total} replicas per node, ulimit -n {args.nofile}, data in {base}", flush=True)
    failures = []
    system = f"Apache Kafka (-Xmx{args.kafka_heap})" if args.apache_kafka else "kraft"
    results = Results(f"{system}: {total:,} partitions x RF 3 on 3 combined nodes (ulimit -n {args.nofile})")
    overrides = dict(o.split("=", 1) for o in args.override)
    with (KafkaNodes(base, overrides, args.kafka_heap) if args.apache_kafka
          else LocalCluster(base, controllers=3, overrides=overrides)) as cluster:
        try:
            if not args.apache_kafka:
                start_cluster(cluster)
            quorum_before = quorum(cluster)
            print(f"started: quorum {quorum_before}; fds/RSS(MiB) {node_stats(cluster)}", flush=True)
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
            watcher = LedWatcher(cluster, args.partitions)
            watcher.start()
            t0 = time.monotonic()
            retries = 0
            for name in topics:
                while True:  # as Kafka's Java admin client retries a controller change
                    fs = admin.create_topics([NewTopic(name, num_partitions=args.partitions,
                                                       replication_factor=3)], request_timeout=300)
                    try:
                        fs[name].result(600)
                        break
                    except KafkaException as exc:
                        code = exc.args[0].code()
                        if code == KafkaError.TOPIC_ALREADY_EXISTS and retries:
                            break
                        if code not in (KafkaError.NOT_CONTROLLER, KafkaError.REQUEST_TIMED_OUT,
                                        KafkaError._TIMED_OUT):
                            raise
                        retries += 1
                        print(f"  {name}: {exc.args[0].name()}, retrying", flush=True)
                        time.sleep(1)
                watcher.created(name)
                print(f"  {name} created at {time.monotonic() - t0:.1f}s; fds/RSS {node_stats(cluster)}; "
                      f"quorum {quorum(cluster)}", flush=True)
            created_s = time.monotonic() - t0
            admin = None  # destroyed now, not after the cluster stops (its reconnect noise)
            deadline = time.monotonic() + args.timeout
            led = known = 0
            while time.monotonic() < deadline:
                led, known = all_led(cluster, topics, args.partitions)
                if led == total or not all(n.running for n in cluster.nodes.values()):
                    break
                time.sleep(2)
            led_s = time.monotonic() - t0
            watcher.stop()
            slowest = max(watcher.latency.values(), default=float("inf"))
            print(f"created in {created_s:.1f}s ({retries} CreateTopics retries); {led}/{total} partitions led after "
                  f"{led_s:.1f}s; each topic fully led at most {slowest:.1f}s after its CreateTopics answered "
                  f"({len(watcher.latency)}/{len(topics)} topics seen led)", flush=True)
            results.add("created (CreateTopics, one topic at a time) / every partition led",
                        f"{created_s:.1f} s / {led_s:.1f} s", "all led", led == total)
            results.add("each topic fully led after its CreateTopics answered, at most", f"{slowest:.1f} s",
                        "<= 30 s", slowest <= 30)
            if led != total:
                failures.append(f"only {led}/{total} partitions led")
            elif len(watcher.latency) == len(topics) and slowest > 30:
                failures.append(f"a topic was fully led only {slowest:.1f}s after it was created (more than 30 s)")
            while time.monotonic() < deadline:  # every follower's replica exists too
                hosted = replicas_hosted(cluster)
                if all(n >= total for n in hosted.values()):
                    break
                time.sleep(5)  # DescribeLogDirs of every replica is work for each node
            print(f"every replica created after {time.monotonic() - t0:.1f}s: {hosted}", flush=True)
            results.add("every follower replica created", f"{time.monotonic() - t0:.1f} s", "-", None)
            results.load.append(os.getloadavg()[0])
            quorum_after = quorum(cluster)
            print(f"quorum (leader, epoch) before {quorum_before}, after creation {quorum_after}", flush=True)
            if set(quorum_after.values()) != set(quorum_before.values()):
                failures.append(f"the controller leadership changed: {quorum_before} -> {quorum_after}")
            time.sleep(20)  # let replica fetchers settle before measuring
            stats = node_stats(cluster)
            reference = start_idle_reference(args.idle_seconds)
            cpu0, c0 = cpu_seconds(cluster), time.monotonic()
            time.sleep(args.idle_seconds)
            cpu1, c1 = cpu_seconds(cluster), time.monotonic()
            idle = {i: f"{100 * (cpu1[i] - cpu0[i]) / (c1 - c0):.1f}%" for i in cpu1 if i in cpu0}
            print(f"fds/RSS(MiB) per node: {stats}; idle CPU per node ({args.idle_seconds:.0f} s): {idle}; quorum {quorum(cluster)}",
                  flush=True)
            idle_goal = 2 if total <= 20_000 else 5
            worst = max((100 * (cpu1[i] - cpu0[i]) / (c1 - c0) for i in cpu1 if i in cpu0), default=0.0)
            results.add(f"idle CPU per node ({args.idle_seconds:.0f} s, 20 s after the last replica)", ", ".join(idle.values()),
                        f"<= {idle_goal}%", worst <= idle_goal)
            results.add("the same window: a bare Python process waking twice a second to touch 1 MiB",
                        idle_reference_row(reference), "-", None)
            rss = [mb for _, mb in stats.values()]
            results.add("RSS per node", f"{min(rss):,}-{max(rss):,} MiB", "<= 1.5 GB", max(rss) <= 1430)
            fds = [n for n, _ in stats.values()]
            results.add("open descriptors per node", f"{min(fds):,}-{max(fds):,} (limit {args.nofile:,})",
                        f"<= {args.nofile // 2:,}", max(fds) <= args.nofile // 2)
            results.add("quorum (leader, epoch) before / after creation", f"{sorted(set(quorum_before.values()))} / "
                        f"{sorted(set(quorum_after.values()))}", "unchanged",
                        set(quorum_after.values()) == set(quorum_before.values()))
            if args.hold:
                pids = {i: n.process.pid for i, n in cluster.nodes.items() if n.running}
                print(f"holding the idle cluster {args.hold:.0f}s; node pids {pids}", flush=True)
                time.sleep(args.hold)

            if not args.no_produce:
                produce_and_consume(cluster, topics, args.partitions, failures, results)
            stats = node_stats(cluster)
            quorum_end = quorum(cluster)
            print(f"{'after produce/consume' if not args.no_produce else 'before the kill rows'}: fds/RSS(MiB) per node: {stats}; quorum {quorum_end}", flush=True)
            if set(quorum_end.values()) != set(quorum_before.values()):
                failures.append(f"the controller leadership changed: {quorum_before} -> {quorum_end}")
            dead = [i for i, n in cluster.nodes.items() if not n.running]
            if dead:
                failures.append(f"nodes {dead} died")
            if any(fds > args.nofile // 2 for fds, _ in stats.values()):
                failures.append("a node holds more than half its descriptor limit")
            if not args.no_kill and not dead:
                kill_rows(cluster, topics, total, failures, results)
        finally:
            cluster.stop_all(timeout_s=120)
    for node in cluster.nodes.values():
        text = node.log_path.read_text(errors="replace")
        for needle in ("Too many open files", "Traceback" if not args.apache_kafka else "OutOfMemoryError"):
            if needle in text:
                failures.append(f"node {node.node_id}: {needle!r} in {node.log_path}")
    results.load.append(os.getloadavg()[0])
    table = results.table(git_commit())
    if failures:
        table += "\nFailed: " + "; ".join(failures) + "\n"
    name = f"{total}-kafka.md" if args.apache_kafka else f"{total}.md"
    out = Path(args.out) if args.out else Path(__file__).resolve().parent / "results" / "many_partitions" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(table)
    print(table, flush=True)
    print(f"wrote {out}", flush=True)
    print("OK" if not failures else "FAILED: " + "; ".join(failures), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
