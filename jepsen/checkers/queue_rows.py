"""The rows of the queue analysis, built from history records with Arrow kernels.

Theory of operation
-------------------
The Spark queue checker hands each Python worker all records of some processes (one
shuffle of Arrow streams by process bucket, ``spark_queue``).  :func:`rows_of_records` sorts them by ``(proc,
index)`` and turns them into the rows ``queue_arrays.analyse`` takes, a chunk at a
time, with no Python per record in the common case:

* pairing: an invocation and the next record of its process are one operation when that
  record is a completion (``history.pair``): a comparison of neighbours over whole
  columns; an invocation that ends a chunk is carried to the next one, and with it the
  process's latest position reset (``queue.RESET_FS``);
* values: a send of one message ``[key, value]`` acknowledged as ``[key, [offset,
  value]]``, and a poll's ``{"key": [[offset, value], ...], ...}``, whose keys, offsets
  and values are all integers, are cut into rows by regular expressions and string
  splits over the whole column (RE2 in Arrow's C++).  Anything else (a string or float
  value, a multi-message send, a key written ``"007"``) is read by ``queue.records_of``,
  the single-process path's own extraction, one operation at a time;
* the operations' completion types, latencies and completion times are folded per
  ``f`` as they go (:class:`Stats`); :func:`packed_rows` sends each ``f``'s part under
  the key ``"\\0" + f``, and :func:`stats_of` merges the parts into the figures of
  ``basic_stats`` (exact nearest-rank quantiles: the parts carry every latency).

A value's identity is its text (:func:`value_text`): two values have the same text
exactly when ``queue._h`` finds them equal (``1``, ``1.0`` and ``true`` three values,
``-0.0`` and ``0.0`` one); an integer's text is its digits, so both ways of reading a
record give the same text.
"""

from __future__ import annotations

import functools
import json
import pickle
from collections.abc import Iterator
from typing import Any

import numpy as np

from jepsen.checkers import queue, queue_arrays
from jepsen.checkers._common import QUANTILES, Flat, quantile_rank
from jepsen.history import decode_value

STATS_KEY = "\0"  # statistics parts' keys start with it; no key text does (``key_text``)
NULL = int(queue_arrays.NULL)

# The columns of the rows and their types (``ROW_COLUMNS`` in this order).
ROW_DDL = ("key string, src byte, proc string, i_index long, i_time long, c_index long, "
           "c_time long, type byte, pos int, offset long, value string, reset long")
ROW_COLUMNS = tuple(c.split()[0] for c in ROW_DDL.split(", "))

# Integers as the fast path reads them: canonical JSON (no -0, no leading zero) that
# fits a long.
_INT = r"(?:0|-?[1-9][0-9]{0,17})"
_SEND = rf"^\[(?P<k>{_INT}),(?P<v>{_INT})\]$"
_ACK = rf"^\[{_INT},\[(?P<o>{_INT}),(?P<v>{_INT})\]\]$"
_PAIR = rf"\[{_INT},{_INT}\]"
_ENTRY = rf'"{_INT}":\[(?:{_PAIR}(?:,{_PAIR})*)?\]'
_POLL = rf"^\{{(?:{_ENTRY}(?:,{_ENTRY})*)?\}}$"


@functools.cache
def _schema():
    import pyarrow as pa

    types = {"string": pa.string(), "byte": pa.int8(), "int": pa.int32(),
             "long": pa.int64()}
    return pa.schema([(c.split()[0], types[c.split()[1]]) for c in ROW_DDL.split(", ")])


# ---------------------------------------------------------------- identities


def value_text(v: Any) -> str:
    """A value's identity as text: equal exactly when ``queue._h`` is."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "f" + repr(v + 0.0)  # -0.0 is 0.0, as Clojure's = has it
    if isinstance(v, str):
        return json.dumps(v)
    if v is None:
        return "null"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(value_text(x) for x in v) + "]"
    if isinstance(v, dict):
        items = sorted(v.items(), key=lambda kv: (isinstance(kv[0], str), kv[0]))
        return "{" + ",".join(f"{value_text(k)}:{value_text(x)}" for k, x in items) + "}"
    return repr(v)


def key_text(k: Any) -> str:
    """A partition key as the rows name it: a string ``s`` as ``'"' + s`` (told from the
    number of the same digits), anything else as its JSON text."""
    return '"' + k if isinstance(k, str) else json.dumps(k, separators=(",", ":"))


# ---------------------------------------------------------------- pairing


class _Carry:
    """What one chunk leaves to the next: an invocation waiting for its completion, and
    the latest position reset of the chunk's last process."""

    def __init__(self) -> None:
        self.invoke = None  # a one-row table
        self.proc: str | None = None
        self.reset = NULL


