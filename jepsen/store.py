"""The store: where runs keep everything they produce.

Layout::

    <store>/<test-name>/<start-time>/      one run (start-time: 20261122T021500.123Z, UTC)
        test.json                          options and run summary
        history.jsonl  history.parquet     the history (jepsen.history)
        results.json                       the checkers' verdict (jepsen.checkers)
        jepsen.log                         the harness's log
        node<i>/node.log                   each node's log (server.properties, ...)
        node<i>/data/                      each node's data -- kept only for invalid runs
        latency-raw.png  latency-quantiles.png  rate.png  index.html   (jepsen.report)
    <store>/<test-name>/latest -> <start-time>
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

LATEST = "latest"
LOG_FILE = "jepsen.log"
_SAFE = re.compile(r"[^A-Za-z0-9._+=-]+")


def safe_name(name: str) -> str:
    return _SAFE.sub("_", name).strip("._") or "test"


def timestamp(now: float | None = None) -> str:
    t = datetime.fromtimestamp(time.time() if now is None else now, tz=timezone.utc)
    return t.strftime("%Y%m%dT%H%M%S.") + f"{t.microsecond // 1000:03d}Z"


def new_run_dir(store: str | os.PathLike, test_name: str, now: float | None = None) -> Path:
    """Creates ``<store>/<test-name>/<start-time>/`` and repoints ``latest`` at it."""
    test_dir = Path(store) / safe_name(test_name)
    test_dir.mkdir(parents=True, exist_ok=True)
    stamp = timestamp(now)
    run = test_dir / stamp
    n = 1
    while run.exists():
        run = test_dir / f"{stamp}-{n}"
        n += 1
    run.mkdir()
    link_latest(test_dir, run.name)
    return run


def link_latest(parent: Path, name: str) -> None:
    link = parent / LATEST
    tmp = parent / f".{LATEST}.{os.getpid()}"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    os.symlink(name, tmp)
    os.replace(tmp, link)


def runs(store: str | os.PathLike, test_name: str | None = None) -> list[Path]:
    """Run folders in a store (of one test, or all), oldest first."""
    root = Path(store)
    tests = [root / safe_name(test_name)] if test_name else \
        [p for p in sorted(root.iterdir()) if p.is_dir()] if root.is_dir() else []
    out = []
    for t in tests:
        if t.is_dir():
            out += [p for p in sorted(t.iterdir()) if p.is_dir() and not p.is_symlink()
                    and (p / "test.json").exists()]
    return out


def attach_log(run_dir: Path) -> logging.Handler:
    """Routes the ``jepsen`` loggers into ``<run>/jepsen.log`` until ``detach_log``."""
    h = logging.FileHandler(run_dir / LOG_FILE, encoding="utf-8")
    h.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    h.setLevel(logging.INFO)
    root = logging.getLogger("jepsen")
    root.addHandler(h)
    if root.level == logging.NOTSET or root.level > logging.INFO:
        root.setLevel(logging.INFO)
    return h


def detach_log(handler: logging.Handler) -> None:
    logging.getLogger("jepsen").removeHandler(handler)
    handler.close()


def write_json(path: Path, doc: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    os.replace(tmp, path)


def tidy_nodes(run_dir: Path, cluster, keep_data: bool) -> None:
    """Keeps each node's log; drops data directories and fsync journals of valid runs."""
    for spec in cluster.nodes.values():
        d = Path(spec.directory)
        if not keep_data:
            shutil.rmtree(spec.data_dir, ignore_errors=True)
            for junk in ("fsync.journal",):
                (d / junk).unlink(missing_ok=True)
