"""The Python worker daemon of the checkers' Spark sessions: pyspark's own daemon, started
with the modules every check's workers use already imported (``spark.python.daemon.module``).

Spark starts one daemon per executor, and the daemon forks a worker for each task that
finds no idle one.  pyspark's daemon imports nothing heavy before it forks, because pandas
and pyarrow start threads at import, and a fork copies only the thread that calls it.  So
each new worker of a check imported pyarrow, pandas, numpy and the checker modules itself:
about 0.8 s of CPU per worker, paid on the first check of a session, on both cores at once.

Here they are imported once, before any fork, with the two threads they would start
turned off by their own settings (``spark.executorEnv`` in ``jepsen.checkers.spark``):
OpenBLAS's pool (``OPENBLAS_NUM_THREADS=1``; the checkers make no BLAS calls) and the
background thread of the jemalloc that pyarrow bundles
(``JE_ARROW_MALLOC_CONF=background_thread:false``).  Without both settings nothing is
imported before the fork (pyspark's own behaviour).  The import stops at the first module
after which a thread runs all the same, and the daemon says so on stderr: the modules that
started threads so far (OpenBLAS, jemalloc) register fork handlers, but an unknown one may
not, so nothing more is loaded.
"""

from __future__ import annotations

import os
import sys


def _threads() -> int:
    """OS threads of this process (``threading`` does not see those that C code starts)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:  # not Linux: cannot tell, so import nothing before the fork
        return -1


SETTINGS = {"OPENBLAS_NUM_THREADS": "1", "JE_ARROW_MALLOC_CONF": "background_thread:false"}
MODULES = ("numpy", "pyarrow", "pyarrow.compute", "pandas", "pyspark.worker",
           "jepsen.checkers.queue_rows", "jepsen.checkers.queue_arrays", "jepsen.checkers.linear")


def preload() -> list[str]:
    """Import the workers' modules while this process has one thread; the names imported."""
    if any(os.environ.get(k) != v for k, v in SETTINGS.items()) or _threads() != 1:
        return []
    done = []
    for name in MODULES:
        __import__(name)
        done.append(name)
        if _threads() != 1:
            print(f"jepsen spark daemon: importing {name} started a thread; the workers import "
                  "the rest after the fork", file=sys.stderr)
            break
    return done


if __name__ == "__main__":
    preload()
    from pyspark import daemon

    daemon.manager()
