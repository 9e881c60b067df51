"""Transactional histories for tests: a clean simulation, a serial model, seeded anomalies.

* :func:`txn_history` simulates concurrent transactional clients of a correct Kafka: a
  transaction takes effect atomically when it completes (its sends get the next offsets
  of their partitions, then a commit marker takes one more offset), an aborted one takes
  offsets too (its records and its abort marker are invisible), and polls read committed
  records from the consumer's position, at most ``max_poll`` per poll.  Every history it
  produces passes the txn checker with its default allowances (a poll that stops early
  makes rw cycles, which Kafka allows).
* :func:`serial_history` runs transactions one at a time, and polls read to the end of
  every partition: no anomaly at all, with nothing allowed.
* :data:`SCENARIOS` builds one small history per anomaly class, on its own keys and
  processes, and says what the checker must report for it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from jepsen.checkers.synth import Recorder
from jepsen.history import FAIL, INFO, INVOKE, OK, Op


class Log:
    """The partitions of a correct broker: per key, ``[(offset, value | None)]``."""

    def __init__(self, keys: int) -> None:
        self.entries: list[list[tuple[int, Any]]] = [[] for _ in range(keys)]

    def append(self, key: int, value: Any) -> int:
        e = self.entries[key]
        off = e[-1][0] + 1 if e else 0
        e.append((off, value))
        return off

    def commit(self, sends: list[tuple[int, Any]], visible: bool) -> list[int]:
        """Appends a transaction's records and its marker; returns the records' offsets."""
        offs = [self.append(k, v if visible else None) for k, v in sends]
        for k in sorted({k for k, _ in sends}):
            self.append(k, None)  # the commit or abort marker
        return offs

    def poll(self, position: dict[int, int], max_poll: int) -> dict[int, list]:
        """Committed records from ``position`` (entry indexes, advanced), ``max_poll`` in all."""
        out: dict[int, list] = {}
        left = max_poll
        for k in sorted(position):
            e = self.entries[k]
            i = position[k]
            while i < len(e) and left > 0:
                off, v = e[i]
                i += 1
                if v is not None:
                    out.setdefault(k, []).append([off, v])
                    left -= 1
            position[k] = i
        return out


def _mops(rng: random.Random, keys: int, next_value: list[int], max_mops: int) -> list:
    out = []
    for _ in range(rng.randint(1, max_mops)):
        if rng.random() < 0.5:
            k = rng.randrange(keys)
            out.append(["send", k, next_value[k]])
            next_value[k] += 1
        else:
            out.append(["poll"])
    return out


def _run(log: Log, mops: list, position: dict[int, int], max_poll: int,
         visible: bool = True) -> list:
    """Applies a transaction; returns its completed micro-ops."""
    sends = [(m[1], m[2]) for m in mops if m[0] == "send"]
    done = []
    for m in mops:
        done.append(["poll", log.poll(position, max_poll)] if m[0] == "poll" else m)
    offs = iter(log.commit(sends, visible))
    return [["send", m[1], [next(offs), m[2]]] if m[0] == "send" else m for m in done]


def _drain(log: Log, rec: Recorder, process: int, keys: int) -> None:
    rec.add(INVOKE, process, "assign", list(range(keys)))
    rec.add(OK, process, "assign", list(range(keys)))
    position = {k: 0 for k in range(keys)}
    while any(position[k] < len(log.entries[k]) for k in position):
        rec.add(INVOKE, process, "txn", [["poll"]])
        rec.add(OK, process, "txn", _run(log, [["poll"]], position, 1_000_000))


def txn_history(n_ops: int, keys: int = 8, processes: int = 6, seed: int = 0,
                info_rate: float = 0.01, abort_rate: float = 0.05, max_poll: int = 10,
                max_mops: int = 4) -> list[Op]:
    """A clean concurrent txn history of about ``n_ops`` records, ending with a drain."""
    rng = random.Random(seed)
    rec = Recorder(rng)
    log = Log(keys)
    next_value = [0] * keys
    pid = list(range(processes))
    position: dict[int, dict[int, int]] = {}
    inflight: dict[int, list] = {}
    while len(rec.ops) < n_ops:
        c = rng.randrange(processes)
        if c not in position:  # a fresh process assigns every key, from the start
            rec.add(INVOKE, pid[c], "assign", list(range(keys)))
            rec.add(OK, pid[c], "assign", list(range(keys)))
            position[c] = {k: 0 for k in range(keys)}
            continue
        if c not in inflight:
            inflight[c] = _mops(rng, keys, next_value, max_mops)
            rec.add(INVOKE, pid[c], "txn", inflight[c])
            continue
        mops = inflight.pop(c)
        r = rng.random()
        if r < abort_rate:
            _run(log, mops, dict(position[c]), max_poll, visible=False)
            rec.add(FAIL, pid[c], "txn", mops, "aborted")
        elif r < abort_rate + info_rate:
            _run(log, mops, dict(position[c]), max_poll, visible=rng.random() < 0.5)
            rec.add(INFO, pid[c], "txn", mops, "timeout")
            pid[c] += processes
            del position[c]
        else:
            rec.add(OK, pid[c], "txn", _run(log, mops, position[c], max_poll))
    for c, mops in inflight.items():
        rec.add(INFO, pid[c], "txn", mops, "test ended")
    _drain(log, rec, max(pid) + 1, keys)
    return rec.ops


def serial_history(txns: list[list], keys: int, processes: int = 3,
                   aborts: frozenset[int] = frozenset()) -> list[Op]:
    """Runs ``txns`` (lists of ``["send", key, value]`` / ``["poll"]``) one after another,
    round-robin over processes; transaction ``i`` aborts when ``i in aborts``.  Polls read
    to the end of every partition."""
    rec = Recorder(random.Random(0))
    log = Log(keys)
    position: dict[int, dict[int, int]] = {}
    for i, mops in enumerate(txns):
        p = i % processes
        if p not in position:
            rec.add(INVOKE, p, "assign", list(range(keys)))
            rec.add(OK, p, "assign", list(range(keys)))
            position[p] = {k: 0 for k in range(keys)}
        rec.add(INVOKE, p, "txn", mops)
        if i in aborts:
            _run(log, mops, dict(position[p]), 1_000_000, visible=False)
            rec.add(FAIL, p, "txn", mops, "aborted")
        else:
            rec.add(OK, p, "txn", _run(log, mops, position[p], 1_000_000))
    _drain(log, rec, processes, keys)
    return rec.ops


# ---------------------------------------------------------------- seeded anomalies


class Builder:
    """Hand-built txn histories: invocations and completions, 1 µs apart."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.open: dict[Any, list] = {}

    def _add(self, type_: str, p, f: str, value, error=None) -> int:
        i = len(self.ops)
        self.ops.append(Op(i, 1_000 * (i + 1), type_, p, f, value, error))
        return i

    def begin(self, p, *mops) -> int:
        """Invokes a transaction; micro-ops as completed (``["send", k, [off, v]]``)."""
        inv = [["send", m[1], m[2][1]] if m[0] == "send" else ["poll"] for m in mops]
        self.open[p] = list(mops)
        return self._add(INVOKE, p, "txn", inv)

    def end(self, p, type_: str = OK) -> None:
        mops = self.open.pop(p)
        inv = [["send", m[1], m[2][1]] if m[0] == "send" else ["poll"] for m in mops]
        self._add(type_, p, "txn", mops if type_ == OK else inv,
                  {OK: None, FAIL: "aborted"}.get(type_, "timeout"))

    def txn(self, p, *mops, type_: str = OK) -> int:
        i = self.begin(p, *mops)
        self.end(p, type_)
        return i


