"""The queue checker on Spark: one row per message and read, analysed per partition.

Theory of operation
-------------------
The JVM pairs invocations with completions (``spark.paired_frame``: one window over
each process's records, so one shuffle; the caller caches the pairs), parses the JSON
values once each as variants and explodes each send into its messages and each ok poll
into the ``(offset, value)`` pairs it read: one table of *rows* (:func:`rows_frame`),
which is shuffled once more, by partition key.  Each key's rows then reach one Python
worker as Arrow columns (``applyInArrow``), where ``queue_arrays.analyse`` finds every
anomaly of ``queue.check_partition`` with numpy sorts and grouped reductions -- no
Python per record -- and returns counts, at most ``max_examples`` anomaly rows of each
type, and the unseen series and lag.  A key is the unit of analysis: all of a key's
rows are in one worker at once (one partition's history, never the whole history).

The driver receives those small results (:func:`assemble`), reads just the operations
the examples name and builds the anomaly dicts with the same functions as the
single-process path, so both paths report the same thing.
"""

from __future__ import annotations

import decimal
import json
import pickle
from typing import Any

from jepsen.checkers import queue, queue_arrays


# ---------------------------------------------------------------- the plan

def _at(v, path: str):
    """The variant at ``path`` in ``v`` (SQL null when there is none).

    The checker reads variants by path and as JSON text only: a cast of a variant to
    another type (``try_variant_get(.., "long")``, ``.cast("long")``) builds a Cast
    expression per row (a sixth of this stage's samples in a profile).
    """
    from pyspark.sql import functions as F

    return F.variant_get(v, path, "variant")


def _pair(v):
    """Whether the variant ``v`` is a list of two (``[key, x]``, ``[offset, value]``)."""
    return _at(v, "$[1]").isNotNull() & _at(v, "$[2]").isNull()


def _long(v):
    """A JSON integer as a long (null for anything else), read from its text."""
    from pyspark.sql import functions as F

    return F.to_json(v).try_cast("long")


def _messages(text):
    """A send value as an array of ``[key, x]`` messages (the single- or multi-message
    form), each a variant: the JSON is parsed once and read by path."""
    from pyspark.sql import functions as F

    v = F.try_parse_json(text)
    multi = F.to_json(_at(v, "$[0]")).startswith("[")  # its first item is a list
    return (F.when(multi, F.try_variant_get(v, "$", "array<variant>"))
            .when(_pair(v), F.array(v))
            .otherwise(F.array().cast("array<variant>")))


def _value_cols(v):
    """A message value's identity, as two columns ``(value, nested)``.

    Values are told apart as Jepsen's EDN values are (and the pure path, ``queue._h``):
    ``1``, ``1.0`` and ``true`` are three values, ``-0.0`` and ``0.0`` one (as Clojure's
    ``=`` has them), and a list or map holds its items by the same rule.

    A scalar's identity is ``value``, a text: its canonical JSON, except that a number
    written with a fraction or an exponent is a float, told from every integer (the
    variant's own text writes ``1.0`` as ``1``): its double's text (``1.0``,
    ``1.0E20``), one text per double as Python's float equality has it.  JSON's
    ``-0.0`` is the decimal 0 to Spark, but ``-0.0e0`` a double whose text keeps the
    sign: the sum with ``0.0`` drops it.  A list or map (rare as a queue value) has no
    SQL text that keeps its items' floats (``to_json`` writes ``[1, 1.0]`` as ``[1,1]``),
    so it travels as the variant ``nested``, whose decimals keep their scale, with a
    null ``value``: the analysing worker writes its text (``_nested_text``).
    """
    from pyspark.sql import functions as F

    kind = F.schema_of_variant(v)
    container = kind.startswith("ARRAY") | kind.startswith("OBJECT")
    number = kind.startswith("DECIMAL") | (kind == "DOUBLE")
    double = F.variant_get(v, "$", "double") + F.lit(0.0)
    text = (F.when(container, F.lit(None).cast("string"))
            .when(number, double.cast("string")).otherwise(F.to_json(v)))
    return text.alias("value"), F.when(container, v).alias("nested")


def _nested_text(x: Any) -> str:
    """The text of a list or map value in ``VariantVal.toPython``'s form: canonical
    JSON, names sorted, a float (a ``float``, or a ``Decimal`` with a fraction) written
    as Python writes the float, ``-0.0`` as ``0.0``, so never as an integer."""
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return json.dumps(x)
    if isinstance(x, int):
        return str(x)
    if isinstance(x, decimal.Decimal):
        return str(int(x)) if x.as_tuple().exponent >= 0 else repr(float(x) + 0.0)
    if isinstance(x, float):
        return repr(x + 0.0)
    if isinstance(x, list):
        return "[" + ",".join(_nested_text(y) for y in x) + "]"
    if isinstance(x, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{_nested_text(x[k])}" for k in sorted(x)) + "}"
    return repr(x)  # dates and the like: no JSON value reads as one


