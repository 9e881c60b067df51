"""The queue checker as a Spark SQL plan: every anomaly by windows over one keyed table.

Theory of operation
-------------------
The JVM parses the JSON values (``from_json``: a nested value that is not a string keeps
its JSON text, a string loses its quotes, on both sides of every comparison) and
explodes each send into its messages and each ok poll into the ``(offset, value)`` pairs
it read.  Both go into one table of *rows*, one row per message or read, hash-partitioned
by partition key -- the only shuffle after pairing invocations with completions.  An
offset is *known* when an ok send or a read shows it; the ``dense_rank`` of known
offsets is the version order.

Every anomaly of ``queue.check_partition`` is then a property of a row and a few window
aggregates over groups that the key partitioning already co-locates (so the windows sort
but never shuffle):

* per ``(key, value)``: the value's first read (G1a, lost, unseen, lag), whether any
  send carried it (unexpected), and its lowest and highest known offset (duplicate);
* per ``(key, offset)``: the lowest and highest value shown there (inconsistent offsets);
* per key: the highest offset read (lost writes) and the version-order rank;
* per ``(key, process)`` in invocation order: the previous read or ok send of the same
  consumer or producer (poll skips and backward polls, within a poll when the previous
  row belongs to the same poll; nonmonotonic sends).  A position reset of the process
  between two polls, found by a window over the process's operations, excuses them.

One pass maps each row to the anomalies it is the witness of.  Realtime order needs the
highest offset completed before each send began: a running ``max`` over completions and
invocations in time order flags the few candidate sends, and a join over only those finds
the send of another process that beat them.

The driver receives the counts per type and at most ``max_examples`` rows per type, then
reads just the operations those examples name and builds the anomaly dicts with the same
functions as the single-process path, so both paths report the same thing.
"""

from __future__ import annotations

import json
from typing import Any

from jepsen.checkers import queue

SKIPPED_SHOWN = 16  # check_partition lists at most this many skipped offsets

_PAIR = "array<string>"
_REF = "struct<src:int,i:bigint,pos:bigint>"
_ANOMALY = (f"struct<kind:string,seq:bigint,refs:array<{_REF}>,offsets:array<bigint>,"
            "delta:bigint,extra:bigint>")


def _messages(col):
    """A send value as an array of [key, x] messages (single or multi-message form)."""
    from pyspark.sql import functions as F

    multi = F.from_json(col, f"array<{_PAIR}>")
    single = F.from_json(col, _PAIR)
    return (F.when(col.startswith("[["), multi)
            .when(F.size(single) == 2, F.array(single))
            .otherwise(F.array().cast(f"array<{_PAIR}>")))


def rows_frame(paired, partitions: int):
    """One row per sent message and per read, partitioned by key (see the module doc).

    ``paired`` is a ``paired_frame`` with the ``reset`` column of ``queue.RESET_FS``.
    """
    from pyspark.sql import functions as F

    c = F.col
    ops = paired.filter(c("f").isin("send", "poll")).select(
        "f", "i_index", "i_time", "c_index", "c_time", "c_type", "i_value", "c_value",
        F.coalesce(c("process").cast("string"), F.concat(F.lit("@"), c("actor")))
        .alias("proc"), "reset")
    common = ("proc", "i_index", "i_time", "c_index", "c_time")
    sends = ops.filter(c("f") == "send").select(
        *common, c("c_type").alias("type"),
        F.posexplode(_messages(c("i_value"))).alias("pos", "m"),
        F.when(c("c_type") == "ok", _messages(c("c_value"))).alias("acks"))
    ack = F.from_json(F.get(F.get(c("acks"), c("pos")), 1), _PAIR)
    acked = F.size(ack) == 2
    messages = sends.select(
        F.get(c("m"), 0).alias("key"), F.lit(0).alias("src"), *common, "type", "pos",
        F.when(acked, F.get(ack, 0).try_cast("long")).alias("offset"),
        F.when(acked, F.get(ack, 1)).otherwise(F.get(c("m"), 1)).alias("value"),
        F.lit(None).cast("long").alias("reset"))
    polls = ops.filter((c("f") == "poll") & (c("c_type") == "ok")).select(
        *common, "reset", F.explode(F.from_json("c_value", f"map<string,array<{_PAIR}>>"))
        .alias("key", "pairs"))
    reads = polls.select(
        "key", *common, "reset", F.posexplode("pairs").alias("pos", "pair")).select(
        "key", F.lit(1).alias("src"), *common, F.lit("ok").alias("type"), "pos",
        F.get(c("pair"), 0).try_cast("long").alias("offset"),
        F.get(c("pair"), 1).alias("value"), "reset")
    return messages.unionByName(reads).repartition(partitions, "key")


