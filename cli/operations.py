"""Operators' tools with the flags and JSON of Kafka's: ``kraftctl delete-records``
(kafka-delete-records.sh), ``leader-election`` (kafka-leader-election.sh), ``log-dirs``
(kafka-log-dirs.sh), ``cluster-tool unregister`` (kafka-cluster.sh unregister) and
``reassign-partitions`` (kafka-reassign-partitions.sh, with its replication throttles)."""

from __future__ import annotations

import json

import click

from cli.admin_client import AdminClient, AdminError, error_name
from cli.topics import fail
from kraft.quotas.replication import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS

ALTER_LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"  # stored only (one log dir)

PREFERRED, UNCLEAN = 0, 1


def _admin(bootstrap_server: str, command_config: str | None) -> AdminClient:
    try:
        return AdminClient(bootstrap_server, command_config=command_config)
    except AdminError as exc:
        fail(str(exc))


def _read_json(path: str, what: str) -> dict:
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as exc:
        fail(f"cannot read {what} {path}: {exc.strerror}")
    except json.JSONDecodeError as exc:
        fail(f"{what} {path} is not JSON: {exc}")
    if not isinstance(doc, dict):
        fail(f"{what} {path}: expected a JSON object")
    return doc


def _partition_list(doc: dict, path: str, need_offset: bool) -> list[dict]:
    """``{"partitions": [{"topic": t, "partition": n[, "offset": o]}, ...]}`` checked."""
    parts = doc.get("partitions")
    if not isinstance(parts, list) or not parts:
        fail(f"{path}: expected a non-empty \"partitions\" list")
    seen = set()
    for entry in parts:
        ok = (isinstance(entry, dict) and isinstance(entry.get("topic"), str)
              and isinstance(entry.get("partition"), int) and entry["partition"] >= 0
              and (not need_offset or isinstance(entry.get("offset"), int)))
        if not ok:
            fail(f"{path}: each partition needs \"topic\" (string), \"partition\" (integer >= 0)"
                 + (" and \"offset\" (integer)" if need_offset else "") + f": {json.dumps(entry)}")
        key = (entry["topic"], entry["partition"])
        if key in seen:
            fail(f"{path}: partition {key[0]}-{key[1]} is listed twice")
        seen.add(key)
    return parts


def _leaders(admin: AdminClient, topics: list[str]) -> tuple[dict, dict]:
    """(partition -> leader id, broker id -> address) from Metadata."""
    md = admin.metadata(sorted(set(topics)))
    brokers = {b["node_id"]: (b["host"], b["port"]) for b in md["brokers"]}
    leaders = {}
    for t in md["topics"]:
        for p in t["partitions"]:
            leaders[(t["name"], p["partition_index"])] = p["leader_id"]
    return leaders, brokers


@click.command("delete-records")
@click.option("--bootstrap-server", required=True)
@click.option("--offset-json-file", required=True, type=click.Path(dir_okay=False),
              help='{"partitions": [{"topic": "t", "partition": 0, "offset": 10}], "version": 1}; '
                   "offset -1 means the high watermark.")
