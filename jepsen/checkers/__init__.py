"""Checkers for Jepsen histories, in plain Python and on Spark.

Entry points:

* ``check_queue(history)`` -- Jepsen's Kafka-workload anomalies (``queue``).
* ``check_linearizable(history, model)`` -- WGL search per key (``linear``).
* ``check_txn(history)`` -- transactions: Jepsen's Kafka-transaction anomalies and Elle's
  cycles (``txn``; on Spark ``txn_spark.spark_check_txn``).
* ``check(source, spark=...)`` / ``check_store(run_dir, spark=...)`` -- pick the checkers
  a history needs, run them in this process or on Spark, and build results.json.
* ``spark_session(master)`` -- a quiet SparkSession (``jepsen.checkers.spark``).
* ``render_html(results)`` -- an HTML fragment summarising results.

results.json::

    {"valid": true | false | "unknown",
     "engine": "python" | "spark", "records": n, "elapsed-s": s, "history": dir,
     "checkers": {
       "queue": {"valid", "anomaly-types", "bad-anomaly-types", "sub-via", "partitions",
                 "anomalies": {type: {"count", "fatal", "examples": [
                     {"key", ...details (offset, value, offsets, delta, ...),
                      "ops": [op-ref, ...]}]}},
                 "unseen-series": {"t0-ns", "bucket-ns", "series": [{"bucket", "time-ns",
                                                                      "unseen"}]},
                 "realtime-lag": {"worst": {"key", "lag-ns", "value", "ops"},
                                  "mean-ns", "sends-seen"}},
       "txn": {the queue fields, "graph": {"nodes", "edges": {type: n}, "sccs"};
               a cycle anomaly: {"cycle": [invoke-index, ...], "steps": [{"from", "to",
               "type", "key", "value", "value'"}], "ops": [op-ref, ...]}},
       "linearizable": {"valid", "model", "keys", "ops", "steps", "unknown-count",
                        "unknown-keys", "failures": {"count", "examples": [
                            {"key", "valid", "ops", "steps", "op": op-ref,
                             "window": [op-ref, ...], "final-states": [...],
                             "prefix-ops"}]}}},
     "stats": {"by-f": {f: {"ok", "fail", "info"}},
               "latency-ns": {f: {"0.5", "0.9", "0.99", "1.0"}},
               "throughput": {"t0-ns", "bucket-ns", "series": [{"bucket", "ok", ...}]}}}

An op-ref is ``{"process", "f", "type", "invoke-index", "index", "invoke-time", "time",
"value"}``: the operation's invocation and completion positions and times.
"""

from jepsen.checkers._common import UNKNOWN, merge_valid
from jepsen.checkers.linear import MODELS, check_linearizable
from jepsen.checkers.queue import ANOMALIES, check_queue
from jepsen.checkers.report import check, check_store, render_html, write_results
from jepsen.checkers.txn import check_txn


def spark_session(*args, **kwargs):
    """A quiet SparkSession; see ``jepsen.checkers.spark.spark_session``."""
    from jepsen.checkers.spark import spark_session as make

    return make(*args, **kwargs)


__all__ = [
    "ANOMALIES",
    "MODELS",
    "UNKNOWN",
    "check",
    "check_linearizable",
    "check_queue",
    "check_txn",
    "check_store",
    "merge_valid",
    "render_html",
    "spark_session",
    "write_results",
]
