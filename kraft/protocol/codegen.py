"""Readers and writers specialised from the schema table: Python source generated once per
(message, version) and compiled with ``exec``.

The reference codec (``kraft.protocol.interpreted``) makes several calls per field: a
closure, a ``Reader`` method, a bounds check, a struct unpack.  A produce request of one
record cost some 500 Python calls, a fifth of them in the codec.  Generated code reads a
run of fixed-width fields with one ``struct`` unpack after one bounds check, builds each
dict as one literal, and calls a function only for a string, a bytes field or a nested
struct.  Tagged fields (rare, and never on a hot path) are read and written by the
reference closures.

A generated reader is ``read(buf, pos, end) -> (dict, pos)``; a writer is
``write(out: bytearray, value: dict) -> None``.  Both behave as the reference ones do:
the same dicts, the same bytes, MalformedMessage for any input the reference refuses,
the same exceptions for values that cannot be encoded (a test holds them together).
"""

from __future__ import annotations

import struct
import uuid

from kraft.protocol import interpreted as ref
from kraft.protocol import primitives as p
from kraft.protocol.errors import MalformedMessage
from kraft.protocol.schema import Field

_FORMATS = {"bool": "b", "int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
            "int64": "q", "float64": "d"}
_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


# --------------------------------------------------------------------- runtime helpers


def _short(n: int, pos: int, end: int) -> MalformedMessage:
    return MalformedMessage(f"need {n} bytes at position {pos}, only {end - pos} left")


def _uvarint(buf, pos: int, end: int) -> tuple[int, int]:
    r = p.Reader(buf, pos, end)
    return r.uvarint(), r.pos


def _length(buf, pos: int, end: int, compact: bool, wide: bool) -> tuple[int, int]:
    if compact:
        if pos < end and buf[pos] < 0x80:  # one byte: the usual case
            return buf[pos] - 1, pos + 1
        n, pos = _uvarint(buf, pos, end)
        return n - 1, pos
    size = 4 if wide else 2
    if pos + size > end:
        raise _short(size, pos, end)
    return (_I32 if wide else _I16).unpack_from(buf, pos)[0], pos + size


def _make_string_reader(compact: bool, nullable: bool):
    def read_string(buf, pos, end):
        n, pos = _length(buf, pos, end, compact, False)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise MalformedMessage(f"invalid string length {n}")
        if pos + n > end:
            raise _short(n, pos, end)
        try:
            return str(buf[pos:pos + n], "utf-8"), pos + n
        except UnicodeDecodeError as exc:
            raise MalformedMessage(f"string is not UTF-8: {exc}") from None
    return read_string


def _make_bytes_reader(compact: bool, nullable: bool):
    def read_bytes(buf, pos, end):
        n, pos = _length(buf, pos, end, compact, True)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise MalformedMessage(f"invalid bytes length {n}")
        if pos + n > end:
            raise _short(n, pos, end)
        return bytes(buf[pos:pos + n]), pos + n
    return read_bytes


def _make_array_length_reader(compact: bool, nullable: bool):
    def read_array_length(buf, pos, end):
        n, pos = _length(buf, pos, end, compact, True)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise MalformedMessage(f"invalid array length {n}")
        if n > end - pos:  # each element takes a byte at least
            raise MalformedMessage(f"array length {n} exceeds the {end - pos} bytes left")
        return n, pos
    return read_array_length


def _read_uuid(buf, pos, end):
    if pos + 16 > end:
        raise _short(16, pos, end)
    return uuid.UUID(bytes=bytes(buf[pos:pos + 16])), pos + 16


def _read_tags(buf, pos, end, tagged: dict, out: dict) -> int:
    r = p.Reader(buf, pos, end)
    ref._read_tagged(r, tagged, out)
    return r.pos


def _write_uvarint(out: bytearray, value: int) -> None:
    if 0 <= value < 0x80:
        out.append(value)
    else:
        p.write_uvarint(out, value)


def _make_string_writer(compact: bool):
    def write_string(out, v):
        data = v.encode("utf-8")
        if compact:
            _write_uvarint(out, len(data) + 1)
        else:
            if len(data) > 0x7FFF:
                raise ValueError(f"string of {len(data)} bytes exceeds int16 length")
            out += _I16.pack(len(data))
        out += data
    return write_string


