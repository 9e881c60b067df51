"""``kraftctl acls``: kafka-acls.sh's flags and output (CreateAcls, DescribeAcls, DeleteAcls).

``--add`` makes one ACL for each principal x host x operation on each resource named
(``--topic``, ``--group``, ``--cluster``, ``--transactional-id``); ``--producer`` and
``--consumer`` stand for the operations a producer or a consumer needs, as kafka-acls.sh
has them.  ``--remove`` deletes the ACLs so described, or with no principal every ACL of the
resources (asking first unless ``--force``); ``--list`` prints the ACLs of the resources named,
or of every resource.
"""

from __future__ import annotations

import click

from cli.admin_client import AdminClient, AdminError, error_name
from cli.topics import fail
from kraft.security.authorizer import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclOperation as Op,
    PatternType,
    PermissionType,
    ResourceType as R,
)

PATTERN_TYPES = {"literal": PatternType.LITERAL, "prefixed": PatternType.PREFIXED,
                 "match": PatternType.MATCH, "any": PatternType.ANY}
PRODUCER_OPS = {R.TOPIC: (Op.WRITE, Op.DESCRIBE, Op.CREATE), R.TRANSACTIONAL_ID: (Op.WRITE, Op.DESCRIBE)}
CONSUMER_OPS = {R.TOPIC: (Op.READ, Op.DESCRIBE), R.GROUP: (Op.READ,)}


def parse_operation(text: str) -> Op:
    """Kafka's spellings: Read, DescribeConfigs, IdempotentWrite, ... (or READ, DESCRIBE_CONFIGS)."""
    key = text.strip().replace("_", "").replace("-", "").upper()
    for op in Op:
        if op.name.replace("_", "") == key and op not in (Op.UNKNOWN, Op.ANY):
            return op
    raise AdminError(f"--operation {text}: not one of "
                     + ", ".join(o.name for o in Op if o not in (Op.UNKNOWN, Op.ANY)))


def parse_principal(text: str) -> str:
    kind, sep, name = text.strip().partition(":")
    if not sep or not kind or not name:
        raise AdminError(f"principal {text!r}: expected Type:name, e.g. User:alice")
    return f"{kind}:{name}"


def pattern_text(rtype, name, pattern) -> str:
    return f"ResourcePattern(resourceType={R(rtype).name}, name={name}, patternType={PatternType(pattern).name})"


def entry_text(principal, host, op, permission) -> str:
    return (f"(principal={principal}, host={host}, operation={Op(op).name}, "
            f"permissionType={PermissionType(permission).name})")


@click.command("acls")
@click.option("--bootstrap-server", required=True, help="host:port[,host:port...] of brokers.")
@click.option("--command-config", type=click.Path(dir_okay=False), default=None,
              help="Client properties: security.protocol, sasl.mechanism, sasl.jaas.config, ssl.*")
@click.option("--add", "action", flag_value="add")
@click.option("--remove", "action", flag_value="remove")
@click.option("--list", "action", flag_value="list")
@click.option("--allow-principal", multiple=True, metavar="Type:name")
@click.option("--deny-principal", multiple=True, metavar="Type:name")
@click.option("--allow-host", multiple=True, help="Default: * when --allow-principal is given.")
@click.option("--deny-host", multiple=True, help="Default: * when --deny-principal is given.")
@click.option("--operation", "operations", multiple=True,
              help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                   "AlterConfigs, IdempotentWrite, All (repeatable).")
@click.option("--topic", "topics", multiple=True)
@click.option("--group", "groups", multiple=True)
@click.option("--cluster", is_flag=True)
@click.option("--transactional-id", "transactional_ids", multiple=True)
@click.option("--resource-pattern-type", type=click.Choice(sorted(PATTERN_TYPES), case_sensitive=False),
              default="literal", show_default=True)
@click.option("--producer", is_flag=True, help="WRITE, DESCRIBE, CREATE on --topic; WRITE, DESCRIBE on "
                                              "--transactional-id.")
