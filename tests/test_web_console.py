"""``kraftctl console`` in a real headless browser (Debian's chromium) against a real 3-node
cluster: a topic under load, a consumer group with committed offsets, then a broker
stopped.  The page the browser rendered (its DOM after the script has refreshed it) must
show the brokers, the quorum's leader, every partition, the group's lag, and after the stop
the under-replicated partitions and the missing broker.  The screenshots are kept: under
the test's tmp dir, and in ``$KRAFT_TEST_ARTIFACTS`` when set."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import pytest

from cluster_helpers import active_controller, fast_overrides, start_cluster, wait_until

TOPIC = "orders"
PARTITIONS = 3
GROUP = "billing"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install chromium)")


class Rendered(HTMLParser):
    """The DOM as the console's tests read it: each ``<tr>`` with a class (its classes,
    ``data-*`` attributes and ``td[data-field]`` texts), each other element with a
    ``data-field`` (its text), and each chart's lines (their last values)."""

    def __init__(self, text: str):
        super().__init__()
        self.rows: list[dict] = []
        self.fields: dict[str, list[str]] = {}
        self.ids: dict[str, str] = {}
        self.charts: dict[str, dict[str, float]] = {}  # chart -> line -> last value
        self._chart = None
        self._row = None
        self._field: tuple[str, list[str]] | None = None
        self._id: tuple[str, list[str]] | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr" and a.get("class"):
            self._row = {"classes": set(a["class"].split()), **{k[5:]: v for k, v in a.items() if k.startswith("data-")}}
            self.rows.append(self._row)
        if "data-field" in a:
            self._field = (a["data-field"], [])
        if a.get("id") == "status":
            self._id = ("status", [])
        if tag == "svg" and "data-chart" in a:
            self._chart = self.charts.setdefault(a["data-chart"], {})
        if tag == "polyline" and self._chart is not None:
            self._chart[a["data-line"]] = float(a["data-last"])

    def handle_data(self, data):
        for current in (self._field, self._id):
            if current is not None:
                current[1].append(data)

    def handle_endtag(self, tag):
        if self._field is not None and tag in ("td", "span", "b"):
            name, text = self._field
            text = "".join(text).strip()
            if self._row is not None and tag == "td":
                self._row[name] = text
            else:
                self.fields.setdefault(name, []).append(text)
            self._field = None
        if self._id is not None and tag == "span":
            self.ids[self._id[0]] = "".join(self._id[1]).strip()
            self._id = None
        if tag == "tr":
            self._row = None

    def of(self, cls: str, **data) -> list[dict]:
        return [r for r in self.rows if cls in r["classes"] and all(r.get(k) == str(v) for k, v in data.items())]


def _artifact_dirs(tmp_path: Path) -> list[Path]:
    dirs = [tmp_path]
    if os.environ.get("KRAFT_TEST_ARTIFACTS"):
        d = Path(os.environ["KRAFT_TEST_ARTIFACTS"])
        d.mkdir(parents=True, exist_ok=True)
        dirs.append(d)
    return dirs


def chromium(url: str, tmp_path: Path, *action: str, budget_ms: int = 4000) -> str:
    """One headless chromium run on ``url`` (``--dump-dom`` or ``--screenshot=...``);
    returns its stdout.  The whole process group is killed if it hangs."""
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'chromium-profile'}",
            "--window-size=1400,1900", f"--virtual-time-budget={budget_ms}", *action, url]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise AssertionError(f"chromium did not finish loading {url} within 120 s") from None
    assert proc.returncode == 0, f"chromium exited {proc.returncode}: {err[-2000:]}"
    return out


def screenshot(url: str, tmp_path: Path, name: str) -> Path:
    shot = tmp_path / name
    chromium(url, tmp_path, f"--screenshot={shot}")
    assert shot.stat().st_size > 10_000, "an empty screenshot"
    for d in _artifact_dirs(tmp_path)[1:]:
        shutil.copy(shot, d / name)
    print(f"console screenshot: {shot}" + "".join(f" (and {d / name})" for d in _artifact_dirs(tmp_path)[1:]))
    return shot


def snapshot(url: str) -> dict:
    with urllib.request.urlopen(url + "api/snapshot", timeout=10) as resp:
        return json.loads(resp.read())["snapshot"]


class Load:
    """Produces to the topic in the background at a modest rate until stopped."""

    def __init__(self, bootstrap: str):
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        i = 0
        while not self.stop.is_set():
            for _ in range(50):
                self.producer.produce(TOPIC, value=b"v" * 100, partition=i % PARTITIONS)
                i += 1
            self.producer.poll(0)
            self.stop.wait(0.1)
        self.producer.flush(10)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(30)


class Member:
    """A consumer of the group that keeps polling (so the group is Stable with one member
    owning every partition) and never commits: the group's committed offsets stay put."""

    def __init__(self, bootstrap: str):
        from confluent_kafka import Consumer

        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "client.id": "billing-reader",
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        self.consumer.subscribe([TOPIC])
        while not self.stop.is_set():
            self.consumer.poll(0.2)
        self.consumer.close()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(30)


