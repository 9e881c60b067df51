"""Host backends: process control against dummy servers, loopback addresses, partitions."""

import os
import shutil
import socket
import sys
import time

import pytest

from jepsen.hosts import (CLOCK_ENV, JOURNAL_ENV, HostError, LocalHosts, NodeConfig, Unsupported,
                          cleanup,
                          configure_kraft, make_hosts)
from jepsen.net import PacketBehavior

# Binds its node's address (argv[1]) and port, answers "pong <its env>" to each connection.
SERVER = """
import os, socket, sys
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((sys.argv[1], int(sys.argv[2]))); srv.listen(16)
while True:
    c, _ = srv.accept()
    with c:
        c.sendall(("pong " + os.environ.get("KRAFT_CLOCK_OFFSET_FILE", "-")).encode())
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ask(address, port, *, source=None, timeout_s=1.0):
    """One exchange; None on timeout.  ``source`` binds the client like a node would."""
    try:
        with socket.create_connection((address, port), timeout=timeout_s,
                                      source_address=(source, 0) if source else None) as s:
            return s.recv(200).decode()
    except socket.timeout:
        return None


def wait_up(address, port, timeout_s=10):
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return ask(address, port)
        except OSError:
            assert time.monotonic() < deadline, f"{address}:{port} never came up"
            time.sleep(0.02)


@pytest.fixture
def local(tmp_path):
    port = free_port()
    hosts = LocalHosts([1, 2, 3])
    for node in hosts.nodes:
        hosts.configure(node, NodeConfig(
            argv=[sys.executable, "-c", SERVER, hosts.address(node), str(port)],
            log_path=tmp_path / f"n{node}.log", clock_file=tmp_path / f"clock{node}"))
    hosts.port = port
    with hosts:
        yield hosts
    assert not any(hosts.is_running(n) for n in hosts.nodes)


def test_addresses_are_distinct_loopbacks_and_127_0_0_1_is_left_to_the_harness():
    hosts = LocalHosts([1, 2, 3])
    assert [hosts.address(n) for n in hosts.nodes] == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    with pytest.raises(ValueError):
        LocalHosts([1, 2], first_address="10.0.0.1")
    with pytest.raises(ValueError):
        make_hosts("cloud", [1])


def test_start_passes_env_and_each_node_has_its_own_address(local, tmp_path):
    local.start_all()
    for node in local.nodes:
        assert wait_up(local.address(node), local.port) == f"pong {tmp_path / f'clock{node}'}"
    assert not local.start(1)  # already running


def test_kill_pause_resume_stop(local):
    local.start_all()
    a1 = local.address(1)
    wait_up(a1, local.port)
    assert local.pause(1) and local.is_paused(1)
    assert ask(a1, local.port, timeout_s=0.3) is None  # the kernel accepts, nobody answers
    assert local.resume(1) and not local.is_paused(1)
    assert ask(a1, local.port).startswith("pong")
    pid = local.pid(1)
    assert local.kill(1) and not local.is_running(1)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(ConnectionRefusedError):
        ask(a1, local.port)
    assert not local.kill(1) and not local.pause(1) and not local.resume(1)
    assert local.start(1)
    wait_up(a1, local.port)
    local.pause(2)
    assert local.stop(2, timeout_s=5)  # a paused node is continued so it can exit
    assert not local.is_running(2)


def test_run_and_missing_command(local):
    assert local.run(1, ["echo", "hi"]).stdout == "hi\n"
    with pytest.raises(HostError, match="failed"):
        local.run(1, ["false"])
    bare = LocalHosts([1])
    with pytest.raises(HostError, match="no command"):
        bare.start(1)


def test_node_config_env():
    cfg = NodeConfig(argv=["x"], env={"A": "1"}, clock_file="/c", fsync_journal="/j")
    env = cfg.full_env()
    assert env["A"] == "1" and env[CLOCK_ENV] == "/c" and env[JOURNAL_ENV] == "/j"


def test_local_cannot_delay_packets():
    hosts = LocalHosts([1, 2])
    with pytest.raises(Unsupported):
        hosts.shape([1], PacketBehavior(delay_ms=10))


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("nft"), reason="needs root and nft")
def test_local_partition_drops_between_node_addresses_only(local):
    local.start_all()
    a1, a2, a3 = (local.address(n) for n in local.nodes)
    for a in (a1, a2, a3):
        wait_up(a, local.port)
    run_id = None
    try:
        local.partition({1: {2}, 2: {1}})
        run_id = local.run_id
        assert ask(a2, local.port, source=a1, timeout_s=0.4) is None
        assert ask(a1, local.port, source=a2, timeout_s=0.4) is None
        assert ask(a3, local.port, source=a1).startswith("pong")
        assert ask(a2, local.port).startswith("pong")  # the harness (127.0.0.1) still gets through
        local.heal()
        assert ask(a2, local.port, source=a1).startswith("pong")
        local.shape([3], PacketBehavior(loss=100))
        assert ask(a3, local.port, source=a1, timeout_s=0.4) is None
        assert ask(a3, local.port).startswith("pong")
        local.unshape()
        assert ask(a3, local.port, source=a1).startswith("pong")
    finally:
        local.close()
    from jepsen.hosts import _system
    assert run_id and _system.nft_tables(run_id) == []


def test_configure_kraft_lays_out_a_cluster_on_local_hosts(tmp_path):
    hosts = LocalHosts([1, 2, 3])
    cluster = configure_kraft(hosts, tmp_path)  # runs kraftctl format for each node
    assert [n.host for n in cluster.nodes.values()] == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    cfg = hosts.configs[2]
    assert cfg.argv[-1] == str(cluster.nodes[2].config_path)
    assert cfg.data_dir == cluster.nodes[2].data_dir
    assert (cfg.data_dir / "meta.properties").is_file()
    from jepsen.faults import read_journal
    assert str(cfg.data_dir / "meta.properties") in read_journal(cfg.fsync_journal)
    assert cfg.clock_file.parent == cluster.nodes[2].directory
    assert "controller.quorum.voters=1@127.0.0.2:" in cluster.nodes[1].config_path.read_text()
    with pytest.raises(ValueError):
        configure_kraft(LocalHosts([2, 3]), tmp_path / "x", format=False)


ORPHANING_HARNESS = """
import sys, time
from jepsen.hosts import LocalHosts, NodeConfig
h = LocalHosts([1, 2])
for n in h.nodes:
    h.configure(n, NodeConfig(argv=[sys.executable, "-c", "import time; time.sleep(60)"]))
