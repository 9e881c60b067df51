"""``kraftctl configs`` (kafka-configs.sh) and ``kraftctl metadata-quorum``
(kafka-metadata-quorum.sh)."""

from __future__ import annotations

import json
import time

import click

from cli.admin_client import AdminClient, AdminError, error_name
from cli.topics import fail

RESOURCE_TYPES = {"topics": 2, "brokers": 4, "broker-loggers": 8, "groups": 32, "users": None, "clients": None}
SET, DELETE = 0, 1


def _remember_names(ctx, param, values):
    """--entity-name and --entity-default pair with --entity-types in command-line order:
    click hands each option's values over at its first appearance, which is that order."""
    order = ctx.meta.setdefault("kraft.entity_names", [])
    if param.name == "entity_default":
        order.extend([None] * values)
    else:
        order.extend(values)
    return values


@click.command("configs")
@click.option("--bootstrap-server", required=True)
@click.option("--entity-type", "entity_types", required=True, multiple=True, type=click.Choice(sorted(RESOURCE_TYPES)),
              help="Twice for a user and client-id quota: --entity-type users ... --entity-type clients ...")
@click.option("--entity-name", "entity_names", multiple=True, callback=_remember_names,
              help="Topic name, broker id (empty: the cluster default; broker-loggers: the node's id), "
                   "group id, user or client id.")
@click.option("--entity-default", count=True, callback=_remember_names,
              help="The <default> user or client id (quotas).")
@click.option("--describe", "action", flag_value="describe")
@click.option("--alter", "action", flag_value="alter")
@click.option("--add-config", "add", multiple=True, metavar="K=V[,K=V]")
@click.option("--delete-config", "delete", multiple=True, metavar="K[,K]")
@click.option("--all", "show_all", is_flag=True, help="--describe: include defaults.")
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--command-config", type=click.Path(dir_okay=False), default=None,
              help="Client properties: security.protocol, sasl.mechanism, sasl.jaas.config, ssl.*")
@click.pass_context
def configs_command(ctx, bootstrap_server, entity_types, entity_names, entity_default, action, add, delete,
                    show_all, output, command_config):
    """Describe or alter topic and broker configuration, a node's log levels (broker-loggers),
    a consumer group's session timeout and heartbeat interval (groups), client quotas (users,
    clients) and users' SCRAM credentials."""
    if action is None:
        fail("one of --describe, --alter is required")
    names = ctx.meta.get("kraft.entity_names", [])
    entity_type = entity_types[0]
    if len(entity_types) > 1 and set(entity_types) != {"users", "clients"}:
        fail("only users and clients may be combined")
    rtype = RESOURCE_TYPES[entity_type]
    try:
        admin = AdminClient(bootstrap_server, command_config=command_config)
        if rtype is None:
            _quotas_and_credentials(admin, list(entity_types), names, action, add, delete, output)
            return
        entity_name = names[0] if names and names[0] is not None else ""
        if rtype == 8 and not entity_name.strip():
            fail("--entity-type broker-loggers needs --entity-name <node id>: a node's log levels are its own")
        if rtype == 32 and not entity_name.strip():
            fail("--entity-type groups needs --entity-name <group id>")
        # A broker (and its loggers) is described and its loggers set by that broker itself.
        address = _broker_address(admin, entity_name) if rtype in (4, 8) and entity_name else None
        if action == "describe":
            resp = admin.call("DescribeConfigs", {"resources": [
                {"resource_type": rtype, "resource_name": entity_name, "configuration_keys": None}],
                "include_synonyms": False, "include_documentation": False}, address=address)
            result = resp["results"][0]
            if result["error_code"]:
                fail(f"{error_name(result['error_code'])}: {result['error_message'] or ''}".strip(": "))
            # Kafka's ConfigSource, as kafka-configs.sh filters: a topic's dynamic configs, one
            # broker's own, or (no name) the cluster-wide broker defaults; every logger; a
            # group's own.
            dynamic = {2: 1, 8: 6, 32: 8}.get(rtype, 2 if entity_name else 3)
            configs = [c for c in result["configs"] if show_all or c["config_source"] == dynamic]
            if output == "json":
                click.echo(json.dumps({c["name"]: c["value"] for c in configs}, indent=2))
                return
            label = {2: "topic", 8: "broker-logger", 32: "group"}.get(rtype, "broker")
            click.echo(f"Dynamic configs for {label} {entity_name} are:" if not show_all
                       else f"All configs for {label} {entity_name} are:")
            for c in configs:
                click.echo(f"  {c['name']}={c['value']}")
            return
        ops = []
        for item in add:
            for part in item.split(","):
                k, sep, v = part.partition("=")
                if not sep:
                    fail(f"--add-config {part!r}: expected key=value")
                ops.append({"name": k.strip(), "config_operation": SET, "value": v})
        for item in delete:
            for k in item.split(","):
                ops.append({"name": k.strip(), "config_operation": DELETE, "value": None})
        if not ops:
            fail("--alter needs --add-config or --delete-config")
        resp = admin.call("IncrementalAlterConfigs", {"resources": [
            {"resource_type": rtype, "resource_name": entity_name, "configs": ops}], "validate_only": False},
            address=address if rtype == 8 else None)
        result = resp["responses"][0]
        if result["error_code"]:
            fail(f"{error_name(result['error_code'])}: {result.get('error_message') or ''}".strip(": "))
        click.echo(json.dumps({"altered": True}) if output == "json"
                   else f"Completed updating config for {entity_type[:-1]} {entity_name}.")
    except AdminError as exc:
        fail(str(exc))


