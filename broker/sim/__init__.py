"""The data-plane simulator: one partition's brokers, controller, clients, network and
disks, deterministic from one seed (``broker/sim/simulation.py``).

    python -m broker.sim --seeds 100000 --jobs 2           # many seeds, prints failures
    python -m broker.sim --seed 42 --trace                 # replay one seed with its trace
    python -m broker.sim --seeds 2000 --unsafe skip_truncation_on_divergence   # a mutation
"""

from broker.sim.runner import SWITCHES, main, run_seed, run_seeds
from broker.sim.simulation import Simulation, SimulationFailure

__all__ = ["SWITCHES", "Simulation", "SimulationFailure", "main", "run_seed", "run_seeds"]