def _ref(src, i, pos):
    """A reference to a send's message (src 0) or a poll's read (src 1) of a key."""
    from pyspark.sql import functions as F

    src = F.lit(src) if isinstance(src, int) else src
    return F.struct(src.cast("int").alias("src"), F.col(i).cast("long").alias("i"),
                    F.col(pos).cast("long").alias("pos"))


def _an(cond, kind, seq, refs, offsets=None, delta=None, extra=None):
    """An anomaly struct when ``cond`` holds (null otherwise)."""
    from pyspark.sql import functions as F

    def opt(x, t):
        return x.cast(t) if x is not None else F.lit(None).cast(t)

    return F.when(cond, F.struct(
        F.lit(kind).alias("kind"), seq.cast("long").alias("seq"),
        F.array(*refs).alias("refs"), opt(offsets, "array<bigint>").alias("offsets"),
        opt(delta, "long").alias("delta"), opt(extra, "long").alias("extra")))


_FIELDS = ("kind", "seq", "refs", "offsets", "delta", "extra")


def windowed(rows):
    """The rows with the window aggregates every anomaly is judged on."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    c = F.col
    known = c("offset").isNotNull()
    by_value = Window.partitionBy("key", "value")
    by_offset = Window.partitionBy("key", "offset")
    by_key = Window.partitionBy("key")
    w_seq = Window.partitionBy("key", "proc", "src", known).orderBy("i_index", "pos")
    read = c("src") == 1
    r = rows.select(
        "*",
        F.min(F.when(read, F.struct("i_index", "i_time", "c_time", "pos")))
        .over(by_value).alias("fr"),
        F.max(F.when(c("src") == 0, F.lit(1))).over(by_value).alias("sent"),
        F.min(F.when(known, c("offset"))).over(by_value).alias("o_lo"),
        F.max(F.when(known, c("offset"))).over(by_value).alias("o_hi"))
    # a window over a whole key would buffer the key's rows: a group-by of a few rows
    max_read = rows.filter(read).groupBy("key").agg(F.max("offset").alias("max_read"))
    r = r.join(F.broadcast(max_read), "key", "left")
    r = r.select(
        "*",
        F.min(F.when(known, c("value"))).over(by_offset).alias("v_lo"),
        F.max(F.when(known, c("value"))).over(by_offset).alias("v_hi"))
    r = r.select("*", F.dense_rank().over(by_key.orderBy("offset")).alias("rank"))
    return r.select(
        "*", *(F.lag(x).over(w_seq).alias(f"p_{x}")
               for x in ("i_index", "c_index", "pos", "offset", "rank")))


def anomalies(w):
    """``(key, anomaly)`` rows: each row's anomalies (realtime order aside)."""
    from pyspark.sql import functions as F

    c = F.col
    read, send = c("src") == 1, c("src") == 0
    this = _ref(c("src"), "i_index", "pos")
    prev = _ref(c("src"), "p_i_index", "p_pos")
    seq_in = c("i_index") * F.lit(1 << 20) + c("pos")
    stepped = c("p_i_index").isNotNull()
    internal = c("p_i_index") == c("i_index")
    back = c("offset") <= c("p_offset")
    d = c("rank") - c("p_rank")
    excused = ~internal & c("reset").isNotNull() & (c("reset") > c("p_c_index"))
    poll_step = read & stepped & ~excused
    offs = F.array("p_offset", "offset")
    gone = send & (c("type") == "ok") & c("fr").isNull()
    lost = c("offset").isNotNull() & c("max_read").isNotNull() & (c("offset") < c("max_read"))
    first_read = F.struct(c("fr.i_index").alias("i_index"), c("fr.pos").alias("pos"))
    fr_ref = _ref(1, "fr.i_index", "fr.pos")
    xs = [
        _an(c("offset").isNotNull() & (c("v_lo") != c("v_hi")), "inconsistent-offsets",
            c("offset"), [this], F.array("offset")),
        _an(c("offset").isNotNull() & (c("o_lo") != c("o_hi")), "duplicate",
            c("src") * F.lit(1 << 62) + c("i_index"), [this], F.array("offset")),
        _an(send & (c("type") == "fail") & c("fr").isNotNull(), "G1a", seq_in,
            [this, fr_ref]),
        _an(gone & lost, "lost-write", seq_in, [this], extra=c("max_read")),
        _an(gone & ~lost, "unseen", seq_in, [this]),
        _an(read & c("sent").isNull()
            & (F.struct("i_index", "pos") == first_read), "unexpected", seq_in,
            [this]),
        _an(poll_step & internal & back, "int-nonmonotonic-poll", c("pos"), [this],
            offs, d),
        _an(poll_step & internal & ~back & (d > 1), "int-poll-skip", c("pos"), [this],
            offs, d, c("p_rank")),
        _an(poll_step & ~internal & back, "nonmonotonic-poll", c("pos"),
            [prev, this], offs, d),
        _an(poll_step & ~internal & ~back & (d > 1), "poll-skip", c("pos"),
            [prev, this], offs, d, c("p_rank")),
        _an(send & c("offset").isNotNull() & stepped & back & internal,
            "int-nonmonotonic-send", c("pos"), [prev, this], offs, d),
        _an(send & c("offset").isNotNull() & stepped & back & ~internal,
            "nonmonotonic-send", c("pos"), [prev, this], offs, d),
    ]
    found = (w.select("key", "value", "src", "i_index", "pos",
                      F.explode(F.array_compact(F.array(*xs))).alias("a"))
             .select("key", "value", "src", "i_index", "pos", "a.*"))
    # every row of a duplicated value or an inconsistent offset sees it: keep the first
    grouped = c("kind").isin("inconsistent-offsets", "duplicate")
    one = (found.filter(grouped)
           .withColumn("g", F.when(c("kind") == "duplicate", c("value"))
                       .otherwise(c("offsets")[0].cast("string")))
           .groupBy("kind", "key", "g")
           .agg(F.min(F.struct("src", "i_index", "pos", *_FIELDS)).alias("a"))
           .select("key", *(f"a.{f}" for f in _FIELDS)))
    return found.filter(~grouped).select("key", *_FIELDS).unionByName(one)


