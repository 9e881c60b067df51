"""Apache Kafka's Java clients (AdminClient, an idempotent KafkaProducer with acks=all, a
KafkaConsumer in a classic group, then in a KIP-848 consumer group, then one of each in the same
group: the online upgrade and downgrade) against a 3-node kraft cluster.

tests/java/KraftClientSmoke.java is compiled here against the jars bench/kafka/pom.xml
pins; the test skips, saying why, without java / javac / mvn or when the download fails."""

import subprocess
import time

from cluster_helpers import fast_overrides, start_cluster
from kafka_helpers import compile_java, kafka_libs
from kraft.apache_kafka import java_command


def test_java_admin_producer_consumer_against_kraft(make_cluster, tmp_path):
    libs = kafka_libs()
    classes = compile_java("KraftClientSmoke.java", tmp_path / "classes", libs)
    cluster = start_cluster(make_cluster(controllers=3, brokers=0, overrides=fast_overrides()))
    started = time.monotonic()
    result = subprocess.run(
        java_command("KraftClientSmoke", [cluster.bootstrap_servers, "java-smoke", "java-smoke-group"],
                     libs=libs, extra_classpath=[str(classes)]),
        capture_output=True, text=True, timeout=180)
    elapsed = time.monotonic() - started
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    steps = result.stdout.splitlines()
    assert steps[-1] == "ok all", steps
    assert any(s.startswith("ok producer idempotent acks=all") for s in steps)
    assert any(s.startswith("ok consumer classic group") for s in steps)
    assert any(s.startswith("ok consumer consumer group") for s in steps)  # KIP-848, a regex subscription
    assert any(s.endswith("type=Consumer") for s in steps) and any(s.endswith("type=Classic") for s in steps)
    assert any(s.startswith("ok mixed group") for s in steps)  # the online upgrade and downgrade
    print(f"Java client smoke test: {elapsed:.1f}s\n" + result.stdout)
    cluster.stop_all()
