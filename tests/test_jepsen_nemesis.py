"""Nemeses: grudges, target selection, seeded schedules, clock files, kill/pause/file
against dummy processes, and the trio schedule runner."""

import os
import random
import subprocess
import sys
import time

import pytest
import trio
import trio.testing

from jepsen.hosts import Hosts, LocalHosts, NodeConfig
from jepsen.net import (PARTITION_SPECS, PacketBehavior, bisect, complete_grudge, grudge_components,
                        majorities_ring, majority, minority_third, netem_args, nft_ruleset,
                        DropRule, partition_grudge)
from jepsen.nemesis import (FAULTS, RECOVER, ClockFiles, ClockNemesis, Compose, FileNemesis,
                            KillNemesis, Nemesis, Oracle, PartitionNemesis, PauseNemesis,
                            ScheduleOptions, fault_windows, make_nemesis, op,
                            run_schedule, schedule, select_targets, unsupported_faults)

NODES = [1, 2, 3, 4, 5]


# -- grudges ---------------------------------------------------------------------------------

def hears(grudge, node, nodes):
    return {n for n in nodes if n not in grudge.get(node, set())}


def test_complete_grudge_and_sizes():
    g = complete_grudge([[1, 2], [3], [4, 5]])
    assert g == {1: {3, 4, 5}, 2: {3, 4, 5}, 3: {1, 2, 4, 5}, 4: {1, 2, 3}, 5: {1, 2, 3}}
    assert complete_grudge([[1, 2, 3]]) == {}
    assert grudge_components(g, NODES) == [[1, 2], [3], [4, 5]]
    assert bisect([1, 2, 3, 4, 5]) == [[1, 2], [3, 4, 5]]
    assert [majority(n) for n in (1, 2, 3, 4, 5)] == [1, 2, 2, 3, 3]
    assert [minority_third(n) for n in (3, 4, 5, 7, 10)] == [0, 1, 1, 2, 3]


