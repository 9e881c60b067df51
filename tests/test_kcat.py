"""kcat (librdkafka's command-line client) produces to and consumes from a kraft cluster."""

import shutil
import subprocess

import pytest

from cluster_helpers import fast_overrides, start_cluster

pytestmark = pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (apt-get install kcat)")


def kcat(*args, stdin=None):
    return subprocess.run(["kcat", *args], input=stdin, capture_output=True, timeout=60)


def test_kcat_produce_consume_and_list(make_cluster):
    cluster = start_cluster(make_cluster(controllers=1, brokers=0, overrides=fast_overrides()))
    bootstrap = cluster.bootstrap_servers
    lines = b"".join(b"key%d:value %d\n" % (i, i) for i in range(100))
    # Auto-created topic (auto.create.topics.enable=true), keys split at ':'.
    produced = kcat("-b", bootstrap, "-t", "kcat-topic", "-P", "-K:", "-z", "snappy", stdin=lines)
    assert produced.returncode == 0, produced.stderr
    consumed = kcat("-b", bootstrap, "-t", "kcat-topic", "-C", "-o", "beginning", "-e", "-f", "%k=%s\n")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.decode().splitlines() == [f"key{i}=value {i}" for i in range(100)]
    listing = kcat("-b", bootstrap, "-L", "-t", "kcat-topic")
    assert b"topic \"kcat-topic\" with 1 partitions" in listing.stdout
    cluster.stop_all()
