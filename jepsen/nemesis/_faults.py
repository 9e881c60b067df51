"""The nemeses: kill, pause, partition, packet, file.  (Clock lives in ``_clock``.)

Each one remembers what it did, so its ``stop-`` op undoes exactly that (a ``stop-kill``
restarts the nodes the kill nemesis killed, not the ones a file fault holds down) and its
``teardown`` leaves the cluster whole.
"""

from __future__ import annotations

import random
import time

from jepsen import faults
from jepsen.hosts import Hosts
from jepsen.net import PacketBehavior, grudge_components, partition_grudge
from jepsen.nemesis._core import Nemesis, completed
from jepsen.nemesis._targets import Oracle, select_targets


class _HostNemesis(Nemesis):
    def __init__(self, hosts: Hosts, rng: random.Random | None = None, oracle: Oracle | None = None):
        super().__init__(rng)
        self.hosts = hosts
        self.oracle = oracle or Oracle()
        self.fs = frozenset({f"start-{self.fault}", f"stop-{self.fault}"})

    def targets(self, spec) -> list[int]:
        return select_targets(spec, self.hosts.nodes, self.rng, self.oracle)

    def invoke(self, invocation: dict) -> dict:
        f = invocation.get("f")
        if f == f"start-{self.fault}":
            return completed(invocation, self.start(invocation.get("value")))
        if f == f"stop-{self.fault}":
            return completed(invocation, self.stop())
        self._unknown(invocation)

    def teardown(self) -> None:
        self.stop()


class KillNemesis(_HostNemesis):
    """``start-kill`` SIGKILLs the targets (value: a target spec); ``stop-kill`` restarts them."""

    fault = "kill"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.down: set[int] = set()

    def start(self, spec):
        nodes = self.targets(spec if spec is not None else "one")
        killed = [n for n in nodes if self.hosts.kill(n)]
        self.down |= set(nodes)
        return {"spec": spec, "killed": killed}

    def stop(self):
        started = [n for n in sorted(self.down) if self.hosts.start(n)]
        self.down.clear()
        return {"started": started}


class PauseNemesis(_HostNemesis):
    """``start-pause`` SIGSTOPs the targets; ``stop-pause`` SIGCONTs them."""

    fault = "pause"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.paused: set[int] = set()

    def start(self, spec):
        nodes = self.targets(spec if spec is not None else "one")
        paused = [n for n in nodes if self.hosts.pause(n)]
        self.paused |= set(paused)
        return {"spec": spec, "paused": paused}

    def stop(self):
        resumed = [n for n in sorted(self.paused) if self.hosts.resume(n)]
        self.paused.clear()
        return {"resumed": resumed}


