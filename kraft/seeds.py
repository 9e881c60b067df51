"""Running a deterministic simulator over many seeds, in worker processes.

Both simulators (``kraft/raft/sim.py``, ``broker/sim``) give a module-level
``run_seed(seed, option, record_trace) -> (seed, failure text or None)``; a seed runs
without its trace first (cheaper) and again with it when it fails, for the report.
"""

from __future__ import annotations

import traceback


def crash_text(exc: BaseException) -> str:
    """How a simulator reports an exception its run raised: type, message, and the line."""
    where = traceback.extract_tb(exc.__traceback__)[-1]
    return f"{type(exc).__name__}: {exc} (at {where.filename}:{where.lineno})"


def _run_quiet(args) -> tuple[int, str | None]:
    run_seed, seed, option = args
    try:
        result = run_seed(seed, option, record_trace=False)
        if result[1] is not None:
            result = run_seed(seed, option, record_trace=True)
    except Exception as exc:  # noqa: BLE001 - a seed's failure, never the pool's
        # The simulators turn a crash into a failure text themselves; this is the last
        # guard.  Raised in a pool worker, an exception that cannot be pickled back (one
        # whose __init__ takes other arguments than it passes on) hangs imap_unordered.
        return seed, (f"seed {seed}: run_seed raised {type(exc).__name__}: {exc}\n"
                      f"{''.join(traceback.format_exception(exc))}"
                      f"replay: {run_seed.__module__}.{run_seed.__qualname__}({seed}, {option!r})")
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


def seed_command(argv, *, prog: str, description: str, unsafe_help: str, option, simulation,
                 failure: type[Exception], run_seeds, summary) -> int:
    """The command line both simulators share.  ``--seed S [--trace]`` runs one seed and
    says how it went (``summary(sim)`` on success); ``--seeds N [--first F] [--jobs J]``
    runs a range and prints each failure with the command that replays it.

    ``option(names)`` turns the ``--unsafe`` names into what ``simulation(seed, option)``
    and ``run_seeds(seeds, jobs, option)`` take."""
    import argparse
    import time

    parser = argparse.ArgumentParser(prog=prog, description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=1000, help="how many seeds to run")
    parser.add_argument("--first", type=int, default=0, help="first seed of the range")
    parser.add_argument("--seed", type=int, help="run exactly this seed")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--trace", action="store_true", help="print the event trace")
    parser.add_argument("--unsafe", action="append", default=[], help=unsafe_help)
    args = parser.parse_args(argv)
    chosen = option(args.unsafe)
    if args.seed is not None:
        sim = simulation(args.seed, chosen)
        try:
            sim.run()
        except failure as exc:
            if args.trace:
                print("\n".join(exc.trace))
            print(f"FAIL seed {args.seed}: {exc.reason}")
            return 1
        if args.trace:
            print("\n".join(sim.trace))
        print(f"ok seed {args.seed}: {summary(sim)}")
        return 0
    failures = done = 0
    started = time.monotonic()
    for _, text in run_seeds(range(args.first, args.first + args.seeds), args.jobs, chosen):
        done += 1
        if text is not None:
            failures += 1
            lines = text.splitlines()
            print(f"FAIL {lines[0]}  (replay: {lines[-1].removeprefix('replay: ')})", flush=True)
    elapsed = time.monotonic() - started
    print(f"{done} seeds, {failures} failed, {elapsed:.0f} s ({done / max(elapsed, 1e-9):.0f} seeds/s)")
    return 1 if failures else 0
