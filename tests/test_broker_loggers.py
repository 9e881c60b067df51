"""A running node's log levels (the BROKER_LOGGER config resource, KIP-412): DescribeConfigs
lists its loggers, IncrementalAlterConfigs sets and unsets their levels, with Kafka's checks
and errors, on the node that answers.  Kafka's kafka-configs --entity-type broker-loggers
is in test_kafka_tools.py."""

import uuid

import pytest

from cluster_helpers import fast_overrides, request, start_cluster, wait_until
from kraft.local_cluster import LocalCluster
from kraft.protocol.error_codes import ErrorCode

LOGGER = 8  # ConfigResource.Type.BROKER_LOGGER
SET, DELETE, APPEND = 0, 1, 2


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    cluster = LocalCluster(tmp_path_factory.mktemp("loggers"), controllers=1, brokers=0,
                           overrides=fast_overrides())
    try:
        start_cluster(cluster)
        yield cluster.nodes[1]
    finally:
        cluster.stop_all()


def describe(node, keys=None, name="1") -> dict:
    resp = request(node.host, node.broker_port, "DescribeConfigs", 4, {"resources": [
        {"resource_type": LOGGER, "resource_name": name, "configuration_keys": keys}],
        "include_synonyms": False, "include_documentation": False})
    return resp["results"][0]


def levels(node, keys=None) -> dict:
    result = describe(node, keys)
    assert result["error_code"] == 0, result
    return {c["name"]: c["value"] for c in result["configs"]}


