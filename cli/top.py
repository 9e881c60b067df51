"""``kraftctl top``: every node's vital metrics, one row per node, redrawn every second.

Where the metrics are: each node serves them over HTTP when ``kraft.metrics.port`` is set
(``kraft.metrics.exporter``).  ``top`` asks the cluster for its nodes (DescribeCluster on a
broker for the brokers, on a controller listener for the controllers, KIP-919) and each node
for its own ``kraft.metrics.port`` and ``kraft.metrics.host`` (DescribeConfigs of the
BROKER resource named by its id, which answers with the node's static configuration).  The
metrics host is ``kraft.metrics.host`` unless that is a wildcard address, else the host the
node advertises.  ``--metrics host:port`` (repeatable) names endpoints directly.

Rates are per second between two scrapes; ``--once`` scrapes twice, ``--interval`` apart,
prints one frame and exits.
"""

from __future__ import annotations

import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import click

from cli.admin_client import AdminClient, AdminError, parse_bootstrap
from cli.topics import fail

WILDCARDS = {"", "0.0.0.0", "::", "[::]"}
BROKER_RESOURCE = 4


@dataclass
class Endpoint:
    node_id: int | None  # None: named with --metrics, learnt from the scrape
    url: str | None  # None: the node serves no metrics (kraft.metrics.port unset)


def _metrics_config(admin: AdminClient, node_id: int, address) -> tuple[str | None, int]:
    resp = admin.call("DescribeConfigs", {"resources": [{
        "resource_type": BROKER_RESOURCE, "resource_name": str(node_id),
        "configuration_keys": ["kraft.metrics.port", "kraft.metrics.host"]}],
        "include_synonyms": False, "include_documentation": False}, address=address)
    result = resp["results"][0]
    if result["error_code"]:
        raise AdminError(f"DescribeConfigs of node {node_id}: error {result['error_code']}")
    values = {c["name"]: c["value"] for c in result["configs"]}
    port = int(values.get("kraft.metrics.port") or 0)
    return values.get("kraft.metrics.host"), port