def send(k, off, v) -> list:
    return ["send", k, [off, v]]


def poll(**by_key) -> list:
    """``poll(k3=[(0, 30)])`` -> a poll micro-op of key 3 (keys spelled ``k<int>``)."""
    return ["poll", {int(k[1:]): [list(p) for p in v] for k, v in by_key.items()}]


def _drain_of(b: Builder, p, log: dict[int, list]) -> None:
    b.txn(p, ["poll", {k: [list(x) for x in v] for k, v in log.items()}])


def g0(b, k, p):
    """Two transactions' sends to two keys land in opposite orders."""
    b.begin(p, send(k, 0, 1), send(k + 1, 1, 2))
    b.begin(p + 1, send(k, 1, 3), send(k + 1, 0, 4))
    b.end(p)
    b.end(p + 1)
    _drain_of(b, p + 2, {k: [(0, 1), (1, 3)], k + 1: [(0, 4), (1, 2)]})
    return {"G0"}


def g1c(b, k, p):
    """Each of two transactions reads the other's write."""
    b.begin(p, send(k, 0, 1), poll(**{f"k{k + 1}": [(0, 2)]}))
    b.begin(p + 1, send(k + 1, 0, 2), poll(**{f"k{k}": [(0, 1)]}))
    b.end(p)
    b.end(p + 1)
    _drain_of(b, p + 2, {k: [(0, 1)], k + 1: [(0, 2)]})
    return {"G1c"}


