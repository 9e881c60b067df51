"""``kraftctl configs --entity-type users``: SCRAM credentials, as kafka-configs.sh does
them (KIP-554): ``--add-config 'SCRAM-SHA-512=[password=...]'`` salts the password here and
sends AlterUserScramCredentials; ``--delete-config SCRAM-SHA-512`` removes one;
``--describe`` lists mechanisms and iterations (never a secret)."""

from __future__ import annotations

import json

import click

from cli.admin_client import AdminClient, error_name
from cli.topics import fail
from kraft.security.credentials import CredentialSpecError, parse_scram_specs, salted_credential
from kraft.security.scram import MECHANISMS, MECHANISMS_BY_TYPE


def describe_users(admin: AdminClient, user: str, output: str) -> None:
    resp = admin.call("DescribeUserScramCredentials", {"users": [{"name": user}] if user else None})
    if resp["error_code"]:
        fail(f"{error_name(resp['error_code'])}: {resp['error_message'] or ''}".strip(": "))
    described = {}
    for result in resp["results"]:
        if result["error_code"]:
            fail(f"{error_name(result['error_code'])}: {result['error_message'] or ''}".strip(": "))
        described[result["user"]] = {
            MECHANISMS_BY_TYPE[c["mechanism"]].name if c["mechanism"] in MECHANISMS_BY_TYPE else str(c["mechanism"]):
                c["iterations"] for c in result["credential_infos"]}
    if output == "json":
        click.echo(json.dumps(described, indent=2))
        return
    for name, mechanisms in described.items():
        listed = ", ".join(f"{m}=iterations={i}" for m, i in mechanisms.items())
        click.echo(f"SCRAM credential configs for user-principal '{name}' are {listed}")


def alter_users(admin: AdminClient, user: str, add, delete, output: str) -> None:
    if not user:
        fail("--entity-name is required for users")
    upsertions, deletions = [], []
    try:
        for item in add:
            for mechanism, fields in parse_scram_specs(item):
                _, iterations, salt, salted = salted_credential(mechanism, fields, needs_name=False)
                upsertions.append({"name": user, "mechanism": mechanism.type, "iterations": iterations,
                                   "salt": salt, "salted_password": salted})
    except CredentialSpecError as exc:
        fail(f"--add-config: {exc}")
    for item in delete:
        for name in filter(None, (n.strip().upper() for n in item.split(","))):
            if name not in MECHANISMS:
                fail(f"--delete-config {name}: not a SCRAM mechanism ({', '.join(MECHANISMS)})")
            deletions.append({"name": user, "mechanism": MECHANISMS[name].type})
    if not upsertions and not deletions:
        fail("--alter needs --add-config or --delete-config")
    resp = admin.call("AlterUserScramCredentials", {"deletions": deletions, "upsertions": upsertions})
    for result in resp["results"]:
        if result["error_code"]:
            fail(f"{error_name(result['error_code'])}: {result['error_message'] or ''}".strip(": "))
    if output != "quiet":  # (quiet: part of a larger alteration that reports itself)
        click.echo(json.dumps({"altered": True}) if output == "json" else f"Completed updating config for user {user}.")