@click.option("--command-config", type=click.Path(dir_okay=False), default=None)
def delete_records_command(bootstrap_server, offset_json_file, command_config):
    """Delete the records below an offset of each partition (the log start offset moves)."""
    parts = _partition_list(_read_json(offset_json_file, "offset JSON file"), offset_json_file, True)
    admin = _admin(bootstrap_server, command_config)
    try:
        leaders, brokers = _leaders(admin, [p["topic"] for p in parts])
        by_leader: dict[int, list[dict]] = {}
        results = {}
        for p in parts:
            key = (p["topic"], p["partition"])
            leader = leaders.get(key)
            if leader is None:
                results[key] = ("error", "UNKNOWN_TOPIC_OR_PARTITION")
            elif leader < 0 or leader not in brokers:
                results[key] = ("error", "LEADER_NOT_AVAILABLE")
            else:
                by_leader.setdefault(leader, []).append(p)
        for leader, entries in sorted(by_leader.items()):
            topics: dict[str, list[dict]] = {}
            for p in entries:
                topics.setdefault(p["topic"], []).append({"partition_index": p["partition"], "offset": p["offset"]})
            resp = admin.call("DeleteRecords", {"timeout_ms": 30000, "topics": [
                {"name": t, "partitions": ps} for t, ps in topics.items()]}, address=brokers[leader])
            for t in resp["topics"]:
                for r in t["partitions"]:
                    key = (t["name"], r["partition_index"])
                    results[key] = (("ok", r["low_watermark"]) if not r["error_code"]
                                    else ("error", error_name(r["error_code"])))
    except AdminError as exc:
        fail(str(exc))
    click.echo("Records delete operation completed:")
    failed = False
    for p in parts:
        key = (p["topic"], p["partition"])
        kind, value = results[key]
        if kind == "ok":
            click.echo(f"partition: {key[0]}-{key[1]}\tlow_watermark: {value}")
        else:
            failed = True
            click.echo(f"partition: {key[0]}-{key[1]}\terror: {value}")
    if failed:
        raise SystemExit(1)


@click.command("leader-election")
@click.option("--bootstrap-server", required=True)
@click.option("--election-type", required=True, type=click.Choice(["PREFERRED", "UNCLEAN"], case_sensitive=False))
@click.option("--all-topic-partitions", is_flag=True, help="Every partition of every topic.")
@click.option("--topic")
@click.option("--partition", type=int)
@click.option("--path-to-json-file", type=click.Path(dir_okay=False),
              help='{"partitions": [{"topic": "t", "partition": 0}]}')
@click.option("--admin.config", "command_config", type=click.Path(dir_okay=False), default=None)
def leader_election_command(bootstrap_server, election_type, all_topic_partitions, topic, partition,
                            path_to_json_file, command_config):
    """Elect the preferred (or, with no in-sync replica left, any live) replica as leader."""
    chosen = sum(bool(x) for x in (all_topic_partitions, topic, path_to_json_file))
    if chosen != 1:
        fail("give exactly one of --all-topic-partitions, --topic (with --partition) and --path-to-json-file")
    if topic and partition is None:
        fail("--topic needs --partition")
    if partition is not None and not topic:
        fail("--partition needs --topic")
    wanted = None
    if topic:
        wanted = [{"topic": topic, "partitions": [partition]}]
    elif path_to_json_file:
        parts = _partition_list(_read_json(path_to_json_file, "JSON file"), path_to_json_file, False)
        grouped: dict[str, list[int]] = {}
        for p in parts:
            grouped.setdefault(p["topic"], []).append(p["partition"])
        wanted = [{"topic": t, "partitions": ps} for t, ps in grouped.items()]
    kind = election_type.upper()
    admin = _admin(bootstrap_server, command_config)
    try:
        resp = admin.call("ElectLeaders", {"election_type": PREFERRED if kind == "PREFERRED" else UNCLEAN,
                                           "topic_partitions": wanted, "timeout_ms": 30000})
    except AdminError as exc:
        fail(str(exc))
    if resp.get("error_code"):
        fail(f"leader election failed: {error_name(resp['error_code'])}")
    done, not_needed, errors = [], [], []
    for t in resp["replica_election_results"]:
        for r in t["partition_result"]:
            name = f"{t['topic']}-{r['partition_id']}"
            if r["error_code"] == 0:
                done.append(name)
            elif error_name(r["error_code"]) == "ELECTION_NOT_NEEDED":
                not_needed.append(name)
            else:
                errors.append((name, error_name(r["error_code"]), r.get("error_message")))
    if done:
        click.echo(f"Successfully completed leader election ({kind}) for partitions {', '.join(done)}")
    if not_needed:
        click.echo(f"Valid replica already elected for partitions {', '.join(not_needed)}")
    if not done and not not_needed and not errors:
        click.echo(f"No partition needed a leader election ({kind})")
    if errors:
        click.echo(f"Error completing leader election ({kind}) for partitions "
                   + ", ".join(f"{name}: {code}" + (f" ({msg})" if msg else "") for name, code, msg in errors),
                   err=True)
        raise SystemExit(1)