def realtime(rows):
    """Sends that landed below a send of another process completed before they began."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    c = F.col
    oks = rows.filter((c("src") == 0) & (c("type") == "ok") & c("offset").isNotNull())
    ev = oks.select("key", "i_index", "pos", "offset", F.explode(F.array(
        F.struct(c("i_time").alias("t"), F.lit(0).alias("e")),
        F.struct(c("c_time").alias("t"), F.lit(1).alias("e")))).alias("ev"))
    w = (Window.partitionBy("key").orderBy("ev.t", "ev.e", "i_index", "pos")
         .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    best = F.max(F.when(c("ev.e") == 1, c("offset"))).over(w)
    cand = (ev.filter(c("ev.t").isNotNull()).select("*", best.alias("best"))
            .filter((c("ev.e") == 0) & (c("best") > c("offset")))
            .select("key", "i_index", "pos"))
    b = oks.join(F.broadcast(cand), ["key", "i_index", "pos"]).select(
        "key", "proc", "i_index", "i_time", "pos", "offset")
    a = oks.filter(c("c_time").isNotNull()).select(
        c("key").alias("a_key"), c("proc").alias("a_proc"), c("i_index").alias("a_i"),
        c("pos").alias("a_pos"), c("c_time").alias("a_c"), c("offset").alias("a_off"))
    j = F.broadcast(b).join(a, (c("key") == c("a_key")) & (c("a_c") < c("i_time"))
                            & (c("a_proc") != c("proc")) & (c("a_off") > c("offset")))
    top = F.max(F.struct("a_off", (-c("a_c")).alias("nc"), (-c("a_i")).alias("ni"),
                         (-c("a_pos")).alias("np"), "a_i", "a_pos")).alias("a")
    hit = j.groupBy("key", "i_index", "pos", "offset").agg(top)
    return hit.select("key", _an(F.lit(True), "realtime-order", c("pos"),
                                 [_ref(0, "a.a_i", "a.a_pos"), _ref(0, "i_index", "pos")],
                                 F.array("a.a_off", "offset")).alias("a")).select("key", "a.*")


def facts(w, t0: int, bucket_ns: int):
    """``(series, lag, keys)`` frames: unseen over time, realtime lag, partition count."""
    from pyspark.sql import functions as F

    c = F.col
    done = w.filter((c("src") == 0) & (c("type") == "ok") & c("c_time").isNotNull())
    bucket = F.floor((c("c_time") - F.lit(t0)) / F.lit(bucket_ns)).cast("long")
    seen_b = F.floor((F.greatest(c("fr.c_time"), c("c_time")) - F.lit(t0))
                     / F.lit(bucket_ns)).cast("long")
    lagc = F.greatest(F.lit(0), c("fr.i_time") - c("c_time"))
    per = done.select(F.explode(F.array(
        F.struct(F.lit("acked").alias("what"), bucket.alias("b"),
                 F.lit(None).cast("long").alias("lag")),
        F.when(c("fr").isNotNull(), F.struct(F.lit("seen").alias("what"),
                                              seen_b.alias("b"), lagc.alias("lag"))))))
    series = per.select("col.*").filter(c("what").isNotNull()).groupBy("what", "b").agg(
        F.count(F.lit(1)).alias("n"), F.sum("lag").alias("lag"))
    worst = (done.filter(c("fr").isNotNull())
             .agg(F.max(F.struct(lagc.alias("lag"), (-c("i_index")).alias("ni"),
                                 (-c("pos")).alias("np"), "key", "i_index", "pos",
                                 c("fr.i_index").alias("p_i"))).alias("worst")))
    keys = w.select("key").distinct()
    return series, worst, keys


# ---------------------------------------------------------------- the driver's part


def _text(v: Any) -> str:
    """The text Spark's ``from_json`` gives a value: strings bare, the rest as JSON."""
    return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))


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
        vals.sort(key=lambda x: repr(queue._h(x[0])))
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
                 skipped=more.get(("skip", _row_id(row)), []), ops=refs)
    elif kind == "realtime-order":
        a.update(offsets=list(row["offsets"]), ops=refs)
    else:  # the nonmonotonic kinds
        a.update(offsets=list(row["offsets"]), delta=row["delta"], ops=refs)
    return a


