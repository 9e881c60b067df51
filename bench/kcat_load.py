"""A load generator in C: kcat (librdkafka, its defaults) producing a file of records and
reading them back.

``kraftctl perf`` drives librdkafka from Python, one ``produce()`` call per record: at half
a million records a second that client alone takes more than a core of this project's
2-core machine, so a broker's row measures what is left over.  kcat makes the same
librdkafka calls from C, reading records from a file (``-l``), and leaves the broker most of
the machine.  Both systems are measured with it the same way, one after the other.

The figures are wall time around the whole kcat process, start-up and the final flush
included (so slightly below the rate while it runs); each is the median of ``repeats`` runs,
since one run of a few seconds on a shared 2-core machine is noisy.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import time
from pathlib import Path


def records_file(path: Path, count: int, size: int) -> Path:
    """``count`` records of ``size`` bytes, one per line (kcat's default delimiter): the
    payload ``kraftctl perf produce`` sends (``cli.perf.make_payload``)."""
    from cli.perf import make_payload

    if path.exists() and path.stat().st_size == count * (size + 1):
        return path
    line = make_payload(size) + b"\n"
    with open(path, "wb") as f:
        for _ in range(count // 10_000):
            f.write(line * 10_000)
        f.write(line * (count % 10_000))
    return path


def available() -> str | None:
    """None when kcat can run, else why not."""
    return None if shutil.which("kcat") else "kcat is not installed (apt-get install kcat)"


def _one(cmd: list[str], timeout_s: float) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, timeout=timeout_s, check=False)
    return time.monotonic() - t0, p


def produce(bootstrap: str, topics: list[str], data: Path, count: int, acks: str,
            timeout_s: float) -> dict:
    """One kcat producer per topic in ``topics`` (one after another; each a fresh topic, so
    no run appends to the last one's log), each sending ``data`` (``count`` records).
    The records' delivery is checked by :func:`consume` reading them back."""
    why = available()
    if why:
        return {"error": why}
    runs = []
    for topic in topics:
        seconds, p = _one(["kcat", "-P", "-b", bootstrap, "-t", topic, "-l", str(data), "-X", f"acks={acks}"],
                          timeout_s)
        failed = p.stderr.decode(errors="replace").count("Delivery failed")
        if p.returncode != 0 or failed:
            return {"error": f"kcat -P into {topic}: exit {p.returncode}, {failed} delivery failures: "
                             f"{p.stderr.decode(errors='replace')[-200:]}"}
        runs.append(count / seconds)
    return {"records_per_s": statistics.median(runs), "runs": runs, "records": count,
            "command": f"kcat -P -b {bootstrap} -t <topic> -l {data} -X acks={acks}"}


def consume(bootstrap: str, topic: str, count: int, repeats: int, timeout_s: float) -> dict:
    """``repeats`` kcat consumers (no group: every partition from the beginning), each until
    it has ``count`` records or reached the end of every partition; one newline printed per
    record, counted here.

    The consumer's local queue holds the whole run (``queued.min.messages``, librdkafka's
    default 100,000).  With the default, a broker that answers faster than kcat prints
    fills the queue, and librdkafka (2.0, Debian's) then backs each partition off for
    ``fetch.error.backoff.ms`` (500 ms) before it fetches again: on 3 nodes that measured
    the client's pauses (2M records in 3.2-6.2 s from kraft, 2.2 s from Kafka; 1.0-1.3 s
    and 1.1-1.3 s with the larger queue)."""
    why = available()
    if why:
        return {"error": why}
    runs = []
    for _ in range(repeats):
        seconds, p = _one(["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-c", str(count),
                           "-e", "-q", "-f", r"\n", "-X", f"queued.min.messages={max(count, 100_000)}",
                           "-X", "queued.max.messages.kbytes=2097151"], timeout_s)
        got = p.stdout.count(b"\n")
        if p.returncode != 0 or got != count:
            return {"error": f"kcat -C of {topic}: exit {p.returncode}, {got:,} of {count:,} records: "
                             f"{p.stderr.decode(errors='replace')[-200:]}"}
        runs.append(count / seconds)
    return {"records_per_s": statistics.median(runs), "runs": runs, "records": count,
            "command": f"kcat -C -b {bootstrap} -t {topic} -o beginning -c {count} -e -q "
                       f"-X queued.min.messages={max(count, 100_000)}"}
