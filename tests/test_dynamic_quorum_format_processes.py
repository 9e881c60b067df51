"""Kafka 4's quickstart on kraft: a ``server.properties`` with
``controller.quorum.bootstrap.servers`` and no ``controller.quorum.voters`` (Kafka's own
sample), formatted with ``kraftctl format --standalone`` or, for three controllers,
``--initial-controllers id@host:port:directory-id,...`` (KIP-853), starts a cluster that
takes and serves records, keeps its voter set across restarts, and elects a new leader when
the old one is killed; a broker, or a controller formatted ``--no-initial-controllers``,
learns the voters from ``controller.quorum.bootstrap.servers``.  Bad format options are
refused with one line saying what to do."""

import re
import signal
import subprocess
import sys
import time

import pytest

from cluster_helpers import kraftctl, wait_until
from kraft.local_cluster import free_port
from kraft.properties import format_properties


def kafka4_sample(node_id: int, port: int, controller_port: int, bootstrap: str, data) -> dict[str, str]:
    """Kafka 4.1's config/server.properties, with this test's ports and directory."""
    return {
        "process.roles": "broker,controller", "node.id": str(node_id),
        "controller.quorum.bootstrap.servers": bootstrap,
        "listeners": f"PLAINTEXT://:{port},CONTROLLER://:{controller_port}",
        "inter.broker.listener.name": "PLAINTEXT",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,"
                                          "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "num.network.threads": "3", "num.io.threads": "8", "socket.send.buffer.bytes": "102400",
        "socket.receive.buffer.bytes": "102400", "socket.request.max.bytes": "104857600",
        "log.dirs": str(data), "num.partitions": "1", "num.recovery.threads.per.data.dir": "1",
        "offsets.topic.replication.factor": "1", "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1", "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1", "log.retention.hours": "168", "log.segment.bytes": "1073741824",
        "log.retention.check.interval.ms": "300000",
        # this test's only change of timing: elections within a second, as the other tests'
        "controller.quorum.election.timeout.ms": "500", "controller.quorum.fetch.timeout.ms": "1000",
        "broker.heartbeat.interval.ms": "500", "broker.session.timeout.ms": "3000",
    }


class Nodes:
    """``kraftctl start`` processes, killed at the end whatever happens."""

    def __init__(self, tmp_path):
        self.tmp_path, self.procs = tmp_path, {}

    def start(self, node_id: int, config):
        log = open(self.tmp_path / f"node{node_id}.log", "ab")
        self.procs[node_id] = subprocess.Popen([sys.executable, "-m", "cli.main", "start", str(config)],
                                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()

    def stop(self, node_id: int, sig=signal.SIGTERM):
        p = self.procs.pop(node_id)
        p.send_signal(sig)
        p.wait(30)

    def close(self):
        for p in self.procs.values():
            p.kill()
            p.wait()


@pytest.fixture
def nodes(tmp_path):
    n = Nodes(tmp_path)
    yield n
    n.close()


def produce_and_read(bootstrap: str, topic: str, values: list[bytes], replication: int = 1) -> list[bytes]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, replication)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for v in values:
        producer.produce(topic, v)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got, deadline = [], time.monotonic() + 30
    while len(got) < len(values) and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    consumer.close()
    return got


def brokers_seen(bootstrap: str) -> int:
    from confluent_kafka.admin import AdminClient

    try:
        return len(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5).brokers)
    except Exception:  # noqa: BLE001 - not answering yet
        return 0


def voters_of(bootstrap: str) -> str:
    """The voter ids kraftctl's describe --status shows, e.g. "[1, 3]"."""
    out = kraftctl("metadata-quorum", "--bootstrap-server", bootstrap, "describe", "--status")
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("CurrentVoters")), None)
    return str([int(i) for i in re.findall(r'"id": (\d+)', line)]) if line else out.stdout + out.stderr