@click.command("log-dirs")
@click.option("--bootstrap-server", required=True)
@click.option("--describe", is_flag=True, required=True, help="Describe the log directories (the only action).")
@click.option("--topic-list", default=None, help="Comma-separated topics (default: all).")
@click.option("--broker-list", default=None, help="Comma-separated broker ids (default: all).")
@click.option("--command-config", type=click.Path(dir_okay=False), default=None)
def log_dirs_command(bootstrap_server, describe, topic_list, broker_list, command_config):
    """Each broker's log directory: its partitions with their size and lag, as JSON."""
    admin = _admin(bootstrap_server, command_config)
    try:
        md = admin.metadata(None)
        brokers = {b["node_id"]: (b["host"], b["port"]) for b in md["brokers"]}
        if broker_list:
            try:
                ids = [int(x) for x in broker_list.split(",") if x.strip()]
            except ValueError:
                fail(f"--broker-list: {broker_list!r} is not a list of broker ids")
            unknown = [i for i in ids if i not in brokers]
            if unknown:
                fail(f"--broker-list: no live broker {', '.join(map(str, unknown))}")
        else:
            ids = sorted(brokers)
        topics = [t for t in (topic_list or "").split(",") if t]
        request_topics = None
        if topics:
            by_name = {t["name"]: t for t in md["topics"]}
            request_topics = [{"topic": t, "partitions": [p["partition_index"] for p in by_name[t]["partitions"]]}
                              for t in topics if t in by_name]
        click.echo("Querying brokers for log directories information")
        out = []
        for broker_id in ids:
            resp = admin.call("DescribeLogDirs", {"topics": request_topics}, address=brokers[broker_id])
            dirs = []
            for d in resp["results"]:
                dirs.append({"logDir": d["log_dir"], "error": None if not d["error_code"] else error_name(d["error_code"]),
                             "partitions": [{"partition": f"{t['name']}-{p['partition_index']}", "size": p["partition_size"],
                                             "offsetLag": p["offset_lag"], "isFuture": p["is_future_key"]}
                                            for t in d["topics"] for p in t["partitions"]]})
            out.append({"broker": broker_id, "logDirs": dirs})
    except AdminError as exc:
        fail(str(exc))
    click.echo(f"Received log directory information from brokers {','.join(map(str, ids))}")
    click.echo(json.dumps({"version": 1, "brokers": out}))


@click.group("cluster-tool")
def cluster_tool_group():
    """kafka-cluster.sh: the cluster's id, and unregistering a decommissioned broker."""


@cluster_tool_group.command("cluster-id")
@click.option("--bootstrap-server", required=True)
@click.option("--config", "command_config", type=click.Path(dir_okay=False), default=None)
def cluster_id_command(bootstrap_server, command_config):
    admin = _admin(bootstrap_server, command_config)
    try:
        click.echo(f"Cluster ID: {admin.metadata([])['cluster_id']}")
    except AdminError as exc:
        fail(str(exc))


@cluster_tool_group.command("unregister")
@click.option("--bootstrap-server", required=True)
@click.option("--id", "broker_id", type=int, required=True, help="The broker to unregister.")
@click.option("--config", "command_config", type=click.Path(dir_okay=False), default=None)
def unregister_command(bootstrap_server, broker_id, command_config):
    """Remove a stopped broker's registration: it leaves every ISR and is no longer given
    new replicas.  A broker that starts again registers anew."""
    admin = _admin(bootstrap_server, command_config)
    try:
        resp = admin.call("UnregisterBroker", {"broker_id": broker_id})
    except AdminError as exc:
        fail(str(exc))
    if resp["error_code"]:
        fail(f"could not unregister broker {broker_id}: {error_name(resp['error_code'])}"
             + (f" ({resp['error_message']})" if resp.get("error_message") else ""))
    click.echo(f"Broker {broker_id} is no longer registered.")


