"""A node keeps the memory it frees for the next request (kraft/malloc_tuning.py): taking
produce load, its process faults in almost no new pages, where with glibc's default
thresholds every request-sized buffer is mapped, zeroed by the kernel and given back."""

from __future__ import annotations

from pathlib import Path

import pytest
from cluster_helpers import create_led_topic, fast_overrides, start_cluster

from kraft.local_cluster import LocalCluster
from kraft.malloc_tuning import keep_freed_memory

RECORD = b"x" * 1000
MEGABYTES = 40


def minor_faults(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])


def load(producer) -> None:
    for i in range(MEGABYTES * 1000):
        producer.produce("load", RECORD, partition=i % 3)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def faults_per_mb(tmp_path) -> float:
    """Minor page faults of a one-node cluster's process per MB produced to it, after a
    first load of the same size (so start-up and first-touch allocations are left out)."""
    from confluent_kafka import Producer

    cluster = LocalCluster(tmp_path, controllers=1, brokers=0, overrides=fast_overrides())
    try:
        start_cluster(cluster)
        create_led_topic(cluster, "load", 3, 1)
        pid = next(iter(cluster.nodes.values())).process.pid
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "1", "linger.ms": 5,
                             "batch.size": 1 << 20, "compression.type": "none"})
        load(producer)
        before = minor_faults(pid)
        load(producer)
        faults = minor_faults(pid) - before
        del producer  # (closed before the node stops, so it does not retry its connections)
        return faults / MEGABYTES
    finally:
        cluster.stop_all()


def test_a_node_under_produce_load_faults_in_almost_no_new_memory(tmp_path, monkeypatch):
    for name in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES"):
        monkeypatch.delenv(name, raising=False)
    if "unchanged" in keep_freed_memory({}):
        pytest.skip("not glibc")
    tuned = faults_per_mb(tmp_path / "tuned")
    # glibc's own defaults, given explicitly: the node leaves them alone
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", str(128 << 10))
    default = faults_per_mb(tmp_path / "default")
    print(f"minor faults per MB produced: {tuned:.0f} kept, {default:.0f} with glibc's defaults")
    assert tuned < 50, f"{tuned:.0f} minor faults per MB produced (glibc's defaults: {default:.0f})"
    assert default > 4 * tuned + 50
