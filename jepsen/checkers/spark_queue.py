"""The queue checker as Spark SQL plans: every anomaly found by joins, windows, aggregations.

Theory of operation
-------------------
The JVM parses the JSON values (``from_json``; a nested value that is not a string keeps
its JSON text, a string loses its quotes, as on both sides of every comparison) and
explodes the history into two tables, keyed by partition:

* *messages* -- one row per message of a send (its position, completion type, and the
  offset and value of its acknowledgement when ok);
* *reads* -- one row per ``(offset, value)`` pair an ok poll returned.

Their union over offsets (ok sends and reads) is the set of known offsets; a
``dense_rank`` over it is the version order.  Every anomaly of ``queue.check_partition``
is then a relational property: inconsistent offsets and duplicates are group-bys over
``(key, offset, value)``; lost, unseen, aborted and unexpected values are joins of
messages with each value's first read; poll skips and backward polls are one ``lag``
window over each consumer's reads of a key (rows of one poll are internal pairs, the
first row of a poll meets the last of the previous one, and a reset of the process in
between, found by a window over its operations, excuses it); producer order is a window
over each producer's ok messages.  Realtime order needs the highest offset completed
before each send began: a running ``max`` over completions and invocations in time order
flags the few candidate sends, and a join over only those finds the send that beat them.

Every anomaly is one row of one shape (kind, key, the ops it names, numbers).  The
driver receives the counts per kind and at most ``max_examples`` rows per kind, then
reads just the operations those examples name and builds the anomaly dicts with the
same functions as the single-process path, so both paths report the same thing.
"""

from __future__ import annotations

import json
from typing import Any

from jepsen.checkers import queue

SKIPPED_SHOWN = 16  # check_partition lists at most this many skipped offsets

_PAIR = "array<string>"


def _messages(col):
    """A send value as an array of [key, x] messages (single or multi-message form)."""
    from pyspark.sql import functions as F

    multi = F.from_json(col, f"array<{_PAIR}>")
    single = F.from_json(col, _PAIR)
    return (F.when(col.startswith("[["), multi)
            .when(F.size(single) == 2, F.array(single))
            .otherwise(F.array().cast(f"array<{_PAIR}>")))


def _proc():
    from pyspark.sql import functions as F

    return F.coalesce(F.col("process").cast("string"), F.concat(F.lit("@"), F.col("actor")))


def tables(paired):
    """``(messages, reads)``: the per-partition rows of sends and ok polls."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    # the latest position reset of each process before each of its operations
    w = (Window.partitionBy("process", "actor").orderBy("i_index")
         .rowsBetween(Window.unboundedPreceding, -1))
    ops = paired.select(
        "*", F.last(F.when(F.col("f").isin(*queue.RESET_FS), F.col("i_index")),
                    ignorenulls=True).over(w).alias("reset"))
    sends = ops.filter(F.col("f") == "send").select(
        _proc().alias("proc"), "i_index", "i_time", "c_index", "c_time",
        F.col("c_type").alias("type"), F.posexplode(_messages(F.col("i_value"))),
        F.when(F.col("c_type") == "ok", _messages(F.col("c_value"))).alias("acks"))
    ack = F.from_json(F.get(F.get(F.col("acks"), F.col("pos")), 1), _PAIR)
    acked = F.size(ack) == 2
    messages = sends.select(
        F.col("col")[0].alias("key"), "proc", "i_index", "i_time", "c_index", "c_time",
        "type", "pos",
        F.when(acked, F.get(ack, 1)).otherwise(F.get(F.col("col"), 1)).alias("value"),
        F.when(acked, F.get(ack, 0).try_cast("long")).alias("offset"))
    polls = ops.filter((F.col("f") == "poll") & (F.col("c_type") == "ok")).select(
        _proc().alias("proc"), "i_index", "i_time", "c_index", "c_time", "reset",
        F.explode(F.from_json("c_value", f"map<string,array<{_PAIR}>>")))
    reads = polls.select(
        "key", "proc", "i_index", "i_time", "c_index", "c_time", "reset",
        F.posexplode("value").alias("pos", "pair")).select(
        "key", "proc", "i_index", "i_time", "c_index", "c_time", "reset", "pos",
        F.get(F.col("pair"), 0).try_cast("long").alias("offset"),
        F.get(F.col("pair"), 1).alias("value"))
    return messages, reads


def _ref(src: int, i_index: str = "i_index", pos: str = "pos"):
    """A reference to a send message (src 0) or a poll (src 1) of the row's key."""
    from pyspark.sql import functions as F

    return F.struct(F.lit(src).alias("src"), F.col(i_index).cast("long").alias("i"),
                    F.col(pos).cast("long").alias("pos"))