# ------------------------------------------------------------------ reassign-partitions

def _assignment(admin: AdminClient, topics: list[str]) -> dict[tuple[str, int], list[int]]:
    md = admin.metadata(sorted(set(topics)))
    out = {}
    for t in md["topics"]:
        if t["error_code"]:
            raise AdminError(f"topic '{t['name']}': {error_name(t['error_code'])}")
        for p in t["partitions"]:
            out[(t["name"], p["partition_index"])] = list(p["replica_nodes"])
    return out


def _assignment_json(assignment: dict[tuple[str, int], list[int]]) -> str:
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": replicas, "log_dirs": ["any"] * len(replicas)}
        for (t, p), replicas in sorted(assignment.items())]})


def _reassignment_file(path: str) -> dict[tuple[str, int], list[int]]:
    doc = _read_json(path, "reassignment JSON file")
    parts = _partition_list(doc, path, False)
    out = {}
    for p in parts:
        replicas = p.get("replicas")
        if not isinstance(replicas, list) or not replicas or not all(isinstance(r, int) for r in replicas):
            fail(f"{path}: partition {p['topic']}-{p['partition']} needs \"replicas\", a non-empty list of broker ids")
        if len(set(replicas)) != len(replicas):
            fail(f"{path}: partition {p['topic']}-{p['partition']} lists a broker twice: {replicas}")
        out[(p["topic"], p["partition"])] = replicas
    return out


def _alter(admin: AdminClient, targets: dict[tuple[str, int], list[int] | None]) -> dict:
    topics: dict[str, list[dict]] = {}
    for (t, p), replicas in sorted(targets.items()):
        topics.setdefault(t, []).append({"partition_index": p, "replicas": replicas})
    resp = admin.call("AlterPartitionReassignments", {"timeout_ms": 30000, "topics": [
        {"name": t, "partitions": ps} for t, ps in topics.items()]})
    if resp["error_code"]:
        raise AdminError(f"reassignment refused: {error_name(resp['error_code'])}"
                         + (f" ({resp['error_message']})" if resp.get("error_message") else ""))
    errors = {}
    for t in resp["responses"]:
        for p in t["partitions"]:
            if p["error_code"]:
                errors[(t["name"], p["partition_index"])] = error_name(p["error_code"]) + (
                    f" ({p['error_message']})" if p.get("error_message") else "")
    return errors


def _ongoing(admin: AdminClient, topics=None) -> dict[tuple[str, int], dict]:
    resp = admin.call("ListPartitionReassignments", {"timeout_ms": 30000, "topics": topics})
    if resp["error_code"]:
        raise AdminError(f"cannot list reassignments: {error_name(resp['error_code'])}")
    return {(t["name"], p["partition_index"]): p for t in resp["topics"] for p in t["partitions"]}


def _names(keys) -> str:
    return ",".join(f"{t}-{p}" for t, p in sorted(keys))


@click.command("reassign-partitions")
@click.option("--bootstrap-server", required=True)
@click.option("--generate", is_flag=True, help="Propose an assignment of --topics-to-move-json-file onto --broker-list.")
@click.option("--execute", is_flag=True, help="Start the reassignment in --reassignment-json-file.")
@click.option("--verify", is_flag=True, help="Tell whether the reassignment in --reassignment-json-file is done.")
@click.option("--cancel", is_flag=True, help="Cancel the reassignment in --reassignment-json-file.")
@click.option("--list", "list_", is_flag=True, help="List the reassignments under way.")
@click.option("--topics-to-move-json-file", type=click.Path(dir_okay=False),
              help='{"topics": [{"topic": "t"}], "version": 1}')