def _write_tags(out: bytearray, get, tagged) -> None:
    present = []
    for tag, key, write, default in tagged:
        v = get(key, _MISSING)
        if v is not _MISSING and v != default:
            present.append((tag, write, v))
    _write_uvarint(out, len(present))
    for tag, write, v in present:
        body = bytearray()
        write(body, v)
        _write_uvarint(out, tag)
        _write_uvarint(out, len(body))
        out += body


_MISSING = ref._MISSING


# --------------------------------------------------------------------- the generator


def _field_flexible(f: Field, version: int, flexible: bool) -> bool:
    return flexible if f.flexible is None else version in f.flexible


def _is_fixed(f: Field) -> bool:
    return not f.is_array and f.type in _FORMATS


class _Source:
    """The functions generated for one message version, and the names they use."""

    def __init__(self):
        self.functions: list[str] = []
        self.ns: dict = {"MalformedMessage": MalformedMessage, "_short": _short, "_MISSING": _MISSING,
                         "_read_uuid": _read_uuid, "_read_tags": _read_tags, "_struct": struct,
                         "_I8": _I8, "_I32": _I32, "_write_uvarint": _write_uvarint, "_write_tags": _write_tags,
                         "_write_length": p.write_length, "_write_bytes": p.write_bytes,
                         "_write_records": p.write_records}
        self._names: dict = {}

    def name(self, prefix: str, value) -> str:
        """A global of the generated module holding ``value`` (one per distinct key)."""
        key = (prefix, id(value))  # the value lives in ``ns``: its id stays its own
        name = self._names.get(key)
        if name is None:
            name = f"_{prefix}{len(self._names)}"
            self._names[key] = name
            self.ns[name] = value
        return name

    def compile(self, entry: str):
        exec(compile("\n\n".join(self.functions), f"<codegen {entry}>", "exec"), self.ns)
        return self.ns[entry]


def _split(fields, version: int, flexible: bool):
    """(regular, tagged, absent) as the reference struct reader and writer split them."""
    regular, tagged, absent = [], [], []
    for f in fields:
        if f.tag is not None and flexible and version in f.tagged_versions:
            tagged.append(f)
            absent.append(f)  # the default unless the tag is present
        elif f.tag is None and version in f.versions:
            regular.append(f)
        else:
            absent.append(f)
    return regular, tagged, absent


def _runs(regular):
    """The regular fields in order, consecutive fixed-width scalars grouped in lists."""
    out = []
    for f in regular:
        if _is_fixed(f) and out and isinstance(out[-1], list):
            out[-1].append(f)
        elif _is_fixed(f):
            out.append([f])
        else:
            out.append(f)
    return out


# -- readers


def _reader(src: _Source, fields, version: int, flexible: bool) -> str:
    """Generate the reader of a struct; returns its function's name."""
    name = f"_read{len(src.functions)}"
    src.functions.append("")  # reserve the slot: nested structs are generated first
    slot = len(src.functions) - 1
    regular, tagged, absent = _split(fields, version, flexible)
    lines = [f"def {name}(buf, pos, end):"]
    values = []  # (key, expression) in the reference's order
    for i, item in enumerate(_runs(regular)):
        if isinstance(item, list):
            fmt = ">" + "".join(_FORMATS[f.type] for f in item)
            size = struct.calcsize(fmt)
            names = [f"v{i}_{j}" for j in range(len(item))]
            lines += [f"    if pos + {size} > end: raise _short({size}, pos, end)",
                      f"    {', '.join(names)}, = {src.name('S', struct.Struct(fmt))}.unpack_from(buf, pos)",
                      f"    pos += {size}"]
            values += [(f.key, f"{n} != 0" if f.type == "bool" else n) for f, n in zip(item, names)]
        else:
            lines += _read_field(src, item, f"v{i}", version, flexible)
            values.append((item.key, f"v{i}"))
    fresh = []
    for f in absent:
        value, make = ref._default_maker(f)
        if make is None:
            values.append((f.key, src.name("D", value) if not isinstance(value, (int, float, str, type(None)))
                           else repr(value)))
        else:
            fresh.append((f.key, f"{src.name('M', make)}()"))
    values += fresh
    lines.append("    out = {" + ", ".join(f"{k!r}: {e}" for k, e in values) + "}")
    if flexible:
        table = {f.tag: (f.key, ref._field_reader(f, version, flexible)) for f in tagged}
        lines += ["    if pos < end and buf[pos] == 0:",  # no tagged fields: the usual case
                  "        pos += 1",
                  "    else:",
                  f"        pos = _read_tags(buf, pos, end, {src.name('T', table)}, out)"]
    lines.append("    return out, pos")
    src.functions[slot] = "\n".join(lines)
    return name


