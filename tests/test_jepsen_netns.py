"""The netns backend cuts links for real (root, ip, nft needed; skipped otherwise)."""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from jepsen.hosts import NodeConfig, Unsupported, cleanup, make_hosts
from jepsen.hosts import _system
from jepsen.net import PacketBehavior, partition_grudge

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("nft"),
    reason="needs root, iproute2 (ip) and nftables (nft): apt-get install iproute2 nftables",
)

PORT = 7000
ECHO_SERVER = f"""
import socket, threading
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("0.0.0.0", {PORT})); srv.listen(16)
def serve(c):
    with c:
        while (data := c.recv(100)):
            c.sendall(data)
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""
# Prints "ok" when an echo round trip works, "timeout" when the connection hangs.
PING = """
import socket, sys
try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3])) as s:
        s.sendall(b"ping"); print("ok" if s.recv(4) == b"ping" else "bad")
except socket.timeout:
    print("timeout")
except OSError as exc:
    print(f"error {exc}")
"""


def ping(hosts, from_node, address, timeout_s=0.7):
    result = hosts.run(from_node, [sys.executable, "-c", PING, address, str(PORT), str(timeout_s)])
    return result.stdout.strip()


def ping_from_root(address, timeout_s=0.7):
    result = subprocess.run([sys.executable, "-c", PING, address, str(PORT), str(timeout_s)],
                            capture_output=True, text=True, timeout=10)
    return result.stdout.strip()


def wait_listening(hosts, nodes):
    import time
    deadline = time.monotonic() + 10
    for node in nodes:
        while ping(hosts, node, "127.0.0.1") != "ok":
            assert time.monotonic() < deadline, f"echo server on node {node} did not come up"
            time.sleep(0.05)


@pytest.fixture
def hosts():
    h = make_hosts("netns", [1, 2, 3])
    for node in h.nodes:
        h.configure(node, NodeConfig(argv=[sys.executable, "-c", ECHO_SERVER]))
    run_id = h.run_id
    try:
        yield h
    finally:
        h.close()
    assert_gone(run_id)


def assert_gone(run_id):
    assert _system.namespaces(run_id) == []
    assert _system.links(run_id) == []
    assert _system.nft_tables(run_id) == []
    assert not (_system.RUN_DIR / run_id).exists()


def test_partition_cuts_link_keeps_loopback_and_heals(hosts):
    hosts.start_all()
    wait_listening(hosts, hosts.nodes)
    a1, a2, a3 = (hosts.address(n) for n in hosts.nodes)
    assert ping(hosts, 1, a2) == "ok"
    assert ping(hosts, 2, a1) == "ok"

    hosts.partition({1: {2}, 2: {1}})
    assert ping(hosts, 1, a2) == "timeout"
    assert ping(hosts, 2, a1) == "timeout"
    # Each namespace's own loopback, the unaffected links and the harness's link still work.
    assert ping(hosts, 1, "127.0.0.1") == "ok"
    assert ping(hosts, 2, "127.0.0.1") == "ok"
    assert ping(hosts, 1, a3) == "ok"
    assert ping(hosts, 3, a2) == "ok"
    assert ping_from_root(a1) == "ok" and ping_from_root(a2) == "ok"

    hosts.heal()
    assert ping(hosts, 1, a2) == "ok"
    assert ping(hosts, 2, a1) == "ok"


def test_complete_grudge_isolates_a_node(hosts):
    hosts.start_all()
    wait_listening(hosts, hosts.nodes)
    import random
    grudge = partition_grudge("one", hosts.nodes, random.Random(3))
    lone = next(n for n, g in grudge.items() if len(g) == 2)
    others = [n for n in hosts.nodes if n != lone]
    hosts.partition(grudge)
    assert ping(hosts, lone, hosts.address(others[0]), 0.4) == "timeout"
    assert ping(hosts, others[1], hosts.address(lone), 0.4) == "timeout"
    assert ping(hosts, others[0], hosts.address(others[1])) == "ok"


def test_kill_pause_inside_namespace(hosts):
    hosts.start(1)
    wait_listening(hosts, [1])
    assert hosts.pause(1)
    assert ping(hosts, 1, "127.0.0.1", 0.4) == "timeout"  # accepted by the kernel, never served
    assert hosts.resume(1)
    assert ping(hosts, 1, "127.0.0.1") == "ok"
    assert hosts.kill(1) and not hosts.is_running(1)
    assert ping(hosts, 1, "127.0.0.1").startswith("error")  # refused


def test_total_loss_drops_everything_to_a_target(hosts):
    hosts.start_all()
    wait_listening(hosts, hosts.nodes)
    hosts.shape([2], PacketBehavior(loss=100))
    assert ping(hosts, 1, hosts.address(2), 0.4) == "timeout"
    assert ping(hosts, 1, hosts.address(3)) == "ok"
    hosts.unshape()
    assert ping(hosts, 1, hosts.address(2)) == "ok"


def test_netem_behaviours_are_applied_or_refused_clearly(hosts):
    behavior = PacketBehavior(delay_ms=50, jitter_ms=5, duplicate=1)
    if hosts.netem_available():
        hosts.shape([1], behavior)
        out = subprocess.run(["tc", "qdisc", "show", "dev", hosts._veth[1]],
                             capture_output=True, text=True).stdout
        assert "netem" in out
        hosts.unshape()
    else:
        with pytest.raises(Unsupported, match="netem"):
            hosts.shape([1], behavior)


def test_cleanup_removes_leftovers_of_a_dead_run(tmp_path):
    h = make_hosts("netns", [1, 2])
    run_id = h.run_id
    # Simulate a harness that died without cleaning up: forget the handle, fake a dead owner.
    _system.forget_on_exit(h.close)
    (_system.RUN_DIR / run_id).write_text("999999999")
    assert _system.namespaces(run_id)
    removed = cleanup()
    assert any(run_id in r for r in removed)
    assert _system.namespaces(run_id) == [] and _system.links(run_id) == []
    h._closed = True  # nothing left for it to do


HARNESS = """
import sys, time
from jepsen.hosts import make_hosts, NodeConfig
h = make_hosts(sys.argv[1], [1, 2])
for n in h.nodes:
    h.configure(n, NodeConfig(argv=[sys.executable, "-c", "import time; time.sleep(60)"]))
