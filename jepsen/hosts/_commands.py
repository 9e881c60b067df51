"""Short commands on the machine, and the errors host operations raise (used by every
backend and by ``jepsen.hosts._system``)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence


class HostError(RuntimeError):
    """A host operation failed (a command returned an error, a tool is missing)."""


class Unsupported(HostError):
    """The backend cannot do this (say, packet faults on loopback); the message says why."""


def run_checked(argv: Sequence[str], *, input: str | None = None, timeout_s: float = 30.0,
                check: bool = True) -> subprocess.CompletedProcess:
    """Run a short command; raise ``HostError`` with its stderr when it fails."""
    try:
        result = subprocess.run(list(argv), input=input, capture_output=True, text=True,
                                timeout=timeout_s)
    except FileNotFoundError:
        raise HostError(f"{argv[0]} is not installed") from None
    except subprocess.TimeoutExpired:
        raise HostError(f"{' '.join(argv)} did not finish within {timeout_s} s") from None
    if check and result.returncode != 0:
        raise HostError(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr.strip()}")
    return result
