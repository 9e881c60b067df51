"""The nemesis protocol, op helpers and composition.

As in Jepsen, a nemesis is a client that receives operations: ``invoke(op)`` takes an
op such as ``{"type": "invoke", "process": "nemesis", "f": "start-partition", "value":
"majority"}``, acts, and returns the completion, of type ``info`` (a fault neither
succeeds nor fails), whose ``value`` records what it did (which nodes, which grudge).
The history (``jepsen.history``) records both, so the nemesis's records alternate
invoke / completion like any process's; the dicts carry exactly the ``Op`` fields except
``index`` and ``time``, which the recorder adds.  ``invoke`` is synchronous;
trio code calls it through ``trio.to_thread.run_sync`` (``run_schedule`` does).
"""

from __future__ import annotations

import random
from collections.abc import Iterable

PROCESS = "nemesis"


def op(f: str, value=None) -> dict:
    """A nemesis invocation."""
    return {"type": "invoke", "process": PROCESS, "f": f, "value": value}


def completed(invocation: dict, value) -> dict:
    """The completion of ``invocation``: type ``info``, ``value`` what was done."""
    done = dict(invocation)
    done["type"] = "info"
    done["value"] = value
    return done


class Nemesis:
    """Base class.  ``fs`` are the op names it handles; ``fault`` the name of its
    start/stop pair (``start-<fault>``/``stop-<fault>``) when it has one."""

    fs: frozenset[str] = frozenset()
    fault: str | None = None

    def __init__(self, rng: random.Random | None = None):
        self.rng = rng or random.Random()

    def setup(self) -> None:
        """Bring the system to a known good state before the first op."""

    def invoke(self, invocation: dict) -> dict:
        raise NotImplementedError

    def teardown(self) -> None:
        """Undo whatever is still in effect (heal, resume, restart, reset)."""

    def _unknown(self, invocation: dict):
        raise ValueError(f"{type(self).__name__} does not handle f={invocation.get('f')!r}")


class Compose(Nemesis):
    """Routes each op to the nemesis that handles its ``f``."""

    def __init__(self, nemeses: Iterable[Nemesis]):
        super().__init__()
        self.nemeses = list(nemeses)
        self._route: dict[str, Nemesis] = {}
        for n in self.nemeses:
            for f in n.fs:
                if f in self._route:
                    raise ValueError(f"two nemeses handle {f!r}")
                self._route[f] = n
        self.fs = frozenset(self._route)

    def setup(self) -> None:
        for n in self.nemeses:
            n.setup()

    def invoke(self, invocation: dict) -> dict:
        nemesis = self._route.get(invocation.get("f"))
        if nemesis is None:
            self._unknown(invocation)
        return nemesis.invoke(invocation)

    def teardown(self) -> None:
        errors = []
        for n in reversed(self.nemeses):
            try:
                n.teardown()
            except Exception as exc:  # noqa: BLE001 - tear down the rest first
                errors.append(exc)
        if errors:
            raise errors[0]
