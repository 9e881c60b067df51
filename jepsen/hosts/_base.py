"""What every host backend offers: node processes and network control.

A backend owns N nodes, named by kraft node id.  Each node has an address (where clients
and peers reach it), a command that runs it (configured once, run many times), a data
directory (what file faults attack) and two per-node files the nemeses use: the clock
offset file (``KRAFT_CLOCK_OFFSET_FILE``) and the fsync journal (``KRAFT_FSYNC_JOURNAL``).
The process side (start, stop, kill, pause, resume) is the same for every backend except
for the command prefix that places a process on its host; backends differ in addresses
and in how they enforce grudges and packet behaviours.

The methods are synchronous (they run short subprocesses and signal processes); trio code
calls them through ``trio.to_thread.run_sync``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from jepsen.faults._journal import JOURNAL_ENV
from jepsen.hosts._commands import HostError, Unsupported, run_checked  # noqa: F401 - re-exported
from jepsen.hosts._runs import RUN_ENV, forget_on_exit, new_run_id, on_exit
from jepsen.hosts._system import remove_run
from jepsen.net import Grudge, PacketBehavior

CLOCK_ENV = "KRAFT_CLOCK_OFFSET_FILE"  # read by kraft.clock


#: Network faults and the capabilities (any one of them) that enforce each.
NETWORK_FAULT_NEEDS = {"partition": frozenset({"partition"}),
                       "packet": frozenset({"packet", "packet-loss"})}


@dataclass
class NodeConfig:
    """How to run one node.  ``env`` adds to the harness's environment."""

    argv: list[str]
    data_dir: Path | None = None
    log_path: Path | None = None
    cwd: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    clock_file: Path | None = None
    fsync_journal: Path | None = None

    def full_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.env)
        if self.clock_file is not None:
            env[CLOCK_ENV] = str(self.clock_file)
        if self.fsync_journal is not None:
            env[JOURNAL_ENV] = str(self.fsync_journal)
        return env