def alter(node, *changes, name="1", validate_only=False, extra=()) -> list:
    resources = [{"resource_type": LOGGER, "resource_name": name,
                  "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in changes]}, *extra]
    resp = request(node.host, node.broker_port, "IncrementalAlterConfigs", 1,
                   {"resources": resources, "validate_only": validate_only})
    return resp["responses"]


def test_describe_lists_the_nodes_loggers_with_kafkas_level_names(node):
    result = describe(node)
    assert result["error_code"] == 0
    configs = {c["name"]: c for c in result["configs"]}
    assert configs["root"]["value"] == "INFO"
    assert configs["broker.replica_fetcher"]["value"] == "INFO"  # the root's, inherited
    assert {c["config_source"] for c in configs.values()} == {6}  # DYNAMIC_BROKER_LOGGER_CONFIG
    assert not any(c["read_only"] or c["is_sensitive"] for c in configs.values())
    assert levels(node, ["root", "kraft.raft.driver"]).keys() == {"root", "kraft.raft.driver"}
    for other in ("2", "", "x"):
        assert describe(node, name=other)["error_code"] == ErrorCode.INVALID_REQUEST


def test_set_and_unset_a_level_and_a_packages_level(node):
    assert alter(node, ("broker.replica_fetcher", SET, "DEBUG"))[0]["error_code"] == 0
    assert levels(node, ["broker.replica_fetcher"]) == {"broker.replica_fetcher": "DEBUG"}
    # a package: its modules without a level of their own follow it
    assert alter(node, ("broker", SET, "WARN"))[0]["error_code"] == 0
    got = levels(node, ["broker", "broker.replica_fetcher", "broker.api", "kraft.raft.driver", "root"])
    assert got == {"broker": "WARN", "broker.replica_fetcher": "DEBUG", "broker.api": "WARN",
                   "kraft.raft.driver": "INFO", "root": "INFO"}
    assert alter(node, ("broker.replica_fetcher", DELETE, None), ("broker", DELETE, None))[0]["error_code"] == 0
    assert set(levels(node, ["broker.replica_fetcher", "broker.api"]).values()) == {"INFO"}
    # validate_only checks and changes nothing
    assert alter(node, ("broker.replica_fetcher", SET, "TRACE"), validate_only=True)[0]["error_code"] == 0
    assert levels(node, ["broker.replica_fetcher"]) == {"broker.replica_fetcher": "INFO"}


@pytest.mark.parametrize("changes, code, words", [
    ([("no.such.logger", SET, "DEBUG")], ErrorCode.INVALID_CONFIG, "does not exist"),
    ([("root", SET, "debug")], ErrorCode.INVALID_CONFIG, "Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN"),
    ([("root", SET, "VERBOSE")], ErrorCode.INVALID_CONFIG, "not a supported log level"),
    ([("root", DELETE, None)], ErrorCode.INVALID_REQUEST, "root logger is not allowed"),
    ([("root", APPEND, "DEBUG")], ErrorCode.INVALID_REQUEST, "APPEND operation is not allowed"),
    ([("root", SET, None)], ErrorCode.INVALID_REQUEST, "Null value"),
    ([("root", SET, "WARN"), ("root", SET, "ERROR")], ErrorCode.INVALID_REQUEST, "duplicate config keys"),
    # one bad change refuses the resource: the good one before it is not applied
    ([("broker.api", SET, "ERROR"), ("root", SET, "LOUD")], ErrorCode.INVALID_CONFIG, "LOUD"),
])
def test_bad_changes_are_refused_with_kafkas_errors_and_change_nothing(node, changes, code, words):
    before = levels(node)
    answer = alter(node, *changes)[0]
    assert answer["error_code"] == code and words in answer["error_message"], answer
    assert levels(node) == before


def test_another_nodes_loggers_and_a_resource_named_twice_are_refused(node):
    assert alter(node, ("root", SET, "INFO"), name="2")[0]["error_code"] == ErrorCode.INVALID_REQUEST
    twice = {"resource_type": LOGGER, "resource_name": "1",
             "configs": [{"name": "broker.api", "config_operation": SET, "value": "ERROR"}]}
    answers = alter(node, ("broker.api", SET, "ERROR"), extra=[twice])
    assert [a["error_code"] for a in answers] == [ErrorCode.INVALID_REQUEST] * 2
    assert levels(node, ["broker.api"]) == {"broker.api": "INFO"}


def test_loggers_and_a_topic_config_in_one_request(node):
    """The loggers are changed on the node, the topic's config by the controller; the
    answers keep the request's order."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"cfg-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": f"{node.host}:{node.broker_port}"})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    topic_change = {"resource_type": 2, "resource_name": topic,
                    "configs": [{"name": "retention.ms", "config_operation": SET, "value": "3600000"}]}
    answers = alter(node, ("broker.api", SET, "DEBUG"), extra=[topic_change])
    assert [(a["resource_type"], a["error_code"]) for a in answers] == [(LOGGER, 0), (2, 0)], answers
    assert levels(node, ["broker.api"]) == {"broker.api": "DEBUG"}
    resp = request(node.host, node.broker_port, "DescribeConfigs", 4, {"resources": [
        {"resource_type": 2, "resource_name": topic, "configuration_keys": ["retention.ms"]}],
        "include_synonyms": False, "include_documentation": False})
    assert resp["results"][0]["configs"][0]["value"] == "3600000"
    assert alter(node, ("broker.api", DELETE, None))[0]["error_code"] == 0
    # the legacy AlterConfigs has no BROKER_LOGGER resource (as Kafka)
    resp = request(node.host, node.broker_port, "AlterConfigs", 1, {"resources": [
        {"resource_type": LOGGER, "resource_name": "1", "configs": [{"name": "root", "value": "DEBUG"}]}],
        "validate_only": False})
    assert resp["responses"][0]["error_code"] == ErrorCode.INVALID_REQUEST


def test_a_level_set_takes_effect_in_the_nodes_log(node):
    """Each change logs a WARN line (as Kafka's RuntimeLoggerManager); with that logger set
    to ERROR, the next change logs none, and once unset they are logged again."""
    def logged(what: str) -> bool:
        return what in node.log_path.read_text(errors="replace")

    assert alter(node, ("broker.replica_manager", SET, "WARN"))[0]["error_code"] == 0
    wait_until(lambda: logged("Updated the log level of broker.replica_manager to WARN"), timeout_s=10,
               what="the change logged")
    assert alter(node, ("broker.broker_loggers", SET, "ERROR"), ("broker.replica_manager", SET, "DEBUG"))[0][
        "error_code"] == 0
    assert levels(node, ["broker.replica_manager"]) == {"broker.replica_manager": "DEBUG"}
    assert alter(node, ("broker.broker_loggers", DELETE, None), ("broker.replica_manager", DELETE, None))[0][
        "error_code"] == 0
    wait_until(lambda: logged("Unset the log level of broker.replica_manager"), timeout_s=10, what="the unset logged")
    text = node.log_path.read_text(errors="replace")
    assert "Updated the log level of broker.replica_manager to DEBUG" not in text


def test_kraftctl_configs_broker_loggers(node):
    from cluster_helpers import kraftctl

    bs = f"{node.host}:{node.broker_port}"
    args = ("configs", "--bootstrap-server", bs, "--entity-type", "broker-loggers")
    r = kraftctl(*args, "--entity-name", "1", "--alter", "--add-config", "broker.group=DEBUG")
    assert r.returncode == 0 and "Completed updating config for broker-logger 1." in r.stdout, r.stderr
    r = kraftctl(*args, "--entity-name", "1", "--describe")
    assert r.returncode == 0 and "Dynamic configs for broker-logger 1 are:" in r.stdout
    assert "  broker.group=DEBUG" in r.stdout and "  root=INFO" in r.stdout
    r = kraftctl(*args, "--entity-name", "1", "--alter", "--delete-config", "broker.group")
    assert r.returncode == 0
    assert levels(node, ["broker.group"]) == {"broker.group": "INFO"}
    r = kraftctl(*args, "--entity-name", "1", "--alter", "--add-config", "root=LOUD")
    assert r.returncode != 0 and "INVALID_CONFIG" in r.stderr and "not a supported log level" in r.stderr
    r = kraftctl(*args, "--describe")
    assert r.returncode != 0 and "needs --entity-name" in r.stderr
    r = kraftctl(*args, "--entity-name", "7", "--describe")
    assert r.returncode != 0 and "not a live broker" in r.stderr
