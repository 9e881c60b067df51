"""The history model: ops, pairing, JSON lines and Parquet round trips."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from jepsen.history import (
    JSONL_FILE,
    PARQUET_FILE,
    JsonlWriter,
    Op,
    history_file,
    op_key,
    pair,
    read_history,
    read_jsonl,
    read_parquet,
    reindex,
    write_history,
    write_jsonl,
    write_parquet,
    write_parquet_chunks,
)


def sample() -> list[Op]:
    return [
        Op(0, 10, "invoke", 0, "send", [1, "a"]),
        Op(1, 11, "invoke", 1, "poll", None),
        Op(2, 12, "ok", 0, "send", [1, [7, "a"]]),
        Op(3, 13, "invoke", "nemesis", "start-partition", "majority"),
        Op(4, 14, "ok", 1, "poll", {1: [[7, "a"]], "topic-x": [[0, {"nested": [1, 2]}]]}),
        Op(5, 15, "info", "nemesis", "start-partition", {"n1": ["n2", "n3"]}),
        Op(6, 16, "invoke", 2, "cas", ["k", [None, 3]]),
        Op(7, 17, "fail", 2, "cas", ["k", [None, 3]], error="precondition"),
        Op(8, 18, "invoke", 3, "write", [5, 1]),
    ]


def test_op_validates_itself():
    with pytest.raises(ValueError):
        Op(0, 0, "done", 0, "read")
    with pytest.raises(TypeError):
        Op(0, 0, "ok", 1.5, "read")
    with pytest.raises(TypeError):
        Op(0, 0, "ok", True, "read")
    op = Op(0, 0, "ok", 0, "read")
    with pytest.raises(AttributeError):
        op.index = 3  # frozen


def test_pairing_follows_processes():
    ops = pair(sample())
    assert [(o.invoke.index, o.complete and o.complete.index) for o in ops] == [
        (0, 2), (1, 4), (3, 5), (6, 7), (8, None)]
    assert [o.type for o in ops] == ["ok", "ok", "info", "fail", "info"]


def test_keys():
    ops = sample()
    assert [op_key(o) for o in ops] == [1, None, 1, None, None, None, "k", "k", 5]
    assert op_key(Op(0, 0, "invoke", 0, "send", [[0, "a"], [1, "b"]])) is None


def test_jsonl_round_trip(tmp_path):
    p = tmp_path / "h.jsonl"
    write_jsonl(sample(), p)
    assert read_jsonl(p) == sample()
    line = json.loads(p.read_text().splitlines()[7])
    assert line["error"] == "precondition" and "error" not in json.loads(
        p.read_text().splitlines()[0])


def test_jsonl_writer_appends_and_a_torn_tail_is_skipped(tmp_path):
    p = tmp_path / "h.jsonl"
    with JsonlWriter(p) as w:
        for op in sample()[:3]:
            w.append(op)
    with open(p, "a") as f:
        f.write('{"index": 3, "ti')
    assert read_jsonl(p) == sample()[:3]


def test_parquet_round_trip_and_schema(tmp_path):
    p = tmp_path / "h.parquet"
    write_parquet(sample(), p)
    assert read_parquet(p) == sample()
    t = pq.read_table(p)
    assert t.schema.names == ["index", "time", "process", "actor", "type", "f", "key",
                              "value", "error"]
    cols = t.to_pydict()
    assert cols["process"][3] is None and cols["actor"][3] == "nemesis"
    assert cols["key"][:3] == ["1", None, "1"] and cols["key"][6] == '"k"'
    assert json.loads(cols["value"][2]) == [1, [7, "a"]]


def test_run_folder(tmp_path):
    write_history(sample(), tmp_path / "run")
    assert history_file(tmp_path / "run").name == PARQUET_FILE
    assert read_history(tmp_path / "run") == sample()
    (tmp_path / "run" / PARQUET_FILE).unlink()
    assert history_file(tmp_path / "run").name == JSONL_FILE
    assert read_history(tmp_path / "run") == sample()
    with pytest.raises(FileNotFoundError):
        history_file(tmp_path)


def test_reindex():
    ops = reindex([Op(9, 1, "invoke", 0, "read"), Op(9, 2, "ok", 0, "read")])
    assert [o.index for o in ops] == [0, 1]


def test_a_history_written_in_chunks_reads_back_whole(tmp_path):
    from jepsen.checkers.synth import iter_queue_history, queue_history

    p = tmp_path / "h.parquet"
    chunks = iter_queue_history(3000, seed=9, chunk=400)
    assert write_parquet_chunks(chunks, p) == len(queue_history(3000, seed=9))
    assert read_parquet(p) == queue_history(3000, seed=9)
    assert pq.ParquetFile(p).metadata.num_row_groups > 5