CHUNK = 1 << 16  # records read at a time: bounds the arrays made along the way


def rows_of_records(batches: Iterator[Any], stats: Stats) -> Iterator[Any]:
    """All records of some processes (columns ``process, actor, index, time, type, f,
    value``, in any order) in; their rows out, their operations folded into ``stats``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = pa.Table.from_batches([b for b in batches if b.num_rows])
    if not t.num_rows:
        return
    proc = pc.if_else(pc.is_null(t.column("process")),
                      pc.binary_join_element_wise("@", t.column("actor"), ""),
                      pc.cast(t.column("process"), pa.string()))
    t = t.append_column("proc", proc)
    t = t.take(pc.sort_indices(t, [("proc", "ascending"), ("index", "ascending")]))
    carry = _Carry()
    for start in range(0, t.num_rows, CHUNK):
        yield from _rows(t.slice(start, CHUNK), carry, stats,
                         final=start + CHUNK >= t.num_rows)


def packed_rows(batches: Iterator[Any], t0: int, bucket_ns: int) -> Iterator[tuple[str, bytes]]:
    """:func:`rows_of_records`'s rows packed per key: ``(key, rows)`` with the key's rows
    as one Arrow IPC stream (without the key), and per ``f`` ``(STATS_KEY + f, its
    pickled statistics part)``: the shuffle by key then moves a few large values instead
    of every row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    stats = Stats(t0, bucket_ns)
    found = [b for b in rows_of_records(batches, stats) if b.num_rows]
    for p in stats.parts():
        yield STATS_KEY + str(p["f"]), pickle.dumps(p)
    if not found:
        return
    rows = pa.Table.from_batches(found)
    enc = rows.column("key").combine_chunks().dictionary_encode()
    order = pc.sort_indices(enc.indices)
    codes = enc.indices.take(order).to_numpy()
    rows = rows.take(order).drop_columns(["key"])
    starts = [0, *(np.flatnonzero(np.diff(codes)) + 1).tolist()]
    for a, b in zip(starts, [*starts[1:], len(codes)]):
        yield enc.dictionary[int(codes[a])].as_py(), ipc_stream(rows.slice(a, b - a))


