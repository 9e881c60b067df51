"""Seeded synthetic histories of a correct system, for tests and benchmarks.

Both generators simulate concurrent clients against an in-memory, linearizable system:
an operation takes effect at its completion, so every history they produce is clean
(queue: after the final drain, no anomaly; register: linearizable).  Indefinite (info)
operations take effect or not at random, as in a real run.
"""

from __future__ import annotations

import random
from array import array
from collections.abc import Iterator
from typing import Any

from jepsen.history import FAIL, INFO, INVOKE, NEMESIS, OK, Op

_TICK_NS = 1_000_000


class Recorder:
    """Numbers and times records (each a random 1 ns..2 ms after the last); ``ops`` holds
    those not yet taken by ``drain``."""

    def __init__(self, rng: random.Random) -> None:
        self.ops: list[Op] = []
        self.n = 0
        self.now = 0
        self.rng = rng

    def add(self, type_: str, process: Any, f: str, value: Any, error: str | None = None):
        self.now += self.rng.randint(1, 2 * _TICK_NS)
        self.ops.append(Op(self.n, self.now, type_, process, f, value, error))
        self.n += 1

    def drain(self) -> list[Op]:
        out, self.ops = self.ops, []
        return out


def queue_history(n_ops: int, partitions: int = 8, producers: int = 6, consumers: int = 4,
                  seed: int = 0, info_rate: float = 0.01, fail_rate: float = 0.01,
                  max_poll: int = 10, nemesis_every: int = 5000) -> list[Op]:
    """A clean queue history of about ``n_ops`` records (sends, polls, a final drain)."""
    out: list[Op] = []
    for chunk in iter_queue_history(n_ops, partitions, producers, consumers, seed, info_rate,
                                    fail_rate, max_poll, nemesis_every):
        out.extend(chunk)
    return out


def iter_queue_history(n_ops: int, partitions: int = 8, producers: int = 6,
                       consumers: int = 4, seed: int = 0, info_rate: float = 0.01,
                       fail_rate: float = 0.01, max_poll: int = 10,
                       nemesis_every: int = 5000, chunk: int = 100_000) -> Iterator[list[Op]]:
    """``queue_history`` in chunks of about ``chunk`` records, for histories too large to
    hold: only the partitions' logs (machine integers) stay in memory."""
    rng = random.Random(seed)
    rec = Recorder(rng)
    logs = [array("q") for _ in range(partitions)]
    nproc = producers + consumers
    pid = list(range(nproc))  # current process id per client slot
    inflight: dict[int, tuple] = {}
    pos: dict[int, dict[int, int]] = {}
    next_value = 0
    for c in range(producers, nproc):
        keys = [k for k in range(partitions) if k % consumers == c - producers]
        rec.add(INVOKE, pid[c], "assign", keys)
        rec.add(OK, pid[c], "assign", keys)
        pos[c] = {k: 0 for k in keys}
    nemesis_on = False
    while rec.n < n_ops:
        if len(rec.ops) >= chunk:
            yield rec.drain()
        if nemesis_every and rec.n % nemesis_every == 0:
            f = "stop-kill" if nemesis_on else "start-kill"
            rec.add(INVOKE, NEMESIS, f, None)
            rec.add(INFO, NEMESIS, f, ["n1"])
            nemesis_on = not nemesis_on
        c = rng.randrange(nproc)
        if c not in inflight:
            if c < producers:
                key = rng.randrange(partitions)
                inflight[c] = ("send", key, next_value)
                rec.add(INVOKE, pid[c], "send", [key, next_value])
                next_value += 1
            else:
                inflight[c] = ("poll",)
                rec.add(INVOKE, pid[c], "poll", None)
            continue
        op = inflight.pop(c)
        if op[0] == "send":
            _, key, value = op
            r = rng.random()
            if r < fail_rate:
                rec.add(FAIL, pid[c], "send", [key, value], "not-leader")
            elif r < fail_rate + info_rate:
                if rng.random() < 0.5:
                    logs[key].append(value)
                rec.add(INFO, pid[c], "send", [key, value], "timeout")
                pid[c] += nproc
            else:
                logs[key].append(value)
                rec.add(OK, pid[c], "send", [key, [len(logs[key]) - 1, value]])
        else:
            rec.add(OK, pid[c], "poll", _poll(logs, pos[c], max_poll))
    for c in range(producers, nproc):  # the final drain
        if c in inflight:
            inflight.pop(c)
            rec.add(OK, pid[c], "poll", _poll(logs, pos[c], max_poll))
        while any(pos[c][k] < len(logs[k]) for k in pos[c]):
            rec.add(INVOKE, pid[c], "poll", None)
            rec.add(OK, pid[c], "poll", _poll(logs, pos[c], 10 * max_poll))
    for c, op in inflight.items():  # producers cut off by the end of the test
        if op[0] == "send":
            rec.add(INFO, pid[c], "send", [op[1], op[2]], "test ended")
    yield rec.drain()


