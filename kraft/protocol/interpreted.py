"""The reference codec: for each (message, version) the schema table is compiled into a
pair of closures, a reader that builds a dict and a writer that appends to a bytearray, a
flat loop over prepared field operations.

``kraft.protocol.codec`` serves messages with readers and writers generated as Python source
(``kraft.protocol.codegen``), which do the same work in a few calls per struct instead of
several per field; these closures are what the generated code is held against (a test
compares both on every message and version), and they read and write tagged fields for it.
"""

from __future__ import annotations

from kraft.protocol import primitives as p
from kraft.protocol.errors import MalformedMessage
from kraft.protocol.schema import Field

# ---------------------------------------------------------------------------------------
# Defaults


def _scalar_default(type_: str, text: str | None):
    if text == "null":
        return None
    if type_ == "bool":
        return text == "true"
    if type_ in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        return int(text, 0) if text else 0
    if type_ == "float64":
        return float(text) if text else 0.0
    if type_ == "string":
        return text or ""
    if type_ == "bytes":
        return b""
    if type_ == "records":
        return None
    if type_ == "uuid":
        return p.ZERO_UUID
    raise ValueError(f"no default for type {type_}")


def field_default(f: Field):
    """A fresh default value for ``f`` (lists and dicts are new objects each call)."""
    if f.is_array:
        return None if f.default == "null" else []
    if f.is_struct:
        return None if f.default == "null" else {g.key: field_default(g) for g in f.fields}
    return _scalar_default(f.type, f.default)


def _default_maker(f: Field):
    """``(value, None)`` when ``f``'s default is immutable, else ``(None, make)`` where
    ``make()`` returns a fresh default.  Decoding fills absent fields of every struct
    (a fetch of thousands of partitions has thousands), so this work is done once."""
    if f.is_array:
        return (None, None) if f.default == "null" else (None, list)
    if f.is_struct:
        return (None, None) if f.default == "null" else (None, fields_maker(f.fields))
    return _scalar_default(f.type, f.default), None


def fields_maker(fields):
    """A function returning a fresh dict of ``fields`` at their defaults, in field order;
    what each field's default is, and which need a new object each time, is worked out
    here, once."""
    template: dict = {}
    fresh = []
    for g in fields:
        value, make = _default_maker(g)
        template[g.key] = value  # a placeholder where ``make`` fills it: keeps field order
        if make is not None:
            fresh.append((g.key, make))
    if not fresh:
        return template.copy

    def make_fields() -> dict:
        out = template.copy()
        for key, make_field in fresh:
            out[key] = make_field()
        return out
    return make_fields


# ---------------------------------------------------------------------------------------
# Readers

_FIXED_READERS = {
    "bool": p.Reader.bool,
    "int8": p.Reader.int8,
    "int16": p.Reader.int16,
    "uint16": p.Reader.uint16,
    "int32": p.Reader.int32,
    "uint32": p.Reader.uint32,
    "int64": p.Reader.int64,
    "float64": p.Reader.float64,
    "uuid": p.Reader.uuid,
}


def _element_reader(f: Field, version: int, flexible: bool):
    t = f.element_type
    if f.is_struct:
        return _struct_reader(f.fields, version, flexible)
    if t in _FIXED_READERS:
        return _FIXED_READERS[t]
    nullable = version in f.nullable and not f.is_array
    if t == "string":
        return lambda r: r.string(flexible, nullable)
    return lambda r: r.bytes_(flexible, nullable)  # bytes, records


def _field_reader(f: Field, version: int, flexible: bool):
    flexible = flexible if f.flexible is None else version in f.flexible
    elem = _element_reader(f, version, flexible)
    nullable = version in f.nullable
    if f.is_array:
        def read_array(r):
            n = r.array_length(flexible, nullable)
            if n is None:
                return None
            return [elem(r) for _ in range(n)]
        return read_array
    if f.is_struct and nullable:
        def read_nullable_struct(r):
            return None if r.int8() < 0 else elem(r)
        return read_nullable_struct
    return elem