def _broker_address(admin: AdminClient, name: str) -> tuple[str, int]:
    """Where to describe broker ``name``: a broker describes only itself (as Kafka, whose
    admin client sends a broker resource to that broker)."""
    md = admin.metadata([])
    for b in md["brokers"]:
        if str(b["node_id"]) == name.strip():
            return b["host"], b["port"]
    fail(f"broker {name} is not a live broker of the cluster (live: "
         f"{', '.join(str(b['node_id']) for b in sorted(md['brokers'], key=lambda b: b['node_id']))})")


def _quotas_and_credentials(admin, types: list[str], names: list, action, add, delete, output) -> None:
    """users and clients: client quotas (AlterClientQuotas), and for one user alone its
    SCRAM credentials too (AlterUserScramCredentials), as kafka-configs.sh splits them."""
    from cli.client_quotas import alter_quotas, describe_quotas, print_quotas, split_configs
    from cli.scram_users import alter_users, describe_users

    one_user = types == ["users"]
    if action == "describe":
        print_quotas(describe_quotas(admin, types, names), output)
        if one_user and (not names or names[0] is not None) and output == "text":
            describe_users(admin, names[0] if names else "", output)
        return
    pairs = split_configs(add)
    deletes = [k.strip() for item in delete for k in item.split(",") if k.strip()]
    scram_adds = [f"{k}={v}" for k, v in pairs if k.upper().startswith("SCRAM-")]
    scram_deletes = [k for k in deletes if k.upper().startswith("SCRAM-")]
    quota_adds = [(k, v) for k, v in pairs if not k.upper().startswith("SCRAM-")]
    quota_deletes = [k for k in deletes if not k.upper().startswith("SCRAM-")]
    if not pairs and not deletes:
        fail("--alter needs --add-config or --delete-config")
    if (scram_adds or scram_deletes) and not (one_user and names and names[0] is not None):
        fail("SCRAM credentials are set for one named user (--entity-type users --entity-name NAME)")
    scram_delete_items = [",".join(scram_deletes)] if scram_deletes else []
    if not quota_adds and not quota_deletes:  # credentials alone: as before quotas
        alter_users(admin, names[0], scram_adds, scram_delete_items, output)
        return
    alter_quotas(admin, types, names, quota_adds, quota_deletes)
    if scram_adds or scram_deletes:
        alter_users(admin, names[0], scram_adds, scram_delete_items, "quiet")
    from cli.client_quotas import entity_label, entity_of

    label = entity_label(entity_of(types, names))
    click.echo(json.dumps({"altered": True}) if output == "json" else f"Completed updating config for entity: {label}.")


@click.group("metadata-quorum")
@click.option("--bootstrap-server", default=None, help="A broker (it asks the active controller).")
@click.option("--bootstrap-controller", default=None,
              help="A controller, at its controller listener (KIP-919); the quorum leader is then asked.")
@click.pass_context
def quorum_group(ctx, bootstrap_server, bootstrap_controller):
    """Describe the KRaft controller quorum (as kafka-metadata-quorum.sh)."""
    if (bootstrap_server is None) == (bootstrap_controller is None):
        fail("give one of --bootstrap-server and --bootstrap-controller")
    ctx.obj = QuorumTarget(bootstrap_server or bootstrap_controller, bootstrap_controller is not None)