def _poll(logs, positions: dict[int, int], max_poll: int) -> dict[int, list]:
    out = {}
    for k, p in positions.items():
        got = logs[k][p:p + max_poll]
        if got:
            out[k] = [[p + i, v] for i, v in enumerate(got)]
            positions[k] = p + len(got)
    return out


def register_history(n_ops: int, keys: int = 100, processes: int = 10,
                     per_key_group: int = 5, seed: int = 0, info_rate: float = 0.02,
                     values: int = 5) -> list[Op]:
    """A linearizable cas-register history of about ``n_ops`` records over ``keys`` keys.

    Processes work in groups of ``per_key_group`` on one key at a time (as Jepsen's
    independent generator does), so operations on a key overlap.
    """
    rng = random.Random(seed)
    rec = Recorder(rng)
    state: dict[int, Any] = {}
    pid = list(range(processes))
    groups = max(1, processes // per_key_group)
    ops_per_key = max(2, n_ops // max(1, keys) // 2)
    group_key = list(range(groups))
    group_done = [0] * groups
    next_key = groups
    inflight: dict[int, tuple] = {}
    while len(rec.ops) < n_ops:
        c = rng.randrange(processes)
        g = min(c // per_key_group, groups - 1)
        if c not in inflight:
            if group_done[g] >= ops_per_key:
                if any(cc // per_key_group == g or (g == groups - 1 and cc >= groups *
                       per_key_group) for cc in inflight):
                    continue  # let the group's operations finish before moving on
                group_key[g] = next_key % keys
                next_key += 1
                group_done[g] = 0
            key = group_key[g]
            group_done[g] += 1
            f = rng.choice(("read", "write", "cas"))
            if f == "read":
                arg = None
            elif f == "write":
                arg = rng.randrange(values)
            else:
                arg = [rng.randrange(values), rng.randrange(values)]
            inflight[c] = (f, key, arg)
            rec.add(INVOKE, pid[c], f, [key, arg])
            continue
        f, key, arg = inflight.pop(c)
        cur = state.get(key)
        if rng.random() < info_rate and f != "read":
            if rng.random() < 0.5:
                _apply(state, f, key, arg)
            rec.add(INFO, pid[c], f, [key, arg], "timeout")
            pid[c] += processes
        elif f == "read":
            rec.add(OK, pid[c], f, [key, cur])
        elif f == "write":
            state[key] = arg
            rec.add(OK, pid[c], f, [key, arg])
        elif cur == arg[0]:
            state[key] = arg[1]
            rec.add(OK, pid[c], f, [key, arg])
        else:
            rec.add(FAIL, pid[c], f, [key, arg])
    return rec.ops


def _apply(state, f, key, arg):
    if f == "write":
        state[key] = arg
    elif f == "cas" and state.get(key) == arg[0]:
        state[key] = arg[1]