def _struct_reader(fields: tuple[Field, ...], version: int, flexible: bool):
    regular = []
    tagged = {}
    absent = []
    for f in fields:
        if f.tag is not None and flexible and version in f.tagged_versions:
            tagged[f.tag] = (f.key, _field_reader(f, version, flexible))
            absent.append(f)  # filled with the default unless the tag is present
        elif f.tag is None and version in f.versions:
            regular.append((f.key, _field_reader(f, version, flexible)))
        else:
            absent.append(f)

    absent_fixed = {}  # absent fields with immutable defaults
    absent_fresh = []  # (key, make) for the others
    for f in absent:
        value, make = _default_maker(f)
        if make is None:
            absent_fixed[f.key] = value
        else:
            absent_fresh.append((f.key, make))

    def read_struct(r: p.Reader) -> dict:
        out = {}
        for key, read in regular:
            out[key] = read(r)
        if absent_fixed:
            out.update(absent_fixed)
        for key, make in absent_fresh:
            out[key] = make()
        if flexible:
            _read_tagged(r, tagged, out)
        return out

    return read_struct


def _read_tagged(r: p.Reader, tagged: dict, out: dict) -> None:
    count = r.uvarint()
    last = -1
    for _ in range(count):
        tag = r.uvarint()
        size = r.uvarint()
        if tag <= last:
            raise MalformedMessage(f"tagged fields out of order: {tag} after {last}")
        last = tag
        end = r.pos + size
        if end > r.end:
            raise MalformedMessage(f"tagged field {tag} of {size} bytes overruns the message")
        entry = tagged.get(tag)
        if entry is None:
            r.pos = end  # unknown tags are skipped, as Kafka does
            continue
        key, read = entry
        sub = p.Reader(r.buf, r.pos, end)
        out[key] = read(sub)
        if sub.pos != end:
            raise MalformedMessage(f"tagged field {tag} has {end - sub.pos} unread bytes")
        r.pos = end


# ---------------------------------------------------------------------------------------
# Writers

_FIXED_WRITERS = {
    "bool": p.write_bool,
    "int8": p.write_int8,
    "int16": p.write_int16,
    "uint16": p.write_uint16,
    "int32": p.write_int32,
    "uint32": p.write_uint32,
    "int64": p.write_int64,
    "float64": p.write_float64,
    "uuid": p.write_uuid,
}


def _element_writer(f: Field, version: int, flexible: bool):
    t = f.element_type
    if f.is_struct:
        return _struct_writer(f.fields, version, flexible)
    if t in _FIXED_WRITERS:
        return _FIXED_WRITERS[t]
    if t == "string":
        return lambda out, v: p.write_string(out, v, flexible)
    if t == "records":
        return lambda out, v: p.write_records(out, v, flexible)
    return lambda out, v: p.write_bytes(out, v, flexible)


def _field_writer(f: Field, version: int, flexible: bool):
    flexible = flexible if f.flexible is None else version in f.flexible
    elem = _element_writer(f, version, flexible)
    nullable = version in f.nullable
    name = f.name

    def check_null():
        if not nullable:
            raise ValueError(f"field {name} is not nullable in version {version}")

    if f.is_array:
        def write_array(out, v):
            if v is None:
                check_null()
                p.write_length(out, None, flexible, True)
                return
            p.write_length(out, len(v), flexible, True)
            for item in v:
                elem(out, item)
        return write_array
    if f.is_struct:
        def write_struct_field(out, v):
            if nullable:
                if v is None:
                    out.append(0xFF)
                    return
                out.append(1)
            elif v is None:
                check_null()
            elem(out, v)
        return write_struct_field
    if f.element_type in ("string", "bytes", "records"):
        def write_nullable(out, v):
            if v is None:
                check_null()
            elem(out, v)
        return write_nullable
    return elem


def _struct_writer(fields: tuple[Field, ...], version: int, flexible: bool):
    regular = []
    tagged = []
    for f in fields:
        if f.tag is not None and flexible and version in f.tagged_versions:
            tagged.append((f, _field_writer(f, version, flexible), field_default(f)))
        elif f.tag is None and version in f.versions:
            regular.append((f, _field_writer(f, version, flexible)))
    tagged.sort(key=lambda item: item[0].tag)  # with each default, to compare with only

    def write_struct(out: bytearray, value: dict) -> None:
        get = value.get
        for f, write in regular:
            v = get(f.key, _MISSING)
            write(out, field_default(f) if v is _MISSING else v)
        if not flexible:
            return
        present = []
        for f, write, default in tagged:
            v = get(f.key, _MISSING)
            if v is not _MISSING and v != default:
                present.append((f.tag, write, v))
        p.write_uvarint(out, len(present))
        for tag, write, v in present:
            body = bytearray()
            write(body, v)
            p.write_uvarint(out, tag)
            p.write_uvarint(out, len(body))
            out += body

    return write_struct


_MISSING = object()