@click.option("--broker-list", help="Comma-separated broker ids for --generate.")
@click.option("--reassignment-json-file", type=click.Path(dir_okay=False),
              help='{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [4, 5, 6]}]}')
@click.option("--throttle", type=int, default=-1, show_default=False,
              help="--execute: throttle the replication of the moving partitions to this many bytes/s "
                   "(the throttled-replicas topic configs and the brokers' throttled rates; --verify "
                   "removes them once the reassignment is done). With --additional: change it.")
@click.option("--replica-alter-log-dirs-throttle", type=int, default=-1,
              help="Not supported: kraft keeps one log directory per broker.")
@click.option("--additional", is_flag=True,
              help="--execute while other reassignments are under way (or to change their --throttle).")
@click.option("--preserve-throttles", is_flag=True, help="--verify / --cancel: leave the throttles as they are.")
@click.option("--command-config", type=click.Path(dir_okay=False), default=None)
def reassign_partitions_command(bootstrap_server, generate, execute, verify, cancel, list_,
                                topics_to_move_json_file, broker_list, reassignment_json_file, throttle,
                                replica_alter_log_dirs_throttle, additional, preserve_throttles, command_config):
    """Move partitions between brokers (kafka-reassign-partitions.sh): new replicas catch up
    and join the ISR before the old ones leave."""
    actions = [name for name, on in (("--generate", generate), ("--execute", execute), ("--verify", verify),
                                     ("--cancel", cancel), ("--list", list_)) if on]
    if len(actions) != 1:
        fail("give exactly one of --generate, --execute, --verify, --cancel and --list")
    action = actions[0]
    if replica_alter_log_dirs_throttle >= 0:
        fail("--replica-alter-log-dirs-throttle is not supported: kraft keeps one log directory per broker, "
             "so no replica moves between a broker's log directories (use --throttle for moves between brokers)")
    if (throttle >= 0 or additional) and action != "--execute":
        fail("--throttle and --additional go with --execute")
    if preserve_throttles and action not in ("--verify", "--cancel"):
        fail("--preserve-throttles goes with --verify or --cancel")
    if action == "--generate" and not (topics_to_move_json_file and broker_list):
        fail("--generate needs --topics-to-move-json-file and --broker-list")
    if action in ("--execute", "--verify", "--cancel") and not reassignment_json_file:
        fail(f"{action} needs --reassignment-json-file")
    admin = _admin(bootstrap_server, command_config)
    try:
        if action == "--generate":
            _generate(admin, topics_to_move_json_file, broker_list)
        elif action == "--list":
            ongoing = _ongoing(admin)
            click.echo("Current partition reassignments:" if ongoing else "No partition reassignments found.")
            for (t, p), r in sorted(ongoing.items()):
                click.echo(f"{t}-{p}: replicas: {','.join(map(str, r['replicas']))}. adding: "
                           f"{','.join(map(str, r['adding_replicas']))}. removing: {','.join(map(str, r['removing_replicas']))}.")
        else:
            targets = _reassignment_file(reassignment_json_file)
            if action == "--execute":
                ongoing = _ongoing(admin)
                if ongoing and not additional:
                    fail(f"Cannot execute: reassignments are under way ({_names(ongoing)}). Give --additional to "
                         "start this one beside them, or to change their throttle by submitting them again.")
                current = _assignment(admin, [t for t, _ in targets])
                missing = [k for k in targets if k not in current]
                if missing:
                    fail(f"no partition {_names(missing)}")
                click.echo("Current partition replica assignment\n")
                click.echo(_assignment_json({k: current[k] for k in targets}))
                click.echo("\nSave this to use as the --reassignment-json-file option during rollback")
                if throttle >= 0:
                    click.echo("Warning: the throttle stays until --verify finds the reassignment complete: "
                               "run --verify until it does.")
                    _set_throttles(admin, _moves(ongoing, targets, current), throttle)
                errors = _alter(admin, targets)
                _report("started partition reassignments", targets, errors)
            elif action == "--cancel":
                errors = _alter(admin, {k: None for k in targets})
                _report("cancelled partition reassignments", targets, errors, exit_on_error=False)
                if not errors and not preserve_throttles:
                    _clear_throttles(admin, targets)  # as Kafka's --cancel
                if errors:
                    raise SystemExit(1)
            else:
                _verify(admin, targets, preserve_throttles)
    except AdminError as exc:
        fail(str(exc))