def _read_field(src: _Source, f: Field, var: str, version: int, flexible: bool) -> list[str]:
    fl = _field_flexible(f, version, flexible)
    nullable = version in f.nullable
    if f.is_array:
        length = src.name("L", _make_array_length_reader(fl, nullable))
        lines = [f"    n, pos = {length}(buf, pos, end)",
                 "    if n is None:",
                 f"        {var} = None"]
        t = f.element_type
        if t in _FORMATS:  # a run of fixed-width elements: one unpack
            fmt, size = _FORMATS[t], struct.calcsize(">" + _FORMATS[t])
            unpack = f"_struct.unpack_from('>' + str(n) + {fmt!r}, buf, pos)"
            lines += ["    else:",
                      f"        if pos + {size} * n > end: raise _short({size} * n, pos, end)",
                      f"        {var} = [x != 0 for x in {unpack}]" if t == "bool" else
                      f"        {var} = list({unpack})",
                      f"        pos += {size} * n"]
            return lines
        elem = _element_reader_name(src, f, version, fl, nullable=False)
        lines += ["    else:",
                  f"        {var} = []",
                  f"        append = {var}.append",
                  "        for _ in range(n):",
                  f"            x, pos = {elem}(buf, pos, end)",
                  "            append(x)"]
        return lines
    elem = _element_reader_name(src, f, version, fl, nullable)
    if f.is_struct and nullable:
        return ["    if pos + 1 > end: raise _short(1, pos, end)",
                "    pos += 1",
                "    if _I8.unpack_from(buf, pos - 1)[0] < 0:",
                f"        {var} = None",
                "    else:",
                f"        {var}, pos = {elem}(buf, pos, end)"]
    return [f"    {var}, pos = {elem}(buf, pos, end)"]


def _element_reader_name(src: _Source, f: Field, version: int, flexible: bool, nullable: bool) -> str:
    """The function reading one element of ``f`` (a struct, string, bytes or uuid)."""
    t = f.element_type
    if f.is_struct:
        return _reader(src, f.fields, version, flexible)
    if t == "uuid":
        return "_read_uuid"
    if t == "string":
        return src.name("R", _make_string_reader(flexible, nullable))
    return src.name("R", _make_bytes_reader(flexible, nullable))  # bytes, records


# -- writers


def _writer(src: _Source, fields, version: int, flexible: bool) -> str:
    """Generate the writer of a struct; returns its function's name."""
    name = f"_write{len(src.functions)}"
    src.functions.append("")
    slot = len(src.functions) - 1
    regular, tagged, _ = _split(fields, version, flexible)
    lines = [f"def {name}(out, value):", "    get = value.get"]
    for i, item in enumerate(_runs(regular)):
        if isinstance(item, list):
            fmt = ">" + "".join(_FORMATS[f.type] for f in item)
            args = []
            for f in item:
                default = ref.field_default(f)
                got = f"get({f.key!r}, {repr(default) if isinstance(default, (int, float, type(None))) else src.name('D', default)})"
                args.append(f"(1 if {got} else 0)" if f.type == "bool" else got)
            lines.append(f"    out += {src.name('S', struct.Struct(fmt))}.pack({', '.join(args)})")
        else:
            lines += _write_field(src, item, f"v{i}", version, flexible)
    if flexible:
        if tagged:
            table = sorted(((f.tag, f.key, ref._field_writer(f, version, flexible), ref.field_default(f))
                            for f in tagged), key=lambda t: t[0])
            lines.append(f"    _write_tags(out, get, {src.name('T', tuple(table))})")
        else:
            lines.append("    out.append(0)")
    src.functions[slot] = "\n".join(lines)
    return name


