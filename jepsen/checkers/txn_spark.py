"""The txn checker on Spark: the dependency graph as DataFrames, cycles on the driver.

From the Parquet history Spark pairs invocations with completions (``paired_frame``) and
explodes each ``txn`` operation into micro-ops (``from_json`` keeps a nested JSON value
as text, so a send's ``[offset, value]`` and a poll's ``{key: pairs}`` parse in a second
step).  Then, all in the JVM:

* ``sends``  (id, key, value, offset, c_type) and ``reads`` (id, key, offset, value);
* ``versions``: per key, every offset ok sends and polls showed, its (smallest) value, and
  by a window over offsets the version after it;
* ``writer``: (key, value) -> the smallest id of a transaction that sent it and did not
  fail;
* ``ww`` (writers of consecutive versions), ``wr`` (writer of a transaction's highest
  read -> the reader), ``rw`` (the reader -> the writer of the version after it), as
  joins of those frames.

Only the edges (a few per transaction) and one row per transaction come back to the
driver, which adds process and realtime edges and searches cycles
(``jepsen.checkers.txn_graph``).  The per-key anomalies run as the queue checker's do on
Spark: records grouped by key, each key analysed in a Python task.
"""

from __future__ import annotations

from typing import Any

from jepsen.checkers import queue, txn, txn_graph
from jepsen.checkers._common import ref
from jepsen.checkers.spark import (
    _counts_and_grid,
    _flats,
    _FLAT_COLS,
    by_key,
    history_frame,
    paired_frame,
    phase,
    spark_stats,
)


def micro_op_frames(paired):
    """``(sends, reads)`` DataFrames of the txn operations in ``paired``."""
    from pyspark.sql import functions as F

    txns = paired.filter(F.col("f").isin(*txn.TXN_FS))
    text = F.when(F.col("c_type") == "ok", F.col("c_value")).otherwise(F.col("i_value"))
    mops = txns.select(F.col("i_index").alias("id"), "c_type", F.posexplode(
        F.from_json(text, "array<array<string>>")).alias("mop", "m"))
    pair = F.from_json(F.get("m", 2), "array<long>")
    ok = F.col("c_type") == "ok"
    sends = (mops.filter((F.get("m", 0) == "send") & (F.size("m") == 3))
             .select("id", "c_type", F.get("m", 1).cast("long").alias("key"),
                     F.when(ok, F.get(pair, 1)).otherwise(F.get("m", 2).cast("long"))
                     .alias("value"),
                     F.when(ok, F.get(pair, 0)).alias("offset")))
    polled = (mops.filter((F.get("m", 0) == "poll") & ok & (F.size("m") == 2))
              .select("id", F.explode(F.from_json(F.get("m", 1),
                                                  "map<string,array<array<long>>>"))
                      .alias("k", "pairs")))
    reads = polled.select("id", F.col("k").cast("long").alias("key"),
                          F.explode("pairs").alias("p")).select(
        "id", "key", F.get("p", 0).alias("offset"), F.get("p", 1).alias("value"))
    return sends, reads