def g_single(b, k, p):
    """T1 misses T2's write to k but reads T2's write to k+1."""
    b.txn(p + 3, send(k, 0, 1))
    b.begin(p, poll(**{f"k{k}": [(0, 1)], f"k{k + 1}": [(0, 2)]}))
    b.begin(p + 1, send(k, 1, 3), send(k + 1, 0, 2))
    b.end(p)
    b.end(p + 1)
    _drain_of(b, p + 2, {k: [(0, 1), (1, 3)], k + 1: [(0, 2)]})
    return {"G-single"}


def g2_item(b, k, p):
    """Write skew: each transaction misses the other's write."""
    b.txn(p + 3, send(k, 0, 1), send(k + 1, 0, 2))
    b.begin(p, poll(**{f"k{k}": [(0, 1)]}), send(k + 1, 1, 4))
    b.begin(p + 1, poll(**{f"k{k + 1}": [(0, 2)]}), send(k, 1, 3))
    b.end(p)
    b.end(p + 1)
    _drain_of(b, p + 2, {k: [(0, 1), (1, 3)], k + 1: [(0, 2), (1, 4)]})
    return {"G2-item"}


def g0_realtime(b, k, p, same_process=False):
    """A send invoked after another completed lands before it."""
    b.txn(p, send(k, 1, 1))
    b.txn(p if same_process else p + 1, send(k, 0, 2))
    _drain_of(b, p + 2, {k: [(0, 2), (1, 1)]})
    if same_process:  # the queue checker leaves one producer's order to nonmonotonic-send
        return {"G0-process", "G0-realtime", "nonmonotonic-send"}
    return {"G0-realtime", "realtime-order"}


def g1c_realtime(b, k, p, same_process=False):
    """A transaction reads a value sent by one invoked after it completed."""
    b.txn(p, poll(**{f"k{k}": [(0, 1)]}))
    b.txn(p if same_process else p + 1, send(k, 0, 1))
    _drain_of(b, p + 2, {k: [(0, 1)]})
    return {"G1c-process", "G1c-realtime"} if same_process else {"G1c-realtime"}


def g_single_realtime(b, k, p, same_process=False):
    """A poll after a completed send does not see it (a lagging consumer)."""
    b.txn(p + 3, send(k, 0, 1))
    b.txn(p, send(k, 1, 2))
    b.txn(p if same_process else p + 1, poll(**{f"k{k}": [(0, 1)]}))
    _drain_of(b, p + 2, {k: [(0, 1), (1, 2)]})
    if same_process:
        return {"G-single-process", "G-single-realtime"}
    return {"G-single-realtime"}


def g2_item_realtime(b, k, p, same_process=False):
    """Two anti-dependencies and an order: T1 -> T3 -rw-> T2 -rw-> T1."""
    b.txn(p + 3, send(k, 0, 1), send(k + 1, 0, 2))
    b.begin(p + 1, poll(**{f"k{k + 1}": [(0, 2)]}), send(k, 1, 3))
    b.txn(p, send(k + 1, 1, 4))
    b.txn(p if same_process else p + 4, poll(**{f"k{k}": [(0, 1)]}))
    b.end(p + 1)
    _drain_of(b, p + 2, {k: [(0, 1), (1, 3)], k + 1: [(0, 2), (1, 4)]})
    if same_process:
        return {"G2-item-process", "G2-item-realtime"}
    return {"G2-item-realtime"}


def g1a(b, k, p):
    """A poll sees a value of an aborted transaction."""
    b.txn(p, send(k, 0, 1), type_=FAIL)
    b.txn(p + 1, poll(**{f"k{k}": [(0, 1)]}))
    return {"G1a"}


def g1b(b, k, p):
    """A poll reads a transaction's first write to k and a later value, not its second."""
    b.txn(p, send(k, 0, 1), send(k, 1, 2))
    b.txn(p + 3, send(k, 2, 3))
    b.txn(p + 1, poll(**{f"k{k}": [(0, 1), (2, 3)]}))
    _drain_of(b, p + 2, {k: [(0, 1), (1, 2), (2, 3)]})
    return {"G1b", "int-poll-skip"}