h.start_all()
print(h.run_id, h.pid(1), h.pid(2), flush=True)
time.sleep(60)
"""


def test_cleanup_kills_nodes_orphaned_by_a_sigkilled_harness():
    import subprocess
    from jepsen.hosts import _system
    proc = subprocess.Popen([sys.executable, "-c", ORPHANING_HARNESS], stdout=subprocess.PIPE, text=True)
    run_id, *pids = proc.stdout.readline().split()
    proc.kill()  # no handler runs: the nodes survive in their own sessions
    proc.wait()
    pids = [int(p) for p in pids]
    assert set(_system.processes(run_id)) == set(pids)
    removed = cleanup()
    assert {f"process {p}" for p in pids} <= set(removed)
    deadline = time.monotonic() + 5
    while _system.processes(run_id):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert not (_system.RUN_DIR / run_id).exists()


def test_a_forked_child_dies_of_sigterm_without_running_the_parents_teardown(tmp_path):
    import signal

    from jepsen.hosts._runs import forget_on_exit, on_exit

    marker = tmp_path / "teardown-ran"

    def teardown():
        marker.write_text(str(os.getpid()))

    on_exit(teardown)
    try:
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            pytest.skip("another SIGTERM handler was installed first")
        pid = os.fork()
        if pid == 0:  # the child: wait for the parent's SIGTERM
            time.sleep(30)
            os._exit(0)
        time.sleep(0.2)
        os.kill(pid, signal.SIGTERM)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM
        assert not marker.exists()
    finally:
        forget_on_exit(teardown)