class QuorumTarget:
    """Where metadata-quorum asks: a broker, which forwards to the active controller, or a
    controller, where the quorum leader itself must be asked (a follower knows no lags and
    cannot change voters)."""

    def __init__(self, bootstrap: str, controller: bool):
        self.bootstrap, self.controller = bootstrap, controller

    def admin(self, timeout_s: float = 15.0) -> AdminClient:
        return AdminClient(self.bootstrap, timeout_s=timeout_s)

    def leader(self, admin: AdminClient) -> tuple[str, int] | None:
        """The quorum leader's controller endpoint, when asking controllers (else None)."""
        if not self.controller:
            return None
        p, nodes = quorum_answer(admin)
        node = next((n for n in nodes if n["node_id"] == p["leader_id"] and n["listeners"]), None)
        if node is None:
            raise AdminError(f"DescribeQuorum: no endpoint for the leader {p['leader_id']}")
        return node["listeners"][0]["host"], node["listeners"][0]["port"]

    def cluster_id(self, admin: AdminClient, address=None) -> str:
        if not self.controller:
            return admin.metadata([])["cluster_id"]
        return admin.call("DescribeCluster", {"include_cluster_authorized_operations": False, "endpoint_type": 2},
                          address=address)["cluster_id"]


def describe_quorum(admin: AdminClient, address=None) -> dict:
    """DescribeQuorum's partition of ``__cluster_metadata`` (a broker asks the active
    controller); raises AdminError on an error code."""
    return quorum_answer(admin, address)[0]


def quorum_answer(admin: AdminClient, address=None) -> tuple[dict, list[dict]]:
    """(DescribeQuorum's partition, the answer's ``nodes``: each voter's endpoints)."""
    resp = admin.call("DescribeQuorum", {"topics": [{"topic_name": "__cluster_metadata",
                                                      "partitions": [{"partition_index": 0}]}]}, address=address)
    if resp["error_code"]:
        raise AdminError(f"DescribeQuorum: {error_name(resp['error_code'])}")
    p = resp["topics"][0]["partitions"][0]
    if p["error_code"]:
        raise AdminError(f"DescribeQuorum: {error_name(p['error_code'])}")
    return p, resp.get("nodes", [])


def replica_states_text(replicas: list[dict], nodes: list[dict]) -> str:
    """kafka-metadata-quorum.sh's CurrentVoters / CurrentObservers text: each replica's id,
    directory id (null for none) and, when the answer names them, its endpoints."""
    from kraft.storage import uuid_to_string

    endpoints = {n["node_id"]: [f"{e['name']}://{e['host']}:{e['port']}" for e in n["listeners"]] for n in nodes}
    parts = []
    for r in replicas:
        directory = r.get("replica_directory_id")
        text = f'{{"id": {r["replica_id"]}, "directoryId": '
        text += "null" if directory is None or directory.int == 0 else f'"{uuid_to_string(directory)}"'
        if endpoints.get(r["replica_id"]):
            text += ', "endpoints": [' + ", ".join(f'"{e}"' for e in endpoints[r["replica_id"]]) + "]"
        parts.append(text + "}")
    return "[" + ", ".join(parts) + "]"


def replication_rows(p: dict) -> list[dict]:
    """kafka-metadata-quorum.sh --replication's rows from DescribeQuorum's partition: each
    voter and observer, its log end offset, its lag behind the leader's, its timestamps."""
    leader = p["leader_id"]
    leader_leo = next((v["log_end_offset"] for v in p["current_voters"] if v["replica_id"] == leader), -1)
    rows = []
    for kind, items in (("Voter", p["current_voters"]), ("Observer", p["observers"])):
        for v in items:
            status = "Leader" if v["replica_id"] == leader else ("Follower" if kind == "Voter" else "Observer")
            lag = max(leader_leo - v["log_end_offset"], 0) if v["log_end_offset"] >= 0 else None
            rows.append({"node_id": v["replica_id"], "log_end_offset": v["log_end_offset"], "lag": lag,
                         "last_fetch_timestamp": v["last_fetch_timestamp"],
                         "last_caught_up_timestamp": v["last_caught_up_timestamp"], "status": status})
    return rows


@quorum_group.command("describe")
@click.option("--status", "mode", flag_value="status", default=True)
@click.option("--replication", "mode", flag_value="replication")
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.pass_obj
def quorum_describe(target, mode, output):
    try:
        admin = target.admin()
        leader_address = target.leader(admin)
        p, nodes = quorum_answer(admin, leader_address)
        cluster_id = target.cluster_id(admin, leader_address)
    except AdminError as exc:
        fail(str(exc))
    now = int(time.time() * 1000)
    leader = p["leader_id"]
    rows = replication_rows(p)
    if mode == "status":
        followers = [r for r in rows if r["status"] == "Follower"]
        status = {
            "ClusterId": cluster_id, "LeaderId": leader, "LeaderEpoch": p["leader_epoch"],
            "HighWatermark": p["high_watermark"],
            "MaxFollowerLag": max((r["lag"] or 0 for r in followers), default=0),
            "MaxFollowerLagTimeMs": max((now - r["last_caught_up_timestamp"] for r in followers
                                         if r["last_caught_up_timestamp"] > 0), default=0),
            "CurrentVoters": [v["replica_id"] for v in p["current_voters"]],
            "CurrentObservers": [v["replica_id"] for v in p["observers"]],
        }
        if output == "json":
            click.echo(json.dumps(status, indent=2))
            return
        status["CurrentVoters"] = replica_states_text(p["current_voters"], nodes)
        status["CurrentObservers"] = replica_states_text(p["observers"], nodes)
        for k, v in status.items():
            click.echo(f"{k + ':':<24}{v}")
        return
    if output == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo("NodeId\tLogEndOffset\tLag\tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus")
    for r in rows:
        click.echo(f"{r['node_id']}\t{r['log_end_offset']}\t{r['lag'] if r['lag'] is not None else '-'}\t"
                   f"{r['last_fetch_timestamp']}\t{r['last_caught_up_timestamp']}\t{r['status']}")