def discover(bootstrap_server: str | None, bootstrap_controller: str | None,
             command_config: str | None = None) -> dict[int, Endpoint]:
    """Node id -> metrics endpoint, from the cluster itself (see the module doc);
    ``command_config``: client properties for a TLS or SASL listener."""
    found: dict[int, Endpoint] = {}
    for bootstrap, endpoint_type in ((bootstrap_server, 1), (bootstrap_controller, 2)):
        if not bootstrap:
            continue
        admin = AdminClient(bootstrap, timeout_s=5, command_config=command_config)
        cluster = admin.call("DescribeCluster", {"include_cluster_authorized_operations": False,
                                                 "endpoint_type": endpoint_type}, version=1)
        if cluster["error_code"]:
            raise AdminError(f"DescribeCluster at {bootstrap}: {cluster['error_message'] or cluster['error_code']}")
        for node in cluster["brokers"]:
            node_id = node["broker_id"]
            if node_id in found and found[node_id].url:
                continue  # a combined node, already found through the other listener
            try:
                host, port = _metrics_config(admin, node_id, (node["host"], node["port"]))
            except AdminError:
                found[node_id] = Endpoint(node_id, None)
                continue
            if host is None or host in WILDCARDS:
                host = node["host"]
            found[node_id] = Endpoint(node_id, f"http://{_bracket(host)}:{port}/metrics" if port else None)
    return found


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def scrape(url: str, timeout_s: float = 3.0) -> dict[str, list[tuple[dict, float]]]:
    """Sample name -> [(labels, value)] of one endpoint."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=timeout_s) as resp:
        text = resp.read().decode()
    out: dict[str, list[tuple[dict, float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def value(samples: dict, name: str, **labels) -> float | None:
    """The sample of ``name`` whose labels are exactly ``labels``."""
    for got, v in samples.get(name, ()):
        if got == labels:
            return v
    return None


def label(samples: dict, name: str, key: str) -> str | None:
    for got, _ in samples.get(name, ()):
        return got.get(key)
    return None


@dataclass
class Row:
    node_id: str
    roles: str = "?"
    controller: str = "-"
    raft: str = "-"
    messages_in: float | None = None
    bytes_in: float | None = None
    bytes_out: float | None = None
    under_replicated: float | None = None
    leaders: float | None = None
    cpu: float | None = None
    rss: float | None = None
    error: str | None = None


_MESSAGES = "kafka_server_brokertopicmetrics_messagesin_total"
_BYTES_IN = "kafka_server_brokertopicmetrics_bytesin_total"
_BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout_total"


def make_row(node_id, before: dict | None, after: dict, seconds: float) -> Row:
    info_id = label(after, "kraft_node_info", "node_id")
    row = Row(info_id or str(node_id))
    roles = label(after, "kraft_node_info", "roles") or ""
    row.roles = "+".join(r[0] for r in roles.split(",") if r) or "?"
    active = value(after, "kafka_controller_kafkacontroller_activecontrollercount")
    if active is not None:
        row.controller = "active" if active else "standby"
    state = label(after, "kafka_server_raft_metrics_current_state", "state")
    leader = value(after, "kafka_server_raft_metrics_current_leader")
    epoch = value(after, "kafka_server_raft_metrics_current_epoch")
    if state is not None:
        row.raft = f"{state} L{int(leader)} e{int(epoch)}" if leader is not None and leader >= 0 \
            else f"{state} e{int(epoch) if epoch is not None else -1}"

    def rate(name):
        now = value(after, name)
        then = value(before, name) if before is not None else None
        if now is None or then is None or seconds <= 0:
            return None
        return max(now - then, 0) / seconds

    row.messages_in = rate(_MESSAGES)
    row.bytes_in = rate(_BYTES_IN)
    row.bytes_out = rate(_BYTES_OUT)
    cpu = rate("process_cpu_seconds_total")
    row.cpu = cpu * 100 if cpu is not None else None
    row.under_replicated = value(after, "kafka_server_replicamanager_underreplicatedpartitions")
    row.leaders = value(after, "kafka_server_replicamanager_leadercount")
    row.rss = value(after, "process_resident_memory_bytes")
    return row


def _human(n: float | None, unit: str = "") -> str:
    if n is None:
        return "-"
    for suffix in ("", "K", "M", "G", "T"):
        if abs(n) < 1000 or suffix == "T":
            return f"{n:.0f}{suffix}{unit}" if suffix == "" else f"{n:.1f}{suffix}{unit}"
        n /= 1000 if unit != "B" else 1024
    return str(n)


HEADER = ("NODE", "ROLES", "CONTROLLER", "RAFT (state leader epoch)", "MSG IN/s", "BYTES IN/s",
          "BYTES OUT/s", "URP", "LEADERS", "CPU%", "RSS")


def render(rows: list[Row], when: float) -> str:
    table = [HEADER]
    for r in rows:
        if r.error:
            table.append((r.node_id, r.roles, "-", f"DOWN: {r.error}"[:40], "", "", "", "", "", "", ""))
            continue
        table.append((r.node_id, r.roles, r.controller, r.raft, _human(r.messages_in),
                      _human(r.bytes_in, "B"), _human(r.bytes_out, "B"),
                      "-" if r.under_replicated is None else f"{r.under_replicated:.0f}",
                      "-" if r.leaders is None else f"{r.leaders:.0f}",
                      "-" if r.cpu is None else f"{r.cpu:.0f}", _human(r.rss, "B")))
    widths = [max(len(str(line[i])) for line in table) for i in range(len(HEADER))]
    lines = [f"kraft top  {time.strftime('%H:%M:%S', time.localtime(when))}  "
             f"(roles: b broker, c controller; URP: under-replicated partitions this node leads)"]
    for line in table:
        lines.append("  ".join(str(c).ljust(w) if i < 4 else str(c).rjust(w)
                               for i, (c, w) in enumerate(zip(line, widths))).rstrip())
    up = [r for r in rows if not r.error]
    active = [r.node_id for r in up if r.controller == "active"]
    total = sum(r.messages_in or 0 for r in up)
    lines.append(f"{len(up)}/{len(rows)} nodes answering; active controller: "
                 f"{','.join(active) or 'none'}; messages in: {_human(total)}/s")
    return "\n".join(lines)


class Top:
    def __init__(self, endpoints: list[Endpoint]):
        self.endpoints = endpoints
        self.previous: dict[int, tuple[float, dict]] = {}
        self.pool = ThreadPoolExecutor(max_workers=max(1, min(len(endpoints), 16)))

    def frame(self) -> list[Row]:
        def one(i_endpoint):
            i, endpoint = i_endpoint
            label_id = endpoint.node_id if endpoint.node_id is not None else endpoint.url
            if endpoint.url is None:
                return Row(str(label_id), error="kraft.metrics.port not set")
            try:
                samples = scrape(endpoint.url)
            except OSError as exc:
                return Row(str(label_id), error=str(getattr(exc, "reason", exc)))
            now = time.monotonic()
            before = self.previous.get(i)
            self.previous[i] = (now, samples)
            return make_row(label_id, before[1] if before else None, samples,
                            now - before[0] if before else 0.0)

        return list(self.pool.map(one, enumerate(self.endpoints)))


def endpoint_from_option(text: str) -> Endpoint:
    if text.startswith("http://") or text.startswith("https://"):
        return Endpoint(None, text)
    try:
        ((host, port),) = parse_bootstrap(text)
    except (AdminError, ValueError):
        raise AdminError(f"--metrics: {text!r} is not host:port or a URL") from None
    return Endpoint(None, f"http://{_bracket(host)}:{port}/metrics")


@click.command("top")
@click.option("--bootstrap-server", default=None, help="A broker: top shows every broker.")
@click.option("--bootstrap-controller", default=None,
              help="A controller listener: top also shows the controllers (separate controller nodes).")
@click.option("--metrics", "metrics", multiple=True, metavar="HOST:PORT|URL",
              help="A node's metrics endpoint, instead of asking the cluster (repeatable).")
@click.option("--interval", default=1.0, show_default=True, help="Seconds between frames.")
@click.option("--once", is_flag=True, help="Print one frame (two scrapes --interval apart) and exit.")
def top_command(bootstrap_server, bootstrap_controller, metrics, interval, once):
    """Live per-node metrics: roles, controller, Raft leader and epoch, throughput,
    under-replicated partitions, leaders, CPU and memory."""
    if not (bootstrap_server or bootstrap_controller or metrics):
        fail("one of --bootstrap-server, --bootstrap-controller, --metrics is required")
    try:
        endpoints = [endpoint_from_option(m) for m in metrics]
        if bootstrap_server or bootstrap_controller:
            found = discover(bootstrap_server, bootstrap_controller)
            endpoints += [found[k] for k in sorted(found)]
    except AdminError as exc:
        fail(str(exc))
    if not endpoints:
        fail("no nodes found")
    top = Top(endpoints)
    top.frame()  # the first scrape: rates need two
    try:
        while True:
            time.sleep(interval)
            text = render(top.frame(), time.time())
            if once:
                click.echo(text)
                return
            sys.stdout.write("\x1b[H\x1b[2J" + text + "\n")  # home, clear: a plain ANSI redraw
            sys.stdout.flush()
    except KeyboardInterrupt:
        pass
