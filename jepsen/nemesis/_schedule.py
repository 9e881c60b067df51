"""Fault schedules: a seeded timeline of nemesis ops, a final heal, and a recovery wait.

A schedule has two phases.

1. **Coverage**: every enabled fault is started once and held for at least
   ``min_hold_s`` before it is stopped, one fault after the other in ``COVERAGE_ORDER``,
   so a short run still exercises every fault the user asked for, and each long enough to
   matter (a partition healed before the controller fenced anyone tests nothing).  The
   partition comes first, while the cluster is whole, and its first spec is ``leader``
   (when allowed): the node leading a partition the workload writes to is cut off from
   the other nodes, so writes it acknowledged alone are lost unless acks really wait for
   replication.  A hold is never longer than ``2 * interval_s`` (the mix's longest gap),
   and when the run is too short for every fault, the holds shrink to fit
   (``duration_s / faults`` each); no fault is ever dropped.
2. **Mix**: the rest of the run mixes flip-flops as Jepsen's combined nemesis does: every
   step picks one of the enabled faults at random; if that fault is off it is started
   with a random spec, if it is on it is stopped, so different faults can overlap.  Steps
   are ``interval_s`` apart on average (uniform in [0, 2 * interval_s]).

The schedule is a pure function of its arguments and ``random.Random(seed)``: the same
seed gives the same ops at the same times.  It ends with a stop op for every enabled
fault (the final heal) and a ``recover`` step, a wait that gives the cluster time to
converge before the final reads.

``run_schedule`` plays a schedule against a nemesis under trio, recording each invocation
and completion through a callback.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import trio

from jepsen.net import PARTITION_SPECS
from jepsen.nemesis._core import Nemesis, completed, op
from jepsen.nemesis._faults import FILE_FAULTS

DEFAULT_INTERVAL_S = 10.0
FAULTS = ("kill", "pause", "partition", "packet", "clock", "file", "membership")
RECOVER = "recover"
# The final heal: undo pauses, clocks and the network before restarting crashed nodes.
FINAL_ORDER = ("pause", "clock", "packet", "partition", "kill", "file", "membership")
# The coverage phase: faults that aim at a leader need a whole cluster to find it, so
# they go before the destructive ones (a kill of every node leaves no leader to aim at).
COVERAGE_ORDER = ("partition", "membership", "pause", "packet", "clock", "kill", "file")

DEFAULT_TARGETS = ("one", "minority", "majority", "all", "controller", "primaries")
DEFAULT_PACKET_BEHAVIORS = (
    {"delay_ms": 50, "jitter_ms": 10},
    {"loss": 20},
    {"duplicate": 10},
    {"delay_ms": 20, "jitter_ms": 5, "reorder": 25},
)
LOSS_ONLY_BEHAVIORS = ({"loss": 10}, {"loss": 30})


@dataclass(frozen=True)
class Step:
    at_s: float
    op: dict


@dataclass
class ScheduleOptions:
    """What may happen.  Specs are drawn uniformly from each tuple."""

    interval_s: float = DEFAULT_INTERVAL_S
    recovery_s: float = 10.0
    #: The shortest hold of each fault in the coverage phase (None: ``interval_s``).  The
    #: runner sets it from the cluster's timeouts: long enough to fence a cut-off leader.
    min_hold_s: float | None = None
    kill_targets: Sequence = DEFAULT_TARGETS
    pause_targets: Sequence = DEFAULT_TARGETS
    partition_specs: Sequence[str] = PARTITION_SPECS
    packet_targets: Sequence = ("one", "minority", "all")
    packet_behaviors: Sequence[dict] = DEFAULT_PACKET_BEHAVIORS
    clock_targets: Sequence = ("one", "minority", "all")
    clock_max_ms: int = 120_000
    strobe_max_ms: int = 1_000
    file_faults: Sequence[str] = FILE_FAULTS
    membership_counts: Sequence = (1, 2, "all")


def _start_value(fault: str, rng: random.Random, o: ScheduleOptions, first: bool = False):
    if fault == "kill":
        return rng.choice(list(o.kill_targets))
    if fault == "pause":
        return rng.choice(list(o.pause_targets))
    if fault == "partition":
        if first and "leader" in o.partition_specs:
            return "leader"
        return rng.choice(list(o.partition_specs))
    if fault == "packet":
        return {"targets": rng.choice(list(o.packet_targets)),
                "behavior": dict(rng.choice(list(o.packet_behaviors)))}
    if fault == "clock":
        targets = rng.choice(list(o.clock_targets))
        if rng.random() < 0.5:
            return {"mode": "bump", "targets": targets,
                    "delta_ms": rng.randint(-o.clock_max_ms, o.clock_max_ms)}
        return {"mode": "strobe", "targets": targets,
                "delta_ms": rng.randint(1, max(1, o.strobe_max_ms)),
                "period_ms": rng.randint(10, 1000),
                "duration_s": round(rng.uniform(0.5, max(0.5, o.interval_s)), 3)}
    if fault == "file":
        return {"fault": rng.choice(list(o.file_faults)), "targets": "one"}
    if fault == "membership":
        return rng.choice(list(o.membership_counts))
    raise ValueError(f"unknown fault {fault!r} (one of {', '.join(FAULTS)})")


def schedule(seed: int, faults: Sequence[str], duration_s: float,
             options: ScheduleOptions | None = None) -> list[Step]:
    """The seeded timeline for ``duration_s`` of faults, then the final heal and recovery.

    Raises:
        ValueError: an unknown fault name.
    """
    o = options or ScheduleOptions()
    unknown = set(faults) - set(FAULTS)
    if unknown:
        raise ValueError(f"unknown faults {sorted(unknown)} (choose from {', '.join(FAULTS)})")
    rng = random.Random(seed)
    kinds = [f for f in FAULTS if f in set(faults)]  # a stable order, whatever the caller's
    steps, t = _coverage(rng, kinds, duration_s, o)
    active: set[str] = set()
    t += rng.uniform(0, 2 * o.interval_s)
    while kinds and t < duration_s:
        fault = rng.choice(kinds)
        if fault in active:
            active.discard(fault)
            steps.append(Step(round(t, 3), op(f"stop-{fault}")))
        else:
            active.add(fault)
            steps.append(Step(round(t, 3), op(f"start-{fault}", _start_value(fault, rng, o))))
        t += rng.uniform(0, 2 * o.interval_s)
    end = round(max(duration_s, steps[-1].at_s if steps else 0.0), 3)
    steps += [Step(end, op(f"stop-{fault}")) for fault in FINAL_ORDER if fault in kinds]
    steps.append(Step(end, op(RECOVER, o.recovery_s)))
    return steps


def _coverage(rng: random.Random, kinds: Sequence[str], duration_s: float,
              o: ScheduleOptions) -> tuple[list[Step], float]:
    """Phase 1: each fault of ``kinds`` started and stopped once, in ``COVERAGE_ORDER``;
    returns the steps and the time the last one stopped."""
    if not kinds:
        return [], 0.0
    order = [f for f in COVERAGE_ORDER if f in kinds]
    hold = o.interval_s if o.min_hold_s is None else o.min_hold_s
    # Never longer than the mix's longest gap, nor than the run has room for.
    hold = min(hold, 2 * o.interval_s, duration_s / len(order))
    # Spare time per fault, spent at random on a later start and a longer hold.
    spare = min((duration_s - hold * len(order)) / len(order) / 2, o.interval_s)
    steps: list[Step] = []
    t = 0.0
    for fault in order:
        t += rng.uniform(0, spare)
        steps.append(Step(round(t, 3), op(f"start-{fault}", _start_value(fault, rng, o, True))))
        t += hold + rng.uniform(0, spare)
        steps.append(Step(round(t, 3), op(f"stop-{fault}")))
    return steps, t


def options_for(hosts, **overrides) -> ScheduleOptions:
    """Options limited to what ``hosts`` can do (loss-only packet faults without netem)."""
    o = ScheduleOptions(**overrides)
    if "packet_behaviors" not in overrides and "packet" not in hosts.capabilities:
        o.packet_behaviors = LOSS_ONLY_BEHAVIORS
    return o


def unsupported_faults(hosts, wanted: Sequence[str]) -> dict[str, str]:
    """The faults of ``wanted`` that ``hosts`` cannot enforce, each with the reason.  A run
    must refuse to start when this is not empty: a fault is never silently left out."""
    return hosts.unsupported(wanted)


async def run_schedule(nemesis: Nemesis, steps: Sequence[Step],
                       record: Callable[[dict], None]) -> None:
    """Play ``steps`` (times relative to now), recording each invocation and completion.

    A nemesis error is recorded as the completion's ``error`` and the schedule goes on, so
    the final heal always runs.  ``recover`` steps just wait.
    """
    t0 = trio.current_time()
    for step in steps:
        await trio.sleep_until(t0 + step.at_s)
        if step.op["f"] == RECOVER:
            record(dict(step.op))
            await trio.sleep(float(step.op["value"] or 0))
            record(completed(step.op, step.op["value"]))
            continue
        record(dict(step.op))
        try:
            done = await trio.to_thread.run_sync(nemesis.invoke, dict(step.op))
        except Exception as exc:  # noqa: BLE001 - a failed fault is data, not a crash
            done = dict(completed(step.op, None), error=f"{type(exc).__name__}: {exc}")
        record(done)


def fault_windows(steps: Sequence[Step]) -> list[tuple[str, float, float]]:
    """(fault, start_s, stop_s) intervals of a schedule, for shading plots."""
    open_at: dict[str, float] = {}
    windows = []
    for step in steps:
        f = step.op["f"]
        if f.startswith("start-"):
            open_at.setdefault(f[6:], step.at_s)
        elif f.startswith("stop-") and f[5:] in open_at:
            windows.append((f[5:], open_at.pop(f[5:]), step.at_s))
    windows += [(f, t, math.inf) for f, t in open_at.items()]
    return sorted(windows, key=lambda w: (w[1], w[0]))
