"""The queue checker on Spark: one row per message and read, analysed per partition key.

Theory of operation
-------------------
Two shuffles of Arrow IPC streams, Python on both sides of each: the JVM moves a few
hundred large values and never converts, sorts or hashes a record.

1. Python tasks read the history's Parquet row groups with pyarrow (``row_group_tasks``;
   a frame, such as Spark's Kafka source gives, goes through ``mapInArrow`` instead) and
   split each batch by process into buckets, one Arrow stream per bucket
   (``_bucket_blobs``); the JVM shuffles the streams by bucket, so every record of a
   process reaches one Python worker;
2. there, ``queue_rows.packed_rows`` sorts a bucket's records, pairs each invocation with
   its completion and cuts sends and polls into *rows*, one per message sent and per
   ``(offset, value)`` read (Arrow kernels: regular expressions and string splits over
   whole columns; ``queue.records_of`` only for values that are not integers), folds
   each ``f``'s statistics, and packs each key's rows into one Arrow stream;
3. the JVM shuffles the packed rows by key, so all rows of a key reach one worker,
   where ``queue_arrays.analyse`` finds every anomaly of ``queue.check_partition`` with
   numpy sorts and grouped reductions, and returns counts, at most ``max_examples``
   anomaly rows of each type, and the unseen series and lag; the statistics parts of an
   ``f`` are merged there too (``queue_rows.stats_of``).

The plan is an RDD's, not a DataFrame's: the JVM's part is moving byte strings, which
needs no query planning, code generation or JVM compilation of per-record paths.  When
the JVM read the Parquet file, hashed every record and converted it to Arrow for the
workers, those made a check's first run in a session about twice as long as its second.

A key is the unit of analysis: all of a key's rows are in one worker at once (one
partition's history, never the whole history).  The driver receives those small
results (:func:`assemble`), reads just the records the examples name and builds the
anomaly dicts with the same functions as the single-process path, so both paths report
the same thing.
"""

from __future__ import annotations

import functools
import os
import pickle
import zlib
from collections.abc import Iterator
from typing import Any

from jepsen.checkers import queue, queue_arrays, queue_rows
from jepsen.checkers._common import stats_dict, time_buckets


# ---------------------------------------------------------------- the plan

COLUMNS = ["process", "actor", "index", "time", "type", "f", "value"]


# Records per bucket of the first shuffle, at most: a bucket's records are in one Python
# worker at once (about half a kilobyte each while they are paired and cut: the workers of
# a 10M-record check in 9 buckets peaked at 1.1 GB together).
BUCKET_RECORDS = 1_250_000


