"""The schema table language: kraft's own compact description of Kafka messages.

Each message is a block of indented lines (see ``kraft/protocol/tables/``)::

    api Heartbeat 12                    an API: name and key, then its two halves
    request 0-4 flex=4+                 valid versions, flexible versions
      GroupId string 0+                 Name type versions [attributes]
      GroupInstanceId string 3+ null=3+ default=null
    response 0-4 flex=4+
      ...

    metadata PartitionRecord 3 0-2 flex=0+    a metadata-log record (name, type id, versions)
    data LeaderChangeMessage 0-1 flex=0+      a standalone data structure
    header RequestHeader 0-2 flex=2+          a protocol header

Field attributes: ``null=V`` nullable versions, ``tag=N`` tagged field (``tagv=V`` when its
tagged versions differ from its versions), ``flex=V`` a field-level override of flexible
versions, ``default=X``.  Types: bool int8 int16 uint16 int32 uint32 int64 float64 string
bytes records uuid, ``[]T`` arrays of those, and struct types (any other name, with the
struct's fields indented below; ``[]Name`` for arrays of structs).

Names keep Kafka's spelling in the table (so a test can hold it against the specification);
decoded messages are dicts keyed by the snake_case form (``ThrottleTimeMs`` ->
``throttle_time_ms``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PRIMITIVES = frozenset(
    {"bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64", "string",
     "bytes", "records", "uuid"}
)
INFINITE = 1 << 15


@dataclass(frozen=True, slots=True)
class Versions:
    """An inclusive version range; empty when ``lo > hi``."""

    lo: int
    hi: int

    @classmethod
    def parse(cls, text: str) -> "Versions":
        if text == "none":
            return NO_VERSIONS
        if text.endswith("+"):
            return cls(int(text[:-1]), INFINITE)
        lo, _, hi = text.partition("-")
        return cls(int(lo), int(hi or lo))

    def __contains__(self, version: int) -> bool:
        return self.lo <= version <= self.hi

    def __str__(self) -> str:
        if self.lo > self.hi:
            return "none"
        if self.hi == INFINITE:
            return f"{self.lo}+"
        return str(self.lo) if self.lo == self.hi else f"{self.lo}-{self.hi}"


NO_VERSIONS = Versions(1, 0)


def snake_case(name: str) -> str:
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


@dataclass(frozen=True, slots=True)
class Field:
    name: str  # Kafka's spelling
    key: str  # snake_case dict key
    type: str  # as written: "int32", "[]string", "[]Topic", "LeaderIdAndEpoch"
    versions: Versions
    nullable: Versions = NO_VERSIONS
    tag: int | None = None
    tagged_versions: Versions = NO_VERSIONS
    flexible: Versions | None = None  # field-level override
    default: str | None = None
    fields: tuple["Field", ...] = ()  # for struct types
    extension: bool = False  # a kraft addition (``ext=kraft``), absent from Kafka's schemas

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.element_type not in PRIMITIVES


@dataclass(frozen=True, slots=True)
class MessageSpec:
    """One request, response, header, data structure or metadata record."""

    name: str
    kind: str  # request | response | header | data | metadata
    api_key: int | None
    versions: Versions
    flexible: Versions
    fields: tuple[Field, ...]


@dataclass(slots=True)
class SchemaTable:
    apis: dict[str, int] = field(default_factory=dict)  # api name -> key
    messages: dict[tuple[str, str], MessageSpec] = field(default_factory=dict)

    def get(self, name: str, kind: str) -> MessageSpec:
        return self.messages[(name, kind)]


class SchemaSyntaxError(ValueError):
    pass


def _parse_field(line: str, lineno: int) -> tuple[Field, int]:
    words = line.split()
    if len(words) < 3:
        raise SchemaSyntaxError(f"line {lineno}: want 'Name type versions [attrs]': {line!r}")
    name, type_, versions, *attrs = words
    kwargs: dict = {}
    for attr in attrs:
        k, sep, v = attr.partition("=")
        if not sep:
            raise SchemaSyntaxError(f"line {lineno}: attribute without '=': {attr!r}")
        if k == "null":
            kwargs["nullable"] = Versions.parse(v)
        elif k == "tag":
            kwargs["tag"] = int(v)
        elif k == "tagv":
            kwargs["tagged_versions"] = Versions.parse(v)
        elif k == "flex":
            kwargs["flexible"] = Versions.parse(v)
        elif k == "default":
            kwargs["default"] = "" if v == '""' else v
        elif k == "ext":
            if v != "kraft":
                raise SchemaSyntaxError(f"line {lineno}: only ext=kraft is known")
            kwargs["extension"] = True
        else:
            raise SchemaSyntaxError(f"line {lineno}: unknown attribute {k!r}")
    f = Field(name=name, key=snake_case(name), type=type_, versions=Versions.parse(versions), **kwargs)
    if f.tag is not None and f.tagged_versions == NO_VERSIONS:
        f = _replace(f, tagged_versions=f.versions)
    indent = len(line) - len(line.lstrip(" "))
    return f, indent


def _replace(f: Field, **changes) -> Field:
    values = {name: getattr(f, name) for name in Field.__slots__}
    values.update(changes)
    return Field(**values)


def _nest(items: list[tuple[Field, int]], start: int, indent: int) -> tuple[tuple[Field, ...], int]:
    """Group fields at ``indent`` starting at ``items[start]``, attaching deeper lines as
    struct members; returns (fields, index after the group)."""
    out = []
    i = start
    while i < len(items) and items[i][1] == indent:
        f, _ = items[i]
        i += 1
        if i < len(items) and items[i][1] > indent:
            children, i = _nest(items, i, items[i][1])
            f = _replace(f, fields=children)
        if f.is_struct and not f.fields:
            raise SchemaSyntaxError(f"struct field {f.name} of type {f.type} has no fields")
        out.append(f)
    if i < len(items) and items[i][1] > indent:
        raise SchemaSyntaxError(f"unexpected indentation at field {items[i][0].name}")
    return tuple(out), i


def parse(text: str, table: SchemaTable | None = None) -> SchemaTable:
    """Parse schema text into ``table`` (a new one when None)."""
    table = table or SchemaTable()
    lines = [(n, l.rstrip()) for n, l in enumerate(text.splitlines(), 1)]
    lines = [(n, l) for n, l in lines if l.strip() and not l.lstrip().startswith("#")]
    i = 0
    api_name = None
    while i < len(lines):
        lineno, line = lines[i]
        words = line.split()
        head = words[0]
        if head == "api":
            api_name = words[1]
            table.apis[api_name] = int(words[2])
            i += 1
            continue
        if head in ("request", "response"):
            if api_name is None:
                raise SchemaSyntaxError(f"line {lineno}: {head} outside an api block")
            name, api_key, rest = api_name, table.apis[api_name], words[1:]
        elif head in ("metadata", "data", "header"):
            name, rest = words[1], words[2:]
            api_key = int(rest.pop(0)) if head == "metadata" else None
        else:
            raise SchemaSyntaxError(f"line {lineno}: unknown block {head!r}")
        versions = Versions.parse(rest[0])
        flexible = NO_VERSIONS
        for attr in rest[1:]:
            if attr.startswith("flex="):
                flexible = Versions.parse(attr[5:])
        i += 1
        body = []
        while i < len(lines) and lines[i][1].startswith(" "):
            body.append(_parse_field(lines[i][1], lines[i][0]))
            i += 1
        fields, used = _nest(body, 0, body[0][1]) if body else ((), 0)
        if used != len(body):
            raise SchemaSyntaxError(f"{name} {head}: inconsistent indentation")
        table.messages[(name, head)] = MessageSpec(name, head, api_key, versions, flexible, fields)
    return table
