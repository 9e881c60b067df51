"""server.properties parsing and validation (kraft.properties, kraft.server_config)."""

import re

import pytest

from kraft.properties import PropertiesError, format_properties, parse_properties
from kraft.server_config import ConfigError, ServerConfig, parse_overrides

COMBINED = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9097",
    "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    "controller.listener.names": "CONTROLLER",
    "log.dirs": "/tmp/a,/tmp/b",
}


def test_java_properties_syntax():
    text = "# comment\n! also comment\na=1\nb : two words \nc three\nlong=x\\\n    y\nesc=tab\\there\\u0041\nkey\\=with\\:seps=v\n\n"
    assert parse_properties(text) == {
        "a": "1", "b": "two words", "c": "three", "long": "xy", "esc": "tab\thereA", "key=with:seps": "v",
    }
    assert parse_properties(format_properties({"k=1": "a\nb", "x": "y"})) == {"k=1": "a\nb", "x": "y"}
    with pytest.raises(PropertiesError, match="bad \\\\u escape"):
        parse_properties("a=\\u12")


def test_combined_node_config_is_typed():
    c = ServerConfig.from_properties(COMBINED)
    assert c.is_broker and c.is_controller and c.node_id == 1
    assert [v.node_id for v in c.voters] == [1, 2, 3] and c.voters[1].port == 9095
    assert c.listener("CONTROLLER").port == 9093
    assert [e.listener for e in c.broker_listeners] == ["PLAINTEXT"]
    assert c.log_dirs == ("/tmp/a", "/tmp/b") and c.metadata_log_dir == "/tmp/a"
    assert c["broker.session.timeout.ms"] == 9000 and c["controller.quorum.election.timeout.ms"] == 1000
    assert c.retention_ms == 168 * 3_600_000


def test_kafka_sample_tuning_keys_are_accepted():
    ServerConfig.from_properties(dict(COMBINED, **{"num.network.threads": "3", "num.io.threads": "8"}))