def _anomaly(frame, kind, refs, seq, offsets=None, delta=None, value=None, extra=None):
    """Projects rows onto the one anomaly shape."""
    from pyspark.sql import functions as F

    def lit(c, t):
        return c if c is not None else F.lit(None).cast(t)

    return frame.select(
        F.lit(kind).alias("kind"), F.col("key"), seq.cast("long").alias("seq"),
        F.array(*refs).alias("refs"), lit(offsets, "array<long>").alias("offsets"),
        lit(delta, "long").cast("long").alias("delta"),
        lit(value, "string").alias("value"), lit(extra, "long").cast("long").alias("extra"),
        F.lit(None).cast("array<string>").alias("texts"))


def anomalies_and_facts(messages, reads, t0: int, bucket_ns: int):
    """``(anomalies, series, lag, keys)`` frames: every anomaly, and the statistics."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    c = F.col
    known = (messages.filter((c("type") == "ok") & c("offset").isNotNull())
             .select("key", "offset", "value", "proc", "i_index", "pos",
                     F.lit(0).alias("src"))
             .unionByName(reads.select("key", "offset", "value", "proc", "i_index", "pos",
                                       F.lit(1).alias("src"))))
    first = F.min(F.struct("src", "i_index", "pos")).alias("first")
    shows = known.groupBy("key", "offset", "value").agg(first).persist()
    out = []

    def first_ref(col):
        return F.struct(F.col(f"{col}.src").alias("src"),
                        F.col(f"{col}.i_index").cast("long").alias("i"),
                        F.when(F.col(f"{col}.src") == 0, F.col(f"{col}.pos"))
                        .cast("long").alias("pos"))

    # Several values at one offset; one value at several offsets.
    io = (shows.groupBy("key", "offset")
          .agg(F.count(F.lit(1)).alias("n"),
               F.collect_list(F.struct("value", first_ref("first").alias("r"))).alias("vs"))
          .filter(c("n") > 1))
    out.append(io.select(
        F.lit("inconsistent-offsets").alias("kind"), "key", c("offset").alias("seq"),
        c("vs.r").alias("refs"), F.array("offset").alias("offsets"),
        F.lit(None).cast("long").alias("delta"), F.lit(None).cast("string").alias("value"),
        c("offset").alias("extra"), c("vs.value").alias("texts")))
    dup = (shows.groupBy("key", "value")
           .agg(F.count(F.lit(1)).alias("n"),
                F.array_sort(F.collect_list(F.struct(
                    "offset", first_ref("first").alias("r")))).alias("os"),
                F.min("first").alias("f0"))
           .filter(c("n") > 1))
    out.append(dup.select(
        F.lit("duplicate").alias("kind"), "key",
        (c("f0.src") * F.lit(1 << 62) + c("f0.i_index")).alias("seq"),
        c("os.r").alias("refs"), c("os.offset").alias("offsets"),
        F.lit(None).cast("long").alias("delta"), "value",
        F.lit(None).cast("long").alias("extra"),
        F.lit(None).cast("array<string>").alias("texts")))

    # Each value's first read, the highest offset read; writes lost, unseen, aborted.
    seen = (reads.groupBy("key", "value")
            .agg(F.min(F.struct("i_index", "i_time", "c_time")).alias("p")))
    max_read = reads.groupBy("key").agg(F.max("offset").alias("max_read"))
    ms = (messages.join(seen, ["key", "value"], "left").join(max_read, ["key"], "left")
          .persist())
    in_order = c("i_index") * F.lit(1 << 20) + c("pos")
    g1a = ms.filter((c("type") == "fail") & c("p").isNotNull())
    out.append(_anomaly(g1a, "G1a", [_ref(0), _ref(1, "p.i_index", "p.i_index")], in_order))
    gone = ms.filter((c("type") == "ok") & c("p").isNull())
    lost = c("offset").isNotNull() & c("max_read").isNotNull() & (c("offset") < c("max_read"))
    out.append(_anomaly(gone.filter(lost), "lost-write", [_ref(0)], in_order,
                        extra=c("max_read")))
    out.append(_anomaly(gone.filter(~lost), "unseen", [_ref(0)], in_order))
    sent = messages.select("key", "value").distinct()
    unexpected = seen.join(sent, ["key", "value"], "left_anti")
    out.append(_anomaly(unexpected, "unexpected", [_ref(1, "p.i_index", "p.i_index")],
                        c("p.i_index"), value=c("value")))

    # Version order: the rank of every known offset of a key.
    ranks = (shows.select("key", "offset").distinct()
             .withColumn("rank", F.dense_rank().over(
                 Window.partitionBy("key").orderBy("offset"))).persist())

    # Successive reads of one consumer: within a poll, and across two of its polls.
    rr = reads.join(ranks, ["key", "offset"])
    w = Window.partitionBy("key", "proc").orderBy("i_index", "pos")
    steps = rr.select(
        "key", "i_index", "c_index", "reset", "pos", "offset", "rank",
        F.lag("i_index").over(w).alias("p_i"), F.lag("c_index").over(w).alias("p_c"),
        F.lag("offset").over(w).alias("p_off"), F.lag("rank").over(w).alias("p_rank"))
    steps = steps.filter(c("p_i").isNotNull() & (
        (c("offset") <= c("p_off")) | (c("rank") - c("p_rank") > 1)))
    internal = c("p_i") == c("i_index")
    excused = c("reset").isNotNull() & (c("reset") > c("p_c"))
    back = c("offset") <= c("p_off")
    steps = steps.filter(internal | ~excused).select(
        "*", (c("rank") - c("p_rank")).alias("d"), F.array("p_off", "offset").alias("os"))
    for kind, cond, refs in (
            ("int-nonmonotonic-poll", internal & back, [_ref(1, "i_index", "i_index")]),
            ("int-poll-skip", internal & ~back, [_ref(1, "i_index", "i_index")]),
            ("nonmonotonic-poll", ~internal & back,
             [_ref(1, "p_i", "p_i"), _ref(1, "i_index", "i_index")]),
            ("poll-skip", ~internal & ~back,
             [_ref(1, "p_i", "p_i"), _ref(1, "i_index", "i_index")])):
        out.append(_anomaly(steps.filter(cond), kind, refs, c("pos"), offsets=c("os"),
                            delta=c("d"), extra=c("p_rank")))

    # A producer's ok sends, in its order.
    oks = messages.filter((c("type") == "ok") & c("offset").isNotNull())
    ro = oks.join(ranks, ["key", "offset"])
    w = Window.partitionBy("key", "proc").orderBy("i_index", "pos")
    sq = ro.select(
        "key", "i_index", "pos", "offset", "rank",
        F.lag("i_index").over(w).alias("p_i"), F.lag("pos").over(w).alias("p_pos"),
        F.lag("offset").over(w).alias("p_off"), F.lag("rank").over(w).alias("p_rank"))
    sq = sq.filter(c("p_i").isNotNull() & (c("offset") <= c("p_off")))
    for kind, cond in (("int-nonmonotonic-send", c("p_i") == c("i_index")),
                       ("nonmonotonic-send", c("p_i") != c("i_index"))):
        out.append(_anomaly(sq.filter(cond), kind, [_ref(0, "p_i", "p_pos"), _ref(0)],
                            c("pos"), offsets=F.array("p_off", "offset"),
                            delta=c("rank") - c("p_rank")))

    out.append(_realtime(oks))
    anomalies = out[0]
    for a in out[1:]:
        anomalies = anomalies.unionByName(a)

    # Unseen over time and realtime lag, over ok sends.
    done = ms.filter((c("type") == "ok") & c("c_time").isNotNull())
    bucket = F.floor((c("c_time") - F.lit(t0)) / F.lit(bucket_ns)).cast("long")
    seen_b = F.floor((F.greatest(c("p.c_time"), c("c_time")) - F.lit(t0))
                     / F.lit(bucket_ns)).cast("long")
    series = (done.select(bucket.alias("b"), F.lit("acked").alias("what"))
              .unionByName(done.filter(c("p").isNotNull())
                           .select(seen_b.alias("b"), F.lit("seen").alias("what")))
              .groupBy("b", "what").count())
    lagc = F.greatest(F.lit(0), c("p.i_time") - c("c_time"))
    lag = (done.filter(c("p").isNotNull())
           .agg(F.sum(lagc).alias("sum"), F.count(F.lit(1)).alias("n"),
                F.max(F.struct(lagc.alias("lag"), (-c("i_index")).alias("ni"),
                               (-c("pos")).alias("np"), "key", "i_index", "pos",
                               c("p.i_index").alias("p_i"))).alias("worst")))
    keys = (messages.select("key").unionByName(reads.select("key")).distinct()
            .agg(F.count(F.lit(1)).alias("n")))
    return anomalies, series, lag, keys, [shows, ms, ranks]


def _realtime(oks):
    """Sends that landed below a send of another process completed before they began."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    c = F.col
    ev = (oks.filter(c("c_time").isNotNull())
          .select("key", c("c_time").alias("t"), F.lit(1).alias("e"), "offset", "i_index",
                  "pos")
          .unionByName(oks.select("key", c("i_time").alias("t"), F.lit(0).alias("e"),
                                  "offset", "i_index", "pos")))
    w = (Window.partitionBy("key").orderBy("t", "e", "i_index", "pos")
         .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    best = F.max(F.when(c("e") == 1, c("offset"))).over(w)
    cand = (ev.select("*", best.alias("best")).filter((c("e") == 0) & (c("best") > c("offset")))
            .select("key", "i_index", "pos"))
    b = oks.join(cand, ["key", "i_index", "pos"]).select(
        "key", "proc", "i_index", "i_time", "pos", "offset")
    a = oks.filter(c("c_time").isNotNull()).select(
        "key", c("proc").alias("a_proc"), c("i_index").alias("a_i"), c("pos").alias("a_pos"),
        c("c_time").alias("a_c"), c("offset").alias("a_off"))
    j = b.join(a, (b["key"] == a["key"]) & (c("a_c") < c("i_time"))
               & (c("a_proc") != c("proc")) & (c("a_off") > c("offset"))).drop(a["key"])
    top = F.max(F.struct("a_off", (-c("a_c")).alias("nc"), (-c("a_i")).alias("ni"),
                         (-c("a_pos")).alias("np"), "a_i", "a_pos")).alias("a")
    hit = j.groupBy("key", "i_index", "pos", "offset").agg(top)
    return _anomaly(hit, "realtime-order", [_ref(0, "a.a_i", "a.a_pos"), _ref(0)], c("pos"),
                    offsets=F.array("a.a_off", "offset"))


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


def _value_at(rec, offset: int, text: str | None) -> Any:
    if isinstance(rec, queue.SendRec):
        return rec.value
    for off, v in rec.pairs:
        if off == offset and (text is None or _text(v) == text):
            return v
    return None


def example(row, ops: _Ops, skipped: list[int] | None) -> dict[str, Any]:
    """The anomaly dict ``check_partition`` makes, from one anomaly row."""
    kind, kt = row["kind"], row["key"]
    got = [ops.ref(kt, r) for r in row["refs"]]
    key = got[0][0]
    refs = [g[1] for g in got]
    a: dict[str, Any] = {"key": key}
    if kind == "inconsistent-offsets":
        off = row["offsets"][0]
        vals = [(_value_at(g[2], off, t), g[1]) for g, t in zip(got, row["texts"])]
        vals.sort(key=lambda x: repr(queue._h(x[0])))
        a.update(offset=off, values=sorted((v for v, _ in vals), key=repr),
                 ops=[r for _, r in vals])
    elif kind == "duplicate":
        v = _value_at(got[0][2], row["offsets"][0], row["value"])
        a.update(value=v, offsets=list(row["offsets"]), ops=refs)
    elif kind in ("G1a", "unseen"):
        s = got[0][2]
        if kind == "G1a":
            a.update(value=s.value, ops=refs)
        else:
            a.update(value=s.value, offset=s.offset, ops=refs)
    elif kind == "lost-write":
        s = got[0][2]
        a.update(value=s.value, offset=s.offset, **{"max-read-offset": row["extra"]},
                 ops=refs)
    elif kind == "unexpected":
        p = got[0][2]
        v = next((v for _, v in p.pairs if _text(v) == row["value"]), None)
        a.update(value=v, ops=refs)
    elif kind in ("int-poll-skip", "poll-skip"):
        a.update(offsets=list(row["offsets"]), delta=row["delta"], skipped=skipped or [],
                 ops=refs)
    elif kind == "realtime-order":
        a.update(offsets=list(row["offsets"]), ops=refs)
    else:  # the nonmonotonic kinds
        a.update(offsets=list(row["offsets"]), delta=row["delta"], ops=refs)
    return a


def check(spark, paired, t0: int, bucket_ns: int, sub_via: str | None,
          max_examples: int, flats_of) -> dict[str, Any]:
    """The queue result (without ``stats``) of a paired frame, like ``queue.check_queue``.

    ``flats_of(indexes)`` returns the flat operations with those invocation indexes.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    messages, reads = tables(paired)
    messages, reads = messages.persist(), reads.persist()
    anomalies, series, lag, keys, cached = anomalies_and_facts(messages, reads, t0,
                                                               bucket_ns)
    try:
        anomalies = anomalies.persist()
        counts = {r[0]: int(r[1]) for r in anomalies.groupBy("kind").count().collect()}
        rows = []
        if counts:
            w = Window.partitionBy("kind").orderBy(
                F.array_min(F.col("refs.i")), "key", "seq")
            rows = (anomalies.withColumn("n", F.row_number().over(w))
                    .filter(F.col("n") <= max_examples).collect())
        skipped = _skipped(spark, rows, cached[2])
        series_rows = series.collect()
        lag_row = lag.collect()[0]
        n_keys = int(keys.collect()[0][0])
        wanted = {int(r["i"]) for row in rows for r in row["refs"]}
        w_ = lag_row["worst"]
        if w_ is not None:
            wanted |= {int(w_["i_index"]), int(w_["p_i"])}
        ops = _Ops(flats_of(sorted(wanted)))
    finally:
        for f in (anomalies, messages, reads, *cached):
            f.unpersist()
    an: dict[str, list] = {}
    for row in rows:
        d = row.asDict(recursive=True)
        d["refs"] = [dict(r) for r in d["refs"]]
        an.setdefault(row["kind"], []).append(
            (row["seq"], example(d, ops, skipped.get(_row_id(row)))))
    part = {
        "anomalies": {k: [a for _, a in sorted(v, key=lambda x: x[0])]
                      for k, v in an.items()},
        "unseen-acked": {int(r[0]): int(r[2]) for r in series_rows if r[1] == "acked"},
        "unseen-seen": {int(r[0]): int(r[2]) for r in series_rows if r[1] == "seen"},
        "lag": {"worst": _worst(w_, ops), "sum-ns": int(lag_row["sum"] or 0),
                "n": int(lag_row["n"])},
    }
    result = queue.merge_parts([part], t0, bucket_ns, sub_via, max_examples)
    result["partitions"] = n_keys
    for k, a in result["anomalies"].items():
        a["count"] = counts[k]
    return result


def _row_id(row) -> tuple:
    return (row["kind"], row["key"], tuple((r["src"], r["i"], r["pos"]) for r in row["refs"]),
            tuple(row["offsets"] or ()))


def _skipped(spark, rows, ranks) -> dict[tuple, list[int]]:
    """The first skipped offsets of each poll-skip example (a join on the few ranks)."""
    from pyspark.sql import functions as F

    want = [(row["key"], int(row["extra"]) + 1 + i, _row_id(row)) for row in rows
            if row["kind"] in ("poll-skip", "int-poll-skip")
            for i in range(min(SKIPPED_SHOWN, int(row["delta"]) - 1))]
    if not want:
        return {}
    need = spark.createDataFrame([(k, r) for k, r, _ in want], "key string, rank int")
    got = {(r[0], int(r[1])): int(r[2]) for r in
           need.join(ranks, ["key", "rank"]).select("key", "rank", "offset").collect()}
    out: dict[tuple, list[int]] = {}
    for k, r, rid in want:
        out.setdefault(rid, []).append(got[(k, r)])
    return out


def _worst(w, ops: _Ops) -> dict[str, Any] | None:
    if w is None:
        return None
    key, sref, s = ops.ref(w["key"], {"src": 0, "i": int(w["i_index"]), "pos": int(w["pos"])})
    _, pref, _ = ops.ref(w["key"], {"src": 1, "i": int(w["p_i"]), "pos": None})
    return {"key": key, "lag-ns": int(w["lag"]), "value": s.value, "ops": [sref, pref]}