def precommitted_read(b, k, p):
    """A transaction polls its own uncommitted send."""
    b.txn(p, send(k, 0, 1), poll(**{f"k{k}": [(0, 1)]}))
    return {"precommitted-read"}


def inconsistent_offsets(b, k, p):
    """An ok send and a poll disagree on what offset 0 holds."""
    b.txn(p, send(k, 0, 1))
    b.begin(p + 2, send(k, None, 2))
    b.txn(p + 1, poll(**{f"k{k}": [(0, 2)]}))
    b.end(p + 2, INFO)
    _drain_of(b, p + 3, {k: [(0, 1)]})
    return {"inconsistent-offsets"}


def duplicate(b, k, p):
    b.txn(p, send(k, 0, 1))
    _drain_of(b, p + 1, {k: [(0, 1), (1, 1)]})
    return {"duplicate"}


def lost_write(b, k, p):
    b.txn(p, send(k, 0, 1))
    b.txn(p + 1, send(k, 1, 2))
    _drain_of(b, p + 2, {k: [(1, 2)]})
    return {"lost-write"}


def unseen(b, k, p):
    b.txn(p, send(k, 0, 1))
    return {"unseen"}


def poll_skip(b, k, p):
    """A consumer's next transaction polls from offset 2 when it had read only offset 0
    (the sends are concurrent with the first poll, so no cycle follows)."""
    b.txn(p, send(k, 0, 1))
    b.begin(p + 3, send(k, 1, 2))
    b.begin(p + 4, send(k, 2, 3))
    b.txn(p + 1, poll(**{f"k{k}": [(0, 1)]}))
    b.end(p + 3)
    b.end(p + 4)
    b.txn(p + 1, poll(**{f"k{k}": [(2, 3)]}))
    _drain_of(b, p + 2, {k: [(0, 1), (1, 2), (2, 3)]})
    return {"poll-skip"}


def nonmonotonic_poll(b, k, p):
    """A consumer's next transaction polls offset 0 again: it missed a write it had seen,
    which is also a cycle T1 -process-> T2 -rw-> writer -wr-> T1."""
    b.txn(p, send(k, 0, 1))
    b.txn(p + 2, send(k, 1, 2))
    b.txn(p + 1, poll(**{f"k{k}": [(0, 1), (1, 2)]}))
    b.txn(p + 1, poll(**{f"k{k}": [(0, 1)]}))
    return {"nonmonotonic-poll", "G-single-process", "G-single-realtime"}


def nonmonotonic_send(b, k, p):
    b.txn(p, send(k, 1, 1))
    b.txn(p, send(k, 0, 2))
    _drain_of(b, p + 2, {k: [(0, 2), (1, 1)]})
    return {"nonmonotonic-send", "G0-process", "G0-realtime"}


def _same(f):
    def run(b, k, p):
        return f(b, k, p, same_process=True)
    run.__name__ = f.__name__.replace("realtime", "process")
    return run


#: name -> builder(b, key, process) returning the anomaly types it must produce alone.
SCENARIOS: dict[str, Callable[[Builder, int, int], set[str]]] = {
    "G0": g0, "G1c": g1c, "G-single": g_single, "G2-item": g2_item,
    "G0-process": _same(g0_realtime), "G1c-process": _same(g1c_realtime),
    "G-single-process": _same(g_single_realtime), "G2-item-process": _same(g2_item_realtime),
    "G0-realtime": g0_realtime, "G1c-realtime": g1c_realtime,
    "G-single-realtime": g_single_realtime, "G2-item-realtime": g2_item_realtime,
    "G1a": g1a, "G1b": g1b, "precommitted-read": precommitted_read,
    "inconsistent-offsets": inconsistent_offsets, "duplicate": duplicate,
    "lost-write": lost_write, "unseen": unseen, "poll-skip": poll_skip,
    "nonmonotonic-poll": nonmonotonic_poll, "nonmonotonic-send": nonmonotonic_send,
}


def scenario(name: str, key: int = 0, process: int = 0) -> tuple[list[Op], set[str]]:
    b = Builder()
    expected = SCENARIOS[name](b, key, process)
    return b.ops, expected


def all_scenarios(stride: int = 10) -> tuple[list[Op], dict[str, set[str]]]:
    """Every scenario in one history, each on its own keys and processes (sequentially)."""
    b = Builder()
    expected = {}
    for i, (name, build) in enumerate(SCENARIOS.items()):
        expected[name] = build(b, stride * i, stride * i)
    return b.ops, expected
