"""Metadata quorum throughput and commit latency: 3 voters, 3 processes, loopback, real fsync.

Each voter is its own process running the quorum engine (``kraft``: ``RaftDriver`` with
``RaftStorage``, which fsyncs before it votes or acknowledges; ``pysyncobj``: the
``PySyncObjEngine`` from ``kraft/raft/pysyncobj_engine.py`` when it exists) behind
``broker.network.serve_kafka`` on 127.0.0.1.  Whichever process the quorum elects runs the
load: ``--concurrency`` tasks, each proposing a batch of ``--batch-records`` records of
``--record-size`` bytes and timing ``wait_committed`` for it, for ``--seconds`` seconds or
``--max-proposals`` proposals, whichever ends first.  No controller, no brokers: this is the
Raft layer alone, as the controller drives it (one record batch per controller operation).

    python bench/quorum_bench.py                      # kraft engine, JSON summary on stdout
    python bench/quorum_bench.py --engine pysyncobj   # needs kraft/raft/pysyncobj_engine.py
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

QUORUM_APIS = {"Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "Fetch", "FetchSnapshot"}
PYSYNCOBJ_PORT_OFFSET = 1000


def engine_available(engine: str) -> str | None:
    """None when the engine can run, else why not."""
    if engine == "kraft":
        return None
    if engine == "pysyncobj":
        if not (ROOT / "kraft" / "raft" / "pysyncobj_engine.py").exists():
            return "kraft/raft/pysyncobj_engine.py does not exist yet"
        try:
            from kraft.raft.pysyncobj_engine import PySyncObjEngine  # noqa: F401
        except Exception as exc:  # noqa: BLE001 - report any import failure
            return f"cannot import the pysyncobj engine: {exc}"
        return None
    return f"unknown engine {engine!r}"


class CountingListener:
    def __init__(self):
        self.commits = 0

    def handle_load_snapshot(self, snapshot_id, records):
        pass

    def handle_commit(self, batch):
        self.commits += 1

    def handle_leader_change(self, leader):
        pass


# --------------------------------------------------------------------------- one voter


async def voter_main(args) -> None:
    import trio

    from broker.network import serve_kafka
    from kraft.client import KafkaClient
    from kraft.raft.config import RaftConfig
    from kraft.raft.disk import RaftStorage
    from kraft.raft.driver import PeerAddress, RaftDriver

    ports = [int(p) for p in args.ports.split(",")]
    voters = {i + 1: PeerAddress("127.0.0.1", p) for i, p in enumerate(ports)}
    node_id = args.node
    config = RaftConfig(node_id=node_id, voters=frozenset(voters), election_timeout_ms=1000,
                        fetch_timeout_ms=2000, request_timeout_ms=2000)
    directory = Path(args.dir) / f"node{node_id}"
    storage = RaftStorage(directory)
    listener = CountingListener()
    result_path = Path(args.dir) / "result.json"
    async with trio.open_nursery() as nursery:
        if args.engine == "pysyncobj":
            from kraft.raft.pysyncobj_engine import PySyncObjEngine

            engine = PySyncObjEngine(config, storage, voters, listener, password="kraft-bench",
                                     port_offset=PYSYNCOBJ_PORT_OFFSET)
        else:
            engine = RaftDriver(config, storage, KafkaClient(nursery, client_id=f"qbench-{node_id}"),
                                voters, listener)

        async def handler(request):
            if request.api in QUORUM_APIS:
                return await engine.handle(request.api, request.body)
            return None

        await nursery.start(functools.partial(serve_kafka, handler, "127.0.0.1", voters[node_id].port))
        await nursery.start(engine.run)
        # the elected leader runs the load, once its leadership is settled (its epoch's
        # first batch committed and no change for a second); the others only follow
        deadline = trio.current_time() + args.election_timeout
        while True:
            if trio.current_time() > deadline or result_path.exists():
                await trio.sleep_forever()  # a follower: the parent stops it
            stable_since = None
            while trio.current_time() < deadline and not result_path.exists():
                settled = engine.is_leader and engine.committed_offset >= engine.node.log.end_offset
                if not settled:
                    stable_since = None
                elif stable_since is None:
                    stable_since = trio.current_time()
                elif trio.current_time() - stable_since >= 1.0:
                    break
                await trio.sleep(0.05)
            else:
                continue
            result = await run_load(engine, args)
            if result["committed"] or trio.current_time() > deadline:
                break
        result.update(engine=args.engine, leader=node_id)
        tmp = result_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(result))
        os.replace(tmp, result_path)
        await trio.sleep_forever()


async def run_load(engine, args) -> dict:
    import trio

    payload = os.urandom(args.record_size)
    records = [payload] * args.batch_records
    latencies: list[float] = []
    errors: list[str] = []
    state = {"proposals": 0}
    clock = time.perf_counter
    start = clock()
    stop_at = start + args.seconds

    async def worker():
        while clock() < stop_at and state["proposals"] < args.max_proposals:
            state["proposals"] += 1
            t0 = clock()
            try:
                offset, _epoch = engine.propose(records)
            except Exception as exc:  # noqa: BLE001 - NotLeaderError, queue full...
                errors.append(repr(exc))
                await trio.sleep(0.05)
                if not engine.is_leader:
                    return
                continue
            with trio.move_on_after(10) as scope:
                await engine.wait_committed(offset)
            if scope.cancelled_caught:
                errors.append(f"offset {offset} not committed within 10 s")
                continue
            latencies.append((clock() - t0) * 1000.0)

    async with trio.open_nursery() as nursery:
        for _ in range(args.concurrency):
            nursery.start_soon(worker)
    elapsed = clock() - start
    lat = sorted(latencies)

    def pct(q):
        return lat[min(len(lat) - 1, round(q / 100 * (len(lat) - 1)))] if lat else 0.0

    n = len(lat)
    return {"committed": n, "records_committed": n * args.batch_records, "errors": len(errors),
            "first_error": errors[0] if errors else None, "elapsed_s": elapsed,
            "commits_per_s": n / elapsed if elapsed else 0.0,
            "records_per_s": n * args.batch_records / elapsed if elapsed else 0.0,
            "avg_ms": sum(lat) / n if n else 0.0, "p50_ms": pct(50), "p99_ms": pct(99),
            "max_ms": lat[-1] if lat else 0.0, "concurrency": args.concurrency,
            "batch_records": args.batch_records, "record_size": args.record_size}


# --------------------------------------------------------------------------- the parent


def free_ports(n: int, offset: int = 0) -> list[int]:
    from kraft.local_cluster import free_port

    ports: list[int] = []
    while len(ports) < n:
        p = free_port()
        if p in ports or (offset and p + offset > 65535):
            continue
        if offset:  # the pysyncobj transport listens on port + offset: check it is free too
            import socket

            try:
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p + offset))
            except OSError:
                continue
        ports.append(p)
    return ports


def run(engine: str = "kraft", seconds: float = 10.0, concurrency: int = 32, batch_records: int = 1,
        record_size: int = 100, max_proposals: int = 1_000_000, base_dir: str | None = None,
        timeout_s: float = 120.0) -> dict:
    """Start 3 voter processes, wait for the leader's result, stop them; the result dict."""
    reason = engine_available(engine)
    if reason:
        return {"engine": engine, "error": reason}
    base = Path(base_dir or tempfile.mkdtemp(prefix=f"quorum-bench-{engine}-"))
    base.mkdir(parents=True, exist_ok=True)
    ports = free_ports(3, PYSYNCOBJ_PORT_OFFSET if engine == "pysyncobj" else 0)
    procs = []
    try:
        for node in (1, 2, 3):
            log = open(base / f"node{node}.log", "wb")  # noqa: SIM115 - handed to the child
            procs.append(subprocess.Popen(
                [sys.executable, __file__, "--_voter", str(node), "--dir", str(base),
                 "--ports", ",".join(map(str, ports)), "--engine", engine, "--seconds", str(seconds),
                 "--concurrency", str(concurrency), "--batch-records", str(batch_records),
                 "--record-size", str(record_size), "--max-proposals", str(max_proposals)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT))
            log.close()
        deadline = time.monotonic() + timeout_s + seconds
        result_path = base / "result.json"
        while time.monotonic() < deadline:
            if result_path.exists():
                return json.loads(result_path.read_text())
            dead = [p for p in procs if p.poll() is not None]
            if dead:
                tail = (base / f"node{procs.index(dead[0]) + 1}.log").read_text(errors="replace")
                return {"engine": engine, "error": f"a voter exited: {tail.strip().splitlines()[-1:]}"}
            time.sleep(0.2)
        return {"engine": engine, "error": f"no result within {timeout_s + seconds:.0f} s"}
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine", default="kraft", choices=["kraft", "pysyncobj"])
    ap.add_argument("--seconds", type=float, default=10.0, help="load duration")
    ap.add_argument("--concurrency", type=int, default=32, help="proposals in flight")
    ap.add_argument("--batch-records", type=int, default=1, help="records per proposal")
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--max-proposals", type=int, default=1_000_000)
    ap.add_argument("--dir", default=None, help="data directory (default: a new temporary one)")
    ap.add_argument("--_voter", dest="node", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--ports", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--election-timeout", type=float, default=30.0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.node is not None:
        import logging

        from kraft.trio_run import run_trio

        logging.basicConfig(level=logging.WARNING)
        run_trio(voter_main, args)
        return
    result = run(args.engine, args.seconds, args.concurrency, args.batch_records, args.record_size,
                 args.max_proposals, args.dir)
    print(json.dumps(result, indent=2))
    if "error" in result:
        sys.exit(1)


if __name__ == "__main__":
    main()
