"""``kraftctl configs --entity-type clients|users``: client quotas, as kafka-configs.sh does
them (KIP-546) with AlterClientQuotas and DescribeClientQuotas.

Entities pair ``--entity-type`` with ``--entity-name`` or ``--entity-default`` in command-line
order: ``--entity-type users --entity-name alice --entity-type clients --entity-default`` is
user alice's quota for any client id without its own.  Describing with neither names every
entity of the types given (and only of those types, as kafka-configs.sh asks: strict).
"""

from __future__ import annotations

import json

import click

from cli.admin_client import AdminClient, error_name
from cli.topics import fail
from kraft.quotas.entities import CLIENT_ID, USER

ENTITY_TYPES = {"users": USER, "clients": CLIENT_ID}
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


def split_configs(items) -> list[tuple[str, str]]:
    """``k=v,k2=[a=1,b=2]`` -> [(k, v), (k2, [a=1,b=2])]: commas inside brackets stay."""
    out = []
    for item in items:
        depth, start = 0, 0
        for i, ch in enumerate(item + ","):
            depth += ch == "["
            depth -= ch == "]"
            if ch == "," and depth == 0:
                part = item[start:i].strip()
                start = i + 1
                if part:
                    k, sep, v = part.partition("=")
                    if not sep:
                        fail(f"--add-config {part!r}: expected key=value")
                    out.append((k.strip(), v.strip()))
    return out


def entity_of(types: list[str], names: list) -> list[dict]:
    """The entity (for AlterClientQuotas) of entity types and names (None: default)."""
    if len(names) != len(types):
        fail("each --entity-type needs an --entity-name or --entity-default")
    return [{"entity_type": ENTITY_TYPES[t], "entity_name": n} for t, n in zip(types, names)]


def alter_quotas(admin: AdminClient, types: list[str], names: list, adds: list[tuple[str, str]],
                 deletes: list[str]) -> None:
    entity = entity_of(types, names)
    ops = []
    for key, value in adds:
        try:
            number = float(value)
        except ValueError:
            fail(f"--add-config {key}={value}: a quota is a number")
        ops.append({"key": key, "value": number, "remove": False})
    ops += [{"key": key, "value": 0.0, "remove": True} for key in deletes]
    resp = admin.call("AlterClientQuotas", {"entries": [{"entity": entity, "ops": ops}], "validate_only": False})
    for entry in resp["entries"]:
        if entry["error_code"]:
            fail(f"{error_name(entry['error_code'])}: {entry['error_message'] or ''}".strip(": "))


def describe_quotas(admin: AdminClient, types: list[str], names: list) -> list[dict]:
    """The quota entries of the entities named (or, without names, of those types)."""
    components = []
    for i, t in enumerate(types):
        if i < len(names):
            name = names[i]
            components.append({"entity_type": ENTITY_TYPES[t], "match_type": MATCH_DEFAULT if name is None
                               else MATCH_EXACT, "match": name})
        else:
            components.append({"entity_type": ENTITY_TYPES[t], "match_type": MATCH_SPECIFIED, "match": None})
    resp = admin.call("DescribeClientQuotas", {"components": components, "strict": True})
    if resp["error_code"]:
        fail(f"{error_name(resp['error_code'])}: {resp['error_message'] or ''}".strip(": "))
    return resp["entries"] or []


def entity_label(entity: list[dict]) -> str:
    """kafka-configs.sh's words: ``user-principal 'alice', the default client-id``."""
    words = {USER: "user-principal", CLIENT_ID: "client-id"}
    order = {USER: 0, CLIENT_ID: 1}
    parts = []
    for e in sorted(entity, key=lambda e: order.get(e["entity_type"], 2)):
        word = words.get(e["entity_type"], e["entity_type"])
        parts.append(f"the default {word}" if e["entity_name"] is None else f"{word} '{e['entity_name']}'")
    return ", ".join(parts)


def print_quotas(entries: list[dict], output: str) -> None:
    if output == "json":
        click.echo(json.dumps([{"entity": {e["entity_type"]: e["entity_name"] for e in entry["entity"]},
                                "quotas": {v["key"]: v["value"] for v in entry["values"]}} for entry in entries],
                              indent=2))
        return
    for entry in entries:
        values = ", ".join(f"{v['key']}={v['value']}" for v in entry["values"])
        click.echo(f"Quota configs for {entity_label(entry['entity'])} are {values}")