def _row_id(row) -> tuple:
    return (row["kind"], row["key"], tuple((r["src"], r["i"], r["pos"]) for r in row["refs"]))


def check(spark, paired, t0: int, bucket_ns: int, sub_via: str | None,
          max_examples: int, flats_of, partitions: int) -> dict[str, Any]:
    """The queue result (without ``stats``) of a paired frame, like ``queue.check_queue``.

    ``flats_of(indexes)`` returns the flat operations with those invocation indexes.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = rows_frame(paired, partitions).persist()
    w = windowed(rows).persist()
    try:
        found = anomalies(w).unionByName(realtime(rows)).persist()
        counts = {r[0]: int(r[1]) for r in found.groupBy("kind").count().collect()}
        examples = []
        if counts:
            order = Window.partitionBy("kind").orderBy(
                F.array_min(F.col("refs.i")), "key", "seq")
            examples = [r.asDict(recursive=True) for r in
                        found.withColumn("n", F.row_number().over(order))
                        .filter(F.col("n") <= max_examples).drop("n").collect()]
        found.unpersist()
        more = _second_look(spark, rows, w, examples)
        series, worst, keys = facts(w, t0, bucket_ns)
        series_rows = series.collect()
        worst_row = worst.collect()[0]
        n_keys = keys.count()
    finally:
        w.unpersist()
        rows.unpersist()
    wanted = {r["i"] for row in examples for r in row["refs"]}
    wanted |= {r["i"] for k, v in more.items() if k[0] == "io" for r in v}
    wanted |= {r["i"] for k, v in more.items() if k[0] == "dup" for _, r in v}
    wv = worst_row["worst"]
    if wv is not None:
        wanted |= {int(wv["i_index"]), int(wv["p_i"])}
    ops = _Ops(flats_of(sorted(wanted)))
    an: dict[str, list] = {}
    for row in sorted(examples, key=lambda r: r["seq"]):
        an.setdefault(row["kind"], []).append(example(row, ops, more))
    part = {
        "anomalies": an,
        "unseen-acked": {int(r["b"]): int(r["n"]) for r in series_rows
                         if r["what"] == "acked"},
        "unseen-seen": {int(r["b"]): int(r["n"]) for r in series_rows if r["what"] == "seen"},
        "lag": {"worst": _worst(wv, ops),
                "sum-ns": sum(int(r["lag"] or 0) for r in series_rows),
                "n": sum(int(r["n"]) for r in series_rows if r["what"] == "seen")},
    }
    result = queue.merge_parts([part], t0, bucket_ns, sub_via, max_examples)
    result["partitions"] = n_keys
    for k, a in result["anomalies"].items():
        a["count"] = counts[k]
    return result


def _second_look(spark, rows, w, examples) -> dict:
    """Details of the examples that span many rows, by small broadcast joins."""
    from pyspark.sql import functions as F

    c = F.col
    more: dict = {}
    io = [(e["key"], e["offsets"][0]) for e in examples if e["kind"] == "inconsistent-offsets"]
    dup = [(e["key"], e["refs"][0]["src"], e["refs"][0]["i"], e["refs"][0]["pos"])
           for e in examples if e["kind"] == "duplicate"]
    skips = [(e["key"], int(e["extra"]) + 1 + i, _row_id(e)) for e in examples
             if e["kind"] in ("poll-skip", "int-poll-skip")
             for i in range(min(SKIPPED_SHOWN, int(e["delta"]) - 1))]
    known = rows.filter(c("offset").isNotNull())
    first = F.min(F.struct("src", "i_index", "pos")).alias("f")

    def ref_of(f):
        return {"src": f["src"], "i": f["i_index"], "pos": f["pos"]}

    if io:
        want = spark.createDataFrame(io, "key string, offset long")
        for r in (known.join(F.broadcast(want), ["key", "offset"])
                  .groupBy("key", "offset", "value").agg(first).collect()):
            more.setdefault(("io", r["key"], r["offset"]), []).append(ref_of(r["f"]))
    if dup:
        want = spark.createDataFrame(dup, "key string, src int, i_index long, pos long")
        vals = (known.join(F.broadcast(want), ["key", "src", "i_index", "pos"])
                .select("key", "value", "src", "i_index", "pos").distinct())
        got = (known.join(F.broadcast(vals.withColumnRenamed("src", "w_src")
                                      .withColumnRenamed("i_index", "w_i")
                                      .withColumnRenamed("pos", "w_pos")),
                          ["key", "value"])
               .groupBy("key", "w_src", "w_i", "w_pos", "offset").agg(first).collect())
        for r in got:
            more.setdefault(("dup", r["key"], r["w_i"], r["w_pos"]), []).append(
                (r["offset"], ref_of(r["f"])))
        for k in [k for k in more if k[0] == "dup"]:
            more[k].sort(key=lambda x: x[0])
    if skips:
        want = spark.createDataFrame([(k, r) for k, r, _ in skips], "key string, rank int")
        got = {(r[0], int(r[1])): int(r[2]) for r in
               w.join(F.broadcast(want), ["key", "rank"]).select("key", "rank", "offset")
               .distinct().collect()}
        for k, r, rid in skips:
            more.setdefault(("skip", rid), []).append(got[(k, r)])
    return more


def _worst(w, ops: _Ops) -> dict[str, Any] | None:
    if w is None:
        return None
    key, sref, s = ops.ref(w["key"], {"src": 0, "i": int(w["i_index"]), "pos": int(w["pos"])})
    _, pref, _ = ops.ref(w["key"], {"src": 1, "i": int(w["p_i"]), "pos": None})
    return {"key": key, "lag-ns": int(w["lag"]), "value": s.value, "ops": [sref, pref]}