@pytest.mark.parametrize("n", [3, 4, 5, 6, 7, 9])
def test_partition_specs_shapes(n):
    nodes = list(range(1, n + 1))
    rng = random.Random(n)
    one = partition_grudge("one", nodes, rng)
    lone = [k for k, v in one.items() if len(v) == n - 1]
    assert len(lone) == 1 and all(v == set(lone) for k, v in one.items() if k not in lone)

    maj = partition_grudge("majority", nodes, rng)
    comps = grudge_components(maj, nodes)
    assert sorted(len(c) for c in comps) == [n // 2, n - n // 2]

    third = partition_grudge("minority-third", nodes, rng)
    small = minority_third(n)
    assert len({k for k, v in third.items() if len(v) == n - small}) == small

    ring = partition_grudge("majorities-ring", nodes, rng)
    views = [frozenset(hears(ring, node, nodes)) for node in nodes]
    assert all(len(v) == majority(n) and node in v for node, v in zip(nodes, views))
    assert len(set(views)) == n  # no two nodes see the same majority
    assert majorities_ring([1, 2], random.Random(0)) == {}


def test_primaries_each_alone_and_determinism():
    g = partition_grudge("primaries", NODES, random.Random(0), primaries=[2, 4, 99])
    assert grudge_components(g, NODES) == [[1, 3, 5], [2], [4]]
    with pytest.raises(ValueError, match="primary"):
        partition_grudge("primaries", NODES, random.Random(0), primaries=[])
    with pytest.raises(ValueError, match="unknown partition"):
        partition_grudge("bridge", NODES, random.Random(0))
    g = partition_grudge("leader", NODES, random.Random(0), primaries=[4])
    assert grudge_components(g, NODES) == [[1, 2, 3, 5], [4]]
    with pytest.raises(ValueError, match="leader"):
        partition_grudge("leader", NODES, random.Random(0), primaries=[99])
    for spec in set(PARTITION_SPECS) - {"primaries", "leader"}:
        assert (partition_grudge(spec, NODES, random.Random(5))
                == partition_grudge(spec, NODES, random.Random(5)))


def test_rules_and_netem_args():
    b = PacketBehavior(delay_ms=50, jitter_ms=10, loss=5, duplicate=1, reorder=25)
    assert netem_args(b) == ["delay", "50ms", "10ms", "distribution", "normal", "loss", "5%",
                             "duplicate", "1%", "reorder", "25%", "50%"]
    with pytest.raises(ValueError):
        PacketBehavior(reorder=10)
    with pytest.raises(ValueError):
        PacketBehavior(loss=150)
    assert PacketBehavior(loss=3).loss_only and not b.loss_only
    script = nft_ruleset("ip", "kjabcdef", [DropRule("10.0.0.1"), DropRule("10.0.0.2", "10.0.0.3", 12.5)])
    assert "ip saddr 10.0.0.1 drop" in script
    assert "ip saddr 10.0.0.2 ip daddr 10.0.0.3 numgen random mod 10000 < 1250 drop" in script
    assert script.startswith("table ip kjabcdef {}\nflush table ip kjabcdef\n")


# -- targets ---------------------------------------------------------------------------------

def test_select_targets():
    rng = random.Random(1)
    assert len(select_targets("one", NODES, rng)) == 1
    assert len(select_targets("minority", NODES, rng)) == 2
    assert len(select_targets("majority", NODES, rng)) == 3
    assert len(select_targets("minority-third", NODES, rng)) == 1
    assert select_targets("all", NODES, rng) == NODES
    assert select_targets([3, 1], NODES, rng) == [1, 3]
    with pytest.raises(ValueError):
        select_targets([9], NODES, rng)
    with pytest.raises(ValueError):
        select_targets("most", NODES, rng)
    leaders = {("t", 0): 4, ("t", 1): 2}
    oracle = Oracle(controller=lambda: 3, leader=lambda t, p: leaders.get((t, p)),
                    partitions=[("t", 0), ("t", 1)])
    assert select_targets("controller", NODES, rng, oracle) == [3]
    assert select_targets("leader", NODES, rng, oracle) == [4]
    assert select_targets({"leader": ["t", 1]}, NODES, rng, oracle) == [2]
    assert select_targets({"leader": ["t", 7]}, NODES, rng, oracle) == []
    for _ in range(20):
        prim = select_targets("primaries", NODES, rng, oracle)
        assert prim and set(prim) <= {2, 3, 4}

    def broken():
        raise ConnectionError("cluster down")
    assert select_targets("controller", NODES, rng, Oracle(controller=broken)) == []
    assert select_targets("leader", NODES, rng, Oracle()) == []
    assert (select_targets("majority", NODES, random.Random(9))
            == select_targets("majority", NODES, random.Random(9)))


# -- schedules -------------------------------------------------------------------------------

def test_schedule_is_seeded_and_ends_healed():
    s1 = schedule(42, FAULTS, 300)
    assert s1 == schedule(42, list(reversed(FAULTS)), 300)
    assert s1 != schedule(43, FAULTS, 300)
    times = [s.at_s for s in s1]
    assert times == sorted(times)
    fs = [s.op["f"] for s in s1]
    assert any(f.startswith("start-") for f in fs)
    tail = fs[-(len(FAULTS) + 1):]
    assert tail[-1] == RECOVER and s1[-1].op["value"] == 10.0
    assert set(tail[:-1]) == {f"stop-{f}" for f in FAULTS}
    assert tail.index("stop-partition") < tail.index("stop-kill")  # heal before restarts
    # flip-flops: a fault never starts twice without stopping in between
    active = set()
    for f in fs[:-(len(FAULTS) + 1)]:
        kind, fault = f.split("-", 1)
        assert (fault in active) == (kind == "stop")
        active.symmetric_difference_update({fault})
    for w in fault_windows(s1):
        assert w[1] <= w[2]
    gaps = [b - a for a, b in zip(times, times[1:-len(FAULTS) - 1])]
    assert max(gaps) <= 2 * 10.0 + 1e-6


def test_schedule_options_and_errors():
    s = schedule(1, ["partition"], 100, ScheduleOptions(interval_s=1, partition_specs=["one"]))
    starts = [x.op for x in s if x.op["f"] == "start-partition"]
    assert starts and all(o["value"] == "one" for o in starts)
    assert all(o["process"] == "nemesis" and o["type"] == "invoke" for o in (x.op for x in s))
    assert [x.op["f"] for x in schedule(1, [], 10)] == [RECOVER]
    with pytest.raises(ValueError):
        schedule(1, ["meteor"], 10)

    class Caps(Hosts):
        capabilities = frozenset()
    assert set(unsupported_faults(Caps([1]), ["kill", "partition", "packet"])) == {
        "partition", "packet"}
    Caps.capabilities = frozenset({"partition", "packet-loss"})
    assert unsupported_faults(Caps([1]), ["kill", "partition", "packet"]) == {}
    from jepsen.nemesis import options_for
    from jepsen.nemesis._schedule import LOSS_ONLY_BEHAVIORS
    assert options_for(Caps([1]), interval_s=3).packet_behaviors == LOSS_ONLY_BEHAVIORS
    Caps.capabilities = frozenset({"packet"})
    assert options_for(Caps([1])).packet_behaviors != LOSS_ONLY_BEHAVIORS


class Recorder(Nemesis):
    fs = frozenset({"start-x", "stop-x", "start-boom"})

    def __init__(self):
        super().__init__()
        self.seen = []

    def invoke(self, invocation):
        self.seen.append(invocation["f"])
        if invocation["f"] == "start-boom":
            raise RuntimeError("nope")
        return dict(invocation, type="info", value="done")


async def test_run_schedule_plays_steps_on_time(autojump_clock):
    from jepsen.nemesis import Step
    steps = [Step(1.0, op("start-x", "a")), Step(5.0, op("start-boom")), Step(7.5, op("stop-x")),
             Step(7.5, op(RECOVER, 3.0))]
    nemesis, records, times = Recorder(), [], []
    t0 = trio.current_time()

    def record(o):
        records.append(o)
        times.append(round(trio.current_time() - t0, 3))
    await run_schedule(nemesis, steps, record)
    assert [r["f"] for r in records] == ["start-x", "start-x", "start-boom", "start-boom",
                                         "stop-x", "stop-x", RECOVER, RECOVER]
    assert [r["type"] for r in records] == ["invoke", "info"] * 4
    assert records[1]["value"] == "done"
    assert records[3]["error"] == "RuntimeError: nope" and records[3]["type"] == "info"
    # The records are jepsen.history ops once the recorder adds index and time.
    from jepsen.history import Op, pair
    ops = [Op(index=i, time=i, **r) for i, r in enumerate(records)]
    assert [(p.invoke.f, p.complete.value) for p in pair(ops)][0] == ("start-x", "done")
    assert times[0] == 1.0 and times[2] == 5.0 and times[4] == 7.5
    assert trio.current_time() - t0 == pytest.approx(10.5)


@pytest.fixture
def autojump_clock():
    return trio.testing.MockClock(autojump_threshold=0)


def test_compose_routes_and_rejects_overlap():
    a = Recorder()
    c = Compose([a])
    assert c.invoke(op("start-x"))["value"] == "done"
    with pytest.raises(ValueError):
        c.invoke(op("start-y"))
    with pytest.raises(ValueError, match="two nemeses"):
        Compose([Recorder(), Recorder()])


# -- clock -----------------------------------------------------------------------------------

def test_clock_files(tmp_path):
    clocks = ClockFiles({1: tmp_path / "c1", 2: tmp_path / "sub" / "c2"})
    assert clocks.get(1) == 0
    clocks.set(1, -1500)
    assert (tmp_path / "c1").read_text() == "-1500\n"
    assert clocks.bump(1, 500) == -1000
    assert clocks.bump(2, 7) == 7
    assert clocks.offsets() == {1: -1000, 2: 7}
    clocks.reset()
    assert clocks.offsets() == {1: 0, 2: 0}
    assert not list(tmp_path.glob("*.tmp"))


def test_kraft_clock_reads_the_offset_file(tmp_path):
    clocks = ClockFiles({1: tmp_path / "c1"})
    clocks.set(1, 3_600_000)
    code = "import time; from kraft import clock; print(clock.wall_ms() - int(time.time() * 1000))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=dict(os.environ, KRAFT_CLOCK_OFFSET_FILE=str(tmp_path / "c1")))
    assert abs(int(out.stdout) - 3_600_000) < 1000


def clock_hosts(tmp_path, n=3):
    hosts = LocalHosts(list(range(1, n + 1)))
    for node in hosts.nodes:
        hosts.configure(node, NodeConfig(argv=["true"], clock_file=tmp_path / f"clock{node}"))
    return hosts


def test_clock_nemesis_bump_strobe_reset(tmp_path):
    hosts = clock_hosts(tmp_path)
    nem = ClockNemesis(hosts, random.Random(3))
    nem.setup()
    done = nem.invoke(op("start-clock", {"mode": "bump", "targets": "all", "max_ms": 60_000}))
    deltas = {int(k): v for k, v in done["value"]["deltas"].items()}
    assert set(deltas) == {1, 2, 3} and all(abs(d) <= 60_000 for d in deltas.values())
    assert nem.clocks.offsets() == deltas
    nem.invoke(op("start-clock", {"mode": "bump", "targets": [1], "delta_ms": 10}))
    assert nem.clocks.get(1) == deltas[1] + 10

    seen = set()
    nem.invoke(op("start-clock", {"mode": "strobe", "targets": [2], "delta_ms": 100,
                                  "period_ms": 10, "duration_s": 0.3}))
    deadline = time.monotonic() + 0.2
    while time.monotonic() < deadline:
        seen.add(nem.clocks.get(2))
        time.sleep(0.002)
    assert seen >= {deltas[2], deltas[2] + 100}
    nem._strobe.join(2)
    assert nem.clocks.get(2) == deltas[2]  # restored at the end of the strobe
    done = nem.invoke(op("stop-clock"))
    assert nem.clocks.offsets() == {1: 0, 2: 0, 3: 0}
    with pytest.raises(ValueError):
        nem.invoke(op("start-clock", {"mode": "warp"}))


def test_strobe_stops_on_stop_clock(tmp_path):
    nem = ClockNemesis(clock_hosts(tmp_path), random.Random(0))
    nem.invoke(op("start-clock", {"mode": "strobe", "targets": "all", "delta_ms": 5,
                                  "period_ms": 10, "duration_s": 60}))
    t = time.monotonic()
    nem.invoke(op("stop-clock"))
    assert time.monotonic() - t < 1 and nem.clocks.offsets() == {1: 0, 2: 0, 3: 0}


# -- kill, pause, file against dummy processes ---------------------------------------------

SLEEPER = "import time\nwhile True: time.sleep(1)"


def proc_state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


@pytest.fixture
def sleepers(tmp_path):
    hosts = LocalHosts(NODES)
    for node in hosts.nodes:
        hosts.configure(node, NodeConfig(argv=[sys.executable, "-c", SLEEPER],
                                         data_dir=tmp_path / f"n{node}" / "data",
                                         fsync_journal=tmp_path / f"n{node}" / "fsync.journal"))
    hosts.start_all()
    with hosts:
        yield hosts


def test_kill_nemesis(sleepers):
    oracle = Oracle(controller=lambda: 4)
    nem = KillNemesis(sleepers, random.Random(0), oracle)
    pids = {n: sleepers.pid(n) for n in NODES}
    done = nem.invoke(op("start-kill", "majority"))
    killed = done["value"]["killed"]
    assert len(killed) == 3 and all(not sleepers.is_running(n) for n in killed)
    assert sum(sleepers.is_running(n) for n in NODES) == 2
    done = nem.invoke(op("stop-kill"))
    assert done["value"] == {"started": sorted(killed)}
    assert all(sleepers.is_running(n) for n in NODES)
    assert all(sleepers.pid(n) != pids[n] for n in killed)
    assert nem.invoke(op("start-kill", "controller"))["value"]["killed"] == [4]
    nem.teardown()
    assert sleepers.is_running(4)


def test_pause_nemesis(sleepers):
    nem = PauseNemesis(sleepers, random.Random(0))
    done = nem.invoke(op("start-pause", "minority"))
    paused = done["value"]["paused"]
    assert len(paused) == 2
    time.sleep(0.05)
    for n in NODES:
        assert (proc_state(sleepers.pid(n)) == "T") == (n in paused)
    assert nem.invoke(op("stop-pause"))["value"] == {"resumed": paused}
    time.sleep(0.05)
    assert all(proc_state(sleepers.pid(n)) != "T" for n in NODES)


class FakeNet:
    def __init__(self):
        self.nodes = NODES
        self.calls = []

    def partition(self, grudge):
        self.calls.append(("partition", grudge))

    def heal(self):
        self.calls.append(("heal",))

    def shape(self, nodes, behavior):
        self.calls.append(("shape", nodes, behavior))

    def unshape(self):
        self.calls.append(("unshape",))


def test_partition_and_packet_nemesis_drive_the_hosts():
    from jepsen.nemesis import PacketNemesis
    net = FakeNet()
    nem = PartitionNemesis(net, random.Random(0), Oracle(controller=lambda: 5))
    done = nem.invoke(op("start-partition", "primaries"))
    assert done["value"]["components"] == [[1, 2, 3, 4], [5]]
    assert net.calls[-1] == ("partition", {5: {1, 2, 3, 4}, 1: {5}, 2: {5}, 3: {5}, 4: {5}})
    done = nem.invoke(op("start-partition", {"1": [2], "2": [1]}))
    assert net.calls[-1] == ("partition", {1: {2}, 2: {1}})
    nem.invoke(op("stop-partition"))
    assert net.calls[-1] == ("heal",)
    pk = PacketNemesis(net, random.Random(0))
    done = pk.invoke(op("start-packet", {"targets": [2], "behavior": {"loss": 30}}))
    assert done["value"] == {"targets": [2], "behavior": {"loss": 30}}
    assert net.calls[-1] == ("shape", [2], PacketBehavior(loss=30))
    pk.teardown()
    assert net.calls[-1] == ("unshape",)


WRITER = """
import os, sys, time
from jepsen.faults import JournalWriter
root = os.environ["DATA"]; os.makedirs(root, exist_ok=True)
seg = os.path.join(root, "t-0", "0.log"); os.makedirs(os.path.dirname(seg), exist_ok=True)
j = JournalWriter()
fd = os.open(seg, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
os.write(fd, b"s" * 100); os.fsync(fd); j.fsynced(seg, os.fstat(fd).st_size)
os.write(fd, b"u" * 50)
open(os.path.join(root, "ready"), "w").close()
while True: time.sleep(1)
"""


def test_file_nemesis_lose_unsynced_kills_cuts_and_restarts(tmp_path):
    hosts = LocalHosts([1, 2, 3])
    for node in hosts.nodes:
        d = tmp_path / f"n{node}"
        hosts.configure(node, NodeConfig(argv=[sys.executable, "-c", WRITER], data_dir=d / "data",
                                         fsync_journal=d / "journal", env={"DATA": str(d / "data")}))
    with hosts:
        hosts.start_all()
        deadline = time.monotonic() + 10
        while not all((tmp_path / f"n{n}" / "data" / "ready").exists() for n in hosts.nodes):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        nem = FileNemesis(hosts, random.Random(0))
        done = nem.invoke(op("start-file", {"fault": "lose-unsynced", "targets": [2]}))
        seg = tmp_path / "n2" / "data" / "t-0" / "0.log"
        assert not hosts.is_running(2)
        assert seg.read_bytes() == b"s" * 100
        assert not (tmp_path / "n2" / "data" / "ready").exists()  # never synced
        assert done["value"]["nodes"]["2"]["bytes_lost"] == 50
        assert (tmp_path / "n1" / "data" / "t-0" / "0.log").stat().st_size == 150  # untouched
        assert nem.invoke(op("stop-file"))["value"] == {"started": [2]}
        assert hosts.is_running(2)

        done = nem.invoke(op("start-file", {"fault": "truncate", "targets": "all"}))
        hit = list(done["value"]["nodes"])
        assert len(hit) == 1  # one node at a time
        assert done["value"]["nodes"][hit[0]]["file"].endswith("0.log")
        nem.teardown()
        assert all(hosts.is_running(n) for n in hosts.nodes)


def test_make_nemesis_composes_and_is_seeded(sleepers, tmp_path):
    for node in sleepers.nodes:
        sleepers.configs[node].clock_file = tmp_path / f"c{node}"
    nem = make_nemesis(sleepers, ["kill", "clock"], seed=3)
    assert nem.fs == {"start-kill", "stop-kill", "start-clock", "stop-clock"}
    first = nem.invoke(op("start-kill", "one"))["value"]["killed"]
    nem.teardown()
    again = make_nemesis(sleepers, ["kill", "clock"], seed=3)
    assert again.invoke(op("start-kill", "one"))["value"]["killed"] == first
    again.teardown()
    with pytest.raises(ValueError):
        make_nemesis(sleepers, ["flood"])


# -- the leader-targeting partition and the coverage phase -----------------------------------

class GrudgeHosts(Hosts):
    """Records the grudges it is asked to enforce."""

    kind = "fake"
    capabilities = frozenset({"partition"})

    def __init__(self, nodes):
        super().__init__(nodes)
        self.grudges = []

    def partition(self, grudge):
        self.grudges.append({k: set(v) for k, v in grudge.items()})

    def heal(self):
        self.grudges.append({})


def test_partition_leader_cuts_off_the_current_leader_of_a_workload_partition():
    leaders = {("q", 0): 2, ("q", 1): 3, ("q", 2): 2}
    oracle = Oracle(leader=lambda t, p: leaders.get((t, p)), partitions=list(leaders))
    hosts = GrudgeHosts([1, 2, 3])
    nemesis = PartitionNemesis(hosts, random.Random(4), oracle)
    for _ in range(10):
        done = nemesis.invoke(op("start-partition", "leader"))["value"]
        lead = leaders[tuple(done["partition"])]
        assert done["spec"] == "leader" and done["leader"] == lead
        others = set(hosts.nodes) - {lead}
        assert hosts.grudges[-1] == {lead: others, **{n: {lead} for n in others}}
        assert sorted(done["components"]) == sorted([[lead], sorted(others)])
    # A leader that is also the active controller is avoided while another leader exists
    # (cutting it off makes a controller failover that can outlast the hold).
    both = Oracle(controller=lambda: 2, leader=lambda t, p: leaders.get((t, p)),
                  partitions=list(leaders))
    for seed in range(10):
        done = PartitionNemesis(GrudgeHosts([1, 2, 3]), random.Random(seed), both).start("leader")
        assert done["leader"] == 3 and done["controller"] == 2
    alone = Oracle(controller=lambda: 2, leader=lambda t, p: 2, partitions=[("q", 0)])
    assert PartitionNemesis(GrudgeHosts([1, 2, 3]), random.Random(0), alone).start(
        "leader")["leader"] == 2
    # Seeded: the same seed aims at the same partitions.
    aims = [[PartitionNemesis(GrudgeHosts([1, 2, 3]), random.Random(s), oracle)
             .start("leader")["partition"] for s in range(8)] for _ in range(2)]
    assert aims[0] == aims[1] and len({tuple(a) for a in aims[0]}) > 1


def test_partition_leader_waits_for_a_settling_cluster_then_falls_back_to_one():
    answers = iter([None, None, 3])
    oracle = Oracle(leader=lambda t, p: next(answers, 3), partitions=[("q", 0)])
    hosts = GrudgeHosts([1, 2, 3])
    done = PartitionNemesis(hosts, random.Random(1), oracle, leader_wait_s=5).start("leader")
    assert done["leader"] == 3 and hosts.grudges[-1][3] == {1, 2}

    def down(t, p):
        raise ConnectionError("no metadata")
    hosts = GrudgeHosts([1, 2, 3])
    started = time.monotonic()
    done = PartitionNemesis(hosts, random.Random(1), Oracle(leader=down, partitions=[("q", 0)]),
                            leader_wait_s=0.5).start("leader")
    assert time.monotonic() - started < 3
    assert done["leader"] is None and done["fallback"] == "one"
    assert len(done["components"]) == 2 and hosts.grudges  # a node was still cut off


def test_coverage_phase_holds_every_fault_long_enough_and_aims_the_first_partition():
    # The command: --nemesis kill,partition --nodes 3 --time-limit 20, fence time 9 s.
    o = ScheduleOptions(min_hold_s=9.0, recovery_s=5.0)
    for seed in range(100):
        steps = schedule(seed, ["kill", "partition"], 20, o)
        windows = {}
        for f, a, b in fault_windows(steps):
            windows.setdefault(f, (a, b))  # the coverage phase's windows come first
        assert set(windows) == {"kill", "partition"}
        first = next(s.op for s in steps if s.op["f"] == "start-partition")
        assert first["value"] == "leader"
        a, b = windows["partition"]
        assert a < 1.0 and b - a >= 9.0 and b <= 20.0
        ka, kb = windows["kill"]
        assert ka >= b and kb - ka >= 9.0 and kb <= 20.0 + 1e-6  # no overlap, both held
    # Too short for every fault at min_hold_s: the holds shrink, no fault is dropped.
    steps = schedule(3, list(FAULTS), 12, ScheduleOptions(min_hold_s=9.0))
    started = {s.op["f"][6:] for s in steps if s.op["f"].startswith("start-")}
    assert started == set(FAULTS)
    assert all(b - a >= 12 / len(FAULTS) - 2e-3 for _, a, b in fault_windows(steps))  # times kept to ms
    # Specs the user chose are respected: no leader partition unless allowed.
    steps = schedule(3, ["partition"], 60, ScheduleOptions(partition_specs=["one"]))
    assert {s.op["value"] for s in steps if s.op["f"] == "start-partition"} == {"one"}
