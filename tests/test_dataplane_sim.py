"""The deterministic data-plane simulator (broker.sim): seeds, replay, mutation checks."""

import pytest

from broker.partition import SIM_UNSAFE_SWITCHES, Partition
from broker.partition_state import PartitionState
from broker.producer_state import ProducerStateManager
from broker.sim import SWITCHES, Simulation, SimulationFailure, main, run_seeds
from broker.sim.disk import MemLog
from kraft.records.batch import build_batch

DEFAULT_SEEDS = 2000
JOBS = 2


def failures(seeds, unsafe=frozenset()):
    return [(s, f) for s, f in run_seeds(seeds, JOBS, unsafe) if f is not None]


def test_default_seed_range_passes():
    """Every invariant after every event, and convergence after healing, for 2,000 seeds."""
    found = failures(range(DEFAULT_SEEDS))
    assert not found, found[0][1]


@pytest.mark.slow
def test_many_seeds_pass():
    found = failures(range(DEFAULT_SEEDS, DEFAULT_SEEDS + 50_000))
    assert not found, found[0][1]


# Seeds outside the default range that found product bugs, each a regression test now.
FOUND = {
    # DeleteRecords left a follower's log start above a truncation point: the follower's
    # state kept the old start, its HW above its log end.
    30460: "a truncation below the log start",
    # A fetch sent by a replica just before it lost power reached the leader after the
    # replica registered again: the leader proposed its successor, which held less, into
    # the ISR, and a later leader lacked committed records.  The fetch now carries the
    # broker epoch and AlterPartition names it (KIP-903); the controller refuses it.
    14494: "a stale fetch's ISR expansion",
}


@pytest.mark.parametrize("seed", sorted(FOUND))
def test_seeds_that_found_bugs_pass(seed):
    Simulation(seed).run()


def test_a_seed_replays_exactly():
    first, second = Simulation(1234).run(), Simulation(1234).run()
    assert first.trace == second.trace and first.events == second.events
    assert first.oracle.truth == second.oracle.truth
    assert Simulation(1235).run().trace != first.trace


def test_a_run_commits_acknowledges_and_converges():
    sim = Simulation(7).run()
    assert sim.converged_at is not None and sim.acked > 0 and sim.oracle.truth
    leader = sim.brokers[sim.controller.reg.leader]
    for b in sim.brokers.values():
        assert b.disk.log.log_end_offset == leader.disk.log.log_end_offset


def test_faults_happen_in_the_default_range():
    """The seeds exercise what the invariants are about: power losses, truncations of
    divergent tails, leader changes, ISR shrinks and expansions, producers giving up."""
    seen = {"power_loss": 0, "diverging": 0, "becomes leader": 0, "(shrink)": 0, "(expand)": 0,
            "gives up": 0}
    for seed in range(40):
        trace = "\n".join(Simulation(seed).run().trace)
        for word in seen:
            seen[word] += trace.count(word)
    assert all(seen.values()), seen


# Each switch removes one rule the data plane's safety depends on; the simulation must
# notice within the default seed count.  Measured over seeds 0..299: acks=all answered
# before the ISR has it fails 295, the HW from any one follower 231, no truncation on
# divergence 108, no producer dedup 189, a follower serving consumers past its HW 228; each
# is caught within the first seeds.
@pytest.mark.parametrize("switch", sorted(SWITCHES))
def test_the_simulation_catches_an_unsafe_core(switch):
    for seed, failure in run_seeds(range(DEFAULT_SEEDS), 1, {switch}, stop_on_failure=True):
        if failure is not None:
            name = switch.removeprefix("unsafe_")
            assert f"replay: python -m broker.sim --seed {seed} --unsafe {name} --trace" in failure
            return
    pytest.fail(f"{switch} survived {DEFAULT_SEEDS} seeds")


def test_a_replay_command_reproduces_the_failure(capsys):
    seed, failure = next((s, f) for s, f in run_seeds(range(200), 1, {"unsafe_no_producer_dedup"},
                                                      stop_on_failure=True) if f is not None)
    command = failure.splitlines()[-1].removeprefix("replay: python -m broker.sim ").split()
    assert main(command) == 1
    out = capsys.readouterr().out
    assert f"FAIL seed {seed}: {failure.splitlines()[0].split(': ', 1)[1]}" in out
    assert "params" in out  # --trace printed the events


