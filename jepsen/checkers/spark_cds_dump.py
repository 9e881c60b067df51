"""The child process of ``jepsen.checkers.spark_cds.build``: a local session whose JVM dumps
the classes it loaded into a class-data-sharing archive when it exits.  Apart from
``spark_cds`` so that ``spark`` (which maps archives) and this (which runs checks) do not
import each other."""

from __future__ import annotations

import os
import sys
import tempfile

from jepsen.checkers import synth
from jepsen.checkers.spark import spark_check_linearizable, spark_check_queue, spark_session
from jepsen.checkers.spark_cds import QUIET
from jepsen.history import write_parquet


def dump(tmp: str, jars: list[str]) -> None:
    """A session whose JVM dumps its classes to ``tmp`` when it exits, a few checks, then
    the JVM's exit awaited (it leaves when its stdin closes, and writes the archive on
    the way out)."""
    with tempfile.TemporaryDirectory(prefix="jepsen-cds-") as d:
        spark = spark_session("local[2]", log_dir=d, jars=jars or None,
                              java_options=f"-XX:ArchiveClassesAtExit={tmp} {QUIET}")
        queue = os.path.join(d, "queue.parquet")
        register = os.path.join(d, "register.parquet")
        write_parquet(synth.queue_history(20_000, partitions=4), queue)
        write_parquet(synth.register_history(5_000, keys=20), register)
        for _ in range(2):  # the second pass loads what only warm paths touch
            spark_check_queue(spark, queue)
            spark_check_linearizable(spark, register)
        gateway = spark.sparkContext._gateway
        spark.stop()
        proc = gateway.proc
        proc.stdin.close()
        proc.wait(timeout=300)


if __name__ == "__main__":
    dump(sys.argv[1], sys.argv[2:])
