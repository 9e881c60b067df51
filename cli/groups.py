"""``kraftctl consumer-groups`` (kafka-consumer-groups.sh) over kraft's admin client."""

from __future__ import annotations

import json

import click

from broker.group.classic_members import decode_assignment
from broker.group.state import MalformedProtocol
from cli.admin_client import AdminClient, AdminError, error_name
from cli.topics import fail


def _coordinator(admin: AdminClient, group: str) -> tuple[str, int]:
    resp = admin.call("FindCoordinator", {"key_type": 0, "coordinator_keys": [group], "key": group})
    c = resp["coordinators"][0] if resp.get("coordinators") else resp
    if c["error_code"]:
        raise AdminError(f"no coordinator for group {group}: {error_name(c['error_code'])}")
    return c["host"], c["port"]


def _committed(admin, group, address) -> dict[tuple[str, int], int]:
    version = admin.version_of("OffsetFetch")
    if version >= 8:
        body = {"groups": [{"group_id": group, "topics": None}], "require_stable": False}
        resp = admin.call("OffsetFetch", body, address=address)
        g = resp["groups"][0]
        if g["error_code"]:
            raise AdminError(f"cannot fetch offsets of {group}: {error_name(g['error_code'])}")
        topics = g["topics"]
    else:
        resp = admin.call("OffsetFetch", {"group_id": group, "topics": None}, address=address)
        if resp["error_code"]:
            raise AdminError(f"cannot fetch offsets of {group}: {error_name(resp['error_code'])}")
        topics = resp["topics"]
    out = {}
    for t in topics:
        for p in t["partitions"]:
            if p["committed_offset"] >= 0:
                out[(t["name"], p["partition_index"])] = p["committed_offset"]
    return out


def _offsets(admin, partitions, timestamp) -> dict[tuple[str, int], int]:
    """Offsets at ``timestamp`` (-1 latest, -2 earliest) from each partition's leader."""
    md = admin.metadata(sorted({t for t, _ in partitions}))
    leaders = {(t["name"], p["partition_index"]): p["leader_id"] for t in md["topics"] for p in t["partitions"]}
    brokers = {b["node_id"]: (b["host"], b["port"]) for b in md["brokers"]}
    out = {}
    for tp in partitions:
        address = brokers.get(leaders.get(tp, -1))
        if address is None:
            continue
        body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": tp[0], "partitions": [
            {"partition_index": tp[1], "current_leader_epoch": -1, "timestamp": timestamp}]}]}
        resp = admin.call("ListOffsets", body, address=address)
        p = resp["topics"][0]["partitions"][0]
        if not p["error_code"]:
            out[tp] = p["offset"]
    return out


def _describe_group(admin, group, address) -> dict:
    """The group in DescribeGroups' shape.  As Kafka's admin client, ConsumerGroupDescribe
    first: a KIP-848 group comes from it (``"type": "consumer"``, each member's
    ``"partitions"`` and ``"member_epoch"``); GROUP_ID_NOT_FOUND there means a classic group
    (or none), which DescribeGroups describes."""
    if admin.version_of("ConsumerGroupDescribe") >= 0:
        resp = admin.call("ConsumerGroupDescribe", {"group_ids": [group], "include_authorized_operations": False},
                          address=address)
        g = resp["groups"][0]
        if g["error_code"] == 0:
            return {"error_code": 0, "group_id": group, "group_state": g["group_state"], "type": "consumer",
                    "protocol_type": "consumer", "protocol_data": g["assignor_name"], "members": [
                        {"member_id": m["member_id"], "group_instance_id": m["instance_id"],
                         "client_id": m["client_id"], "client_host": m["client_host"],
                         "member_epoch": m["member_epoch"],
                         "partitions": [(t["topic_name"], p) for t in m["assignment"]["topic_partitions"]
                                        for p in t["partitions"]]} for m in g["members"]]}
    resp = admin.call("DescribeGroups", {"groups": [group], "include_authorized_operations": False}, address=address)
    return {**resp["groups"][0], "type": "classic"}


def member_partitions(member) -> list[tuple[str, int]]:
    """The (topic, partition)s assigned to a member of a described group."""
    if "partitions" in member:  # a KIP-848 group's
        return list(member["partitions"])
    try:
        return decode_assignment(member["member_assignment"])
    except MalformedProtocol:  # not the consumer protocol: show no partitions
        return []


@click.command("consumer-groups")
@click.option("--bootstrap-server", required=True)
@click.option("--list", "action", flag_value="list")
@click.option("--describe", "action", flag_value="describe")
@click.option("--reset-offsets", "action", flag_value="reset")
@click.option("--delete", "action", flag_value="delete")
@click.option("--group")
@click.option("--topic", help="--reset-offsets: only this topic (default: every topic with commits).")
@click.option("--to-earliest", "to", flag_value="earliest")
@click.option("--to-latest", "to", flag_value="latest")
@click.option("--to-offset", "to_offset", type=int)
@click.option("--execute", is_flag=True, help="--reset-offsets: apply (without it: dry run).")
@click.option("--members", is_flag=True, help="--describe: list members instead of offsets.")
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def groups_command(bootstrap_server, action, group, topic, to, to_offset, execute, members, output):
    """List, describe, delete consumer groups and reset their offsets."""
    if action is None:
        fail("one of --list, --describe, --reset-offsets, --delete is required")
    try:
        admin = AdminClient(bootstrap_server)
        if action == "list":
            _list(admin, output)
            return
        if not group:
            fail("--group is required")
        address = _coordinator(admin, group)
        if action == "describe":
            _describe(admin, group, address, members, output)
        elif action == "delete":
            resp = admin.call("DeleteGroups", {"groups_names": [group]}, address=address)
            error = resp["results"][0]["error_code"]
            if error:
                fail(f"cannot delete group {group}: {error_name(error)}")
            click.echo(f"Deletion of requested consumer groups ('{group}') was successful.")
        else:
            _reset(admin, group, address, topic, to, to_offset, execute, output)
    except AdminError as exc:
        fail(str(exc))


