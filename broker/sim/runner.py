"""Running many seeds of the data-plane simulation, and its command line."""

from __future__ import annotations

from broker.partition import SIM_UNSAFE_SWITCHES
from broker.sim.simulation import Simulation, SimulationFailure
from kraft import seeds as seeds_runner

USAGE = """The data-plane simulator: one partition's brokers, controller, clients, network and
disks, deterministic from one seed (``broker/sim/simulation.py``).

    python -m broker.sim --seeds 100000 --jobs 2           # many seeds, prints failures
    python -m broker.sim --seed 42 --trace                 # replay one seed with its trace
    python -m broker.sim --seeds 2000 --unsafe skip_truncation_on_divergence   # a mutation
"""

# Every mutation the simulation must catch: the simulator's own switches and the product's
# (kraft.unsafe.ack.before.replication, kraft.unsafe.follower.read.log.end).
SWITCHES = ("unsafe_ack_before_replication", "unsafe_follower_read_log_end") + SIM_UNSAFE_SWITCHES


def switch_names(names) -> frozenset[str]:
    out = set()
    for name in names:
        full = "unsafe_" + name.removeprefix("unsafe_")
        if full not in SWITCHES:
            raise SystemExit(f"unknown switch {name}; known: "
                             + ", ".join(s.removeprefix("unsafe_") for s in SWITCHES))
        out.add(full)
    return frozenset(out)


def run_seed(seed: int, unsafe=frozenset(), record_trace: bool = True) -> tuple[int, str | None]:
    """Run one seed; returns (seed, None) or (seed, failure text)."""
    try:
        Simulation(seed, unsafe, record_trace).run()
    except SimulationFailure as exc:
        return seed, str(exc)
    return seed, None


def run_seeds(seeds, jobs: int = 1, unsafe=frozenset(), stop_on_failure: bool = False):
    """Yield (seed, failure-or-None) for each seed, in worker processes when jobs > 1."""
    return seeds_runner.run_seeds(run_seed, seeds, jobs, frozenset(unsafe), stop_on_failure,
                                  chunksize=16)


def main(argv=None) -> int:
    return seeds_runner.seed_command(
        argv, prog="python -m broker.sim", description=USAGE,
        unsafe_help="enable a mutation switch: " + ", ".join(s.removeprefix("unsafe_") for s in SWITCHES),
        option=switch_names, simulation=Simulation, failure=SimulationFailure, run_seeds=run_seeds,
        summary=lambda sim: (f"{sim.events} events, converged at {sim.converged_at:.0f} ms, "
                             f"{len(sim.oracle.truth)} committed offsets, {sim.acked} writes acknowledged"))
