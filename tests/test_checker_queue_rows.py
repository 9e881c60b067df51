"""The queue checker's rows built with Arrow kernels (``queue_rows``), held against the
single-process path's own pairing and extraction (``flatten``, ``queue.records_of``)."""

from __future__ import annotations

import bisect
import dataclasses
import random

import pytest

pa = pytest.importorskip("pyarrow")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from test_checker_histories import all_scenarios, json_identities, nested_floats  # noqa: E402

from jepsen.checkers import queue, queue_arrays, queue_rows  # noqa: E402
from jepsen.checkers._common import flatten  # noqa: E402
from jepsen.checkers.synth import queue_history  # noqa: E402
from jepsen.history import (  # noqa: E402
    Op,
    decode_value,
    encode_value,
    parquet_schema,
    to_columns,
)

NULL = queue_rows.NULL


def _records(ops: list[Op], shuffle: int | None = None):
    t = pa.Table.from_pydict(to_columns(ops), schema=parquet_schema())
    t = t.select(["process", "actor", "index", "time", "type", "f", "value"])
    if shuffle is not None:  # a shuffle delivers records in any order
        order = list(range(t.num_rows))
        random.Random(shuffle).shuffle(order)
        t = t.take(pa.array(order))
    return t


def _rows(ops: list[Op], batch: int = 1000, shuffle: int | None = None) -> list[tuple]:
    t = _records(ops, shuffle)
    out = pa.Table.from_batches(
        list(queue_rows.rows_of_records(iter(t.to_batches(max_chunksize=batch)),
                                        queue_rows.Stats(0, 1))),
        schema=queue_rows._schema())
    return sorted(tuple(r[c] for c in queue_rows.ROW_COLUMNS) for r in out.to_pylist())


def _expected(ops: list[Op]) -> list[tuple]:
    """The rows as the single-process path sees the history, read back from its file
    (as ``read_history`` does: a name of digits is an integer)."""
    flats = flatten([dataclasses.replace(o, value=decode_value(encode_value(o.value)))
                     for o in ops])
    resets = queue.resets_of(flats)
    codes = {queue.OK: queue_arrays.OK, queue.FAIL: queue_arrays.FAIL}
    out = []
    for fl in flats:
        rs = resets.get(fl.process, [])
        j = bisect.bisect_left(rs, fl.i_index)
        reset = rs[j - 1] if j else None
        proc = str(fl.process) if isinstance(fl.process, int) else "@" + fl.process
        for key, rec in queue.records_of(fl):
            if isinstance(rec, queue.SendRec):
                found = [(queue_arrays.SEND, rec.pos, rec.offset, rec.value,
                          codes.get(rec.type, queue_arrays.INFO))]
            else:
                found = [(queue_arrays.READ, n, o, v, queue_arrays.OK)
                         for n, (o, v) in enumerate(rec.pairs)]
            for src, pos, offset, value, kind in found:
                out.append((queue_rows.key_text(key), src, proc, fl.i_index, fl.i_time,
                            fl.c_index, fl.c_time, kind, pos,
                            offset if isinstance(offset, int) else None,
                            queue_rows.value_text(value), reset))
    return sorted(out)


def _damaged(seed: int) -> list[Op]:
    """A clean history with reads changed to strings, sends failed, offsets moved, and
    a consumer crashed and re-assigned now and then (resets)."""
    rng = random.Random(seed)
    ops = queue_history(3000, seed=seed)
    for i, o in enumerate(ops):
        r = rng.random()
        if o.f == "poll" and o.type == "ok" and o.value and r < 0.05:
            k = next(iter(o.value))
            ops[i] = dataclasses.replace(o, value={**o.value, k: [[0, "x"]]})
        elif o.f == "send" and o.type == "ok" and r < 0.05:
            ops[i] = dataclasses.replace(o, type="fail", value=[o.value[0], o.value[1][1]])
        elif o.f == "send" and o.type == "ok" and r < 0.1:
            ops[i] = dataclasses.replace(o, value=[o.value[0], [o.value[1][0] + 2,
                                                                o.value[1][1]]])
    last = ops[-1]
    t, n = last.time, last.index
    for p in (6, 7, 8):  # consumers whose position is reset late in the history
        ops += [Op(n + 1, t + 1, "invoke", p, "assign", [0, 1]),
                Op(n + 2, t + 2, "ok", p, "assign", [0, 1]),
                Op(n + 3, t + 3, "invoke", p, "poll", None),
                Op(n + 4, t + 4, "ok", p, "poll", {0: [[0, 1]], "a": [[1, 2.5]]})]
        n, t = n + 4, t + 4
    return ops


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_rows_are_what_the_single_process_path_reads(seed):
    ops = _damaged(seed)
    assert _rows(ops) == _expected(ops)