h.start_all()
if sys.argv[1] == "local" and len(sys.argv) > 2:
    h.partition({1: {2}})
print(getattr(h, "run_id", None) or "-", h.pid(1), h.pid(2), flush=True)
time.sleep(60)
"""


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("backend,sig", [("netns", signal.SIGTERM), ("netns", signal.SIGINT),
                                         ("local", signal.SIGTERM)])
def test_a_signalled_harness_removes_everything(backend, sig):
    argv = [sys.executable, "-c", HARNESS, backend] + (["partition"] if backend == "local" else [])
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        run_id, *pids = proc.stdout.readline().split()
        assert run_id != "-" and all(alive(int(p)) for p in pids)
        if backend == "netns":
            assert _system.namespaces(run_id)
        else:
            assert _system.nft_tables(run_id)
        proc.send_signal(sig)
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert_gone(run_id)
    deadline = time.monotonic() + 5
    while any(alive(int(p)) for p in pids):
        assert time.monotonic() < deadline, "node processes outlived the harness"
        time.sleep(0.05)


def test_configure_kraft_on_namespaces(hosts, tmp_path):
    from jepsen.hosts import configure_kraft
    cluster = configure_kraft(hosts, tmp_path, format=False)
    text = cluster.nodes[1].config_path.read_text()
    a = [hosts.address(n) for n in hosts.nodes]
    assert f"controller.quorum.voters=1@{a[0]}:9093,2@{a[1]}:9093,3@{a[2]}:9093" in text
    assert f"PLAINTEXT://{a[0]}:9092" in text
    assert cluster.bootstrap_servers == ",".join(f"{x}:9092" for x in a)


async def test_a_compressed_schedule_runs_every_fault_and_ends_healed(tmp_path):
    import trio
    from jepsen.faults import record_baseline
    from jepsen.nemesis import ScheduleOptions, make_nemesis, run_schedule, schedule
    faults = ["kill", "pause", "partition", "packet", "clock", "file"]
    h = make_hosts("netns", [1, 2, 3])
    run_id = h.run_id
    try:
        for node in h.nodes:
            h.configure(node, NodeConfig(argv=[sys.executable, "-c", ECHO_SERVER],
                                         data_dir=tmp_path / f"n{node}",
                                         clock_file=tmp_path / f"clock{node}",
                                         fsync_journal=tmp_path / f"journal{node}"))
            record_baseline(tmp_path / f"n{node}", tmp_path / f"journal{node}")
        h.start_all()
        wait_listening(h, h.nodes)
        options = ScheduleOptions(interval_s=0.15, recovery_s=0.2,
                                  kill_targets=["one", "majority"], pause_targets=["minority"],
                                  partition_specs=["one", "majority", "majorities-ring"],
                                  packet_behaviors=[{"loss": 50}], strobe_max_ms=50)
        steps = schedule(11, faults, 3.0, options)
        started = {s.op["f"] for s in steps if s.op["f"].startswith("start-")}
        assert started == {f"start-{f}" for f in faults}
        nemesis = make_nemesis(h, faults, seed=11)
        nemesis.setup()
        history = []
        try:
            await run_schedule(nemesis, steps, history.append)
        finally:
            nemesis.teardown()
        errors = [o for o in history if o.get("error")]
        assert not errors, errors
        assert len(history) == 2 * len(steps)
        assert [o["type"] for o in history] == ["invoke", "info"] * len(steps)
        assert all(h.is_running(n) and not h.is_paused(n) for n in h.nodes)
        await trio.to_thread.run_sync(wait_listening, h, h.nodes)
        for a in h.nodes:
            for b in h.nodes:
                assert ping(h, a, h.address(b)) == "ok"
        assert all((tmp_path / f"clock{n}").read_text() == "0\n" for n in h.nodes)
    finally:
        h.close()
    assert_gone(run_id)
