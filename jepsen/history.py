"""The history model: Jepsen operations, and their JSON-lines and Parquet forms.

Theory of operation
-------------------
A history is the ordered list of everything clients and the nemesis did.  Each logical
operation appears twice: an ``invoke`` record when a process starts it, then a completion
when it ends -- ``ok`` (it happened), ``fail`` (it certainly did not) or ``info`` (unknown:
it may have happened, at any time after its invocation, or never).  A process runs one
operation at a time, so a process's records alternate invoke / completion; after an
``info`` the harness retires the process and carries on with a fresh process number.
The nemesis is the process named ``"nemesis"``.

``index`` is the record's position in the history and ``time`` a monotonic clock in
nanoseconds; history order is real-time order.

Values are plain JSON data.  Queue workload (key = partition)::

    send   invoke [key, value]            ok [key, [offset, value]]
           (a multi-message send carries a list of those pairs instead of one)
    poll   invoke null                    ok {key: [[offset, value], ...], ...}
    assign / subscribe  invoke [key, ...] ok the same

Txn workload (each operation a transaction of micro-ops; integer keys and values)::

    txn    invoke [["send", key, value], ["poll"], ...]
           ok     [["send", key, [offset, value]], ["poll", {key: [[offset, value], ...]}],
                   ...]
           fail / info   the invocation's micro-ops (aborted for sure / may have committed)
    assign invoke [key, ...]              ok the same

Register workload (independent keys)::

    read   invoke [key, null]   ok [key, v]
    write  invoke [key, v]      ok [key, v]
    cas    invoke [key, [old, new]]

JSON lines
----------
One JSON object per line with the fields of :class:`Op` (``error`` only when set).  JSON
object keys are strings, so on reading, an object key that spells a decimal integer comes
back as an ``int`` (poll values keyed by partition number round-trip exactly).

Parquet
-------
A flat schema Spark scans without Python, one row per record:

=========  ========  ==================================================================
column     type      meaning
=========  ========  ==================================================================
index      int64     position in the history
time       int64     monotonic nanoseconds
process    int64     the process number; null for a named process
actor      string    the process name when it is not a number (``"nemesis"``)
type       string    invoke / ok / fail / info
f          string    the function
key        string    JSON text of the key the record is about (``value[0]`` of a keyed
                     op: send, read, write, cas); null otherwise
value      string    JSON text of the value
error      string    the error, if any
=========  ========  ==================================================================
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

INVOKE = "invoke"
OK = "ok"
FAIL = "fail"
INFO = "info"
TYPES = (INVOKE, OK, FAIL, INFO)
NEMESIS = "nemesis"

# Functions whose value is [key, ...]: the Parquet ``key`` column is filled for them.
KEYED_FS = frozenset({"send", "read", "write", "cas", "add", "append"})

PARQUET_FILE = "history.parquet"
JSONL_FILE = "history.jsonl"


@dataclass(frozen=True, slots=True)
class Op:
    """One history record.

    Attributes:
        index: position in the history (0-based, dense in a written history).
        time: monotonic clock, nanoseconds.
        type: ``invoke``, ``ok``, ``fail`` or ``info``.
        process: an int for client processes, a name (``"nemesis"``) otherwise.
        f: the function, e.g. ``send``, ``poll``, ``read``, ``start-kill``.
        value: JSON-compatible value.
        error: why the operation failed or is indefinite, if known.
    """

    index: int
    time: int
    type: str
    process: int | str
    f: str
    value: Any = None
    error: str | None = None

    def __post_init__(self) -> None:
        if self.type not in TYPES:
            raise ValueError(f"op type must be one of {TYPES}, not {self.type!r}")
        if not isinstance(self.index, int) or not isinstance(self.time, int):
            raise TypeError("op index and time must be ints")
        if isinstance(self.process, bool) or not isinstance(self.process, (int, str)):
            raise TypeError(f"op process must be an int or a name, not {self.process!r}")

    @property
    def is_invoke(self) -> bool:
        return self.type == INVOKE

    @property
    def is_client(self) -> bool:
        return isinstance(self.process, int)

    def to_dict(self) -> dict[str, Any]:
        d = {
            "index": self.index,
            "time": self.time,
            "type": self.type,
            "process": self.process,
            "f": self.f,
            "value": self.value,
        }
        if self.error is not None:
            d["error"] = self.error
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Op:
        return cls(
            index=int(d["index"]),
            time=int(d["time"]),
            type=d["type"],
            process=d["process"],
            f=d["f"],
            value=d.get("value"),
            error=d.get("error"),
        )


@dataclass(frozen=True, slots=True)
class Operation:
    """An invocation paired with its completion (``None`` while still pending)."""

    invoke: Op
    complete: Op | None = field(default=None)

    @property
    def type(self) -> str:
        """The completion type; a pending operation counts as ``info``."""
        return self.complete.type if self.complete is not None else INFO


def pair(ops: Iterable[Op]) -> list[Operation]:
    """Pair each invocation with the next record of the same process.

    Completions without an invocation are ignored; invocations without a completion
    pair with ``None``.  Returns the operations in invocation order.
    """
    open_: dict[Any, int] = {}
    out: list[list] = []
    for op in ops:
        if op.type == INVOKE:
            open_[op.process] = len(out)
            out.append([op, None])
        else:
            at = open_.pop(op.process, None)
            if at is not None:
                out[at][1] = op
    return [Operation(i, c) for i, c in out]


def reindex(ops: Iterable[Op]) -> list[Op]:
    """Returns the ops with ``index`` set to their position (for hand-built histories)."""
    return [Op(i, o.time, o.type, o.process, o.f, o.value, o.error) for i, o in enumerate(ops)]


def op_key(op: Op) -> Any:
    """The key a keyed op is about (``value[0]``), else ``None``."""
    v = op.value
    if op.f in KEYED_FS and isinstance(v, (list, tuple)) and v:
        if op.f == "send" and isinstance(v[0], (list, tuple)):
            return None  # a multi-message send may span keys
        return v[0]
    return None


# ---------------------------------------------------------------- JSON lines


def _int_keys(pairs: list[tuple[str, Any]]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for k, v in pairs:
        if k and (k.isdigit() or (k[0] == "-" and k[1:].isdigit())):
            out[int(k)] = v
        else:
            out[k] = v
    return out


def decode_value(text: str | None) -> Any:
    """Parses a JSON value text as the history readers do (integer-like keys to ints)."""
    if text is None:
        return None
    if "{" not in text:
        return json.loads(text)  # no objects: the plain (faster) path
    return json.loads(text, object_pairs_hook=_int_keys)


def encode_value(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


class JsonlWriter:
    """Appends ops to a JSON-lines file as they happen (a context manager).

    Each line is flushed so a crashed harness leaves a readable prefix.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._f = open(path, "a", encoding="utf-8")

    def append(self, op: Op) -> None:
        self._f.write(json.dumps(op.to_dict(), separators=(",", ":")) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_jsonl(ops: Iterable[Op], path: str | os.PathLike[str]) -> None:
    """Writes a whole history as JSON lines (replacing the file)."""
    with open(path, "w", encoding="utf-8") as f:
        for op in ops:
            f.write(json.dumps(op.to_dict(), separators=(",", ":")) + "\n")


def iter_jsonl(path: str | os.PathLike[str]) -> Iterator[Op]:
    """Yields the ops of a JSON-lines history; a torn last line is skipped."""
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            d = json.loads(line, object_pairs_hook=_int_keys)
        except json.JSONDecodeError:
            if n == len(lines) - 1:
                return  # a write cut short by a crash
            raise
        yield Op.from_dict(d)


def read_jsonl(path: str | os.PathLike[str]) -> list[Op]:
    return list(iter_jsonl(path))


# ---------------------------------------------------------------- Parquet


def parquet_schema():
    import pyarrow as pa

    return pa.schema(
        [
            ("index", pa.int64()),
            ("time", pa.int64()),
            ("process", pa.int64()),
            ("actor", pa.string()),
            ("type", pa.string()),
            ("f", pa.string()),
            ("key", pa.string()),
            ("value", pa.string()),
            ("error", pa.string()),
        ]
    )


def to_columns(ops: Iterable[Op]) -> dict[str, list]:
    """The ops as Parquet columns (see the module docstring for the schema)."""
    cols: dict[str, list] = {n: [] for n in
                             ("index", "time", "process", "actor", "type", "f", "key",
                              "value", "error")}
    for op in ops:
        cols["index"].append(op.index)
        cols["time"].append(op.time)
        numbered = isinstance(op.process, int)
        cols["process"].append(op.process if numbered else None)
        cols["actor"].append(None if numbered else op.process)
        cols["type"].append(op.type)
        cols["f"].append(op.f)
        k = op_key(op)
        cols["key"].append(None if k is None else encode_value(k))
        cols["value"].append(encode_value(op.value))
        cols["error"].append(op.error)
    return cols


def write_parquet(ops: Iterable[Op], path: str | os.PathLike[str],
                  row_group_size: int = 256 * 1024) -> None:
    """Writes a history as one Parquet file (zstd-compressed)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pydict(to_columns(ops), schema=parquet_schema())
    pq.write_table(table, path, compression="zstd", row_group_size=row_group_size)


def write_parquet_chunks(chunks: Iterable[Iterable[Op]], path: str | os.PathLike[str]) -> int:
    """Writes a history given in chunks as one Parquet file, a row group per chunk, so a
    history larger than memory can be written; returns the number of records."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 0
    schema = parquet_schema()
    with pq.ParquetWriter(path, schema, compression="zstd") as w:
        for chunk in chunks:
            t = pa.Table.from_pydict(to_columns(chunk), schema=schema)
            n += t.num_rows
            w.write_table(t)
    return n


def row_to_op(row: Any) -> Op:
    """Builds an Op from a Parquet/Spark row (mapping or attribute access)."""
    get = row.get if isinstance(row, dict) else row.__getitem__
    process = get("process")
    return Op(
        index=int(get("index")),
        time=int(get("time")),
        type=get("type"),
        process=int(process) if process is not None else get("actor"),
        f=get("f"),
        value=decode_value(get("value")),
        error=get("error"),
    )


def read_parquet(path: str | os.PathLike[str]) -> list[Op]:
    import pyarrow.parquet as pq

    cols = pq.read_table(path).to_pydict()
    dec = decode_value
    return [Op(i, t, ty, p if p is not None else a, f, dec(v), e)
            for i, t, p, a, ty, f, v, e in zip(cols["index"], cols["time"], cols["process"],
                                                cols["actor"], cols["type"], cols["f"],
                                                cols["value"], cols["error"])]


# ---------------------------------------------------------------- stores


def history_file(directory: str | os.PathLike[str]) -> Path:
    """The history file of a run folder: ``history.parquet``, else ``history.jsonl``.

    Raises:
        FileNotFoundError: the folder holds neither.
    """
    d = Path(directory)
    for name in (PARQUET_FILE, JSONL_FILE):
        if (d / name).is_file():
            return d / name
    raise FileNotFoundError(f"no {PARQUET_FILE} or {JSONL_FILE} in {d}")



def history_size(path: str | os.PathLike[str]) -> int | None:
    """How many records a history file (by suffix) or a run folder's history holds, from
    the Parquet file's footer (or the JSONL file's lines), without reading it; None when
    the folder holds neither."""
    p = Path(path)
    if p.is_dir():
        try:
            p = history_file(p)
        except FileNotFoundError:
            return None
    if p.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.ParquetFile(p).metadata.num_rows
    with open(p, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))

def read_history(path: str | os.PathLike[str]) -> list[Op]:
    """Reads a history from a file (by suffix) or a run folder."""
    p = Path(path)
    if p.is_dir():
        p = history_file(p)
    if p.suffix == ".parquet":
        return read_parquet(p)
    return read_jsonl(p)


def write_history(ops: Iterable[Op], directory: str | os.PathLike[str]) -> None:
    """Writes both forms of a history into a run folder."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    ops = list(ops)
    write_jsonl(ops, d / JSONL_FILE)
    write_parquet(ops, d / PARQUET_FILE)