def _write_field(src: _Source, f: Field, var: str, version: int, flexible: bool) -> list[str]:
    fl = _field_flexible(f, version, flexible)
    nullable = version in f.nullable
    refuse = f"raise ValueError({f'field {f.name} is not nullable in version {version}'!r})"
    if f.is_array or f.is_struct:  # a fresh default each time, as the reference
        lines = [f"    {var} = get({f.key!r}, _MISSING)",
                 f"    if {var} is _MISSING:",
                 f"        {var} = {src.name('F', _default_factory(f))}()"]
    else:  # an immutable default
        lines = [f"    {var} = get({f.key!r}, {src.name('D', ref.field_default(f))})"]
    t = f.element_type
    if f.is_array:
        lines += [f"    if {var} is None:",
                  f"        {refuse}" if not nullable else f"        _write_length(out, None, {fl}, True)",
                  "    else:",
                  f"        _write_uvarint(out, len({var}) + 1)" if fl else
                  f"        out += _I32.pack(len({var}))"]
        if t in _FORMATS:
            item = "(1 if x else 0) for x in " + var if t == "bool" else "*" + var
            lines.append(f"        out += _struct.pack('>' + str(len({var})) + {_FORMATS[t]!r}, "
                         f"{'*(' + item + ')' if t == 'bool' else item})")
        else:
            elem = _element_writer_name(src, f, version, fl)
            lines += [f"        for x in {var}:", f"            {elem}(out, x)"]
        return lines
    if f.is_struct:
        elem = _element_writer_name(src, f, version, fl)
        if nullable:
            return lines + [f"    if {var} is None:", "        out.append(0xFF)", "    else:",
                            "        out.append(1)", f"        {elem}(out, {var})"]
        return lines + [f"    if {var} is None:", f"        {refuse}", f"    {elem}(out, {var})"]
    if t in ("string", "bytes", "records"):
        elem = _element_writer_name(src, f, version, fl)
        lines += [f"    if {var} is None:",
                  f"        {refuse}" if not nullable else
                  f"        _write_length(out, None, {fl}, {t != 'string'})",
                  "    else:", f"        {elem}(out, {var})"]
        return lines
    return lines + [f"    {_element_writer_name(src, f, version, fl)}(out, {var})"]  # uuid


def _default_factory(f: Field):
    return lambda: ref.field_default(f)


def _element_writer_name(src: _Source, f: Field, version: int, flexible: bool) -> str:
    t = f.element_type
    if f.is_struct:
        return _writer(src, f.fields, version, flexible)
    if t == "string":
        return src.name("W", _make_string_writer(flexible))
    if t == "records":
        return src.name("W", lambda out, v, _c=flexible: p.write_records(out, v, _c))
    if t == "bytes":
        return src.name("W", lambda out, v, _c=flexible: p.write_bytes(out, v, _c))
    return src.name("W", ref._FIXED_WRITERS[t])


# --------------------------------------------------------------------- entry points


def reader(fields, version: int, flexible: bool, label: str = "message"):
    """``read(buf, pos, end) -> (dict, pos)`` for a struct of ``fields`` at ``version``."""
    src = _Source()
    entry = _reader(src, fields, version, flexible)
    return _named(src.compile(entry), label)


def writer(fields, version: int, flexible: bool, label: str = "message"):
    """``write(out, value)`` for a struct of ``fields`` at ``version``."""
    src = _Source()
    entry = _writer(src, fields, version, flexible)
    return _named(src.compile(entry), label)


def source(fields, version: int, flexible: bool) -> str:
    """The generated reader and writer, as text (for reading and debugging)."""
    r, w = _Source(), _Source()
    _reader(r, fields, version, flexible)
    _writer(w, fields, version, flexible)
    return "\n\n".join(r.functions + w.functions)


def _named(fn, label: str):
    fn.__qualname__ = f"{fn.__name__}[{label}]"
    return fn
