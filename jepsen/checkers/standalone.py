"""A Spark standalone cluster on this machine: a master and workers, started with the
``spark-class`` launcher that ships inside pyspark (pip's pyspark has no ``sbin/start-*``
scripts, so the daemons run in the foreground as our children and die with us).

Used by the test and the benchmark that check histories with ``--spark-master
spark://...``; a real multi-host cluster is started the same way, one worker per host.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StandaloneCluster:
    """A master and ``workers`` workers on 127.0.0.1 (a context manager).

    Args:
        workers: how many worker daemons.
        cores: cores each worker offers.
        memory: memory each worker offers (Spark's size syntax).
        work_dir: where logs and executor folders go (a temp dir by default).
    """

    def __init__(self, workers: int = 2, cores: int = 1, memory: str = "1g",
                 work_dir: str | os.PathLike[str] | None = None) -> None:
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.dir = Path(work_dir or tempfile.mkdtemp(prefix="spark-standalone-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.ui_port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self._procs: list[subprocess.Popen] = []

    def _spawn(self, name: str, *args: str) -> None:
        home = spark_home()
        env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1",
                   SPARK_LOG_DIR=str(self.dir), SPARK_NO_DAEMONIZE="1")
        with open(self.dir / f"{name}.log", "ab") as log:
            self._procs.append(subprocess.Popen(
                [str(home / "bin" / "spark-class"), *args], env=env, stdout=log,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True))

    def alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/",
                                        timeout=5) as r:
                return int(json.load(r).get("aliveworkers", 0))
        except (OSError, ValueError):
            return 0

    def start(self, timeout_s: float = 600.0) -> StandaloneCluster:
        self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(self.ui_port))
        for n in range(self.workers):
            wd = self.dir / f"worker-{n}"
            wd.mkdir(exist_ok=True)
            self._spawn(f"worker-{n}", "org.apache.spark.deploy.worker.Worker",
                        "--host", "127.0.0.1", "--webui-port", str(free_port()),
                        "--cores", str(self.cores), "--memory", self.memory,
                        "--work-dir", str(wd), self.url)
        deadline = time.monotonic() + timeout_s
        while self.alive_workers() < self.workers:
            if any(p.poll() is not None for p in self._procs):
                self.stop()
                raise RuntimeError(f"a Spark daemon exited; see the logs in {self.dir}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"{self.workers} workers did not register in "
                                   f"{timeout_s:.0f}s; see the logs in {self.dir}")
            time.sleep(0.5)
        return self

    def stop(self) -> None:
        for p in reversed(self._procs):
            if p.poll() is None:
                p.terminate()
        for p in self._procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self._procs.clear()

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
