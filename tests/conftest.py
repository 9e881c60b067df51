import functools
import os
from pathlib import Path

import pytest
import trio

REPO = Path(__file__).resolve().parents[1]
SPEC_DIR = Path(os.environ.get("KRAFT_KAFKA_SPEC", REPO.parent / "shared" / "kafka-spec"))


@pytest.hookimpl(trylast=True)  # after pytest-trio's trio_mode has marked the async tests
def pytest_collection_modifyitems(config, items):
    """Async tests run with strict exception groups on every trio version, as kraft itself
    does (kraft.trio_run): pytest-trio's plain trio.run is strict only from trio 0.25 on."""
    strict_run = functools.partial(trio.run, strict_exception_groups=True)
    for item in items:
        if item.get_closest_marker("trio") is not None:
            item.add_marker(pytest.mark.trio(run=strict_run), append=False)


@pytest.fixture
def spec_dir() -> Path:
    if not (SPEC_DIR / "message").is_dir():
        pytest.skip(f"the Kafka message specification is not at {SPEC_DIR} (set KRAFT_KAFKA_SPEC)")
    return SPEC_DIR


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """One local Spark session for every Spark test, stopped at the end of the run."""
    pytest.importorskip("pyspark")
    from jepsen.checkers.spark import spark_session

    s = spark_session("local[2]", shuffle_partitions=4,
                      log_dir=str(tmp_path_factory.mktemp("spark-logs")),
                      records=100_000)  # the tests' histories are all smaller: short checks
    yield s
    s.stop()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the item, so a fixture can tell that its test failed."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


NODE_LOG_TAIL_LINES = 60


def print_node_log_tails(clusters) -> None:
    """The end of every node's log, printed into a failed test's report: a CI run keeps
    nothing else of the processes it killed."""
    for cluster in clusters:
        for node in cluster.nodes.values():
            try:
                lines = node.log_path.read_text(errors="replace").splitlines()
            except OSError:
                continue
            shown = min(len(lines), NODE_LOG_TAIL_LINES)
            print(f"----- {node.log_path} (last {shown} of {len(lines)} lines)")
            print("\n".join(lines[-NODE_LOG_TAIL_LINES:]))


@pytest.fixture
def make_cluster(request, tmp_path):
    """Build LocalClusters under tmp_path; every process is killed at the end of the test,
    and a failed test's report ends with each node's last log lines."""
    from kraft.local_cluster import LocalCluster

    clusters = []

    def make(**kwargs):
        cluster = LocalCluster(tmp_path / f"cluster{len(clusters)}", **kwargs)
        clusters.append(cluster)
        return cluster

    yield make
    for cluster in clusters:
        for node in cluster.nodes.values():
            if node.running:
                node.process.kill()
                node.process.wait()
    call = getattr(request.node, "report_call", None)
    if call is not None and call.failed:
        print_node_log_tails(clusters)