def ipc_stream(data) -> bytes:
    """A table or record batch as one Arrow IPC stream."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, data.schema) as w:
        w.write(data)
    return sink.getvalue().to_pybytes()


def unpack_rows(blobs: list[bytes]):
    """One table from Arrow IPC streams (:func:`ipc_stream`'s): a key's rows from those
    :func:`packed_rows` made, a bucket's records from those of the first shuffle."""
    import pyarrow as pa

    return pa.concat_tables([pa.ipc.open_stream(b).read_all() for b in blobs])


def _rows(t, carry: _Carry, stats: Stats, final: bool) -> Iterator[Any]:
    """The rows of one chunk of records sorted by ``(proc, index)`` (``final``: the
    last chunk), its operations folded into ``stats``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if carry.invoke is not None:
        t = pa.concat_tables([pa.Table.from_batches([carry.invoke]),
                              t.select(carry.invoke.schema.names)])
        carry.invoke = None
    n = t.num_rows
    if n == 0:
        return
    t = t.combine_chunks()
    t = pa.record_batch([c.chunk(0) for c in t.columns], schema=t.schema)
    proc_col = t.column("proc")
    proc = _codes(proc_col)
    kind = t.column("type")
    inv = pc.fill_null(pc.equal(kind, "invoke"), False).to_numpy(zero_copy_only=False)
    index = t.column("index").to_numpy()
    first_proc = proc_col[0].as_py()
    last_proc = proc_col[n - 1].as_py()

    pos = np.arange(n)
    starts = np.ones(n, bool)
    starts[1:] = proc[1:] != proc[:-1]
    group_start = np.maximum.accumulate(np.where(starts, pos, 0))
    mark = inv & pc.fill_null(pc.is_in(t.column("f"), pa.array(sorted(queue.RESET_FS))),
                              False).to_numpy(zero_copy_only=False)
    # the latest reset strictly before each row, within its process
    last_mark = np.maximum.accumulate(np.where(mark, pos, -1))
    before = np.concatenate(([-1], last_mark[:-1]))
    inside = before >= group_start
    reset = np.where(inside, index[np.maximum(before, 0)], NULL)
    inherited = carry.reset if carry.proc == first_proc else NULL
    reset[~inside & (group_start == 0)] = inherited

    held = not final and inv[n - 1]
    if held:  # its completion may open the next chunk
        carry.invoke = t.slice(n - 1, 1)
    # the last process's latest reset, for the next chunk (a held row is seen again)
    upto = n - 1 if held else n
    last_start = group_start[n - 1]
    marks = np.flatnonzero(mark[last_start:upto])
    carry.reset = (int(index[last_start + marks[-1]]) if len(marks)
                   else (inherited if last_start == 0 else NULL))
    carry.proc = last_proc

    done = np.zeros(n, bool)
    done[:-1] = ~inv[1:] & ~starts[1:]
    ops = np.flatnonzero(inv[:upto])
    comp = np.where(done[ops], ops + 1, -1)
    if not len(ops):
        return
    yield from _op_rows(t, ops, comp, reset[ops], stats)


def _codes(col) -> np.ndarray:
    """Equal strings, equal integer codes (nulls a code of their own)."""
    return col.dictionary_encode(null_encoding="encode").indices.to_numpy() \
        .astype(np.int64)


def _take(col, idx: np.ndarray):
    """``col[idx]``, null where ``idx`` is -1."""
    import pyarrow as pa

    return _null_where(col.take(pa.array(np.maximum(idx, 0))), idx < 0)


def _null_where(arr, mask: np.ndarray):
    import pyarrow as pa
    import pyarrow.compute as pc

    if not len(arr) or not mask.any():
        return arr
    return pc.if_else(pa.array(mask), pa.scalar(None, arr.type), arr)


def _op_rows(t, ops: np.ndarray, comp: np.ndarray, reset: np.ndarray,
             stats: Stats) -> Iterator[Any]:
    """The rows of the operations invoked at ``ops`` (completed at ``comp``, or -1)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    paired = comp >= 0
    index = t.column("index").to_numpy()
    time = t.column("time").to_numpy()
    f = t.column("f").take(pa.array(ops))
    c_type = pc.fill_null(_take(t.column("type"), comp), "info")
    o = {
        "proc": t.column("proc").take(pa.array(ops)),
        "i_index": index[ops], "i_time": time[ops],
        "c_index": np.where(paired, index[np.maximum(comp, 0)], NULL),
        "c_time": np.where(paired, time[np.maximum(comp, 0)], NULL),
        "type": np.select([pc.equal(c_type, "ok").to_numpy(zero_copy_only=False),
                           pc.equal(c_type, "fail").to_numpy(zero_copy_only=False)],
                          [queue_arrays.OK, queue_arrays.FAIL], queue_arrays.INFO),
        "reset": reset,
    }
    stats.add(f, c_type, o["i_time"], o["c_time"])
    out = []
    i_value = t.column("value").take(pa.array(ops))
    c_value = _take(t.column("value"), comp)
    is_send = pc.fill_null(pc.equal(f, "send"), False).to_numpy(zero_copy_only=False)
    ok = o["type"] == queue_arrays.OK
    is_poll = pc.fill_null(pc.equal(f, "poll"), False).to_numpy(zero_copy_only=False) & ok

    # sends of one integer message
    fast_send = is_send & _matches(i_value, _SEND) & (~ok | _matches(c_value, _ACK))
    s = np.flatnonzero(fast_send)
    if len(s):
        sel = pa.array(s)
        sent = pc.extract_regex(i_value.take(sel), _SEND)
        ack = pc.extract_regex(_null_where(c_value.take(sel), ~ok[s]), _ACK)
        value = pc.coalesce(pc.struct_field(ack, "v"), pc.struct_field(sent, "v"))
        offset = pc.fill_null(pc.cast(pc.struct_field(ack, "o"), pa.int64()), NULL).to_numpy()
        out.append(_table({"key": pc.struct_field(sent, "k"),
                           "src": np.full(len(s), queue_arrays.SEND),
                           "pos": np.zeros(len(s), np.int64), "offset": offset,
                           "value": value}, o, s))
    # polls whose keys, offsets and values are all integers
    fast_poll = is_poll & _matches(c_value, _POLL)
    p = np.flatnonzero(fast_poll)
    if len(p):
        out.extend(_poll_rows(c_value.take(pa.array(p)), o, p))
    slow = np.flatnonzero((is_send & ~fast_send) | (is_poll & ~fast_poll))
    if len(slow):
        out.append(_slow_rows(t, ops[slow], comp[slow], o, slow))
    tables = [x for x in out if x.num_rows]
    if tables:
        yield from pa.concat_tables(tables).to_batches()


def _matches(arr, pattern: str) -> np.ndarray:
    import pyarrow.compute as pc

    return pc.fill_null(pc.match_substring_regex(arr, pattern), False) \
        .to_numpy(zero_copy_only=False)


def _table(cols: dict, o: dict, at: np.ndarray):
    """A row table: ``cols`` given, the rest taken from the operations ``o`` at ``at``."""
    import pyarrow as pa

    schema = _schema()
    arrays = []
    for name in ROW_COLUMNS:
        if name in cols:
            x = cols[name]
        elif isinstance(o[name], np.ndarray):
            x = o[name][at]
        else:
            x = o[name].take(pa.array(at))
        typ = schema.field(name).type
        if isinstance(x, np.ndarray):
            x = pa.array(x, typ, mask=(x == NULL) if typ == pa.int64() else None)
        else:
            x = x.cast(typ)
        arrays.append(x)
    return pa.Table.from_arrays(arrays, schema=schema)


def _poll_rows(texts, o: dict, p: np.ndarray) -> list:
    """Rows of the integer polls ``texts`` (of the operations at ``p``): a poll text
    split at its quotes alternates names and lists; a list split at anything but
    digits and signs alternates offsets and values."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parts = pc.split_pattern(texts, '"')
    flat = pc.list_flatten(parts)
    owner = pc.list_parent_indices(parts).to_numpy()
    k = np.arange(len(flat)) - parts.offsets.to_numpy()[owner]
    names = np.flatnonzero(k % 2 == 1)
    if not len(names):
        return []
    entry_op = p[owner[names]]  # the operation of each (name, list) entry
    lists = flat.take(pa.array(names + 1))
    numbers = pc.split_pattern_regex(lists, "[^-0-9]+")
    tokens = pc.list_flatten(numbers)
    entry = pc.list_parent_indices(numbers).to_numpy()
    keep = np.flatnonzero(pc.greater(pc.utf8_length(tokens), 0).to_numpy(
        zero_copy_only=False))
    tokens, entry = tokens.take(pa.array(keep)), entry[keep]
    j = np.arange(len(entry)) - np.searchsorted(entry, entry, "left")
    off, val = np.flatnonzero(j % 2 == 0), np.flatnonzero(j % 2 == 1)
    if not len(off):
        return []
    at = entry_op[entry[off]]
    return [_table({"key": flat.take(pa.array(names[entry[off]])),
                    "src": np.full(len(off), queue_arrays.READ),
                    "pos": j[off] // 2,
                    "offset": pc.cast(tokens.take(pa.array(off)), pa.int64()).to_numpy(),
                    "value": tokens.take(pa.array(val))}, o, at)]


def _slow_rows(t, ops: np.ndarray, comp: np.ndarray, o: dict, at: np.ndarray):
    """Rows of the operations the fast paths do not read, by ``queue.records_of``."""
    import pyarrow as pa

    process = _take(t.column("process"), ops).to_pylist()
    actor = _take(t.column("actor"), ops).to_pylist()
    f = t.column("f").take(pa.array(ops)).to_pylist()
    i_value = t.column("value").take(pa.array(ops)).to_pylist()
    c_value = _take(t.column("value"), comp).to_pylist()
    c_type = _take(t.column("type"), comp).to_pylist()
    cols: dict[str, list] = {"key": [], "src": [], "pos": [], "offset": [], "value": []}
    rows_at = []
    for j in range(len(ops)):
        fl = Flat(process[j] if process[j] is not None else actor[j], f[j],
                  int(o["i_index"][at[j]]), int(o["i_time"][at[j]]),
                  decode_value(i_value[j]), None, None,
                  c_type[j] if comp[j] >= 0 else "info", decode_value(c_value[j]), None)
        for key, rec in queue.records_of(fl):
            kt = key_text(key)
            if isinstance(rec, queue.SendRec):
                found = [(queue_arrays.SEND, rec.pos, rec.offset, rec.value)]
            else:
                found = [(queue_arrays.READ, n, off, v) for n, (off, v) in enumerate(rec.pairs)]
            for src, pos, off, v in found:
                cols["key"].append(kt)
                cols["src"].append(src)
                cols["pos"].append(pos)
                cols["offset"].append(off if isinstance(off, int) and not isinstance(off, bool)
                                      and -2**63 < off < 2**63 else NULL)
                cols["value"].append(value_text(v))
                rows_at.append(at[j])
    return _table({"key": pa.array(cols["key"], pa.string()),
                   "src": np.array(cols["src"], np.int64),
                   "pos": np.array(cols["pos"], np.int64),
                   "offset": np.array(cols["offset"], np.int64),
                   "value": pa.array(cols["value"], pa.string())},
                  o, np.array(rows_at, np.int64))


# ---------------------------------------------------------------- statistics


class Stats:
    """One partition's part of ``basic_stats``, per ``f``: completion types counted,
    latencies, completions per time bucket and type, first and last time."""

    def __init__(self, t0: int, bucket_ns: int) -> None:
        self.t0, self.bucket_ns = t0, bucket_ns
        self.parts_by_f: dict[str, dict[str, Any]] = {}

    def add(self, f, c_type, i_time: np.ndarray, c_time: np.ndarray) -> None:
        fs = f.dictionary_encode(null_encoding="encode")
        kinds = c_type.dictionary_encode()
        words = kinds.dictionary.to_pylist()
        code = kinds.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        done = c_time != NULL
        bucket = np.where(done, (c_time - self.t0) // self.bucket_ns, 0)
        f_code = fs.indices.to_numpy(zero_copy_only=False)
        for k, name in enumerate(fs.dictionary.to_pylist()):
            m = f_code == k
            part = self.parts_by_f.setdefault(name, {"f": name, "counts": {}, "lat": [],
                                                "thru": {}, "first": None, "last": None})
            for w, n in zip(*np.unique(code[m], return_counts=True)):
                part["counts"][words[w]] = part["counts"].get(words[w], 0) + int(n)
            d = m & done
            part["lat"].append(c_time[d] - i_time[d])
            keys, n = np.unique(bucket[d] * len(words) + code[d], return_counts=True)
            for key, x in zip(keys.tolist(), n.tolist()):
                b, w = divmod(key, len(words))
                part["thru"][(b, words[w])] = part["thru"].get((b, words[w]), 0) + x
            first = int(i_time[m].min())
            last = int(np.where(done, c_time, i_time)[m].max())
            part["first"] = first if part["first"] is None else min(part["first"], first)
            part["last"] = last if part["last"] is None else max(part["last"], last)

    def parts(self) -> list[dict[str, Any]]:
        """Each ``f``'s part, its latencies in one array (:func:`stats_of` merges them)."""
        return [{**p, "lat": np.concatenate(p["lat"])} for p in self.parts_by_f.values()]


def stats_of(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One ``f``'s statistics from its partitions' parts: counts, nearest-rank latency
    quantiles, completions per bucket and type, and its first and last time."""
    counts: dict[str, int] = {}
    thru: dict[int, dict[str, int]] = {}
    for p in parts:
        for k, n in p["counts"].items():
            counts[k] = counts.get(k, 0) + n
        for (b, k), n in p["thru"].items():
            t = thru.setdefault(b, {})
            t[k] = t.get(k, 0) + n
    lat = np.sort(np.concatenate([p["lat"] for p in parts]))
    return {"f": parts[0]["f"], "counts": counts,
            "latency": {str(q): int(lat[quantile_rank(len(lat), q)]) for q in QUANTILES}
            if len(lat) else None,
            "throughput": thru, "first": min(p["first"] for p in parts),
            "last": max(p["last"] for p in parts)}
