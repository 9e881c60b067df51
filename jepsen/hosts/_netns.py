"""The ``netns`` backend: one network namespace per node, joined by a bridge (Linux, root).

Layout for run ``kjXXXXXX`` with nodes at positions 0..N-1::

    root namespace                      namespace kjXXXXXXn<i>
    bridge kjXXXXXXbr  10.<a>.<b>.1/24
      veth kjXXXXXXv<i>  <------------>  eth0  10.<a>.<b>.<10+i>/24, lo up

The subnet is a private /24 chosen per run among those no local address or route uses.
Namespaces get no default route, so nothing they send can leave the subnet; the harness
reaches every node through the bridge address.  Partitions are nftables drop rules in each
namespace's own input hook (node b drops packets whose source is a node it holds a grudge
against), so a partitioned link really loses packets while each namespace's loopback and
the harness's link keep working.  Packet faults use ``tc netem`` on both ends of a target's
veth (traffic to and from it); on a kernel without netem only random loss is possible,
through nftables, and the other behaviours raise ``Unsupported``.

Everything is named after the run id and removed by ``close()``, at interpreter exit, on
SIGTERM/SIGHUP, and by ``jepsen.hosts.cleanup()`` after a crash (see ``_system``).
"""

from __future__ import annotations

import ipaddress
import random
import subprocess
from collections.abc import Sequence

from jepsen.hosts import _system
from jepsen.hosts._base import HostError, Hosts, Unsupported, check_grudge, run_checked
from jepsen.net import DropRule, Grudge, PacketBehavior, grudge_rules, netem_args, nft_ruleset

_FIRST_HOST = 10


def _used_prefixes() -> str:
    out = []
    for argv in (["ip", "-o", "addr", "show"], ["ip", "route", "show", "table", "all"]):
        out.append(subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout)
    return "\n".join(out)


def pick_subnet(rng: random.Random | None = None) -> ipaddress.IPv4Network:
    """A 10.x.y.0/24 that no local address or route overlaps."""
    rng = rng or random.Random()
    taken = _networks_in(_used_prefixes())
    for _ in range(200):
        net = ipaddress.IPv4Network(f"10.{rng.randrange(100, 250)}.{rng.randrange(1, 255)}.0/24")
        if not any(net.overlaps(t) for t in taken):
            return net
    raise HostError("no free private /24 for the namespace bridge")


def _networks_in(text: str) -> list[ipaddress.IPv4Network]:
    """Every IPv4 address or prefix mentioned in ``ip addr``/``ip route`` output, except the
    default route."""
    found = []
    for word in text.split():
        if not word[:1].isdigit() or ":" in word:
            continue
        try:
            net = ipaddress.IPv4Network(word, strict=False)
        except ValueError:
            continue
        if net.prefixlen:
            found.append(net)
    return found


