"""Tool checks and crash-proof cleanup of what the host backends create.

Resources and node processes are found by run id (see ``_runs``).  ``cleanup()`` removes
those of runs whose owner is gone (or of every run, with ``force``), so even a harness
killed with SIGKILL leaves nothing that the next ``jepsen cleanup`` does not find.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterable

from jepsen.hosts._commands import HostError, Unsupported, run_checked
from jepsen.hosts._runs import (RUN_DIR, RUN_ENV, RUN_RE, forget_on_exit, new_run_id, on_exit,
                                owner_alive, release_run_id)

# Debian package that provides each tool.
PACKAGES = {"ip": "iproute2", "tc": "iproute2", "nft": "nftables", "iptables": "iptables"}


def missing_tools(tools: Iterable[str]) -> list[str]:
    return [t for t in tools if shutil.which(t) is None]


def ensure_tools(tools: Iterable[str], install: bool = True) -> None:
    """Make sure ``tools`` are on PATH, installing their Debian packages as root if allowed.

    Raises:
        Unsupported: a tool is missing and cannot be installed; the message names the
            package to install.
    """
    missing = missing_tools(tools)
    if not missing:
        return
    packages = sorted({PACKAGES.get(t, t) for t in missing})
    if install and os.geteuid() == 0 and shutil.which("apt-get"):
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        for argv in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *packages]):
            subprocess.run(argv, env=env, capture_output=True, timeout=600)
        missing = missing_tools(tools)
        if not missing:
            return
    raise Unsupported(f"missing {', '.join(missing)}: install the Debian package(s) "
                      f"{' '.join(packages)} (apt-get install {' '.join(packages)}) as root")


# -- finding and removing resources by run id ----------------------------------------------

def _lines(argv: list[str]) -> list[str]:
    if shutil.which(argv[0]) is None:
        return []
    result = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    return result.stdout.splitlines() if result.returncode == 0 else []


def namespaces(run: str | None = None) -> list[str]:
    names = [line.split()[0] for line in _lines(["ip", "netns", "list"]) if line.strip()]
    return [n for n in names if RUN_RE.match(n) and (run is None or n.startswith(run))]


def links(run: str | None = None) -> list[str]:
    names = []
    for line in _lines(["ip", "-o", "link", "show"]):
        parts = line.split(":", 2)
        if len(parts) >= 2:
            names.append(parts[1].strip().split("@")[0])
    return [n for n in names if RUN_RE.match(n) and (run is None or n.startswith(run))]


def nft_tables(run: str | None = None) -> list[tuple[str, str]]:
    tables = []
    for line in _lines(["nft", "list", "tables"]):
        parts = line.split()
        if len(parts) == 3 and parts[0] == "table" and RUN_RE.match(parts[2]):
            if run is None or parts[2].startswith(run):
                tables.append((parts[1], parts[2]))
    return tables


def processes(run: str | None = None) -> dict[int, str]:
    """Live processes started by a run (``RUN_ENV`` in their environment): pid -> run id."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        for var in env:
            if var.startswith(RUN_ENV.encode() + b"="):
                tag = var.split(b"=", 1)[1].decode(errors="replace")
                if RUN_RE.match(tag) and (run is None or tag == run):
                    found[int(entry)] = tag
    return found


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def remove_namespace(name: str) -> None:
    # Processes inside a namespace would keep it alive after its name is gone.
    for pid in _lines(["ip", "netns", "pids", name]):
        if pid.isdigit():
            _kill(int(pid))
    run_checked(["ip", "netns", "delete", name], check=False)


def remove_run(run: str) -> list[str]:
    """Remove every resource named after ``run`` and kill its processes; returns what was
    removed."""
    removed = []
    for pid in processes(run):
        _kill(pid)
        removed.append(f"process {pid}")
    for ns in namespaces(run):
        remove_namespace(ns)
        removed.append(f"netns {ns}")
    for link in links(run):
        run_checked(["ip", "link", "delete", link], check=False)
        removed.append(f"link {link}")
    for family, table in nft_tables(run):
        run_checked(["nft", "delete", "table", family, table], check=False)
        removed.append(f"nft table {family} {table}")
    release_run_id(run)
    return removed


def leftover_runs() -> set[str]:
    found = {RUN_RE.match(n).group(1) for n in namespaces() + links()}
    found |= set(processes().values())
    found |= {RUN_RE.match(t).group(1) for _, t in nft_tables()}
    if RUN_DIR.is_dir():
        found |= {p.name for p in RUN_DIR.iterdir() if RUN_RE.match(p.name)}
    return found


def cleanup(force: bool = False) -> list[str]:
    """Remove leftovers of earlier runs: every run whose owner process is gone, or every run
    at all with ``force``.  Returns a description of what was removed."""
    removed = []
    for run in sorted(leftover_runs()):
        if force or not owner_alive(run):
            removed += remove_run(run)
    return removed


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise Unsupported(f"{what} needs root (network namespaces and nftables)")


__all__ = ["HostError", "Unsupported", "cleanup", "ensure_tools", "forget_on_exit",
           "new_run_id", "on_exit"]
