"""kraft's tables of broker keys held against Apache Kafka's own (the pinned release's
KafkaConfig, read by tests/java/KafkaBrokerConfigKeys.java): every key Kafka defines is one
kraft acts on (``KEYS``), loads without acting on (``NOT_USED``), refuses unless at Kafka's
default (``NOT_HONOURED``), or ``broker.id``; every name in those tables is Kafka's; and
where kraft acts on a Kafka key its default is Kafka's, but for the differences listed here
with their reasons.  A Kafka upgrade that adds keys fails here, naming them.

Skips, saying why, without java / javac / mvn or when the pinned Kafka cannot be fetched."""

import subprocess

import pytest

from kafka_helpers import compile_java, kafka_libs
from kraft.kafka_broker_keys import NOT_HONOURED, NOT_USED, refusal
from kraft.server_config import KEYS

# kraft's default differs from Kafka's on purpose
DEFAULTS_DIFFER = {
    "log.dir": "kraft's own name for its default directory (/tmp/kraft-logs)",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT is mapped as well, so that the sample files need no map",
    "group.coordinator.rebalance.protocols": "kraft has no streams groups (KIP-1071)",
}


@pytest.fixture(scope="module")
def kafka_keys(tmp_path_factory) -> dict[str, tuple[str, str]]:
    libs = kafka_libs()
    classes = compile_java("KafkaBrokerConfigKeys.java", tmp_path_factory.mktemp("classes"), libs)
    out = subprocess.run(["java", "-cp", f"{classes}:{libs}/*", "KafkaBrokerConfigKeys"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    keys = {}
    for line in out.stdout.splitlines():
        name, type_, default = line.split("\t")
        keys[name] = (type_, default)
    assert len(keys) > 300, out.stdout[:500]
    return keys


def test_every_kafka_broker_key_is_in_one_of_krafts_tables(kafka_keys):
    tables = [set(KEYS), set(NOT_USED), set(NOT_HONOURED), {"broker.id"}]
    missing = sorted(k for k in kafka_keys if not any(k in t for t in tables))
    assert not missing, f"Kafka broker keys kraft neither uses nor lists as not used: {missing}"
    twice = sorted(k for k in kafka_keys if sum(k in t for t in tables) > 1)
    assert not twice, twice


def test_every_name_in_the_not_used_tables_is_kafkas(kafka_keys):
    assert sorted(set(NOT_USED) - set(kafka_keys)) == []
    assert sorted(set(NOT_HONOURED) - set(kafka_keys)) == []


def test_a_refused_key_at_kafkas_default_is_taken(kafka_keys):
    for name in NOT_HONOURED:
        _, default = kafka_keys[name]
        assert refusal(name, "" if default in ("<null>", "<none>") else default) is None, (name, default)
        assert refusal(name, "com.example.Custom") is not None or name == "remote.log.storage.system.enable"
    assert refusal("remote.log.storage.system.enable", "true")


def _as_kafka_writes(value) -> str:
    if value is None:
        return "<null>"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


def test_krafts_defaults_of_kafka_keys_are_kafkas(kafka_keys):
    differ = {}
    for name, key in KEYS.items():
        if name not in kafka_keys or name in DEFAULTS_DIFFER:
            continue
        type_, theirs = kafka_keys[name]
        ours = _as_kafka_writes(key.default)
        if type_ == "PASSWORD" or theirs == "<none>":
            continue
        if ours in ("", "<null>") and theirs in ("", "<null>"):
            continue
        if type_ == "DOUBLE" and float(ours) == float(theirs):
            continue
        if type_ == "LIST" and sorted(ours.split(",")) == sorted(theirs.split(",")):
            continue
        if ours != theirs:
            differ[name] = (ours, theirs)
    assert not differ, f"kraft's default / Kafka's: {differ}"
    assert set(DEFAULTS_DIFFER) <= set(KEYS) & set(kafka_keys)