def test_kafka4_quickstart_standalone(tmp_path, nodes):
    port, cport = free_port(), free_port()
    config = tmp_path / "server.properties"
    config.write_text(format_properties(kafka4_sample(1, port, cport, f"127.0.0.1:{cport}", tmp_path / "logs")))
    cluster_id = kraftctl("random-uuid").stdout.strip()
    plain = kraftctl("format", "-t", cluster_id, "-c", str(config))
    assert plain.returncode == 1 and "controller.quorum.voters is not set on this controller" in plain.stderr
    assert "Traceback" not in plain.stderr
    formatted = kraftctl("format", "--standalone", "-t", cluster_id, "-c", str(config))
    assert formatted.returncode == 0, formatted.stderr
    bootstrap = f"127.0.0.1:{port}"
    nodes.start(1, config)
    assert produce_and_read(bootstrap, "quickstart-events", [b"one", b"two"]) == [b"one", b"two"]
    assert voters_of(bootstrap).endswith("[1]")
    nodes.stop(1)
    nodes.start(1, config)  # the voter set is the log's now
    assert produce_and_read(bootstrap, "after-restart", [b"three"]) == [b"three"]


def test_three_initial_controllers_elect_again_when_the_leader_dies(tmp_path, nodes):
    ports = {i: (free_port(), free_port()) for i in (1, 2, 3)}
    bootstrap_servers = ",".join(f"127.0.0.1:{c}" for _, c in ports.values())
    directory_ids = {i: kraftctl("random-uuid").stdout.strip() for i in ports}
    initial = ",".join(f"{i}@127.0.0.1:{c}:{directory_ids[i]}" for i, (_, c) in ports.items())
    cluster_id = kraftctl("random-uuid").stdout.strip()
    configs = {}
    for i, (port, cport) in ports.items():
        configs[i] = tmp_path / f"server{i}.properties"
        configs[i].write_text(format_properties(kafka4_sample(i, port, cport, bootstrap_servers, tmp_path / f"d{i}")))
        formatted = kraftctl("format", "--initial-controllers", initial, "-t", cluster_id, "-c", str(configs[i]))
        assert formatted.returncode == 0, formatted.stderr
        assert f"directory.id={directory_ids[i]}" in (tmp_path / f"d{i}" / "meta.properties").read_text()
        nodes.start(i, configs[i])
    bootstrap = ",".join(f"127.0.0.1:{p}" for p, _ in ports.values())
    wait_until(lambda: brokers_seen(bootstrap) == 3, timeout_s=30, what="three brokers registered")
    assert produce_and_read(bootstrap, "replicated", [b"a", b"b"], replication=3) == [b"a", b"b"]
    assert voters_of(bootstrap).endswith("[1, 2, 3]")
    status = kraftctl("metadata-quorum", "--bootstrap-server", bootstrap, "describe", "--status").stdout
    leader = int(next(ln for ln in status.splitlines() if ln.startswith("LeaderId")).split()[-1])
    # asked through a follower's controller listener (--bootstrap-controller), the leader answers
    follower = next(i for i in ports if i != leader)
    via = kraftctl("metadata-quorum", "--bootstrap-controller", f"127.0.0.1:{ports[follower][1]}", "describe",
                   "--replication")
    assert via.returncode == 0, via.stderr
    rows = [ln.split("\t") for ln in via.stdout.splitlines()[1:]]
    assert sorted(int(r[0]) for r in rows) == [1, 2, 3] and all(int(r[1]) > 0 for r in rows), via.stdout
    assert [r[0] for r in rows if r[-1] == "Leader"] == [str(leader)], via.stdout
    nodes.stop(leader, signal.SIGKILL)
    rest = ",".join(f"127.0.0.1:{p}" for i, (p, _) in ports.items() if i != leader)

    def new_leader():
        out = kraftctl("metadata-quorum", "--bootstrap-server", rest, "describe", "--status").stdout
        line = next((ln for ln in out.splitlines() if ln.startswith("LeaderId")), "LeaderId: -1")
        return int(line.split()[-1]) not in (-1, leader)

    wait_until(new_leader, timeout_s=30, what="a new leader among the two left")


