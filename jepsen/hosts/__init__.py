"""Where the nodes of a jepsen run live: ``local`` (loopback processes) or ``netns``
(one network namespace per node).  Both offer the interface of ``Hosts``::

    with make_hosts("netns", [1, 2, 3]) as hosts:
        cluster = configure_kraft(hosts, base_dir)     # configs, format, commands
        hosts.start_all()
        hosts.partition({1: {2, 3}, 2: {1}, 3: {1}})
        hosts.heal()

``cleanup()`` removes what crashed runs left behind (namespaces, links, nftables tables).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from jepsen.faults import record_baseline
from jepsen.hosts._base import (CLOCK_ENV, JOURNAL_ENV, HostError, Hosts, NodeConfig,
                                Unsupported, run_checked)
from jepsen.hosts._local import LocalHosts
from jepsen.hosts._system import cleanup, ensure_tools, missing_tools

BACKENDS = ("local", "netns")


def make_hosts(kind: str, node_ids: Sequence[int], **options) -> Hosts:
    """A backend by name.  Raises ``Unsupported`` when ``netns`` cannot run here (not
    root, tools missing and not installable)."""
    if kind == "local":
        return LocalHosts(node_ids, **options)
    if kind == "netns":
        from jepsen.hosts._netns import NetnsHosts
        return NetnsHosts(node_ids, **options)
    raise ValueError(f"unknown host backend {kind!r} (one of {', '.join(BACKENDS)})")


def configure_kraft(hosts: Hosts, base_dir: str | os.PathLike, *, brokers: int = 0,
                    overrides: dict[str, str] | None = None, cluster_id: str | None = None,
                    format: bool = True, broker_port: int = 9092, controller_port: int = 9093,
                    security=None, node_overrides: dict[int, dict[str, str]] | None = None):
    """Lay out a kraft cluster on ``hosts`` with ``kraft.local_cluster.LocalCluster`` (configs,
    ``kraftctl format``) and configure each node to run ``kraftctl start`` with its clock
    offset file and fsync journal.  ``hosts.nodes`` must be 1..N (kraft node ids); the last
    ``brokers`` of them are broker-only, the rest combined (``brokers=0``) or controllers.

    On ``netns`` every node has its own port space, so every node uses ``broker_port`` and
    ``controller_port``; on ``local`` ports are picked free per address.

    Returns:
        the ``LocalCluster`` (its ``bootstrap_servers`` is what clients use).
    """
    from kraft.local_cluster import LocalCluster

    n = len(hosts.nodes)
    if hosts.nodes != list(range(1, n + 1)):
        raise ValueError("configure_kraft needs node ids 1..N")
    addresses = [hosts.address(node) for node in hosts.nodes]
    common = dict(controllers=n - brokers, brokers=brokers, overrides=overrides,
                  cluster_id=cluster_id, security=security, node_overrides=node_overrides)
    if hosts.kind == "local":
        cluster = LocalCluster(base_dir, hosts=addresses, **common)
    else:
        # The namespaces' addresses are not bindable here; lay out on loopback, then move.
        cluster = LocalCluster(base_dir, **common)
        for spec, address in zip(cluster.nodes.values(), addresses):
            spec.host = address
            spec.broker_port = broker_port if spec.is_broker else None
            spec.controller_port = controller_port if spec.is_controller else None
    if format:
        cluster.format()
    else:
        cluster.write_configs()
    for spec in cluster.nodes.values():
        journal = Path(spec.directory) / "fsync.journal"
        journal.unlink(missing_ok=True)
        # kraftctl format wrote (and fsynced) meta.properties without a journal.
        record_baseline(spec.data_dir, journal)
        hosts.configure(spec.node_id, NodeConfig(
            argv=[sys.executable, "-m", "cli.main", "start", str(spec.config_path)],
            data_dir=spec.data_dir, log_path=spec.log_path,
            clock_file=Path(spec.directory) / "clock-offset-ms",
            fsync_journal=journal,
        ))
    return cluster


__all__ = ["BACKENDS", "CLOCK_ENV", "JOURNAL_ENV", "HostError", "Hosts", "LocalHosts",
           "NodeConfig", "Unsupported", "cleanup", "configure_kraft", "ensure_tools",
           "make_hosts", "missing_tools", "run_checked"]