class NetnsHosts(Hosts):
    kind = "netns"

    def __init__(self, node_ids: Sequence[int], *, install: bool = True):
        super().__init__(node_ids)
        _system.require_root("the netns backend")
        _system.ensure_tools(["ip", "nft"], install=install)
        if len(self.nodes) > 240:
            raise ValueError("at most 240 nodes fit the /24")
        self.ensure_run_id()
        self._closed = False
        self._grudge: Grudge = {}
        self._loss: dict[int, list[DropRule]] = {}
        self._netem: bool | None = None
        self._shaped: list[int] = []
        self.bridge = f"{self.run_id}br"
        self._ns = {n: f"{self.run_id}n{i}" for i, n in enumerate(self.nodes)}
        self._veth = {n: f"{self.run_id}v{i}" for i, n in enumerate(self.nodes)}
        try:
            self.subnet = pick_subnet()
            hosts = list(self.subnet.hosts())
            self.bridge_address = str(hosts[0])
            self._addr = {n: str(hosts[_FIRST_HOST - 1 + i]) for i, n in enumerate(self.nodes)}
            self._build()
        except BaseException:
            self.close()
            raise
        caps = {"partition", "packet-loss"}
        if self.netem_available():
            caps.add("packet")
        self.capabilities = frozenset(caps)

    # -- topology -------------------------------------------------------------------------

    def _build(self) -> None:
        prefix = self.subnet.prefixlen
        run_checked(["ip", "link", "add", self.bridge, "type", "bridge"])
        run_checked(["ip", "addr", "add", f"{self.bridge_address}/{prefix}", "dev", self.bridge])
        run_checked(["ip", "link", "set", self.bridge, "up"])
        for i, node in enumerate(self.nodes):
            ns, veth, peer = self._ns[node], self._veth[node], f"{self.run_id}p{i}"
            run_checked(["ip", "netns", "add", ns])
            run_checked(["ip", "link", "add", veth, "type", "veth", "peer", "name", peer])
            run_checked(["ip", "link", "set", peer, "netns", ns])
            run_checked(["ip", "link", "set", veth, "master", self.bridge, "up"])
            run_checked(["ip", "-n", ns, "link", "set", peer, "name", "eth0"])
            run_checked(["ip", "-n", ns, "addr", "add", f"{self._addr[node]}/{prefix}", "dev", "eth0"])
            run_checked(["ip", "-n", ns, "link", "set", "eth0", "up"])
            run_checked(["ip", "-n", ns, "link", "set", "lo", "up"])

    def address(self, node: int) -> str:
        return self._addr[node]

    def namespace(self, node: int) -> str:
        return self._ns[node]

    def _prefix(self, node: int) -> list[str]:
        return ["ip", "netns", "exec", self._ns[node]]

    # -- firewall --------------------------------------------------------------------------

    def _apply_rules(self, nodes: Sequence[int] | None = None) -> None:
        for node in nodes if nodes is not None else self.nodes:
            rules = grudge_rules({node: self._grudge.get(node, set())}, self.address, with_dst=False)
            rules += self._loss.get(node, [])
            run_checked(self.command(node, ["nft", "-f", "-"]),
                        input=nft_ruleset("ip", self.run_id, rules))

    def partition(self, grudge: Grudge) -> None:
        check_grudge(self, grudge)
        self._grudge = {k: set(v) for k, v in grudge.items()}
        self._apply_rules()

    def heal(self) -> None:
        if self._grudge:
            self._grudge = {}
            self._apply_rules()

    # -- packet shaping --------------------------------------------------------------------

    def netem_available(self) -> bool:
        if self._netem is None:
            probe = None
            if not _system.missing_tools(["tc"]):
                probe = run_checked(["tc", "qdisc", "replace", "dev", self._veth[self.nodes[0]],
                                     "root", "netem", "delay", "0ms"], check=False)
            self._netem = probe is not None and probe.returncode == 0
            if self._netem:
                run_checked(["tc", "qdisc", "del", "dev", self._veth[self.nodes[0]], "root"], check=False)
        return self._netem

    def shape(self, nodes: Sequence[int], behavior: PacketBehavior) -> None:
        self.unshape()
        targets = list(nodes)
        if self.netem_available():
            args = netem_args(behavior)
            if not args:
                return
            for node in targets:
                # Both ends of the veth: the node's egress and its ingress.
                run_checked(self.command(node, ["tc", "qdisc", "replace", "dev", "eth0", "root", "netem", *args]))
                run_checked(["tc", "qdisc", "replace", "dev", self._veth[node], "root", "netem", *args])
            self._shaped = targets
            return
        if not behavior.loss_only:
            raise Unsupported("this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM): only random "
                              "loss is possible here; delay, duplication and reordering are not")
        if not behavior.loss:
            return
        target_addrs = [self.address(n) for n in targets]
        for node in self.nodes:
            if node in targets:
                self._loss[node] = [DropRule(None, None, behavior.loss)]
            else:
                self._loss[node] = [DropRule(a, None, behavior.loss) for a in target_addrs]
        self._apply_rules()

    def unshape(self) -> None:
        for node in self._shaped:
            run_checked(self.command(node, ["tc", "qdisc", "del", "dev", "eth0", "root"]), check=False)
            run_checked(["tc", "qdisc", "del", "dev", self._veth[node], "root"], check=False)
        self._shaped = []
        if self._loss:
            self._loss = {}
            self._apply_rules()

    # -- teardown --------------------------------------------------------------------------

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            super().close()
