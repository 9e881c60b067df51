"""Run ids and teardown that runs however the harness ends.

Every system resource a run creates is named with its run id, ``kj`` + 6 hex digits
(network namespaces, links, nftables tables), and every node process it starts carries
``RUN_ENV=<run id>`` in its environment.  The run records its owner pid in
``RUN_DIR/<run id>``, so ``_system.cleanup`` can tell leftovers of a dead harness from a
live run's resources.

``on_exit(fn)`` runs ``fn`` at interpreter exit and on SIGTERM/SIGHUP (turned into
``SystemExit`` after the teardown).  Ctrl-C raises KeyboardInterrupt, which unwinds through
``with`` blocks and reaches atexit anyway.  SIGKILL cannot be caught: ``_system.cleanup``
finds what such a run left behind.
"""

from __future__ import annotations

import atexit
import os
import re
import secrets
import signal
from collections.abc import Callable
from pathlib import Path

RUN_PREFIX = "kj"
RUN_RE = re.compile(rf"^({RUN_PREFIX}[0-9a-f]{{6}})")
RUN_DIR = Path(os.environ.get("KRAFT_JEPSEN_RUN_DIR", "/tmp/kraft-jepsen-runs"))
RUN_ENV = "KRAFT_JEPSEN_RUN"


def new_run_id() -> str:
    run = RUN_PREFIX + secrets.token_hex(3)
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    (RUN_DIR / run).write_text(str(os.getpid()))
    return run


def release_run_id(run: str) -> None:
    (RUN_DIR / run).unlink(missing_ok=True)


def owner_alive(run: str) -> bool:
    try:
        pid = int((RUN_DIR / run).read_text())
    except (OSError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- teardown on exit ----------------------------------------------------------------------

_handlers: list[Callable[[], None]] = []
_installed = False
_owner_pid = 0  # the process whose teardown the handlers are


def _run_handlers() -> None:
    if os.getpid() != _owner_pid:  # a forked child: the teardown is its parent's business
        return
    while _handlers:
        fn = _handlers.pop()
        try:
            fn()
        except Exception:  # noqa: BLE001 - teardown must go on
            pass


def _on_signal(signum, frame):
    if os.getpid() != _owner_pid:
        # A forked child inherited this handler: die of the signal as if it had none.
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    _run_handlers()
    raise SystemExit(128 + signum)


def on_exit(fn: Callable[[], None]) -> None:
    """Run ``fn`` at interpreter exit and on SIGTERM/SIGHUP (at most once)."""
    global _installed, _owner_pid
    if fn not in _handlers:
        _handlers.append(fn)
    if _installed:
        return
    _installed = True
    _owner_pid = os.getpid()
    atexit.register(_run_handlers)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            if signal.getsignal(sig) in (signal.SIG_DFL, None):
                signal.signal(sig, _on_signal)
        except ValueError:  # not the main thread: atexit still covers normal exits
            pass


def forget_on_exit(fn: Callable[[], None]) -> None:
    if fn in _handlers:
        _handlers.remove(fn)
