"""The nemeses: kill, pause, partition, packet, file.  (Clock lives in ``_clock``.)

Each one remembers what it did, so its ``stop-`` op undoes exactly that (a ``stop-kill``
restarts the nodes the kill nemesis killed, not the ones a file fault holds down) and its
``teardown`` leaves the cluster whole.
"""

from __future__ import annotations

import random

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
    explicit grudge ``{node: [nodes it drops]}``) cuts the network; ``stop-partition`` heals."""

    fault = "partition"

    def start(self, spec):
        if isinstance(spec, dict):
            grudge = {int(k): set(v) for k, v in spec.items()}
        else:
            grudge = partition_grudge(spec or "majority", self.hosts.nodes, self.rng,
                                      primaries=self.oracle.primaries() if spec == "primaries" else ())
        self.hosts.partition(grudge)
        return {"spec": spec if not isinstance(spec, dict) else "grudge",
                "grudge": {str(k): sorted(v) for k, v in sorted(grudge.items())},
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