@click.option("--consumer", is_flag=True, help="READ, DESCRIBE on --topic; READ on --group.")
@click.option("--idempotent", is_flag=True, help="With --producer: IDEMPOTENT_WRITE on the cluster.")
@click.option("--principal", "list_principals", multiple=True, help="--list: only these principals' ACLs.")
@click.option("--force", is_flag=True, help="Remove without asking.")
def acls_command(bootstrap_server, command_config, action, allow_principal, deny_principal, allow_host, deny_host,
                 operations, topics, groups, cluster, transactional_ids, resource_pattern_type, producer, consumer,
                 idempotent, list_principals, force):
    """Add, remove or list ACLs (kafka-acls.sh); needs authorizer.class.name on the brokers."""
    if action is None:
        fail("one of --add, --remove, --list is required")
    pattern = PATTERN_TYPES[resource_pattern_type.lower()]
    try:
        resources = [(R.TOPIC, t) for t in topics] + [(R.GROUP, g) for g in groups] + \
            [(R.TRANSACTIONAL_ID, t) for t in transactional_ids]
        if (cluster or (producer and idempotent)) and pattern == PatternType.LITERAL:
            resources.append((R.CLUSTER, CLUSTER_NAME))
        admin = AdminClient(bootstrap_server, command_config=command_config)
        if action == "list":
            _list(admin, resources, pattern, [parse_principal(p) for p in list_principals])
            return
        if not resources:
            fail("You must provide at least one resource: --topic <topic> or --cluster or --group <group> "
                 "or --transactional-id <id>")
        if action == "add" and pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
            fail(f"A '--resource-pattern-type' value of '{resource_pattern_type}' is not valid when adding acls.")
        entries = _entries(resources, allow_principal, deny_principal, allow_host, deny_host,
                           [parse_operation(o) for o in operations], producer, consumer, idempotent)
        if action == "add":
            if any(not acls for acls in entries.values()):
                fail("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
            _add(admin, entries, pattern)
        else:
            _remove(admin, entries, pattern, force)
    except AdminError as exc:
        fail(str(exc))


def _entries(resources, allow_principal, deny_principal, allow_host, deny_host, operations, producer, consumer,
             idempotent) -> dict[tuple, list[tuple]]:
    """Resource -> the (principal, host, operation, permission) entries asked for."""
    allowed = [parse_principal(p) for p in allow_principal]
    denied = [parse_principal(p) for p in deny_principal]
    allow_hosts = list(allow_host) or (["*"] if allowed else [])
    deny_hosts = list(deny_host) or (["*"] if denied else [])

    def entries(ops):
        out = [(p, h, op, PermissionType.ALLOW) for p in allowed for h in allow_hosts for op in ops]
        out += [(p, h, op, PermissionType.DENY) for p in denied for h in deny_hosts for op in ops]
        return list(dict.fromkeys(out))

    result: dict[tuple, list[tuple]] = {}
    for rtype, name in resources:
        if producer or consumer:
            ops = []
            if producer:
                ops += PRODUCER_OPS.get(rtype, ())
                if rtype == R.CLUSTER and idempotent:
                    ops.append(Op.IDEMPOTENT_WRITE)
            if consumer:
                ops += CONSUMER_OPS.get(rtype, ())
            if not ops:
                continue
        else:
            ops = operations
        for op in ops:
            if op != Op.ALL and op not in SUPPORTED_OPERATIONS[rtype]:
                raise AdminError(f"ResourceType {rtype.name} only supports operations "
                                 + ",".join(o.name for o in (Op.ALL, *SUPPORTED_OPERATIONS[rtype])))
        result[(rtype, name)] = entries(dict.fromkeys(ops))
    return result


def _add(admin: AdminClient, entries: dict, pattern: PatternType) -> None:
    for (rtype, name), acls in entries.items():
        click.echo(f"Adding ACLs for resource `{pattern_text(rtype, name, pattern)}`: \n "
                   + "\n ".join("\t" + entry_text(*e) for e in acls) + " \n")
        creations = []
        for principal, host, op, permission in acls:
            creations.append({"resource_type": rtype, "resource_name": name, "resource_pattern_type": pattern,
                              "principal": principal, "host": host, "operation": op, "permission_type": permission})
        resp = admin.call("CreateAcls", {"creations": creations})
        for r in resp["results"]:
            if r["error_code"]:
                raise AdminError(f"{error_name(r['error_code'])}: {r['error_message'] or ''}".strip(": "))
    _list(admin, list(entries), pattern, [])


def _filter(rtype, name, pattern, principal=None, host=None, op=Op.ANY, permission=PermissionType.ANY) -> dict:
    return {"resource_type_filter": rtype, "resource_name_filter": name, "pattern_type_filter": pattern,
            "principal_filter": principal, "host_filter": host, "operation": op, "permission_type": permission}


def _remove(admin: AdminClient, entries: dict, pattern: PatternType, force: bool) -> None:
    filters = []
    for (rtype, name), acls in entries.items():
        resource = f"ResourcePatternFilter(resourceType={rtype.name}, name={name}, patternType={pattern.name})"
        if acls:
            question = (f"Are you sure you want to remove ACLs: \n " + "\n ".join("\t" + entry_text(*e) for e in acls)
                        + f" \n from resource filter `{resource}`? (y/n)")
            batch = [_filter(rtype, name, pattern, *e) for e in acls]
        else:
            question = f"Are you sure you want to delete all ACLs for resource filter `{resource}`? (y/n)"
            batch = [_filter(rtype, name, pattern)]
        if force or click.confirm(question, default=False, show_default=False, prompt_suffix=" "):
            filters.extend(batch)
    if not filters:
        return
    resp = admin.call("DeleteAcls", {"filters": filters})
    for r in resp["filter_results"]:
        if r["error_code"]:
            raise AdminError(f"{error_name(r['error_code'])}: {r['error_message'] or ''}".strip(": "))


def _list(admin: AdminClient, resources, pattern: PatternType, principals: list[str]) -> None:
    if resources:
        filters = [_filter(rtype, name, pattern) for rtype, name in resources]
    else:
        filters = [_filter(R.ANY, None, PatternType.ANY)]
    by_resource: dict[tuple, list] = {}
    for f in filters:
        resp = admin.call("DescribeAcls", f)
        if resp["error_code"]:
            raise AdminError(f"{error_name(resp['error_code'])}: {resp['error_message'] or ''}".strip(": "))
        for res in resp["resources"]:
            key = (res["resource_type"], res["resource_name"], res["pattern_type"])
            for a in res["acls"]:
                entry = (a["principal"], a["host"], a["operation"], a["permission_type"])
                if (not principals or a["principal"] in principals) and entry not in by_resource.get(key, ()):
                    by_resource.setdefault(key, []).append(entry)
    for principal in principals or [None]:
        if principal is not None:
            click.echo(f"ACLs for principal `{principal}`")
        for key, acls in by_resource.items():
            shown = [e for e in acls if principal is None or e[0] == principal]
            if shown:
                click.echo(f"Current ACLs for resource `{pattern_text(*key)}`: \n "
                           + "\n ".join("\t" + entry_text(*e) for e in shown) + " \n")