def _send_key(v):
    """The partition key of a message (a variant) as the rows name it: a string ``s``
    as ``'"' + s``, told from the number of the same digits (``"3"`` and ``3`` are two
    partitions, as on the pure path), anything else as its JSON text."""
    from pyspark.sql import functions as F

    text = F.to_json(v)
    return F.when(text.startswith('"'),
                  F.concat(F.lit('"'), F.variant_get(v, "$", "string"))).otherwise(text)


def _poll_key(name):
    """A poll's partition key (a name of its JSON object) as the rows name it: a name of
    digits is the integer, as ``history.decode_value`` reads it back; any other name
    the string."""
    from pyspark.sql import functions as F

    integer = F.coalesce(name.try_cast("decimal(38,0)").cast("string"), name)
    return F.when(name.rlike("^-?[0-9]+$"), integer).otherwise(F.concat(F.lit('"'), name))


def rows_frame(paired):
    """One row per sent message and per read (see the module doc), with the columns of
    ``queue_arrays.Rows`` (``type``: 0 ok, 1 fail, 2 info) and the ``key``.

    ``paired`` is a ``paired_frame`` with the ``reset`` column of ``queue.RESET_FS``.
    A value is compared by ``_value_cols``, the same on both sides.
    """
    from pyspark.sql import functions as F

    c = F.col
    ok = c("c_type") == "ok"
    ops = paired.filter(c("f").isin("send", "poll")).select(
        "f", "i_index", "i_time", "c_index", "c_time", "c_type", "i_value", "c_value",
        F.coalesce(c("process").cast("string"), F.concat(F.lit("@"), c("actor")))
        .alias("proc"), "reset")
    common = ("proc", "i_index", "i_time", "c_index", "c_time")
    code = (F.when(ok, F.lit(queue_arrays.OK))
            .when(c("c_type") == "fail", F.lit(queue_arrays.FAIL))
            .otherwise(F.lit(queue_arrays.INFO)).cast("byte"))
    # each value parsed once per operation, before the explode copies the row
    sends = ops.filter(c("f") == "send").select(
        *common, code.alias("type"), "reset", _messages(c("i_value")).alias("sent"),
        F.when(ok, _messages(c("c_value"))).alias("acks"))
    sent = sends.select(*common, "type", "reset", "acks",
                        F.posexplode("sent").alias("pos", "m"))
    ack = _at(F.get(c("acks"), c("pos")), "$[1]")  # [offset, value] when acknowledged
    acked = _pair(ack)
    messages = sent.select(
        _send_key(_at("m", "$[0]")).alias("key"),
        F.lit(queue_arrays.SEND).cast("byte").alias("src"), *common, "type", "pos",
        F.when(acked, _long(_at(ack, "$[0]"))).alias("offset"),
        *_value_cols(F.when(acked, _at(ack, "$[1]")).otherwise(_at("m", "$[1]"))), "reset")
    polls = ops.filter((c("f") == "poll") & ok).select(
        *common, "reset",
        F.explode(F.from_json("c_value", "map<string,array<array<variant>>>"))
        .alias("name", "pairs"))
    reads = polls.select(
        _poll_key(c("name")).alias("key"), *common, "reset",
        F.posexplode("pairs").alias("pos", "pair")).select(
        "key", F.lit(queue_arrays.READ).cast("byte").alias("src"), *common,
        F.lit(queue_arrays.OK).cast("byte").alias("type"), "pos",
        _long(F.get(c("pair"), 0)).alias("offset"), *_value_cols(F.get(c("pair"), 1)),
        "reset")
    return messages.unionByName(reads)


def _analyser(t0: int, bucket_ns: int, max_examples: int):
    """The ``applyInArrow`` function: the rows of the keys of one hash (almost always
    one key) in, one pickled ``queue_arrays.analyse`` result per key out."""

    def analyse(table):
        import pyarrow as pa
        import pyarrow.compute as pc

        keys = table.column("key").combine_chunks().dictionary_encode()
        out = []
        for k, key in enumerate(keys.dictionary.to_pylist()):
            rows = table if len(keys.dictionary) == 1 else \
                table.filter(pc.equal(keys.indices, k))
            out.append(pickle.dumps(queue_arrays.analyse(key, _columns(rows), t0, bucket_ns,
                                                         max_examples)))
        return pa.table({"result": pa.array(out, pa.binary())})

    return analyse


