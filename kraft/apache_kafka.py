"""Apache Kafka itself, from Maven Central: its tools, its Java clients and its broker.

kraft is tested against Kafka's own command-line tools and Java clients, and benchmarked
against a real Apache Kafka KRaft cluster.  Nothing of Kafka is in the repository:
``bench/kafka/pom.xml`` pins a Kafka 4.x release, and :func:`ensure_libs` runs
``mvn dependency:copy-dependencies`` once to put every jar into a cache directory
(``~/.cache/kraft/kafka-<version>/libs``, or wherever ``KRAFT_KAFKA_LIBS`` points).

The ``kafka-*.sh`` scripts are not in the jars, so a tool is run by its main class
(:data:`TOOLS`) with ``java -cp <libs>/*``, exactly what the script would run.

:class:`ApacheKafkaCluster` formats and starts a 1- or 3-node Kafka KRaft cluster on
loopback (combined broker+controller nodes, free ports) with the settings
:class:`~kraft.local_cluster.LocalCluster` gives a kraft cluster, and stops it cleanly.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

from kraft.properties import format_properties

POM = Path(__file__).resolve().parent.parent / "bench" / "kafka" / "pom.xml"

# Tool name (the script's name without .sh) -> main class in Kafka 4.x's jars.
TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-groups": "org.apache.kafka.tools.GroupsCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-e2e-latency": "org.apache.kafka.tools.EndToEndLatency",
    "kafka-streams-application-reset": "org.apache.kafka.tools.StreamsResetter",
    "kafka-transactional-message-copier": "org.apache.kafka.tools.TransactionalMessageCopier",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-storage": "kafka.tools.StorageTool",
    "kafka-dump-log": "kafka.tools.DumpLogSegments",
    "kafka-server-start": "kafka.Kafka",
}

# Small heaps and the client compiler: a tool starts in ~1 s on a busy 2-core machine.
TOOL_JVM_OPTS = ["-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                 "-Djava.awt.headless=true"]
SERVER_JVM_OPTS = ["-Xms128m", "-Xmx512m", "-XX:+UseG1GC", "-Djava.awt.headless=true"]

# Tools log warnings and errors to stderr (Kafka's tools-log4j2 does the same).
_LOG4J2 = """\
status = error
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = STDERR
"""


class KafkaUnavailable(Exception):
    """Java, Maven or the download is missing; the message says which (a test's skip reason)."""


def kafka_version() -> str:
    match = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", POM.read_text())
    if not match:
        raise KafkaUnavailable(f"no <kafka.version> in {POM}")
    return match.group(1)


def libs_dir() -> Path:
    override = os.environ.get("KRAFT_KAFKA_LIBS")
    if override:
        return Path(override)
    return Path.home() / ".cache" / "kraft" / f"kafka-{kafka_version()}" / "libs"


def missing_programs() -> list[str]:
    return [p for p in ("java", "javac", "mvn") if shutil.which(p) is None]


def ensure_libs(timeout_s: float = 900.0) -> Path:
    """The directory holding every Kafka jar, downloading them the first time.

    A ``.complete`` marker is written last, so an interrupted download is redone; a lock
    file beside the directory keeps two processes (two test workers, two runs) from
    writing the same jars at once, one of them reading a jar the other is still writing."""
    libs = libs_dir()
    marker = libs / ".complete"
    if marker.exists():
        return libs
    missing = missing_programs()
    if missing:
        raise KafkaUnavailable(f"{', '.join(missing)} not on PATH")
    libs.mkdir(parents=True, exist_ok=True)
    with open(libs.parent / f".{libs.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not marker.exists():  # else another process finished while this one waited
            _download_libs(libs, timeout_s)
    return libs


def _download_libs(libs: Path, timeout_s: float) -> None:
    marker = libs / ".complete"
    try:
        result = subprocess.run(
            ["mvn", "-q", "-B", "-f", str(POM), "dependency:copy-dependencies",
             f"-DoutputDirectory={libs}", "-DincludeScope=runtime"],
            capture_output=True, text=True, timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        raise KafkaUnavailable(f"mvn dependency:copy-dependencies took over {timeout_s:.0f}s") from None
    if result.returncode != 0:
        tail = (result.stdout + result.stderr).strip().splitlines()[-5:]
        raise KafkaUnavailable("mvn dependency:copy-dependencies failed: " + " | ".join(tail))
    (libs / "log4j2-tools.properties").write_text(_LOG4J2.format(level="warn"))
    (libs / "log4j2-server.properties").write_text(_LOG4J2.format(level="info"))
    marker.write_text(kafka_version() + "\n")


def java_command(main_class: str, args: list[str], *, libs: Path | None = None,
                 jvm_opts: list[str] | None = None, extra_classpath: list[str] = (),
                 log_config: str = "log4j2-tools.properties") -> list[str]:
    libs = libs or ensure_libs()
    classpath = os.pathsep.join([*extra_classpath, str(libs / "*")])
    return ["java", *(TOOL_JVM_OPTS if jvm_opts is None else jvm_opts),
            f"-Dlog4j2.configurationFile={libs / log_config}",
            "-cp", classpath, main_class, *args]


def tool_command(tool: str, args: list[str], **kwargs) -> list[str]:
    """The command ``<tool>.sh args`` would run, e.g. ``tool_command("kafka-topics", [...])``."""
    return java_command(TOOLS[tool], list(args), **kwargs)


def run_tool(tool: str, args: list[str], *, input: str | None = None, timeout_s: float = 120.0,
             **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(tool_command(tool, args, **kwargs), input=input, capture_output=True,
                          text=True, timeout=timeout_s)


def _broker_count(host: str, port: int) -> int:
    """How many brokers a Metadata answer lists (kraft's own client); 0 when unreachable."""
    import trio

    from kraft.client import KafkaClient, NodeUnavailable
    from kraft.trio_run import run_trio

    async def main():
        async with trio.open_nursery() as nursery:
            client = KafkaClient(nursery, connect_timeout_s=2.0)
            try:
                md = await client.request(host, port, "Metadata", 12, {"topics": []}, timeout_s=2.0)
                return len(md["brokers"])
            except NodeUnavailable:
                return 0
            finally:
                await client.aclose()
                nursery.cancel_scope.cancel()

    return run_trio(main)


class ApacheKafkaCluster:
    """N combined broker+controller Apache Kafka nodes on loopback (N = 1 or 3).

    The layout (free ports, one directory per node) and the settings are those of kraft's
    :class:`LocalCluster` with the same ``overrides``, so the two can be compared."""

    # Kafka's internal topics default to replication factor 3, which one node cannot hold.
    def __init__(self, base_dir: str | os.PathLike, *, nodes: int = 3,
                 overrides: dict[str, str] | None = None, heap: str | None = None):
        # imported here: fetching the jars (.ci/run, before any virtual environment
        # exists) needs nothing but the standard library, and LocalCluster needs cramjam
        from kraft.local_cluster import LocalCluster

        self.layout = LocalCluster(base_dir, controllers=nodes, brokers=0, overrides=overrides)
        self.processes: dict[int, subprocess.Popen] = {}
        self.libs = ensure_libs()
        # -Xmx512m by default (SERVER_JVM_OPTS); ``heap`` (e.g. "4g") for larger clusters:
        # at 15,000 partitions a 512 MB heap ran out (issue 19)
        self.jvm_opts = SERVER_JVM_OPTS if heap is None else [
            o for o in SERVER_JVM_OPTS if not o.startswith("-Xmx")] + [f"-Xmx{heap}"]

    @property
    def bootstrap_servers(self) -> str:
        return self.layout.bootstrap_servers

    @property
    def cluster_id(self) -> str:
        return self.layout.cluster_id

    def properties(self, node) -> dict[str, str]:
        rf = str(min(3, len(self.layout.nodes)))
        props = {
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": str(min(2, len(self.layout.nodes))),
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": str(min(2, len(self.layout.nodes))),
        }
        props.update(self.layout.properties(node))
        return props

    def format(self) -> None:
        for node in self.layout.nodes.values():
            node.directory.mkdir(parents=True, exist_ok=True)
            node.config_path.write_text(format_properties(self.properties(node)))
            result = run_tool("kafka-storage", ["format", f"--cluster-id={self.cluster_id}", "-c",
                                                str(node.config_path), "--ignore-formatted"],
                              libs=self.libs)
            if result.returncode != 0:
                raise RuntimeError(f"kafka-storage format of node {node.node_id} failed: "
                                   f"{(result.stdout + result.stderr).strip()}")

    def start(self, node_id: int | None = None) -> None:
        """Start every node, or only ``node_id`` (again, after a kill)."""
        for node in self.layout.nodes.values():
            if node_id is not None and node.node_id != node_id:
                continue
            log = open(node.log_path, "ab")
            try:
                self.processes[node.node_id] = subprocess.Popen(
                    tool_command("kafka-server-start", [str(node.config_path)], libs=self.libs,
                                 jvm_opts=self.jvm_opts, log_config="log4j2-server.properties"),
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    start_new_session=True)
            finally:
                log.close()
            node.process = self.processes[node.node_id]

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        """Until every broker answers Metadata listing all of them (registered, unfenced)."""
        deadline = time.monotonic() + timeout_s
        count = len(self.layout.nodes)
        while time.monotonic() < deadline:
            for node_id, proc in self.processes.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"Kafka node {node_id} exited with {proc.returncode}; see "
                                       f"{self.layout.nodes[node_id].log_path}")
            if all(_broker_count(n.host, n.broker_port) == count
                   for n in self.layout.nodes.values()):
                return
            time.sleep(0.5)
        raise TimeoutError(f"Apache Kafka cluster not ready after {timeout_s}s")

    def stop(self, timeout_s: float = 60.0) -> None:
        """SIGTERM every node (a controlled shutdown), SIGKILL what is left after the timeout."""
        deadline = time.monotonic() + timeout_s
        for proc in self.processes.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.processes.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def __enter__(self) -> "ApacheKafkaCluster":
        self.format()
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.stop(timeout_s=10)
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