def edge_frame(sends, reads):
    """The ww, wr and rw rows ``(a, b, type, key, value, value2)`` as one DataFrame, and
    the frames it persisted (to unpersist when done)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    shown = (sends.filter((F.col("c_type") == "ok") & F.col("offset").isNotNull())
             .select("key", "offset", "value").unionByName(reads.select("key", "offset",
                                                                        "value")))
    versions = shown.groupBy("key", "offset").agg(F.min("value").alias("value"))
    w = Window.partitionBy("key").orderBy("offset")
    order = versions.select("key", "offset", "value",
                            F.lead("value").over(w).alias("next")).persist()
    writer = (sends.filter(F.col("c_type") != "fail").groupBy("key", "value")
              .agg(F.min("id").alias("w"))).persist()
    w1 = writer.select("key", "value", F.col("w").alias("a"))
    w2 = writer.select("key", F.col("value").alias("next"), F.col("w").alias("b"))
    ww = (order.filter(F.col("next").isNotNull()).join(w1, ["key", "value"])
          .join(w2, ["key", "next"]).filter(F.col("a") != F.col("b"))
          .select("a", "b", F.lit("ww").alias("type"), "key", "value",
                  F.col("next").alias("value2")))
    final = (reads.groupBy("id", "key").agg(F.max(F.struct("offset", "value")).alias("t"))
             .select(F.col("id").alias("r"), "key", F.col("t.offset").alias("offset"),
                     F.col("t.value").alias("value"))).persist()
    wr = (final.join(w1, ["key", "value"]).filter(F.col("a") != F.col("r"))
          .select("a", F.col("r").alias("b"), F.lit("wr").alias("type"), "key", "value",
                  F.lit(None).cast("long").alias("value2")))
    rw = (final.join(order.select("key", "offset", "next"), ["key", "offset"])
          .filter(F.col("next").isNotNull()).join(w2, ["key", "next"])
          .filter(F.col("b") != F.col("r"))
          .select(F.col("r").alias("a"), "b", F.lit("rw").alias("type"), "key", "value",
                  F.col("next").alias("value2")))
    return ww.unionByName(wr).unionByName(rw), [order, writer, final]


def spark_check_txn(spark, source, sub_via: str | None = None,
                    allowed=txn.ALLOWED, max_examples: int = queue.DEFAULT_MAX_EXAMPLES,
                    partitions: int | None = None) -> dict[str, Any]:
    """The txn checker on Spark; returns what ``txn.check_txn`` returns."""
    from pyspark.sql import functions as F

    df = history_frame(spark, source)
    paired = paired_frame(df).persist()
    cached = []
    try:
        with phase(spark, "txn: pair operations, count"):
            counts, t0, bucket_ns = _counts_and_grid(paired)
        with phase(spark, "txn: collect assignments"):
            rows = (paired.filter(F.col("f").isin(*queue.RESET_FS))
                    .select("process", "actor", "i_index", "f").collect())
        resets: dict[Any, list[int]] = {}
        for r in rows:
            resets.setdefault(r[0] if r[0] is not None else r[1], []).append(int(r[2]))
        for v in resets.values():
            v.sort()
        if sub_via is None:
            fs = {r[3] for r in rows}
            sub_via = "subscribe" if "subscribe" in fs else ("assign" if "assign" in fs
                                                             else None)
        n = partitions or spark.sparkContext.defaultParallelism
        resets_b = spark.sparkContext.broadcast(resets)

        def analyse(key, recs):
            nsend = len(queue.SendRec._fields)
            sends = [queue.SendRec._make(r) for r in recs if len(r) == nsend]
            polls = [queue.PollRec._make(r) for r in recs if len(r) != nsend]
            return key, txn.check_key(key, sends, polls, resets_b.value, t0, bucket_ns,
                                      edges=False)

        txns = paired.filter(F.col("f").isin(*txn.TXN_FS))
        with phase(spark, "txn: analyse keys"):
            parts = by_key(txns, txn.records_of, analyse, n)
        with phase(spark, "txn: dependency graph"):
            sends, reads = micro_op_frames(paired)
            cached += [sends.persist(), reads.persist()]
            edges, more = edge_frame(sends, reads)
            cached += more
            data_rows = [tuple(r) for r in edges.collect()]
        with phase(spark, "txn: transactions"):
            node_rows = (txns.filter(F.col("c_type").isin("ok", "info"))
                         .select("i_index", "process", "actor", "i_time", "c_time",
                                 "c_type", "c_index").collect())
        in_rows = {i for r in data_rows for i in r[:2]}
        nodes = {}
        for i, p, actor, it, ct, ctype, ci in node_rows:
            if ctype == "ok" or i in in_rows:
                nodes[i] = txn_graph.Node(i, p if p is not None else actor, it,
                                          ct if ctype == "ok" else None, ci)

        def refs_of(ids):
            if not ids:
                return {}
            with phase(spark, "txn: operations in cycles"):
                got = paired.filter(F.col("i_index").isin(*sorted(ids))).select(
                    *_FLAT_COLS).collect()
            return {fl.i_index: ref(fl) for fl in _flats(got)}

        result = txn.finish(parts, nodes, data_rows, refs_of, t0, bucket_ns, sub_via,
                            allowed, max_examples)
        with phase(spark, "txn: latency, throughput"):
            result["stats"] = spark_stats(paired, t0, bucket_ns, counts)
    finally:
        for frame in cached:
            frame.unpersist()
        paired.unpersist()
    return result
