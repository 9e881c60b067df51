"""Running a deterministic simulator over many seeds, in worker processes.

Both simulators (``kraft/raft/sim.py``, ``broker/sim``) give a module-level
``run_seed(seed, option, record_trace) -> (seed, failure text or None)``; a seed runs
without its trace first (cheaper) and again with it when it fails, for the report.
"""

from __future__ import annotations


def _run_quiet(args) -> tuple[int, str | None]:
    run_seed, seed, option = args
    result = run_seed(seed, option, record_trace=False)
    if result[1] is not None:
        result = run_seed(seed, option, record_trace=True)
    return result


def run_seeds(run_seed, seeds, jobs: int = 1, option=None, stop_on_failure: bool = False,
              chunksize: int = 8):
    """Yield (seed, failure-or-None) for each seed, in parallel processes when jobs > 1."""
    work = ((run_seed, s, option) for s in seeds)
    if jobs <= 1:
        for item in work:
            result = _run_quiet(item)
            yield result
            if stop_on_failure and result[1] is not None:
                return
        return
    import multiprocessing

    # spawn, not fork: a worker must not inherit the caller's threads, locks or Python
    # signal handlers.  Forked from a pytest process holding a Python SIGTERM handler,
    # a worker once missed Pool.terminate()'s SIGTERM and the run hung in join().
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        for result in pool.imap_unordered(_run_quiet, work, chunksize=chunksize):
            yield result
            if stop_on_failure and result[1] is not None:
                pool.terminate()
                return