def test_failure_carries_seed_and_trace():
    with pytest.raises(SimulationFailure) as info:
        for seed in range(50):
            Simulation(seed, {"unsafe_ack_before_replication"}).run()
    exc = info.value
    assert exc.trace and "params" in exc.trace[0]
    assert str(exc).startswith(f"seed {exc.seed}:")


def test_cli_runs_seeds_and_names_failures(capsys):
    assert main(["--seeds", "3", "--jobs", "1"]) == 0
    assert "3 seeds, 0 failed" in capsys.readouterr().out
    assert main(["--seed", "3"]) == 0
    assert "ok seed 3" in capsys.readouterr().out
    assert main(["--seeds", "20", "--unsafe", "ack_before_replication"]) == 1
    assert "FAIL seed" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--seeds", "1", "--unsafe", "no_such_switch"])


# ---------------------------------------------------------------- the switches stay off


def test_unsafe_switches_are_off_by_default():
    state = PartitionState(1)
    assert not any(getattr(state, name) for name in dir(state) if name.startswith("unsafe_"))
    assert not ProducerStateManager().unsafe_no_dedup
    part = Partition("t", 0, None, MemLog(), 1, epoch_checkpoint=_NoCheckpoint())
    assert not part.producers.unsafe_no_dedup and not part.unsafe_follower_read_log_end
    assert not any(getattr(part.state, name) for name in dir(part.state) if name.startswith("unsafe_"))
    with pytest.raises(ValueError):
        Partition("t", 0, None, MemLog(), 1, epoch_checkpoint=_NoCheckpoint(),
                  sim_unsafe=frozenset({"unsafe_anything"}))


def test_no_broker_code_passes_the_simulator_switches():
    """Only broker/sim reaches ``sim_unsafe``: the replica manager builds partitions
    without it."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    users = sorted(str(p.relative_to(root)) for top in ("broker", "kraft", "metadata", "cli", "jepsen", "tests")
                   for p in (root / top).rglob("*.py") if "sim_unsafe" in p.read_text())
    assert users == ["broker/partition.py", "broker/sim/simulation.py", "tests/test_dataplane_sim.py"]
    assert set(SIM_UNSAFE_SWITCHES) < set(SWITCHES)


class _NoCheckpoint:
    def read(self):
        from broker.leader_epoch_cache import LeaderEpochCache

        return LeaderEpochCache()

    def write(self, cache, *, sync, grown=False):
        pass


# ---------------------------------------------------------------- the simulated disk


def _batch(write_id: int, count: int = 1) -> bytes:
    return build_batch([(None, b"v")] * count, timestamp=write_id)


def test_memlog_power_loss_keeps_the_flushed_prefix_and_whole_batches():
    from random import Random

    log = MemLog()
    for i in range(3):
        log.append(_batch(i, 2), assign_offsets=True, leader_epoch=1)
    log.flush()
    for i in range(3, 8):
        log.append(_batch(i), assign_offsets=True, leader_epoch=1)
    ends = set()
    for seed in range(30):
        copy = MemLog()
        copy.batches, copy.synced = list(log.batches), log.synced
        copy.power_loss(Random(seed))
        assert 6 <= copy.log_end_offset <= 11 and copy.synced == len(copy.batches)
        ends.add(copy.log_end_offset)
    assert len(ends) > 2


def test_memlog_truncation_is_durable_and_checks_follower_offsets():
    from kraft.log.errors import UnexpectedAppendOffsetError

    log = MemLog()
    info = log.append(_batch(1, 3), assign_offsets=True, leader_epoch=2)
    assert (info.first_offset, info.last_offset) == (0, 2)
    log.append(_batch(2), assign_offsets=True, leader_epoch=2)
    log.truncate_to(3)
    assert log.log_end_offset == 3 and log.synced == 0
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append(bytes(log.read(0)[0]), assign_offsets=False)
    assert [h.partition_leader_epoch for h, _ in log.iter_batches()] == [2]
