"""A dynamic controller quorum's first voters (KIP-853), as ``kafka-storage format`` writes them.

Kafka 4's sample ``server.properties`` names no ``controller.quorum.voters``: it sets
``controller.quorum.bootstrap.servers`` and is formatted with ``--standalone`` (this
controller is the whole quorum) or ``--initial-controllers id@host:port:directory-id,...``.
Either writes the voter set into the metadata log as its first snapshot
(``kraft.storage.format_storage``),
``__cluster_metadata-0/00000000000000000000-0000000000.checkpoint``, a header, a
VotersRecord and a footer; from then on the log holds the voter set, changed by
``metadata-quorum add-controller`` / ``remove-controller``.  A node started without static
voters reads its starting voter set from its newest snapshot (the Raft core then follows
every later VotersRecord in the log).

A node with neither (a broker of Kafka 4's ``broker.properties``, or a controller formatted
with ``--no-initial-controllers`` to be added later by ``add-controller``) asks the
bootstrap servers for the voter set (DescribeQuorum v2, whose ``nodes`` name each voter's
endpoint) before it starts following the log, retrying until one answers, as Kafka's
brokers wait for the quorum.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

from kraft.raft.disk import PARTITION_DIR, latest_snapshot_path
from kraft.raft.record_codec import Voter, decode_voters_record, snapshot_voters_record
from kraft.server_config import ServerConfig


class QuorumBootstrapError(RuntimeError):
    """A format or start that would leave a node without a voter set; the message says what
    to do."""


_ENTRY = re.compile(r"(\d+)@(\[[^\]]+\]|[^:@]+):(\d+):([A-Za-z0-9_-]{22})")


def parse_initial_controllers(text: str) -> list[Voter]:
    """``--initial-controllers``: ``id@host:port:directory-id`` entries, comma separated (the
    directory id in Kafka's base64 form, from ``kraftctl random-uuid``)."""
    from kraft.storage import parse_uuid_string

    voters = []
    for entry in (e.strip() for e in text.split(",")):
        m = _ENTRY.fullmatch(entry)
        if m is None:
            raise QuorumBootstrapError(f"--initial-controllers: {entry!r} is not id@host:port:directory-id")
        try:
            directory = parse_uuid_string(m.group(4))
        except ValueError as exc:
            raise QuorumBootstrapError(f"--initial-controllers: {entry!r}: {exc}") from None
        port = int(m.group(3))
        if not 0 < port <= 65535:
            raise QuorumBootstrapError(f"--initial-controllers: {entry!r}: port out of range")
        voters.append(Voter(int(m.group(1)), directory, m.group(2).strip("[]"), port))
    ids = [v.node_id for v in voters]
    if len(set(ids)) != len(ids):
        raise QuorumBootstrapError(f"--initial-controllers: a node id is named twice in {ids}")
    return voters


def controller_endpoint(config: ServerConfig) -> tuple[str, str, int]:
    """(listener, host, port) other controllers reach this one at: its first controller
    listener as advertised, else as it listens (a wildcard host resolved to this machine's
    name, as Kafka resolves it)."""
    for name in config.controller_listener_names:
        for endpoints in (config.advertised_listeners, config.listeners):
            e = next((e for e in endpoints if e.listener == name), None)
            if e is not None:
                host = e.host if e.host not in ("", "0.0.0.0", "::") else socket.getfqdn()
                return e.listener, host, e.port
    raise QuorumBootstrapError("--standalone: this node has no controller listener (controller.listener.names)")


def initial_voters(config: ServerConfig, *, standalone: bool = False, initial_controllers: str | None = None,
                   no_initial_controllers: bool = False) -> list[Voter] | None:
    """The voter set ``kraftctl format`` writes (None: none to write), checked as Kafka's
    StorageTool checks the three options.  With ``--standalone`` this node's directory id is
    left None: it is the metadata log directory's, made when that is formatted; with
    ``--initial-controllers`` this node's entry names the directory id to format it with."""
    chosen = [name for name, given in (("--standalone", standalone),
                                       ("--initial-controllers", initial_controllers is not None),
                                       ("--no-initial-controllers", no_initial_controllers)) if given]
    if len(chosen) > 1:
        raise QuorumBootstrapError(f"{' and '.join(chosen)}: give at most one")
    if chosen and config.voters:
        raise QuorumBootstrapError(f"{chosen[0]}: controller.quorum.voters is set (a static quorum); the option is "
                                   "for a dynamic one, named by controller.quorum.bootstrap.servers")
    if chosen and not config.is_controller:
        raise QuorumBootstrapError(f"{chosen[0]}: only a controller's storage holds the quorum's voters")
    if not chosen:
        if config.is_controller and not config.voters:
            raise QuorumBootstrapError(
                "controller.quorum.voters is not set on this controller: format it with --standalone (a quorum "
                "of this node alone) or --initial-controllers id@host:port:directory-id,...")
        return None
    if no_initial_controllers:
        return None
    if standalone:
        listener, host, port = controller_endpoint(config)
        return [Voter(config.node_id, None, host, port, listener)]
    voters = parse_initial_controllers(initial_controllers or "")
    listener = config.controller_listener_names[0]
    return [Voter(v.node_id, v.directory_id, v.host, v.port, listener) for v in voters]


def stored_voters(metadata_log_dir) -> list[Voter]:
    """The voter set of the newest snapshot in ``metadata_log_dir`` (none: [])."""
    path = latest_snapshot_path(Path(metadata_log_dir) / PARTITION_DIR)
    if path is None:
        return []
    record = snapshot_voters_record(path.read_bytes())
    return decode_voters_record(record) if record is not None else []


def check_engine(config: ServerConfig) -> None:
    """pysyncobj has only a static voter set."""
    if not config.voters and config.is_controller and config["controller.quorum.engine"] == "pysyncobj":
        raise QuorumBootstrapError("controller.quorum.engine=pysyncobj needs controller.quorum.voters")


def voters_at_start(config: ServerConfig) -> list[Voter]:
    """The voters a node starts with: the static ones, else its log's; [] when it has to ask
    ``controller.quorum.bootstrap.servers`` (``discover_voters``)."""
    if config.voters:
        return [Voter(v.node_id, None, v.host, v.port) for v in config.voters]
    check_engine(config)
    return stored_voters(config.metadata_log_dir)


def bootstrap_servers(config: ServerConfig) -> list[tuple[str, int]]:
    out = []
    for entry in config["controller.quorum.bootstrap.servers"]:
        host, sep, port = entry.strip().rpartition(":")
        if not sep or not port.isdigit():
            raise QuorumBootstrapError(f"controller.quorum.bootstrap.servers: {entry!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    return out


def voters_described(response: dict) -> dict[int, tuple[str, int]]:
    """Voter id -> (host, port) from a DescribeQuorum v2 answer ({} if it names none)."""
    if response.get("error_code"):
        return {}
    partitions = [p for t in response.get("topics", []) for p in t["partitions"] if not p["error_code"]]
    ids = {v["replica_id"] for p in partitions for v in p["current_voters"]}
    endpoints = {n["node_id"]: n["listeners"][0] for n in response.get("nodes", []) if n["listeners"]}
    if not ids or not ids <= set(endpoints):
        return {}
    return {i: (endpoints[i]["host"], endpoints[i]["port"]) for i in sorted(ids)}


async def discover_voters(client, config: ServerConfig, log, retry_s: float = 1.0) -> dict[int, tuple[str, int]]:
    """Ask each bootstrap server for the voter set until one names it."""
    import trio

    from kraft.client import NodeUnavailable

    servers = bootstrap_servers(config)
    body = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}
    asked = 0
    while True:
        for host, port in servers:
            try:
                found = voters_described(await client.request(host, port, "DescribeQuorum", 2, body, timeout_s=2.0))
            except NodeUnavailable:
                continue
            if found:
                log.info("node %d: the quorum's voters, from %s:%d: %s", config.node_id, host, port,
                         ", ".join(f"{i}@{h}:{p}" for i, (h, p) in found.items()))
                return found
        if asked % 10 == 0:
            log.info("node %d: waiting for one of controller.quorum.bootstrap.servers (%s) to name the quorum's voters",
                     config.node_id, ", ".join(f"{h}:{p}" for h, p in servers))
        asked += 1
        await trio.sleep(retry_s)
