"""Nemeses (Jepsen's model): clients that receive ``start-X``/``stop-X`` ops and record what
they did.  Faults: kill, pause, partition, packet, clock, file, membership; ``Compose`` mixes them and
``schedule`` + ``run_schedule`` play a seeded timeline ending in a heal and a recovery wait.

    nemesis = make_nemesis(hosts, ["kill", "partition", "clock"], seed=7, oracle=oracle)
    steps = schedule(7, ["kill", "partition", "clock"], duration_s=60)
    nemesis.setup()
    try:
        await run_schedule(nemesis, steps, record=history.append)
    finally:
        nemesis.teardown()
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from jepsen.nemesis._clock import ClockFiles, ClockNemesis
from jepsen.nemesis._core import PROCESS, Compose, Nemesis, completed, op
from jepsen.nemesis._membership import MembershipNemesis
from jepsen.nemesis._faults import (FILE_FAULTS, FileNemesis, KillNemesis, PacketNemesis,
                                    PartitionNemesis, PauseNemesis)
from jepsen.nemesis._schedule import (DEFAULT_INTERVAL_S, FAULTS, RECOVER, ScheduleOptions, Step,
                                      fault_windows, options_for, run_schedule, schedule,
                                      unsupported_faults)
from jepsen.nemesis._targets import TARGET_SPECS, Oracle, select_targets

_CLASSES = {"kill": KillNemesis, "pause": PauseNemesis, "partition": PartitionNemesis,
            "packet": PacketNemesis, "clock": ClockNemesis, "file": FileNemesis,
            "membership": MembershipNemesis}


def make_nemesis(hosts, faults: Sequence[str], *, seed: int = 0,
                 oracle: Oracle | None = None) -> Compose:
    """One nemesis handling ``faults``; each part draws from its own generator derived
    from ``seed``, so target choices replay with the seed."""
    parts = []
    for fault in (f for f in FAULTS if f in set(faults)):
        parts.append(_CLASSES[fault](hosts, random.Random(f"{seed}:{fault}"), oracle))
    unknown = set(faults) - set(FAULTS)
    if unknown:
        raise ValueError(f"unknown faults {sorted(unknown)} (choose from {', '.join(FAULTS)})")
    return Compose(parts)


__all__ = ["DEFAULT_INTERVAL_S", "FAULTS", "FILE_FAULTS", "PROCESS", "RECOVER", "TARGET_SPECS",
           "ClockFiles", "ClockNemesis", "Compose", "FileNemesis", "KillNemesis", "MembershipNemesis", "Nemesis",
           "Oracle", "PacketNemesis", "PartitionNemesis", "PauseNemesis", "ScheduleOptions",
           "Step", "completed", "fault_windows", "make_nemesis", "op", "options_for",
           "run_schedule", "schedule", "select_targets", "unsupported_faults"]