def list_groups(admin: AdminClient) -> list[str]:
    """Every group any broker coordinates (ListGroups on each: a group lives on one)."""
    md = admin.metadata([])
    names = set()
    for b in md["brokers"]:
        resp = admin.call("ListGroups", {"states_filter": [], "types_filter": []}, address=(b["host"], b["port"]))
        names.update(g["group_id"] for g in resp["groups"])
    return sorted(names)


def _list(admin, output):
    names = list_groups(admin)
    click.echo(json.dumps(names) if output == "json" else "\n".join(names))


def describe_group(admin: AdminClient, group: str) -> tuple[tuple[str, int], dict]:
    """(coordinator address, DescribeGroups result) of ``group``."""
    address = _coordinator(admin, group)
    return address, _describe_group(admin, group, address)


def offset_rows(admin: AdminClient, group: str, address, desc: dict) -> list[dict]:
    """kafka-consumer-groups.sh --describe's rows: per partition with a committed offset or an
    owner, the committed offset, the log end offset, the lag and the owning member."""
    owners = {}
    for m in desc["members"]:
        for tp in member_partitions(m):
            owners[tp] = m
    committed = _committed(admin, group, address)
    partitions = sorted(set(committed) | set(owners))
    ends = _offsets(admin, partitions, -1)
    rows = []
    for tp in partitions:
        current = committed.get(tp)
        end = ends.get(tp)
        owner = owners.get(tp)
        rows.append({"group": group, "topic": tp[0], "partition": tp[1], "current_offset": current,
                     "log_end_offset": end,
                     "lag": end - current if current is not None and end is not None else None,
                     "consumer_id": owner["member_id"] if owner else None,
                     "host": owner["client_host"] if owner else None,
                     "client_id": owner["client_id"] if owner else None})
    return rows


def _describe(admin, group, address, members, output):
    desc = _describe_group(admin, group, address)
    if desc["error_code"]:
        fail(f"cannot describe group {group}: {error_name(desc['error_code'])}")
    if desc["group_state"] == "Dead":
        fail(f"consumer group '{group}' does not exist")
    if members:
        rows = [{"group": group, "consumer_id": m["member_id"], "host": m["client_host"],
                 "client_id": m["client_id"], "partitions": len(member_partitions(m))} for m in desc["members"]]
        if output == "json":
            click.echo(json.dumps(rows, indent=2))
            return
        click.echo("GROUP\tCONSUMER-ID\tHOST\tCLIENT-ID\t#PARTITIONS")
        for r in rows:
            click.echo(f"{r['group']}\t{r['consumer_id']}\t{r['host']}\t{r['client_id']}\t{r['partitions']}")
        return
    rows = offset_rows(admin, group, address, desc)
    if output == "json":
        click.echo(json.dumps({"group": group, "state": desc["group_state"], "type": desc["type"],
                               "partitions": rows}, indent=2))
        return
    if not desc["members"]:
        click.echo(f"Consumer group '{group}' has no active members.")
    click.echo("GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID")
    for r in rows:
        click.echo("\t".join("-" if v is None else str(v) for v in (
            r["group"], r["topic"], r["partition"], r["current_offset"], r["log_end_offset"], r["lag"],
            r["consumer_id"], r["host"], r["client_id"])))


def _reset(admin, group, address, topic, to, to_offset, execute, output):
    if to is None and to_offset is None:
        fail("--reset-offsets needs --to-earliest, --to-latest or --to-offset N")
    desc = _describe_group(admin, group, address)
    if desc["members"]:
        fail(f"group {group} has active members; stop them before resetting offsets")
    committed = _committed(admin, group, address)
    if topic:
        md = admin.metadata([topic])
        t = md["topics"][0]
        if t["error_code"]:
            fail(f"topic '{topic}' does not exist")
        partitions = [(topic, p["partition_index"]) for p in t["partitions"]]
    else:
        partitions = sorted(committed)
    if not partitions:
        fail(f"group {group} has no committed offsets; name a --topic")
    if to_offset is not None:
        targets = {tp: to_offset for tp in partitions}
        earliest, latest = _offsets(admin, partitions, -2), _offsets(admin, partitions, -1)
        targets = {tp: min(max(o, earliest.get(tp, o)), latest.get(tp, o)) for tp, o in targets.items()}
    else:
        targets = _offsets(admin, partitions, -2 if to == "earliest" else -1)
    if execute:
        topics = {}
        for (t, p), o in targets.items():
            topics.setdefault(t, []).append({"partition_index": p, "committed_offset": o,
                                             "committed_leader_epoch": -1, "committed_metadata": ""})
        body = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                "group_instance_id": None, "retention_time_ms": -1,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
        resp = admin.call("OffsetCommit", body, address=address)
        errors = {p["error_code"] for t in resp["topics"] for p in t["partitions"]} - {0}
        if errors:
            fail(f"cannot reset offsets: {', '.join(error_name(e) for e in errors)}")
    rows = [{"group": group, "topic": t, "partition": p, "new_offset": o} for (t, p), o in sorted(targets.items())]
    if output == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo("GROUP\tTOPIC\tPARTITION\tNEW-OFFSET" + ("" if execute else "\t(dry run: add --execute)"))
    for r in rows:
        click.echo(f"{r['group']}\t{r['topic']}\t{r['partition']}\t{r['new_offset']}")
