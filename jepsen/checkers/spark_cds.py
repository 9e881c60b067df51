"""A class-data-sharing archive for the local Spark JVM (the JDK's dynamic AppCDS).

A fresh Spark JVM spends most of its first seconds loading and verifying Spark's classes
(about 4 s of its start, and as much again on a check's first use of the Parquet reader,
the planner and the Arrow writer, on this project's 2-core machine).  The JDK can dump
the classes one run loaded into an archive (``-XX:ArchiveClassesAtExit``) and map them
into later runs (``-XX:SharedArchiveFile``).  :func:`build` makes that archive once, in a
child process that runs small queue and register checks and waits for its JVM to exit;
:func:`java_options` adds it to local sessions when it exists.

An archive is only valid for the JDK and class path that made it: its name carries a
hash of PySpark's version, the ``java`` executable Spark starts (and its mtime) and any
extra jars.  A JVM that cannot use an archive (another JDK build, a changed class path)
says so in its log and runs without it.  A truncated archive, though, crashes the JVM
(SIGBUS while mapping it): so :func:`build` seals an archive it made with a ``.size``
file beside it, and only an archive whose size its seal names is used.

``JEPSEN_SPARK_CLASS_ARCHIVE``: a path to use instead of the one in the user's cache
directory, or ``off`` to start every session without one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ENV = "JEPSEN_SPARK_CLASS_ARCHIVE"

# the JVM's warnings (an archive it cannot map, classes it cannot dump) go to stderr,
# which spark_session sends to the session's log, not to the terminal
QUIET = "-Xlog:disable -Xlog:all=warning:stderr"


def _java() -> str:
    """The ``java`` Spark's launcher starts: ``$JAVA_HOME/bin/java``, else the PATH's."""
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(found) if found else "java"


def archive_path(jars: list[str] | None = None) -> Path | None:
    """Where the archive for this PySpark, JDK and jars lives (None when turned off)."""
    chosen = os.environ.get(ENV, "")
    if chosen.lower() in ("off", "0", "false", "no"):
        return None
    if chosen:
        return Path(chosen)
    import pyspark

    java = _java()
    try:
        mtime = os.stat(java).st_mtime_ns
    except OSError:
        mtime = 0
    ident = "\0".join([pyspark.__version__, java, str(mtime),
                       *sorted(os.path.realpath(j) for j in jars or ())])
    key = hashlib.sha256(ident.encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "jepsen" / f"spark-{pyspark.__version__}-{key}.jsa"


def java_options(jars: list[str] | None = None) -> str:
    """The JVM options that map the archive, when it exists ("" otherwise)."""
    path = archive_path(jars)
    if path is None or not sealed(path):
        return ""
    return f"-XX:SharedArchiveFile={path} {QUIET}"


def _seal(path: Path) -> Path:
    return path.with_name(path.name + ".size")


def sealed(path: Path) -> bool:
    """Whether ``path`` is an archive :func:`build` finished, whole (its seal names its
    size)."""
    try:
        return _seal(path).read_text().strip() == str(path.stat().st_size)
    except (OSError, ValueError):
        return False


def build(path: Path | None = None, jars: list[str] | None = None) -> dict[str, float | str]:
    """Makes the archive: a child process starts a local session that dumps its classes
    at exit, runs small queue and register checks (so the classes a check needs are
    loaded), stops, and waits for its JVM to exit; the archive then replaces any older
    one at once (a session starting meanwhile sees the old one or none).  Returns
    ``path``, ``seconds`` and ``mb``."""
    path = path or archive_path(jars)
    if path is None:
        raise ValueError(f"{ENV} is off: no archive to build")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    t = time.monotonic()
    cmd = [sys.executable, "-m", "jepsen.checkers.spark_cds_dump", str(tmp), *(jars or ())]
    try:
        out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, env={**os.environ, ENV: "off"})
        if out.returncode != 0 or not tmp.is_file():
            tail = "\n".join(out.stdout.splitlines()[-20:])
            raise RuntimeError(f"building the class archive failed (exit {out.returncode}):"
                               f"\n{tail}")
        size = tmp.stat().st_size
        os.replace(tmp, path)
        seal = tmp.with_name(tmp.name + ".size")
        seal.write_text(f"{size}\n")
        os.replace(seal, _seal(path))
    finally:
        tmp.unlink(missing_ok=True)
    return {"path": str(path), "seconds": time.monotonic() - t,
            "mb": path.stat().st_size / 1e6}
