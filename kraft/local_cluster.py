"""A cluster of kraft processes on this machine: config files, formatting, start/stop/kill.

Used by ``kraftctl cluster`` (the development cluster), the integration tests and the
jepsen ``local`` host backend.  Every node is a real ``kraftctl start`` process with its own
data directory and log file; nothing is shared between nodes but the loopback network.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from kraft.properties import format_properties
from kraft.storage import new_uuid_string


_FIRST_PORT = 10000
_PYSYNCOBJ_OFFSET = 1000  # the pysyncobj engine listens on the controller port + 1000


def _ephemeral_low() -> int:
    """Where the kernel's ephemeral ports (local ports of outgoing connections) begin."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


# Ports this process has handed out, newest last: a cluster's ports are chosen one after
# another before any node binds one, so the bind test alone let two nodes of one cluster draw
# the same port (about 1 in 800 clusters of 4 nodes; a test suite starts hundreds).
_HANDED_OUT: dict[int, None] = {}
_HANDED_OUT_KEPT = 4096


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now, for a node to bind a moment later, and not handed
    out before by this process (nor paired with one through the pysyncobj engine's offset).

    Chosen below the ephemeral range: a port the kernel picks for ``bind(0)`` is an
    ephemeral one, and in the second before the node binds it any outgoing connection on the
    machine could take it as its local port (seen as a broker dying of EADDRINUSE)."""
    rng = random.SystemRandom()
    high = _ephemeral_low() - _PYSYNCOBJ_OFFSET - 1
    for _ in range(1000):
        port = rng.randint(_FIRST_PORT, high)
        if any(p in _HANDED_OUT for p in (port, port + _PYSYNCOBJ_OFFSET, port - _PYSYNCOBJ_OFFSET)):
            continue
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
        _HANDED_OUT[port] = None
        if len(_HANDED_OUT) > _HANDED_OUT_KEPT:
            del _HANDED_OUT[next(iter(_HANDED_OUT))]
        return port
    raise RuntimeError(f"no free port in {_FIRST_PORT}-{high} on {host}")


@dataclass
class NodeSpec:
    node_id: int
    roles: tuple[str, ...]
    host: str
    broker_port: int | None
    controller_port: int | None
    directory: Path
    process: subprocess.Popen | None = field(default=None, repr=False)
    extra_ports: dict[str, int] = field(default_factory=dict)  # more broker listeners: name -> port
    metrics_port: int | None = None  # kraft.metrics.port: Prometheus metrics over HTTP

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.directory / "node.log"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def metrics_url(self) -> str | None:
        return f"http://{self.host}:{self.metrics_port}/metrics" if self.metrics_port else None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class LocalCluster:
    """N controllers and M brokers (or N combined nodes when ``brokers == 0``)."""

    def __init__(self, base_dir: str | os.PathLike, *, controllers: int = 3, brokers: int = 0,
                 host: str = "127.0.0.1", hosts: list[str] | None = None,
                 first_broker_port: int | None = None, overrides: dict[str, str] | None = None,
                 cluster_id: str | None = None, open_files_limit: int | None = None, security=None,
                 node_overrides: dict[int, dict[str, str]] | None = None):
        """``security``: a ``kraft.security.dev_cluster.ClusterSecurity`` (TLS and SASL on
        every listener, certificates written under ``base_dir/certs``); None is PLAINTEXT.
        ``node_overrides``: node id -> keys for that node alone (``broker.rack``), over
        ``overrides``."""
        self.base_dir = Path(base_dir)
        self.security = security
        self.open_files_limit = open_files_limit  # `ulimit -n` for every node (soft and hard)
        self.cluster_id = cluster_id or new_uuid_string()
        self.overrides = dict(overrides or {})
        self.node_overrides = {n: dict(keys) for n, keys in (node_overrides or {}).items()}
        self.nodes: dict[int, NodeSpec] = {}
        total = controllers + brokers
        hosts = hosts or [host] * total
        next_port = first_broker_port
        for i in range(total):
            node_id = i + 1
            combined = brokers == 0
            roles = ("broker", "controller") if combined else (("controller",) if i < controllers else ("broker",))
            h = hosts[i]
            broker_port = None
            if "broker" in roles:
                broker_port = next_port if next_port else free_port(h)
                if next_port:
                    next_port += 1
            controller_port = free_port(h) if "controller" in roles else None
            self.nodes[node_id] = NodeSpec(node_id, roles, h, broker_port, controller_port,
                                           self.base_dir / f"node{node_id}", metrics_port=free_port(h))
            if security is not None and "broker" in roles:
                self.nodes[node_id].extra_ports = {name: free_port(h) for name in list(security.listener_protocols)[1:]}
        if security is not None:
            security.prepare(self.base_dir / "certs", sorted(set(hosts)))
        # The static controller.quorum.voters every node is configured with; controllers
        # added later (add_controller_node) join the quorum through AddRaftVoter instead.
        # (Read when configs are written: a backend may move hosts and ports after this.)
        self._static_voters = [n.node_id for n in self.nodes.values() if n.is_controller]

    # -- layout -------------------------------------------------------------------------

    @property
    def voters(self) -> str:
        return ",".join(f"{n.node_id}@{n.host}:{n.controller_port}"
                        for n in (self.nodes[i] for i in self._static_voters))

    def add_controller_node(self, host: str | None = None) -> NodeSpec:
        """A new controller-only node, configured and formatted but not started: it follows
        the metadata log as an observer until ``kraftctl metadata-quorum add-controller``."""
        node_id = max(self.nodes) + 1
        h = host or next(iter(self.nodes.values())).host
        node = NodeSpec(node_id, ("controller",), h, None, free_port(h), self.base_dir / f"node{node_id}",
                        metrics_port=free_port(h))
        self.nodes[node_id] = node
        node.directory.mkdir(parents=True, exist_ok=True)
        node.config_path.write_text(format_properties(self.properties(node)))
        self._format_node(node)
        return node

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{n.host}:{n.broker_port}" for n in self.nodes.values() if n.is_broker)

    def bootstrap_for(self, listener: str) -> str:
        """bootstrap.servers of one of ``security.extra_listeners``."""
        return ",".join(f"{n.host}:{n.extra_ports[listener.upper()]}" for n in self.brokers)

    @property
    def brokers(self) -> list[NodeSpec]:
        return [n for n in self.nodes.values() if n.is_broker]

    @property
    def controllers(self) -> list[NodeSpec]:
        return [n for n in self.nodes.values() if n.is_controller]

    def properties(self, node: NodeSpec) -> dict[str, str]:
        listeners = []
        main = self.security.protocol if self.security is not None else "PLAINTEXT"
        if node.is_broker:
            listeners.append(f"{main}://{node.host}:{node.broker_port}")
            listeners.extend(f"{name}://{node.host}:{port}" for name, port in node.extra_ports.items())
        if node.is_controller:
            listeners.append(f"CONTROLLER://{node.host}:{node.controller_port}")
        props = {
            "process.roles": ",".join(node.roles),
            "node.id": str(node.node_id),
            "controller.quorum.voters": self.voters,
            "listeners": ",".join(listeners),
            "controller.listener.names": "CONTROLLER",
            "log.dirs": str(node.data_dir),
            "num.partitions": "1",
            "default.replication.factor": str(min(3, len(self.brokers))),
            "offsets.topic.replication.factor": str(min(3, len(self.brokers))),
            "offsets.topic.num.partitions": "10",
            "transaction.state.log.replication.factor": str(min(3, len(self.brokers))),
            "transaction.state.log.min.isr": str(min(2, len(self.brokers))),
            "transaction.state.log.num.partitions": "10",
            "kraft.metrics.host": node.host,
            "kraft.metrics.port": str(node.metrics_port),
        }
        if self.security is not None:
            props.update(self.security.properties())
        props.update(self.overrides)
        props.update(self.node_overrides.get(node.node_id, {}))
        return props

    def write_configs(self) -> None:
        for node in self.nodes.values():
            node.directory.mkdir(parents=True, exist_ok=True)
            node.config_path.write_text(format_properties(self.properties(node)))

    def format(self) -> None:
        self.write_configs()
        for node in self.nodes.values():
            self._format_node(node)

    def _format_node(self, node: NodeSpec) -> None:
        result = subprocess.run(
            [sys.executable, "-m", "cli.main", "format", "--config", str(node.config_path),
             "--cluster-id", self.cluster_id, "--ignore-formatted",
             *(self.security.format_args() if self.security is not None else ())],
            capture_output=True, text=True, timeout=120,
        )
        if result.returncode != 0:
            raise RuntimeError(f"formatting node {node.node_id} failed: {result.stderr.strip()}")

    # -- processes ----------------------------------------------------------------------

    def start(self, node_id: int, extra_args: tuple[str, ...] = ()) -> None:
        node = self.nodes[node_id]
        if node.running:
            return
        log = open(node.log_path, "ab")
        try:
            node.process = subprocess.Popen(
                [sys.executable, "-m", "cli.main", "start", str(node.config_path), *extra_args],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C in a terminal reaches the supervisor only
                preexec_fn=self._limit_open_files if self.open_files_limit else None,
            )
        finally:
            log.close()

    def _limit_open_files(self) -> None:  # in the child, before exec
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_files_limit, self.open_files_limit))

    def start_all(self) -> None:
        for node_id in self.nodes:
            self.start(node_id)

    def signal(self, node_id: int, sig: int) -> None:
        node = self.nodes[node_id]
        if node.running:
            os.kill(node.process.pid, sig)

    def kill(self, node_id: int) -> None:
        """SIGKILL: no shutdown work at all, as a crash."""
        node = self.nodes[node_id]
        if node.running:
            node.process.kill()
            node.process.wait()

    def stop(self, node_id: int, timeout_s: float = 30.0) -> int | None:
        """SIGTERM and wait for a clean exit; SIGKILL after ``timeout_s``."""
        node = self.nodes[node_id]
        if not node.running:
            return node.process.returncode if node.process else None
        try:
            node.process.send_signal(signal.SIGCONT)  # a paused node cannot exit
            node.process.terminate()
            return node.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            node.process.kill()
            return node.process.wait()

    def stop_all(self, timeout_s: float = 30.0) -> None:
        """SIGTERM every node, broker-only nodes first: their controlled shutdowns need the
        controllers, which stop (together) once the brokers are gone."""
        deadline = time.monotonic() + timeout_s
        brokers = [n for n in self.nodes.values() if not n.is_controller]
        controllers = [n for n in self.nodes.values() if n.is_controller]
        for group in (brokers, controllers):
            for node in group:
                if node.running:
                    node.process.send_signal(signal.SIGCONT)  # a paused node cannot exit
                    node.process.terminate()
            for node in group:
                if node.process is None:
                    continue
                try:
                    node.process.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    node.process.kill()
                    node.process.wait()

    def __enter__(self) -> "LocalCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.stop_all()