@pytest.mark.parametrize("change,message", [
    ({"node.idd": "1"}, "node.idd: unknown configuration key"),
    ({"node.id": "one"}, "node.id: 'one' is not an integer"),
    ({"node.id": "-3"}, "node.id: '-3' must be at least 0"),
    ({"process.roles": "broker,zookeeper"}, "process.roles"),
    ({"controller.quorum.voters": "1@host"}, "controller.quorum.voters: '1@host'"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092"}, "a controller needs a listener"),
    ({"listeners": "PLAINTEXT://127.0.0.1:99999,CONTROLLER://:1"}, "out of range"),
    ({"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:TLS"}, "must be one of"),
    ({"listener.name.plaintext.ssl.client.auth": "maybe"}, "must be none, requested or required"),
    ({"listener.name.plaintext.ssl.keystore.nonsense": "x"}, "unknown configuration key"),
    ({"ssl.principal.mapping.rules": "RULE:^CN=(.*)$/$1/"}, "DEFAULT only"),
    ({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"}, "not both"),
    ({"auto.create.topics.enable": "yes"}, "not true or false"),
    ({"controller.quorum.engine": "zk"}, "must be kraft or pysyncobj"),
    ({"controller.quorum.engine": "pysyncobj"}, "controller.quorum.pysyncobj.password: required"),
    ({"replica.fetch.wait.max.ms": "40000"}, "should always be less than or equal to replica.lag.time.max.ms"),
    ({"replica.fetch.min.bytes": "0"}, "replica.fetch.min.bytes: '0' must be at least 1"),
])
def test_bad_config_names_the_key(change, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(".", r"\.")):
        ServerConfig.from_properties(dict(COMBINED, **change))


def test_required_keys_and_overrides():
    props = dict(COMBINED)
    del props["node.id"]
    with pytest.raises(ConfigError, match="node.id: required"):
        ServerConfig.from_properties(props)
    c = ServerConfig.from_properties(props, parse_overrides(["node.id=1", "num.partitions=6"]))
    assert c.node_id == 1 and c["num.partitions"] == 6
    with pytest.raises(ConfigError, match="expected key=value"):
        parse_overrides(["novalue"])


def test_broker_only_node_must_not_listen_on_controller_listener():
    props = dict(COMBINED, **{"process.roles": "broker", "node.id": "4"})
    with pytest.raises(ConfigError, match="broker-only node"):
        ServerConfig.from_properties(props)
    props["listeners"] = "PLAINTEXT://127.0.0.1:9092"
    assert ServerConfig.from_properties(props).is_controller is False


def test_log_cleaner_keys():
    c = ServerConfig.from_properties(COMBINED)
    assert c["log.cleaner.enable"] is True and c["log.cleaner.backoff.ms"] == 15000
    c = ServerConfig.from_properties(dict(COMBINED, **{"log.cleaner.backoff.ms": "200",
                                                       "log.cleaner.enable": "false"}))
    assert c["log.cleaner.enable"] is False and c["log.cleaner.backoff.ms"] == 200
    with pytest.raises(ConfigError, match="log.cleaner.backoff.ms: '-1' must be at least 0"):
        ServerConfig.from_properties(dict(COMBINED, **{"log.cleaner.backoff.ms": "-1"}))


# A server.properties written for Apache Kafka 4.1, with keys kraft has no counterpart for.
KAFKA_FILE_KEYS = {
    "num.replica.alter.log.dirs.threads": "2", "log.cleaner.threads": "2", "metric.reporters": "",
    "group.max.size": "100", "controlled.shutdown.enable": "true", "fetch.max.bytes": "57671680",
    "ssl.protocol": "TLSv1.3", "connections.max.reauth.ms": "0",
    "principal.builder.class": "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
    "remote.log.storage.system.enable": "false",
}


def test_a_kafka_file_loads_and_its_unused_keys_are_named():
    c = ServerConfig.from_properties(dict(COMBINED, **KAFKA_FILE_KEYS))
    assert c.not_used == tuple(sorted(KAFKA_FILE_KEYS))
    # a plugin's own key (Kafka hands it to the plugin) loads too, named with them
    c = ServerConfig.from_properties(dict(COMBINED, **{"cruise.control.metrics.topic": "__CruiseControlMetrics"}))
    assert c.not_used == ("cruise.control.metrics.topic",)


@pytest.mark.parametrize("change,message", [
    ({"log.retention.hour": "1"}, "log.retention.hour: unknown configuration key (did you mean log.retention.hours?)"),
    ({"log.cleaner.thread": "2"}, "log.cleaner.thread: unknown configuration key (did you mean log.cleaner.threads?)"),
    ({"ssl.client.authentication": "required"}, "ssl.client.authentication: unknown configuration key"),
    ({"principal.builder.class": "com.example.Builder"}, "kraft runs no Java classes"),
    ({"create.topic.policy.class.name": "com.example.Policy"}, "the policy would not be enforced"),
    ({"ssl.cipher.suites": "TLS_AES_256_GCM_SHA384"}, "does not restrict cipher suites"),
    ({"remote.log.storage.system.enable": "true"}, "kraft has no tiered storage"),
    ({"broker.id": "2"}, "broker.id and node.id: '2' and '1'"),
])
def test_a_key_kraft_cannot_honour_or_a_likely_typo_is_refused(change, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        ServerConfig.from_properties(dict(COMBINED, **change))


def test_broker_id_stands_for_node_id():
    props = dict(COMBINED, **{"broker.id": "1"})
    del props["node.id"]
    assert ServerConfig.from_properties(props).node_id == 1
    assert ServerConfig.from_properties(dict(COMBINED, **{"broker.id": "1"})).not_used == ()


def test_log_cleaner_defaults_of_topic_keys_reach_every_topic():
    from broker.replica_manager import log_config_for

    c = ServerConfig.from_properties(dict(COMBINED, **{
        "log.cleaner.delete.retention.ms": "1000", "log.cleaner.min.compaction.lag.ms": "2000",
        "log.cleaner.max.compaction.lag.ms": "3000", "log.cleaner.min.cleanable.ratio": "0.25",
        "log.segment.delete.delay.ms": "4000"}))
    log = log_config_for(c, {})
    assert (log.delete_retention_ms, log.min_compaction_lag_ms, log.max_compaction_lag_ms,
            log.min_cleanable_dirty_ratio, log.file_delete_delay_ms) == (1000, 2000, 3000, 0.25, 4000)
    assert log_config_for(c, {"delete.retention.ms": "5"}).delete_retention_ms == 5
    with pytest.raises(ConfigError, match="log.cleaner.min.cleanable.ratio: '1.5' must be in"):
        ServerConfig.from_properties(dict(COMBINED, **{"log.cleaner.min.cleanable.ratio": "1.5"}))