def test_a_broker_and_a_later_controller_join_through_the_bootstrap_servers(tmp_path, nodes):
    """Kafka 4's broker.properties names the quorum by controller.quorum.bootstrap.servers
    only; a controller formatted --no-initial-controllers follows the log until
    add-controller makes it a voter."""
    port, cport = free_port(), free_port()
    bootstrap_servers = f"127.0.0.1:{cport}"
    first = tmp_path / "controller1.properties"
    first.write_text(format_properties(kafka4_sample(1, port, cport, bootstrap_servers, tmp_path / "d1")))
    cluster_id = kraftctl("random-uuid").stdout.strip()
    assert kraftctl("format", "--standalone", "-t", cluster_id, "-c", str(first)).returncode == 0
    bport = free_port()
    broker = tmp_path / "broker.properties"
    broker.write_text(format_properties({
        **kafka4_sample(2, bport, cport, bootstrap_servers, tmp_path / "d2"), "process.roles": "broker",
        "listeners": f"PLAINTEXT://:{bport}", "advertised.listeners": f"PLAINTEXT://127.0.0.1:{bport}"}))
    assert kraftctl("format", "-t", cluster_id, "-c", str(broker)).returncode == 0
    nodes.start(2, broker)  # before any controller: it waits for the bootstrap servers to answer
    time.sleep(1.5)
    nodes.start(1, first)
    bootstrap = f"127.0.0.1:{port},127.0.0.1:{bport}"
    wait_until(lambda: brokers_seen(bootstrap) == 2, timeout_s=30, what="the broker registered")
    assert produce_and_read(bootstrap, "two-brokers", [b"x"], replication=2) == [b"x"]

    later_port, later_cport = free_port(), free_port()
    later = tmp_path / "controller3.properties"
    later.write_text(format_properties({
        **kafka4_sample(3, later_port, later_cport, bootstrap_servers, tmp_path / "d3"), "process.roles": "controller",
        "listeners": f"CONTROLLER://:{later_cport}", "advertised.listeners": f"CONTROLLER://127.0.0.1:{later_cport}"}))
    formatted = kraftctl("format", "--no-initial-controllers", "-t", cluster_id, "-c", str(later))
    assert formatted.returncode == 0, formatted.stderr
    nodes.start(3, later)
    wait_until(lambda: "CurrentObservers" in (out := kraftctl(
        "metadata-quorum", "--bootstrap-server", bootstrap, "describe", "--status").stdout) and
        '"id": 3' in next(ln for ln in out.splitlines() if ln.startswith("CurrentObservers")),
        timeout_s=30, what="the new controller following the log")
    added = kraftctl("metadata-quorum", "--bootstrap-controller", bootstrap_servers, "add-controller",
                     "--command-config", str(later))
    assert added.returncode == 0, added.stdout + added.stderr
    wait_until(lambda: voters_of(bootstrap).endswith("[1, 3]"), timeout_s=30, what="voters [1, 3]")


def test_format_options_are_checked(tmp_path):
    port, cport = free_port(), free_port()
    props = kafka4_sample(1, port, cport, f"127.0.0.1:{cport}", tmp_path / "logs")
    cluster_id = kraftctl("random-uuid").stdout.strip()
    static = tmp_path / "static.properties"
    static.write_text(format_properties(dict(props, **{"controller.quorum.voters": f"1@127.0.0.1:{cport}"})))
    both = kraftctl("format", "--standalone", "-t", cluster_id, "-c", str(static))
    assert both.returncode == 1 and "controller.quorum.voters is set" in both.stderr
    config = tmp_path / "server.properties"
    config.write_text(format_properties(props))
    two = kraftctl("format", "--standalone", "--no-initial-controllers", "-t", cluster_id, "-c", str(config))
    assert two.returncode == 1 and "give at most one" in two.stderr
    bad = kraftctl("format", "--initial-controllers", "1@127.0.0.1", "-t", cluster_id, "-c", str(config))
    assert bad.returncode == 1 and "is not id@host:port:directory-id" in bad.stderr
    for result in (both, two, bad):
        assert "Traceback" not in result.stderr