def _columns(table) -> queue_arrays.Rows:
    """An Arrow table of rows as numpy columns: missing longs as ``NULL``, strings as
    codes (equal strings, equal codes)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    def longs(name):
        col = pc.cast(table.column(name), pa.int64())
        return pc.fill_null(col, int(queue_arrays.NULL)).to_numpy()

    def codes(col):
        return col.dictionary_encode(null_encoding="encode").indices.to_numpy() \
            .astype(np.int64)

    values = table.column("value").combine_chunks()
    nested = table.column("nested").combine_chunks()
    if nested.null_count < len(nested):  # lists and maps: their texts are written here
        from pyspark.sql.types import VariantVal

        mask = nested.is_valid()
        texts = [_nested_text(VariantVal(x["value"], x["metadata"]).toPython())
                 for x in nested.filter(mask).to_pylist()]
        values = pc.replace_with_mask(values, mask, pa.array(texts, pa.string()))

    return queue_arrays.Rows(
        src=longs("src"), proc=codes(table.column("proc").combine_chunks()),
        i_index=longs("i_index"),
        i_time=longs("i_time"), c_index=longs("c_index"), c_time=longs("c_time"),
        type=longs("type"), pos=longs("pos"), offset=longs("offset"),
        value=codes(values), reset=longs("reset"))


def check(paired, t0: int, bucket_ns: int, sub_via: str | None, max_examples: int,
          flats_of, partitions: int | None = None) -> dict[str, Any]:
    """The queue result (without ``stats``) of a paired frame, like ``queue.check_queue``.

    ``flats_of(indexes)`` returns the flat operations invoked at those indexes;
    ``partitions``: how many partitions the rows are hashed into
    (``spark.sql.shuffle.partitions`` when None).
    """
    from pyspark.sql import functions as F

    # grouped by a 64-bit hash of the key: sorting by a long is much cheaper than by a
    # string, and the function splits the rare group that holds two keys
    rows = rows_frame(paired).withColumn("h", F.xxhash64("key"))
    if partitions:
        rows = rows.repartition(partitions, "h")  # the grouping below keeps it
    found = rows.groupBy("h").applyInArrow(_analyser(t0, bucket_ns, max_examples),
                                           "result binary")
    parts = [pickle.loads(r[0]) for r in found.collect()]
    return assemble(parts, t0, bucket_ns, sub_via, max_examples, flats_of)


# ---------------------------------------------------------------- the driver's part


def assemble(parts: list[dict], t0: int, bucket_ns: int, sub_via: str | None,
             max_examples: int, flats_of) -> dict[str, Any]:
    """Folds the analyses of every key (``queue_arrays.analyse``) into the queue result."""
    counts: dict[str, int] = {}
    rows: dict[str, list] = {}
    more: dict = {}
    acked: dict[int, int] = {}
    seen: dict[int, int] = {}
    worst = None
    for p in parts:
        for k, n in p["counts"].items():
            counts[k] = counts.get(k, 0) + n
        for row in p["rows"]:
            rows.setdefault(row["kind"], []).append(row)
        more.update(p["more"])
        for total, got in ((acked, p["acked"]), (seen, p["seen"])):
            for b, n in got.items():
                total[b] = total.get(b, 0) + n
        w = p["worst"]
        if w is not None and (worst is None or _rank(w, p["key"]) > _rank(*worst)):
            worst = (w, p["key"])
    examples = []
    for kind_rows in rows.values():
        kind_rows.sort(key=lambda r: (r["first"], r["key"], r["seq"]))
        examples += kind_rows[:max_examples]
    wanted = {x["i"] for row in examples for x in row["refs"]}
    for row in examples:
        if row["kind"] == "inconsistent-offsets":
            wanted |= {x["i"] for x in more[("io", row["key"], row["offsets"][0])]}
        elif row["kind"] == "duplicate":
            x = row["refs"][0]
            wanted |= {y["i"] for _, y in more[("dup", row["key"], x["i"], x["pos"])]}
    if worst is not None:
        wanted |= {worst[0]["i"], worst[0]["read-i"]}
    got = _Ops(flats_of(sorted(wanted)))
    an: dict[str, list] = {}
    for row in sorted(examples, key=lambda r: r["seq"]):
        an.setdefault(row["kind"], []).append(example(row, got, more))
    part = {
        "anomalies": an,
        "unseen-acked": acked,
        "unseen-seen": seen,
        "lag": {"worst": _worst(worst, got),
                "sum-ns": sum(p["lag-sum"] for p in parts),
                "n": sum(p["lag-n"] for p in parts)},
    }
    result = queue.merge_parts([part], t0, bucket_ns, sub_via, max_examples)
    result["partitions"] = len(parts)
    for k, a in result["anomalies"].items():
        a["count"] = counts[k]
    return result


def _rank(w: dict, key: str) -> tuple:
    """Which send was seen latest: the longest lag, then the first invoked."""
    return (w["lag"], -w["i"], -w["pos"], key)


def _text(v: Any) -> str:
    """A key as the rows name it (``_send_key``, ``_poll_key``)."""
    return '"' + v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))


class _Ops:
    """The records of the few operations that examples name, by (invoke index, key)."""

    def __init__(self, flats) -> None:
        self.sends: dict[tuple[int, str], dict[int, tuple[Any, queue.SendRec]]] = {}
        self.polls: dict[tuple[int, str], tuple[Any, queue.PollRec]] = {}
        for fl in flats:
            for key, rec in queue.records_of(fl):
                k = (rec.i_index, _text(key))
                if isinstance(rec, queue.SendRec):
                    self.sends.setdefault(k, {})[rec.pos] = (key, rec)
                else:
                    self.polls[k] = (key, rec)

    def ref(self, key_text: str, r) -> tuple[Any, dict[str, Any], Any]:
        """``(key, op-ref, record)`` for one reference of an anomaly row."""
        if r["src"] == 0:
            key, rec = self.sends[(r["i"], key_text)][r["pos"]]
            return key, queue._send_ref(key, rec), rec
        key, rec = self.polls[(r["i"], key_text)]
        return key, queue._poll_ref(key, rec), rec


def _value(rec, r) -> Any:
    """The value a message carried, or the value a read returned (``r["pos"]``)."""
    return rec.value if isinstance(rec, queue.SendRec) else rec.pairs[r["pos"]][1]


def example(row: dict, ops: _Ops, more: dict) -> dict[str, Any]:
    """The anomaly dict ``check_partition`` makes, from one anomaly row.

    ``more`` holds what the examples' second look found: the first showing of every
    value at an inconsistent offset, of every offset of a duplicate value, and the
    offsets a skip jumped over.
    """
    kind, kt = row["kind"], row["key"]
    got = [ops.ref(kt, r) for r in row["refs"]]
    key = got[0][0]
    refs = [g[1] for g in got]
    a: dict[str, Any] = {"key": key}
    if kind == "inconsistent-offsets":
        off = row["offsets"][0]
        vals = []
        for r in more[("io", kt, off)]:
            _, ref, rec = ops.ref(kt, r)
            vals.append((_value(rec, r), ref))
        vals.sort(key=lambda x: repr(x[0]))  # as check_partition orders them
        a.update(offset=off, values=sorted((v for v, _ in vals), key=repr),
                 ops=[r for _, r in vals])
    elif kind == "duplicate":
        shows = more[("dup", kt, row["refs"][0]["i"], row["refs"][0]["pos"])]
        a.update(value=_value(got[0][2], row["refs"][0]), offsets=[o for o, _ in shows],
                 ops=[ops.ref(kt, r)[1] for _, r in shows])
    elif kind == "G1a":
        a.update(value=got[0][2].value, ops=refs)
    elif kind == "unseen":
        s = got[0][2]
        a.update(value=s.value, offset=s.offset, ops=refs)
    elif kind == "lost-write":
        s = got[0][2]
        a.update(value=s.value, offset=s.offset, **{"max-read-offset": row["extra"]},
                 ops=refs)
    elif kind == "unexpected":
        a.update(value=_value(got[0][2], row["refs"][0]), ops=refs)
    elif kind in ("int-poll-skip", "poll-skip"):
        a.update(offsets=list(row["offsets"]), delta=row["delta"],
                 skipped=more.get(("skip", queue_arrays.row_id(row)), []), ops=refs)
    elif kind == "realtime-order":
        a.update(offsets=list(row["offsets"]), ops=refs)
    else:  # the nonmonotonic kinds
        a.update(offsets=list(row["offsets"]), delta=row["delta"], ops=refs)
    return a


def _worst(worst, ops: _Ops) -> dict[str, Any] | None:
    if worst is None:
        return None
    w, kt = worst
    key, sref, s = ops.ref(kt, {"src": 0, "i": w["i"], "pos": w["pos"]})
    _, pref, _ = ops.ref(kt, {"src": 1, "i": w["read-i"], "pos": None})
    return {"key": key, "lag-ns": w["lag"], "value": s.value, "ops": [sref, pref]}
