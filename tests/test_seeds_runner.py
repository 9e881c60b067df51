"""kraft.seeds: a seed whose run raises (even an exception that cannot be pickled back from
a worker process) is reported as that seed's failure; the other seeds still run."""

from __future__ import annotations

import signal

import pytest

from kraft.seeds import run_seeds


class Unpicklable(Exception):
    """Like the Raft core's NotLeaderError once was: its __init__ takes an argument that
    ``args`` does not carry, so unpickling it in the parent raises."""

    def __init__(self, leader: int, epoch: int):
        super().__init__(f"not the leader; the leader is {leader} in epoch {epoch}")


def crashing_run_seed(seed: int, option, record_trace: bool = False):
    if seed % 3 == 1:
        raise Unpicklable(seed, 7)
    return seed, None


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_raising_seed_is_a_failure_not_a_hang(jobs):
    def hung(signum, frame):
        raise TimeoutError("run_seeds hung: a worker's exception never came back")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        got = dict(run_seeds(crashing_run_seed, range(9), jobs=jobs, chunksize=2))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert sorted(got) == list(range(9))
    failed = sorted(s for s, text in got.items() if text is not None)
    assert failed == [1, 4, 7]
    text = got[4]
    assert text.startswith("seed 4: run_seed raised Unpicklable: not the leader; the leader is 4 in epoch 7")
    assert text.splitlines()[-1] == f"replay: {__name__}.crashing_run_seed(4, None)"
