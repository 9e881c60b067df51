"""server.properties parsing and validation (kraft.properties, kraft.server_config)."""

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
