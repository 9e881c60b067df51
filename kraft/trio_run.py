"""``run_trio(fn, *args)``: ``trio.run`` for kraft's synchronous entry points (a node's
process, kraftctl's admin client, the jepsen runner's workload phase).

Since trio 0.25 an exception that leaves a nursery always comes out wrapped in an
ExceptionGroup ("strict exception groups"); older trio wraps only when several tasks fail
at once.  kraft supports both, so it asks for strict groups on every version: the code
behaves, and is tested, the same way everywhere.

Errors that synchronous callers act on cross nurseries on their way out: a kraftctl
command's ``AdminError``, the ``KeyboardInterrupt`` of a Ctrl-C, the ``SystemExit`` a
SIGTERM handler raises.  A group that holds exactly one exception (however deeply nested)
therefore leaves ``run_trio`` as that exception, so that ``except AdminError:`` and
SystemExit's exit status work; several exceptions at once stay a group.

Inside async code nothing is unwrapped: code there must not catch an error by type across
a nursery boundary (``except X:`` around ``async with trio.open_nursery()``).  It catches
the error in the task that raised it, or uses ``except* X:``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio

T = TypeVar("T")


def run_trio(async_fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    try:
        return trio.run(async_fn, *args, strict_exception_groups=True)
    except BaseExceptionGroup as group:
        sole = sole_exception(group)
        if sole is None:
            raise
    # Raised outside the handler, so the group does not become its __context__.
    raise sole


def sole_exception(error: BaseException) -> BaseException | None:
    """The one exception inside ``error`` (itself when it is no group); None when there are
    several."""
    while isinstance(error, BaseExceptionGroup):
        if len(error.exceptions) != 1:
            return None
        error = error.exceptions[0]
    return error
