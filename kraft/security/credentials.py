"""SCRAM credentials as operators write them: ``kraftctl format --add-scram`` (KIP-900) and
``kraftctl configs --entity-type users --add-config`` (kafka-configs.sh)::

    SCRAM-SHA-512=[name=alice,password=alice-secret]
    SCRAM-SHA-256=[name=alice,iterations=8192,salt="c2FsdA==",saltedpassword="..."]
    SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]

The password is salted here, on the operator's side: what travels (AlterUserScramCredentials)
and what is stored (UserScramCredentialRecord) never holds it.
"""

from __future__ import annotations

import base64
import os
import re

from kraft.security.scram import MECHANISMS, ScramMechanism, credential_from_salted

DEFAULT_ITERATIONS = 4096
SALT_BYTES = 32


class CredentialSpecError(ValueError):
    pass


_QUOTED = r'"(?:[^"\\]|\\.)*"'
_ITEM = re.compile(r'\s*([A-Za-z0-9-]+)\s*=\s*\[((?:' + _QUOTED + r'|[^\]"])*)\]\s*(?:,|$)')
_FIELD = re.compile(r'\s*([A-Za-z]+)\s*=\s*(' + _QUOTED + r'|[^,"]*?)\s*(?:,|$)')


def parse_scram_specs(text: str) -> list[tuple[ScramMechanism, dict[str, str]]]:
    """``MECH=[k=v,...],MECH=[...]`` -> [(mechanism, {k: v})] (keys lower-cased, quotes dropped)."""
    out = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _ITEM.match(text, pos)
        if m is None:
            raise CredentialSpecError(f"{text!r}: expected MECHANISM=[key=value,...]")
        pos = m.end()
        mechanism = MECHANISMS.get(m.group(1).upper())
        if mechanism is None:
            raise CredentialSpecError(f"{m.group(1)!r} is not a SCRAM mechanism ({', '.join(MECHANISMS)})")
        fields = {}
        inner, at = m.group(2).strip(), 0
        while at < len(inner):
            f = _FIELD.match(inner, at)
            if f is None or f.end() == at:
                raise CredentialSpecError(f"{inner[at:]!r}: expected key=value")
            at = f.end()
            value = f.group(2)
            if value.startswith('"'):
                value = re.sub(r"\\(.)", r"\1", value[1:-1])
            fields[f.group(1).lower()] = value
        out.append((mechanism, fields))
    if not out:
        raise CredentialSpecError("no SCRAM credential given")
    return out


def salted_credential(mechanism: ScramMechanism, fields: dict[str, str], *, needs_name: bool = True):
    """(name, iterations, salt, salted password) from one spec's fields."""
    name = fields.get("name")
    if needs_name and not name:
        raise CredentialSpecError(f"{mechanism.name}: name= is required")
    try:
        iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise CredentialSpecError(f"{mechanism.name}: iterations must be a number") from None
    if not mechanism.min_iterations <= iterations <= mechanism.max_iterations:
        raise CredentialSpecError(f"{mechanism.name}: iterations must be within "
                                  f"{mechanism.min_iterations}..{mechanism.max_iterations}")
    try:
        salt = base64.b64decode(fields["salt"], validate=True) if "salt" in fields else os.urandom(SALT_BYTES)
        if "saltedpassword" in fields:
            if "salt" not in fields:
                raise CredentialSpecError(f"{mechanism.name}: saltedpassword= needs salt=")
            salted = base64.b64decode(fields["saltedpassword"], validate=True)
        elif "password" in fields:
            salted = mechanism.salted_password(fields["password"].encode(), salt, iterations)
        else:
            raise CredentialSpecError(f"{mechanism.name}: password= (or salt= and saltedpassword=) is required")
    except ValueError as exc:
        if isinstance(exc, CredentialSpecError):
            raise
        raise CredentialSpecError(f"{mechanism.name}: salt and saltedpassword are base64") from None
    return name, iterations, salt, salted


def bootstrap_records(specs: list[str]):
    """UserScramCredentialRecords for ``kraftctl format --add-scram`` arguments."""
    from metadata.serde import make

    records = []
    for text in specs:
        for mechanism, fields in parse_scram_specs(text):
            name, iterations, salt, salted = salted_credential(mechanism, fields)
            c = credential_from_salted(mechanism, salt, salted, iterations)
            records.append(make("UserScramCredentialRecord", name=name, mechanism=mechanism.type, salt=c.salt,
                                stored_key=c.stored_key, server_key=c.server_key, iterations=iterations))
    return records