def buckets(spark, records: int | None) -> int:
    """How many buckets (and partitions of each shuffle) a check of ``records`` makes:
    two per task slot, more when a bucket would hold more than ``BUCKET_RECORDS``.
    Every task costs about a tenth of a second of its own in a local session, whatever
    it holds: on 2 cores a 1M-record check took 4.2-4.3 s in 8 buckets and 3.0-3.5 s in
    4.  Unknown (a frame): Spark's default parallelism."""
    if records is None:
        return spark.sparkContext.defaultParallelism
    return max(2 * task_slots(spark), -(-records // BUCKET_RECORDS))


def task_slots(spark) -> int:
    """How many tasks the session runs at once: a local master's thread count, else
    Spark's default parallelism (a cluster's executor cores unless set otherwise)."""
    return local_threads(spark.sparkContext.master) or spark.sparkContext.defaultParallelism


def local_threads(master: str) -> int | None:
    """The threads of a local master (``local``, ``local[N]``, ``local[*]``,
    ``local[N,F]``); None for any other."""
    if master == "local":
        return 1
    if not master.startswith("local["):
        return None
    n = master[len("local["):master.find("]")].split(",")[0]
    return int(n) if n.isdigit() else (os.cpu_count() or 1)


def row_group_tasks(path: str, n: int, groups: list[int] | None = None) -> list[tuple[str, list[int]]]:
    """At most ``n`` read tasks over a Parquet file's row groups (``groups``, else all),
    each ``(path, row groups)``, the groups dealt out in turn."""
    import pyarrow.parquet as pq

    if groups is None:
        groups = list(range(pq.ParquetFile(path).metadata.num_row_groups))
    tasks = max(1, min(n, len(groups)))
    return [(path, groups[i::tasks]) for i in range(tasks)]


def read_row_groups(tasks: Iterator[tuple[str, list[int]]], columns: list[str]):
    """The record batches of read tasks (``row_group_tasks``), one row group at a time."""
    import pyarrow.parquet as pq

    for f, groups in tasks:
        pf = pq.ParquetFile(f)
        for g in groups:
            yield from pf.read_row_group(g, columns=columns).to_batches()


def _bucket_blobs(batches, n: int) -> Iterator[tuple[int, bytes]]:
    """Each batch's records split by process into ``n`` buckets (a process's records
    all in one; those without a process in bucket 0), each bucket's as an Arrow IPC
    stream: ``(bucket, stream)``."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    for b in batches:
        if not b.num_rows:
            continue
        bucket = np.mod(pc.fill_null(b.column("process"), 0).to_numpy(), n)
        order = np.argsort(bucket, kind="stable")
        bounds = np.searchsorted(bucket[order], np.arange(n + 1))
        b = b.take(pa.array(order))
        for i in range(n):
            if bounds[i + 1] > bounds[i]:
                yield i, queue_rows.ipc_stream(b.slice(bounds[i], bounds[i + 1] - bounds[i]))


def _file_blobs(tasks, n: int) -> Iterator[tuple[int, bytes]]:
    return _bucket_blobs(read_row_groups(tasks, COLUMNS), n)


def _frame_blobs(batches, n: int):
    """``mapInArrow``'s function over a frame's records: ``_bucket_blobs`` as batches."""
    import pyarrow as pa

    schema = pa.schema([("bucket", pa.int32()), ("data", pa.binary())])
    for bucket, data in _bucket_blobs(batches, n):
        yield pa.RecordBatch.from_pydict({"bucket": [bucket], "data": [data]}, schema=schema)


def record_blobs(spark, source, n: int):
    """The history's records as ``(bucket, Arrow IPC stream)`` pairs (``_bucket_blobs``):
    for a Parquet path, Python tasks read its row groups with pyarrow; a frame (such as
    Spark's Kafka source gives) goes through ``mapInArrow``."""
    if isinstance(source, str):
        tasks = row_group_tasks(source, task_slots(spark))
        return spark.sparkContext.parallelize(tasks, len(tasks)).mapPartitions(
            functools.partial(_file_blobs, n=n))
    return (source.select(*COLUMNS).mapInArrow(
        functools.partial(_frame_blobs, n=n), "bucket int, data binary").rdd.map(tuple))


def _packed(pairs, t0: int, bucket_ns: int) -> Iterator[tuple[str, bytes]]:
    """A bucket's records (all of each of its processes) as ``queue_rows.packed_rows``
    makes them: ``(key, rows)`` pairs, and ``(STATS_KEY + f, statistics part)``."""
    streams = [data for _, data in pairs]
    if streams:
        yield from queue_rows.packed_rows(iter(queue_rows.unpack_rows(streams).to_batches()),
                                          t0, bucket_ns)


def key_partition(key: str) -> int:
    """The shuffle partition of a key (Python's ``hash`` of a str differs per process)."""
    return zlib.crc32(key.encode())


def _analysed(pairs, t0: int, bucket_ns: int, max_examples: int) -> Iterator[bytes]:
    """One pickled result per key of a partition: ``queue_arrays.analyse``'s, or for the
    statistics parts of an ``f`` ``queue_rows.stats_of``'s."""
    by_key: dict[str, list[bytes]] = {}
    for key, data in pairs:
        by_key.setdefault(key, []).append(data)
    for key, blobs in by_key.items():
        if key.startswith(queue_rows.STATS_KEY):
            got = queue_rows.stats_of([pickle.loads(x) for x in blobs])
        else:
            got = queue_arrays.analyse(key, _columns(queue_rows.unpack_rows(blobs)),
                                       t0, bucket_ns, max_examples)
        yield pickle.dumps(got)


def _columns(table) -> queue_arrays.Rows:
    """An Arrow table of rows as numpy columns: missing longs as ``NULL``, strings as
    codes (equal strings, equal codes)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    def longs(name):
        col = pc.cast(table.column(name), pa.int64())
        return pc.fill_null(col, int(queue_arrays.NULL)).to_numpy()

    def codes(name):
        return table.column(name).combine_chunks() \
            .dictionary_encode(null_encoding="encode").indices.to_numpy().astype(np.int64)

    return queue_arrays.Rows(
        src=longs("src"), proc=codes("proc"), i_index=longs("i_index"),
        i_time=longs("i_time"), c_index=longs("c_index"), c_time=longs("c_time"),
        type=longs("type"), pos=longs("pos"), offset=longs("offset"),
        value=codes("value"), reset=longs("reset"))


def check(spark, source, t0: int, bucket_ns: int, sub_via: str | None, max_examples: int,
          flats_of, partitions: int | None = None) -> tuple[dict[str, Any], tuple[int, int]]:
    """The queue result of a history (a Parquet path or a frame of records), like
    ``queue.check_queue``, and the time grid of its operations (``grid_of``).

    The unseen series and throughput are bucketed by ``(t0, bucket_ns)``; when the
    grid returned differs, the caller checks again with it.  ``flats_of(pairs)``
    returns the flat operations of ``(invoke index, completion index)`` pairs;
    ``partitions``: how many partitions each shuffle makes (``buckets`` when None).
    """
    records = _row_count(source) if isinstance(source, str) else None
    n = partitions or buckets(spark, records)
    found = (record_blobs(spark, source, n)
             .partitionBy(n, _same).mapPartitions(
                 functools.partial(_packed, t0=t0, bucket_ns=bucket_ns))
             .partitionBy(n, key_partition).mapPartitions(
                 functools.partial(_analysed, t0=t0, bucket_ns=bucket_ns,
                                   max_examples=max_examples)))
    parts, stats = [], []
    for blob in found.collect():
        got = pickle.loads(blob)
        (stats if "f" in got else parts).append(got)
    if sub_via is None:
        fs = {s["f"] for s in stats}
        sub_via = "subscribe" if "subscribe" in fs else ("assign" if "assign" in fs else None)
    result = assemble(parts, t0, bucket_ns, sub_via, max_examples, flats_of)
    result["stats"] = _stats(stats, t0, bucket_ns)
    if not stats:
        return result, (0, 1)
    first = min(s["first"] for s in stats)
    return result, (first, time_buckets(first, max(s["last"] for s in stats)))


def _row_count(path: str) -> int:
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).metadata.num_rows


def _same(bucket: int) -> int:
    return bucket


def _stats(stats: list[dict], t0: int, bucket_ns: int) -> dict[str, Any]:
    """``basic_stats`` from ``queue_rows.stats_of``'s results, one per f."""
    counts, latency, thru = {}, {}, {}
    for s in stats:
        counts[s["f"]] = {"ok": 0, "fail": 0, "info": 0, **s["counts"]}
        if s["latency"] is not None:
            latency[s["f"]] = s["latency"]
        for b, kinds in s["throughput"].items():
            t = thru.setdefault(b, {})
            for k, n in kinds.items():
                t[k] = t.get(k, 0) + n
    return stats_dict(counts, latency, thru, t0, bucket_ns)


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
    wanted = {(x["i"], x["c"]) for row in examples for x in row["refs"]}
    for row in examples:
        if row["kind"] == "inconsistent-offsets":
            wanted |= {(x["i"], x["c"]) for x in more[("io", row["key"], row["offsets"][0])]}
        elif row["kind"] == "duplicate":
            x = row["refs"][0]
            wanted |= {(y["i"], y["c"]) for _, y in more[("dup", row["key"], x["i"], x["pos"])]}
    if worst is not None:
        wanted |= {(worst[0]["i"], worst[0]["c"]), (worst[0]["read-i"], worst[0]["read-c"])}
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


class _Ops:
    """The records of the few operations that examples name, by (invoke index, key)."""

    def __init__(self, flats) -> None:
        self.sends: dict[tuple[int, str], dict[int, tuple[Any, queue.SendRec]]] = {}
        self.polls: dict[tuple[int, str], tuple[Any, queue.PollRec]] = {}
        for fl in flats:
            for key, rec in queue.records_of(fl):
                k = (rec.i_index, queue_rows.key_text(key))
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