def _report(what: str, targets, errors: dict, exit_on_error: bool = True) -> None:
    done = [k for k in targets if k not in errors]
    if done:
        click.echo(f"Successfully {what} for {_names(done)}")
    if errors:
        for (t, p), message in sorted(errors.items()):
            click.echo(f"Error for {t}-{p}: {message}", err=True)
        if exit_on_error:
            raise SystemExit(1)


# Replication throttles, as kafka-reassign-partitions.sh sets them: on each moving partition's
# topic, the leader side throttles its current replicas (any may lead while it moves) and the
# follower side its new ones; every broker of the moves gets the rate on both sides.  Only
# replicas outside the ISR are ever held back (kraft.quotas.replication).

def _moves(ongoing: dict, targets: dict, current: dict) -> dict[str, dict[int, tuple[set, set]]]:
    """topic -> partition -> (sources, destinations): the reassignments under way and the
    ones proposed (Kafka's calculateProposedMoveMap)."""
    moves: dict[str, dict[int, tuple[set, set]]] = {}
    for (t, p), r in ongoing.items():
        adding = set(r["adding_replicas"])
        moves.setdefault(t, {})[p] = (set(r["replicas"]) - adding, adding)
    for (t, p), replicas in targets.items():
        by_partition = moves.setdefault(t, {})
        sources = by_partition[p][0] if p in by_partition else set(current[(t, p)])
        by_partition[p] = (sources, set(replicas) - sources)
    return moves


def _pairs(by_partition: dict, side: int) -> str:
    return ",".join(f"{p}:{b}" for p, moved in sorted(by_partition.items()) for b in sorted(moved[side]))


def _alter_configs(admin: AdminClient, resources: list[dict]) -> None:
    """IncrementalAlterConfigs of ``resources``; an error on one is an AdminError (an
    unknown topic, deleted meanwhile, is passed over)."""
    if not resources:
        return
    resp = admin.call("IncrementalAlterConfigs", {"resources": resources, "validate_only": False})
    for r in resp["responses"]:
        code = r["error_code"]
        if code and not (r["resource_type"] == 2 and error_name(code) == "UNKNOWN_TOPIC_OR_PARTITION"):
            kind = "topic" if r["resource_type"] == 2 else "broker"
            raise AdminError(f"cannot alter the throttles of {kind} {r['resource_name']}: {error_name(code)}"
                             + (f" ({r['error_message']})" if r.get("error_message") else ""))


def _set_throttles(admin: AdminClient, moves: dict, rate: int) -> None:
    set_op = 0
    _alter_configs(admin, [{"resource_type": 2, "resource_name": topic, "configs": [
        {"name": LEADER_REPLICAS, "config_operation": set_op, "value": _pairs(by_partition, 0)},
        {"name": FOLLOWER_REPLICAS, "config_operation": set_op, "value": _pairs(by_partition, 1)}]}
        for topic, by_partition in sorted(moves.items())])
    brokers = sorted({b for by_partition in moves.values() for moved in by_partition.values()
                      for side in moved for b in side})
    _alter_configs(admin, [{"resource_type": 4, "resource_name": str(b), "configs": [
        {"name": key, "config_operation": set_op, "value": str(rate)} for key in (LEADER_RATE, FOLLOWER_RATE)]}
        for b in brokers])
    click.echo(f"The inter-broker throttle limit was set to {rate} B/s")