@quorum_group.command("add-controller")
@click.option("--command-config", "config_path", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The new controller's server.properties (its node.id, controller listener and "
                   "metadata.log.dir, whose meta.properties holds its directory id).")
@click.option("--timeout-ms", type=int, default=60000, show_default=True,
              help="How long the leader waits for the new controller to catch up.")
@click.pass_obj
def quorum_add_controller(target, config_path, timeout_ms):
    """Make a running controller a voter (AddRaftVoter, KIP-853).  Start it first: until it
    is added it follows the metadata log as an observer and must have caught up."""
    from pathlib import Path

    from kraft.server_config import ConfigError, ServerConfig
    from kraft.storage import StorageError, parse_uuid_string, read_meta

    try:
        config = ServerConfig.load(config_path)
        meta = read_meta(Path(config.metadata_log_dir))
    except (ConfigError, StorageError, OSError) as exc:
        fail(f"{config_path}: {exc}")
    if not config.is_controller:
        fail(f"{config_path}: process.roles has no controller")
    if meta is None or not meta.directory_id:
        fail(f"{config.metadata_log_dir}: not formatted (kraftctl format), so it has no directory id")
    listeners = []
    for name in config.controller_listener_names:
        endpoint = next((e for e in config.advertised_listeners if e.listener == name), None) or \
            config.listener(name)
        if endpoint is not None:
            listeners.append({"name": name, "host": endpoint.host or "localhost", "port": endpoint.port})
    if not listeners:
        fail(f"{config_path}: no listener named in controller.listener.names")
    body = {"cluster_id": meta.cluster_id, "timeout_ms": timeout_ms, "voter_id": config.node_id,
            "voter_directory_id": parse_uuid_string(meta.directory_id), "listeners": listeners}
    _voter_change(target, "AddRaftVoter", body, timeout_ms,
                  f"Added controller {config.node_id} with directory id {meta.directory_id} and "
                  "endpoints: " + ", ".join(f"{e['name']}://{e['host']}:{e['port']}" for e in listeners))


@quorum_group.command("remove-controller")
@click.option("--controller-id", type=int, required=True)
@click.option("--controller-directory-id", default=None,
              help="The voter's directory id (metadata-quorum describe --replication shows it); "
                   "without it, the one the quorum lists for --controller-id.")
@click.pass_obj
def quorum_remove_controller(target, controller_id, controller_directory_id):
    """Remove a voter from the controller quorum (RemoveRaftVoter, KIP-853)."""
    import uuid

    from kraft.storage import parse_uuid_string, uuid_to_string

    try:
        directory = parse_uuid_string(controller_directory_id) if controller_directory_id else None
    except ValueError as exc:
        fail(f"--controller-directory-id: {exc}")
    if directory is None:  # the voter's key as the quorum describes it
        try:
            admin = target.admin()
            p = describe_quorum(admin, address=target.leader(admin))
        except AdminError as exc:
            fail(str(exc))
        voter = next((v for v in p["current_voters"] if v["replica_id"] == controller_id), None)
        if voter is None:
            fail(f"RemoveRaftVoter failed with VOTER_NOT_FOUND: {controller_id} is not a voter")
        directory = voter.get("replica_directory_id") or uuid.UUID(int=0)
    body = {"cluster_id": None, "voter_id": controller_id, "voter_directory_id": directory}
    _voter_change(target, "RemoveRaftVoter", body, 30000,
                  f"Removed controller {controller_id} with directory id {uuid_to_string(directory)}")


def _voter_change(target: QuorumTarget, api: str, body: dict, timeout_ms: int, done: str) -> None:
    try:
        admin = target.admin(timeout_s=timeout_ms / 1000 + 15)
        resp = admin.call(api, body, address=target.leader(admin))
    except AdminError as exc:
        fail(str(exc))
    if resp["error_code"]:
        detail = f": {resp['error_message']}" if resp.get("error_message") else ""
        fail(f"{api} failed with {error_name(resp['error_code'])}{detail}")
    click.echo(done)