@pytest.mark.parametrize("chunk, batch, shuffle", [(7, 3, 0), (64, 1000, 1), (1 << 16, 50, 2)])
def test_records_in_any_order_and_any_chunks_give_the_same_rows(monkeypatch, chunk, batch,
                                                                shuffle):
    """An invocation that ends a chunk waits for its completion in the next, and the
    latest reset of a process is carried over as well."""
    ops = _damaged(4)
    monkeypatch.setattr(queue_rows, "CHUNK", chunk)
    assert _rows(ops, batch, shuffle) == _expected(ops)


def test_the_anomaly_scenarios_and_odd_values_give_the_rows_of_the_single_process_path():
    for ops in (all_scenarios()[0], json_identities()[0], nested_floats()[0]):
        assert _rows(ops) == _expected(ops)


def test_integer_histories_are_read_without_per_record_python(monkeypatch):
    """The common history (integer keys, offsets and values) never reaches
    ``queue.records_of``: the kernels cut its rows."""
    ops = queue_history(3000, seed=5)
    want = _expected(ops)

    def refuse(fl):
        raise AssertionError(f"read one record at a time: {fl}")

    monkeypatch.setattr(queue, "records_of", refuse)
    assert _rows(ops) == want


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20)
    | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda xs: st.lists(xs, max_size=3)
    | st.dictionaries(st.text(max_size=2) | st.integers(-3, 3), xs, max_size=3),
    max_leaves=6)


@settings(max_examples=300, deadline=None)
@given(json_values, json_values)
def test_value_texts_are_equal_exactly_when_the_values_are(a, b):
    assert (queue_rows.value_text(a) == queue_rows.value_text(b)) == \
        (queue._h(a) == queue._h(b))


@pytest.mark.parametrize("a, b", [(1, 1.0), (1, True), ("1", 1), ([1], [1.0]),
                                  ({"1": 2}, {1: 2})])
def test_values_jepsen_tells_apart_have_different_texts(a, b):
    assert queue_rows.value_text(a) != queue_rows.value_text(b)


def test_negative_zero_is_zero():
    assert queue_rows.value_text(-0.0) == queue_rows.value_text(0.0)
    assert queue_rows.value_text([-0.0]) == queue_rows.value_text([0.0])


def test_statistics_parts_merge_to_the_single_process_figures():
    """Two partitions, each holding all records of some processes, give parts whose
    merge has ``basic_stats``'s figures (exact latency quantiles) and the grid's t0."""
    import pickle

    from jepsen.checkers._common import basic_stats, grid_of
    from jepsen.checkers.spark_queue import _stats

    ops = _damaged(6)
    flats = flatten(ops)
    t0, bucket_ns = grid_of(flats)
    t = _records(ops, shuffle=3)
    odd = pa.array([p is not None and p % 2 == 1 for p in t.column("process").to_pylist()])
    parts: dict[str, list] = {}
    for piece in (t.filter(odd), t.filter(pa.compute.invert(odd))):
        stats = queue_rows.Stats(t0, bucket_ns)
        for _ in queue_rows.rows_of_records(iter(piece.to_batches()), stats):
            pass
        for part in stats.parts():  # as they travel between workers
            parts.setdefault(part["f"], []).append(pickle.loads(pickle.dumps(part)))
    assert all(len(p) == 2 for f, p in parts.items() if f in ("send", "poll"))
    got = [queue_rows.stats_of(p) for p in parts.values()]
    assert _stats(got, t0, bucket_ns) == basic_stats(flats, t0, bucket_ns)
    assert min(s["first"] for s in got) == t0
