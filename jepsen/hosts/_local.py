"""The ``local`` backend: every node a process on its own loopback address.

Node ``i`` (0-based position) listens on ``127.0.0.<first + i>``; ``127.0.0.1`` stays the
harness's own address, so client traffic is never caught in a partition between nodes.

Partitions are enforced with one nftables table in the host's namespace: a drop rule
for each (source address, destination address) pair of the grudge, in the input hook that
loopback traffic passes through.  What ``local`` cannot do, honestly:

* a rule matches addresses, so a node must *bind its outgoing connections to its own
  address*; a connection from an unbound socket leaves from 127.0.0.1 and crosses every
  partition.  kraft nodes do: every node-to-node ``KafkaClient`` (Raft, heartbeats,
  replica fetches) binds to the node's listener host (``cli/node.py``).
* no delay, duplication or reordering (netem on ``lo`` would hit every process on the
  machine); random loss between node addresses works (nftables ``numgen``).
* partitions need root and ``nft``.  ``unsupported`` installs nftables (as root, with
  apt-get) when a run asks for a network fault; without root the run is refused, naming
  ``--hosts netns`` (which needs root too) -- a partition is never silently left out.
* processes share one kernel clock, one filesystem and one port space.

Clients stay on 127.0.0.1, outside every grudge: as in Jepsen, where clients run on the
control node, a partition cuts nodes off from each other, not from the clients, so a
cut-off leader keeps receiving (and, if it is unsafe, acknowledging) writes.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
from collections.abc import Sequence

from jepsen.hosts._base import Hosts, Unsupported, check_grudge, run_checked
from jepsen.hosts._system import ensure_tools
from jepsen.net import DropRule, Grudge, PacketBehavior, grudge_rules, nft_ruleset


class LocalHosts(Hosts):
    kind = "local"

    def __init__(self, node_ids: Sequence[int], *, first_address: str = "127.0.0.2"):
        super().__init__(node_ids)
        first = ipaddress.IPv4Address(first_address)
        last = first + len(self.nodes) - 1
        if not (first.is_loopback and last.is_loopback):
            raise ValueError(f"{first}..{last} is not all loopback")
        self._addresses = {n: str(first + i) for i, n in enumerate(self.nodes)}
        self.capabilities = self._capabilities()
        self._grudge: Grudge = {}
        self._loss: list[DropRule] = []

    def address(self, node: int) -> str:
        return self._addresses[node]

    @staticmethod
    def _capabilities() -> frozenset[str]:
        return (frozenset({"partition", "packet-loss"})
                if os.geteuid() == 0 and shutil.which("nft") else frozenset())

    def unsupported(self, faults: Sequence[str]) -> dict[str, str]:
        missing = super().unsupported(faults)
        if missing and os.geteuid() == 0 and not shutil.which("nft"):
            try:
                ensure_tools(["nft"])  # as the netns backend does
            except Unsupported:
                pass
            self.capabilities = self._capabilities()
            missing = super().unsupported(faults)
        return missing

    def _why_not(self, fault: str) -> str:
        how = ("run as root" if os.geteuid() != 0
               else "install nftables (apt-get install nftables)")
        return (f"the local backend enforces {fault} faults with nftables on loopback, which "
                f"needs root and nft: {how}, or use --hosts netns (root)")

    # -- firewall on loopback --------------------------------------------------------------

    def _apply(self) -> None:
        if "partition" not in self.capabilities:
            raise Unsupported("local partitions need root and nft (apt-get install nftables)")
        rules = grudge_rules(self._grudge, self.address, with_dst=True) + self._loss
        run_checked(["nft", "-f", "-"], input=nft_ruleset("ip", self.ensure_run_id(), rules))

    def partition(self, grudge: Grudge) -> None:
        check_grudge(self, grudge)
        self._grudge = {k: set(v) for k, v in grudge.items()}
        self._apply()

    def heal(self) -> None:
        if self._grudge:
            self._grudge = {}
            self._apply()

    def shape(self, nodes: Sequence[int], behavior: PacketBehavior) -> None:
        if not behavior.loss_only:
            raise Unsupported("the local backend can only drop packets at random; delay, "
                              "duplication and reordering need the netns backend with netem")
        targets = {self.address(n) for n in nodes}
        others = [self.address(n) for n in self.nodes]
        # Traffic to and from the targets, between node addresses only.
        self._loss = [DropRule(src, dst, behavior.loss) for src in others for dst in others
                      if src != dst and (src in targets or dst in targets)]
        self._apply()

    def unshape(self) -> None:
        if self._loss:
            self._loss = []
            self._apply()