class PartitionNemesis(_HostNemesis):
    """``start-partition`` (value: a partition spec, see ``jepsen.net.PARTITION_SPECS``, or an
    explicit grudge ``{node: [nodes it drops]}``) cuts the network; ``stop-partition`` heals.

    ``leader`` asks the oracle who leads each of its partitions (the ones the workload
    writes to) and cuts off, from every other node, the leader of one of them (chosen
    with the seeded generator), preferring one that is not the active controller.
    Held past the broker session timeout, the controller fences it and elects a new
    leader, so what it acknowledged without replicating is gone after the heal.  While a
    cluster settles the oracle may not know yet: it is asked again for up to
    ``leader_wait_s``; if it never answers, a random node is cut off instead and the
    op's value says so (``"fallback": "one"``).
    """

    fault = "partition"

    def __init__(self, *args, leader_wait_s: float = 5.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.leader_wait_s = leader_wait_s

    def start(self, spec):
        if isinstance(spec, dict):
            grudge = {int(k): set(v) for k, v in spec.items()}
            return self._cut(grudge, {"spec": "grudge"})
        spec = spec or "majority"
        if spec == "leader":
            return self._cut_leader()
        grudge = partition_grudge(spec, self.hosts.nodes, self.rng,
                                  primaries=self.oracle.primaries() if spec == "primaries" else ())
        return self._cut(grudge, {"spec": spec})

    def _cut_leader(self) -> dict:
        parts = [tuple(p) for p in self.oracle.partitions]
        deadline = time.monotonic() + self.leader_wait_s
        target = leader = controller = None
        while parts:
            controller = self.oracle.active_controller()
            leaders = {p: self.oracle.leader_of(*p) for p in parts}
            known = [p for p in parts if leaders[p] in self.hosts.nodes]
            # A leader that is not also the active controller: cutting off the controller
            # too makes the fault a controller failover first, which can outlast the hold.
            apart = [p for p in known if leaders[p] != controller]
            if apart or known:
                target = self.rng.choice(apart or known)
                leader = leaders[target]
                break
            if time.monotonic() >= deadline:
                break
            time.sleep(0.25)
        if leader is None:
            grudge = partition_grudge("one", self.hosts.nodes, self.rng)
            return self._cut(grudge, {"spec": "leader", "partition": None, "leader": None,
                                      "fallback": "one"})
        grudge = partition_grudge("leader", self.hosts.nodes, self.rng, primaries=[leader])
        return self._cut(grudge, {"spec": "leader", "partition": list(target), "leader": leader,
                                  "controller": controller})

    def _cut(self, grudge, value: dict) -> dict:
        self.hosts.partition(grudge)
        return {**value, "grudge": {str(k): sorted(v) for k, v in sorted(grudge.items())},
                "components": grudge_components(grudge, self.hosts.nodes)}

    def stop(self):
        self.hosts.heal()
        return "network healed"


class PacketNemesis(_HostNemesis):
    """``start-packet`` value ``{"targets": spec, "behavior": {delay_ms, jitter_ms, loss,
    duplicate, reorder}}`` shapes traffic to and from the targets; ``stop-packet`` undoes it."""

    fault = "packet"

    def start(self, value):
        value = value or {}
        behavior = PacketBehavior(**value.get("behavior", {}))
        nodes = self.targets(value.get("targets", "all"))
        self.hosts.shape(nodes, behavior)
        return {"targets": nodes, "behavior": behavior.to_dict()}

    def stop(self):
        self.hosts.unshape()
        return "packets normal"


FILE_FAULTS = ("lose-unsynced", "truncate", "bitflip")


class FileNemesis(_HostNemesis):
    """``start-file`` value ``{"fault": one of FILE_FAULTS, "targets": spec}`` kills the
    targets, damages their files and leaves them down; ``stop-file`` restarts them.

    ``lose-unsynced`` cuts each target's data directory back to its fsync journal (see
    ``jepsen.faults``); ``truncate`` and ``bitflip`` damage one log segment of one node
    (only the first target is hit, so replicas can repair it).
    """

    fault = "file"

    def __init__(self, *args, max_drop_bytes: int = 4096, bits: int = 1, **kwargs):
        super().__init__(*args, **kwargs)
        self.down: set[int] = set()
        self.max_drop_bytes = max_drop_bytes
        self.bits = bits

    def start(self, value):
        value = value or {}
        kind = value.get("fault", "lose-unsynced")
        if kind not in FILE_FAULTS:
            raise ValueError(f"unknown file fault {kind!r} (one of {', '.join(FILE_FAULTS)})")
        nodes = self.targets(value.get("targets", "one"))
        if kind != "lose-unsynced":
            nodes = nodes[:1]
        done = {}
        for node in nodes:
            cfg = self.hosts.configs[node]
            if cfg.data_dir is None:
                raise ValueError(f"node {node} has no data directory configured")
            self.hosts.kill(node)
            self.down.add(node)
            if kind == "lose-unsynced":
                if cfg.fsync_journal is None:
                    raise ValueError(f"node {node} has no fsync journal configured")
                done[str(node)] = faults.lose_unsynced_writes(cfg.data_dir, cfg.fsync_journal).to_dict()
            else:
                done[str(node)] = faults.corrupt(cfg.data_dir, kind, self.rng,
                                                 max_drop_bytes=self.max_drop_bytes, bits=self.bits)
        return {"fault": kind, "nodes": done}

    def stop(self):
        started = [n for n in sorted(self.down) if self.hosts.start(n)]
        self.down.clear()
        return {"started": started}
