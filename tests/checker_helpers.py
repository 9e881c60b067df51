"""Helpers for the tests that hold the Spark checkers to the single-process ones."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from jepsen.history import Op


def as_json(result: dict) -> dict:
    """``result`` as its JSON reads back (tuples become lists, int keys strings)."""
    return json.loads(json.dumps(result))


def followed_by(ops: list[Op], more: list[Op], value_of: Callable[[Op], Any]) -> list[Op]:
    """Appends the history ``more`` to ``ops``, after their last record.

    Its indexes and times follow ``ops``'s, its client processes are 5000 higher (the
    nemesis stays), and ``value_of(op)`` gives each record's value (the caller moves it
    onto keys of its own), so the two histories stay independent.  Returns ``ops``.
    """
    base_i, base_t = len(ops), ops[-1].time + 1000
    for o in more:
        p = o.process + 5000 if isinstance(o.process, int) else o.process
        ops.append(Op(o.index + base_i, o.time + base_t, o.type, p, o.f, value_of(o), o.error))
    return ops