class Hosts:
    """The common interface.  Subclasses set ``kind``, ``capabilities`` and implement
    ``address``, ``_prefix``, ``partition``, ``heal``, ``shape``, ``unshape``, ``close``."""

    kind = "abstract"
    #: Subset of {"partition", "packet-loss", "packet"} this backend can enforce
    #: ("packet": netem delay, duplication, reordering; "packet-loss": random loss only).
    capabilities: frozenset[str] = frozenset()

    def __init__(self, node_ids: Sequence[int]):
        if not node_ids:
            raise ValueError("a cluster needs at least one node")
        self.nodes: list[int] = list(node_ids)
        self.configs: dict[int, NodeConfig] = {}
        self._procs: dict[int, subprocess.Popen] = {}
        self._paused: set[int] = set()
        #: Names this run's resources and tags its processes (see ``_runs``).
        self.run_id: str | None = None

    # -- per-backend ---------------------------------------------------------------------

    def address(self, node: int) -> str:
        raise NotImplementedError

    def unsupported(self, faults: Sequence[str]) -> dict[str, str]:
        """The network faults of ``faults`` this backend cannot enforce, with the reason
        (process, clock and file faults work everywhere)."""
        out = {}
        for fault in faults:
            need = NETWORK_FAULT_NEEDS.get(fault)
            if need and not need & self.capabilities:
                out[fault] = self._why_not(fault)
        return out

    def _why_not(self, fault: str) -> str:
        return f"the {self.kind} backend cannot do {fault}"

    def _prefix(self, node: int) -> list[str]:
        """Command prefix that runs a command on ``node``'s host."""
        return []

    def partition(self, grudge: Grudge) -> None:
        """Enforce ``grudge`` (replacing any earlier one); nodes absent from it hear all."""
        raise Unsupported(f"the {self.kind} backend cannot partition the network")

    def heal(self) -> None:
        """Remove every partition."""

    def shape(self, nodes: Sequence[int], behavior: PacketBehavior) -> None:
        """Apply ``behavior`` to all traffic to and from ``nodes`` (replacing earlier shaping)."""
        raise Unsupported(f"the {self.kind} backend cannot shape packets")

    def unshape(self) -> None:
        """Remove all packet shaping."""

    def ensure_run_id(self) -> str:
        """The run id, created (with the exit hook) on first need.  Nodes run in their own
        sessions, so a dying harness must take them along explicitly."""
        if self.run_id is None:
            self.run_id = new_run_id()
            on_exit(self.close)
        return self.run_id

    def close(self) -> None:
        """Stop every node and remove everything the backend created."""
        forget_on_exit(self.close)
        self.kill_all()
        if self.run_id is not None:
            remove_run(self.run_id)
            self.run_id = None

    # -- processes -----------------------------------------------------------------------

    def configure(self, node: int, config: NodeConfig) -> None:
        if node not in self.nodes:
            raise KeyError(f"no node {node}")
        self.configs[node] = config

    def command(self, node: int, argv: Sequence[str]) -> list[str]:
        """``argv`` as it must be run to execute on ``node``'s host."""
        return self._prefix(node) + list(argv)

    def run(self, node: int, argv: Sequence[str], *, timeout_s: float = 30.0,
            check: bool = True) -> subprocess.CompletedProcess:
        """Run a short command on ``node``'s host and return its result (text output)."""
        return run_checked(self.command(node, argv), timeout_s=timeout_s, check=check)

    def is_running(self, node: int) -> bool:
        proc = self._procs.get(node)
        return proc is not None and proc.poll() is None

    def is_paused(self, node: int) -> bool:
        return node in self._paused and self.is_running(node)

    def pid(self, node: int) -> int | None:
        proc = self._procs.get(node)
        return proc.pid if proc is not None and proc.poll() is None else None

    def start(self, node: int) -> bool:
        """Start ``node`` unless it runs; returns whether a process was started."""
        if self.is_running(node):
            return False
        cfg = self.configs.get(node)
        if cfg is None:
            raise HostError(f"node {node} has no command configured")
        env = cfg.full_env()
        env[RUN_ENV] = self.ensure_run_id()
        log = open(cfg.log_path, "ab") if cfg.log_path else subprocess.DEVNULL
        try:
            self._procs[node] = subprocess.Popen(
                self.command(node, cfg.argv), cwd=cfg.cwd, env=env,
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: signals reach all of it
            )
        finally:
            if log is not subprocess.DEVNULL:
                log.close()
        self._paused.discard(node)
        return True

    def _signal(self, node: int, sig: int) -> bool:
        proc = self._procs.get(node)
        if proc is None or proc.poll() is not None:
            return False
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return False
        return True

    def kill(self, node: int) -> bool:
        """SIGKILL the node's process group (a crash); returns whether it was running."""
        if not self._signal(node, signal.SIGKILL):
            return False
        self._procs[node].wait()
        self._paused.discard(node)
        return True

    def stop(self, node: int, timeout_s: float = 30.0) -> bool:
        """SIGTERM (after SIGCONT: a paused process cannot exit), SIGKILL after ``timeout_s``."""
        if not self.is_running(node):
            return False
        self._signal(node, signal.SIGCONT)
        self._signal(node, signal.SIGTERM)
        try:
            self._procs[node].wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill(node)
        self._paused.discard(node)
        return True

    def pause(self, node: int) -> bool:
        """SIGSTOP; returns whether the node was running."""
        if self._signal(node, signal.SIGSTOP):
            self._paused.add(node)
            return True
        return False

    def resume(self, node: int) -> bool:
        """SIGCONT; returns whether the node was paused."""
        was = node in self._paused
        self._paused.discard(node)
        return self._signal(node, signal.SIGCONT) and was

    def start_all(self) -> None:
        for node in self.nodes:
            self.start(node)

    def kill_all(self) -> None:
        for node in self.nodes:
            self.kill(node)

    def stop_all(self, timeout_s: float = 30.0) -> None:
        for node in self.nodes:
            if self.is_running(node):
                self._signal(node, signal.SIGCONT)
                self._signal(node, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for node in self.nodes:
            proc = self._procs.get(node)
            if proc is None:
                continue
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.kill(node)
        self._paused.clear()

    def __enter__(self) -> "Hosts":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def check_grudge(hosts: Hosts, grudge: Mapping[int, set[int]]) -> None:
    unknown = (set(grudge) | set().union(*grudge.values())) - set(hosts.nodes) if grudge else set()
    if unknown:
        raise KeyError(f"grudge names unknown nodes {sorted(unknown)}")