@pytest.fixture
def console(tmp_path):
    """Starts ``kraftctl console`` for a cluster; yields its URL; always stops it."""
    procs = []

    def start(bootstrap: str) -> str:
        proc = subprocess.Popen([sys.executable, "-m", "cli.main", "console", "--bootstrap-server", bootstrap,
                                 "--port", "0", "--interval", "1"],
                                stdout=subprocess.PIPE, stderr=open(tmp_path / "console.log", "w"), text=True)
        procs.append(proc)
        found = []
        reader = threading.Thread(target=lambda: found.append(proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(60)
        assert found and "http://" in found[0], \
            f"the console did not announce its URL: {found} {(tmp_path / 'console.log').read_text()[-2000:]}"
        return found[0].split(" at ")[1].strip()

    yield start
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_console_in_a_browser_shows_the_cluster_its_groups_and_a_stopped_broker(make_cluster, console, tmp_path):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = start_cluster(make_cluster(controllers=3, overrides=fast_overrides()))
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the topic is made
    admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=3)])[TOPIC].result(30)

    # 300 records per partition before the load starts; the group commits 100 of partition
    # 0 and 300 of partition 1, none of partition 2 (shown without a lag).
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(300 * PARTITIONS):
        producer.produce(TOPIC, value=b"r" * 100, partition=i % PARTITIONS)
    assert producer.flush(60) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.commit(offsets=[TopicPartition(TOPIC, 0, 100), TopicPartition(TOPIC, 1, 300)], asynchronous=False)
    consumer.close()

    url = console(bootstrap)
    leader, epoch = wait_until(lambda: active_controller(cluster), timeout_s=30, what="a quorum leader")
    with Load(bootstrap), Member(bootstrap):
        def stable_with_a_member():
            groups = [g for g in snapshot(url)["groups"] if g["group"] == GROUP]
            return groups and groups[0].get("state") == "Stable" and len(groups[0]["members"]) == 1
        wait_until(stable_with_a_member, timeout_s=60, what="the console to show the group's member")
        time.sleep(3)  # a few scrapes under load: the charts have lines
        dom = Rendered(chromium(url, tmp_path, "--dump-dom"))
        screenshot(url, tmp_path, "console-healthy.png")

    assert dom.ids.get("status") == "live", "the page's script did not refresh the panels"
    print(f"console poll (Metadata, DescribeQuorum, groups with lag) took {dom.fields['took-ms'][0]} ms")
    # the charts, from the nodes' metrics under the load: a line per node, the topic's rate
    assert set(dom.charts["messages in by node"]) == {"node 1", "node 2", "node 3"}
    assert dom.charts["messages in by topic"][TOPIC] > 0
    brokers = dom.of("broker")
    assert [b["node"] for b in brokers] == ["1", "2", "3"]
    assert all(b["state"] == "registered" for b in brokers)
    assert [b["node"] for b in brokers if b["controller"] == "active"] == [str(leader)]
    assert dom.fields["leader"] == [str(leader)] and dom.fields["epoch"] == [str(epoch)]
    voters = dom.of("replica")
    assert sorted(v["node"] for v in voters) == ["1", "2", "3"]
    assert [v["status"] for v in voters if v["node"] == str(leader)] == ["Leader"]
    partitions = dom.of("partition", topic=TOPIC)
    assert [p["partition"] for p in partitions] == ["0", "1", "2"]
    for p in partitions:
        assert sorted(p["replicas"].split(",")) == ["1", "2", "3"] and sorted(p["isr"].split(",")) == ["1", "2", "3"]
        assert "under-replicated" not in p["classes"] and p["status"] == "ok"
    assert dom.fields["under-replicated-total"] == ["0"]
    offsets = {r["partition"]: r for r in dom.of("offset", topic=TOPIC)}
    assert sorted(offsets) == ["0", "1", "2"]  # partition 2: owned, never committed
    assert (offsets["0"]["committed"], offsets["0"]["lag"]) == ("100", str(int(offsets["0"]["log-end-offset"]) - 100))
    assert int(offsets["0"]["lag"]) >= 200 and offsets["1"]["committed"] == "300"
    assert (offsets["2"]["committed"], offsets["2"]["lag"]) == ("-", "-")
    assert all(r["client-id"] == "billing-reader" for r in offsets.values())
    assert dom.fields["group-lag"] == [str(int(offsets["0"]["lag"]) + int(offsets["1"]["lag"]))]
    assert dom.fields["state"] == ["Stable"]
    (member,) = dom.of("member")
    assert member["client-id"] == "billing-reader"
    assert sorted(member["partitions"].split()) == [f"{TOPIC}-{p}" for p in range(PARTITIONS)]

    # Stop a broker that is not the quorum leader: every partition (RF 3) loses a replica
    # from its ISR, and the broker leaves the registered brokers once fenced.
    victim = next(n for n in cluster.nodes.values() if n.node_id != leader)
    cluster.stop(victim.node_id)

    def shows_the_stop():
        snap = snapshot(url)
        topic = next((t for t in snap["topics"] if t["name"] == TOPIC), None)
        down = [b for b in snap["brokers"] if b["node_id"] == victim.node_id and not b["registered"]]
        return topic is not None and topic["under_replicated"] == PARTITIONS and down
    wait_until(shows_the_stop, timeout_s=60, what="the console to see the stopped broker")
    dom = Rendered(chromium(url, tmp_path, "--dump-dom"))
    shot = screenshot(url, tmp_path, "console-broker-stopped.png")

    partitions = dom.of("partition", topic=TOPIC)
    assert len(partitions) == PARTITIONS
    for p in partitions:
        assert "under-replicated" in p["classes"] and p["status"] == "under-replicated"
        assert str(victim.node_id) not in p["isr"].split(",") and str(victim.node_id) in p["replicas"].split(",")
        assert p["leader"] != str(victim.node_id)
    # __consumer_offsets (RF 3) too: the total counts every marked row
    marked = [p for p in dom.of("partition") if "under-replicated" in p["classes"]]
    assert dom.fields["under-replicated-total"] == [str(len(marked))] and len(marked) >= PARTITIONS
    (down,) = dom.of("broker", node=victim.node_id)
    assert "down" in down["classes"] and down["state"] == "not registered"
    assert shot.exists()