def _clear_throttles(admin: AdminClient, targets: dict) -> None:
    """Kafka's clearAllThrottles: the rates of every live broker and every broker named in the
    plan, and the throttled replicas of the plan's topics (which brokers were sources of
    earlier moves is not known any more)."""
    delete_op = 1
    brokers = {b["node_id"] for b in admin.metadata([])["brokers"]} | {b for r in targets.values() for b in r}
    click.echo(f"Clearing broker-level throttles on broker{'s' if len(brokers) != 1 else ''} "
               f"{','.join(map(str, sorted(brokers)))}")
    _alter_configs(admin, [{"resource_type": 4, "resource_name": str(b), "configs": [
        {"name": key, "config_operation": delete_op, "value": None} for key in (LEADER_RATE, FOLLOWER_RATE,
                                                                                ALTER_LOG_DIRS_RATE)]}
        for b in sorted(brokers)])
    topics = sorted({t for t, _ in targets})
    click.echo(f"Clearing topic-level throttles on topic{'s' if len(topics) != 1 else ''} {','.join(topics)}")
    _alter_configs(admin, [{"resource_type": 2, "resource_name": t, "configs": [
        {"name": key, "config_operation": delete_op, "value": None} for key in (LEADER_REPLICAS, FOLLOWER_REPLICAS)]}
        for t in topics])


def _verify(admin: AdminClient, targets, preserve_throttles: bool = False) -> None:
    ongoing = _ongoing(admin)
    current = _assignment(admin, [t for t, _ in targets])
    click.echo("Status of partition reassignment:")
    pending = False
    for (t, p), replicas in sorted(targets.items()):
        if (t, p) in ongoing:
            pending = True
            click.echo(f"Reassignment of partition {t}-{p} is still in progress.")
        elif current.get((t, p)) == replicas:
            click.echo(f"Reassignment of partition {t}-{p} is completed.")
        else:
            pending = True
            click.echo(f"There is no active reassignment of partition {t}-{p}, but replica set is "
                       f"{current.get((t, p))} rather than {replicas}.")
    if not ongoing and not preserve_throttles:
        # As Kafka's --verify: once no reassignment is under way in the cluster.
        _clear_throttles(admin, targets)
    if pending:
        raise SystemExit(1)


def _generate(admin: AdminClient, topics_file: str, broker_list: str) -> None:
    doc = _read_json(topics_file, "topics JSON file")
    entries = doc.get("topics")
    if not isinstance(entries, list) or not entries or not all(
            isinstance(e, dict) and isinstance(e.get("topic"), str) for e in entries):
        fail(f"{topics_file}: expected {{\"topics\": [{{\"topic\": \"name\"}}, ...]}}")
    try:
        brokers = [int(b) for b in broker_list.split(",") if b.strip()]
    except ValueError:
        fail(f"--broker-list: {broker_list!r} is not a list of broker ids")
    if not brokers or len(set(brokers)) != len(brokers):
        fail("--broker-list: give distinct broker ids")
    current = _assignment(admin, [e["topic"] for e in entries])
    proposed = {}
    for i, (key, replicas) in enumerate(sorted(current.items())):
        if len(replicas) > len(brokers):
            fail(f"{key[0]}-{key[1]} has {len(replicas)} replicas, more than the {len(brokers)} brokers listed")
        # Round robin, as Kafka's rack-unaware assignment: each partition starts one broker on.
        proposed[key] = [brokers[(i + k) % len(brokers)] for k in range(len(replicas))]
    click.echo("Current partition replica assignment")
    click.echo(_assignment_json(current))
    click.echo("\nProposed partition reassignment configuration")
    click.echo(_assignment_json(proposed))
