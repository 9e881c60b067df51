"""The encoder/decoder of every message in the schema table.

For each (message, version) the table is compiled once, on first use, into a reader that
builds a dict and a writer that appends to a bytearray, generated as Python source
(``kraft.protocol.codegen``; ``kraft.protocol.interpreted`` is the reference they are held
against), so no schema is interpreted on the hot path.

Decoded messages are plain dicts keyed by snake_case field names.  Every field of the
message is present in the result: fields the version does not carry hold their defaults, so
handlers can be written once for all versions.  On encode, a missing key means "default".
"""

from __future__ import annotations

import copy
from functools import lru_cache

from kraft.protocol import codegen
from kraft.protocol.errors import MalformedMessage
from kraft.protocol.interpreted import field_default, fields_maker
from kraft.protocol.schema import MessageSpec, Versions
from kraft.protocol.tables import TABLE

# ---------------------------------------------------------------------------------------
# Public API


@lru_cache(maxsize=None)
def _compiled(name: str, kind: str, version: int):
    """The generated (reader, writer) of a message version (``kraft.protocol.codegen``)."""
    spec = spec_for(name, kind)
    if version not in spec.versions:
        raise ValueError(f"{name} {kind} has no version {version} (valid: {spec.versions})")
    flexible = version in spec.flexible
    label = f"{name} {kind} v{version}"
    return (codegen.reader(spec.fields, version, flexible, label),
            codegen.writer(spec.fields, version, flexible, label))


def spec_for(name: str, kind: str) -> MessageSpec:
    try:
        return TABLE.get(name, kind)
    except KeyError:
        raise KeyError(f"no schema for {name} {kind}") from None


def encode(name: str, kind: str, version: int, value: dict) -> bytes:
    """Encode ``value`` as message ``name`` (``kind`` request/response/...) at ``version``."""
    out = bytearray()
    _compiled(name, kind, version)[1](out, value)
    return bytes(out)


def encode_into(out: bytearray, name: str, kind: str, version: int, value: dict) -> None:
    _compiled(name, kind, version)[1](out, value)


def decode(name: str, kind: str, version: int, buf, *, allow_trailing: bool = False) -> dict:
    """Decode one message filling all of ``buf``; trailing bytes are an error unless allowed.

    Raises MalformedMessage for anything that is not a valid encoding.
    """
    value, pos = decode_prefix(name, kind, version, buf)
    if not allow_trailing and pos != len(buf):
        raise MalformedMessage(f"{name} {kind} v{version}: {len(buf) - pos} trailing bytes")
    return value


def decode_prefix(name: str, kind: str, version: int, buf, pos: int = 0) -> tuple[dict, int]:
    """Decode one message at ``buf[pos:]``; returns (value, position after it)."""
    return _compiled(name, kind, version)[0](buf, pos, len(buf))


def reader(name: str, kind: str, version: int):
    """The generated ``read(buf, pos, end) -> (value, pos)`` of a message version."""
    return _compiled(name, kind, version)[0]


def default_message(name: str, kind: str) -> dict:
    """A message with every field at its default (lists and dicts new each call): a
    starting point for building one."""
    return _message_maker(name, kind)()


@lru_cache(maxsize=None)
def _message_maker(name: str, kind: str):
    """``default_message``'s builder, worked out once per message: the controller makes a
    record per partition when a broker leaves (66,000 at 100,000 partitions), and working
    out each field's default per record held its loop for seconds (issue 19)."""
    return fields_maker(spec_for(name, kind).fields)


@lru_cache(maxsize=None)
def is_flexible(name: str, kind: str, version: int) -> bool:
    return version in spec_for(name, kind).flexible


@lru_cache(maxsize=None)
def versions_of(name: str, kind: str = "request") -> Versions:
    return spec_for(name, kind).versions


def clone(value):
    """A deep copy of a decoded message (they are plain containers)."""
    return copy.deepcopy(value)
