"""``kraftctl topics``: kafka-topics.sh's flags and output, over kraft's admin client."""

from __future__ import annotations

import base64
import json
import sys

import click

from cli.admin_client import AdminClient, AdminError, error_name
from metadata.controller.topics import INTERNAL_TOPICS

TOPIC_RESOURCE = 2


def parse_configs(items) -> list[tuple[str, str]]:
    out = []
    for item in items:
        for part in item.split(","):
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                raise AdminError(f"--config {part!r}: expected key=value")
            out.append((key.strip(), value))
    return out


def fail(message: str, code: int = 1):
    click.echo(f"Error: {message}", err=True)
    sys.exit(code)


def topic_id_text(topic_id) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


@click.command("topics")
@click.option("--bootstrap-server", required=True, help="host:port[,host:port...] of brokers.")
@click.option("--create", "action", flag_value="create")
@click.option("--list", "action", flag_value="list")
@click.option("--describe", "action", flag_value="describe")
@click.option("--delete", "action", flag_value="delete")
@click.option("--alter", "action", flag_value="alter")
@click.option("--topic", help="The topic (for --list/--describe: a filter).")
@click.option("--partitions", type=int, help="Partition count (--create, --alter).")
@click.option("--replication-factor", type=int, help="Replication factor (--create).")
@click.option("--config", "configs", multiple=True, metavar="KEY=VALUE", help="Topic config (--create).")
@click.option("--if-not-exists", is_flag=True, help="--create: no error when the topic exists.")
@click.option("--if-exists", is_flag=True, help="--delete/--alter/--describe: no error when it does not.")
@click.option("--under-replicated-partitions", is_flag=True, help="--describe: only partitions with ISR < replicas.")
@click.option("--exclude-internal", is_flag=True, help="Leave out internal topics.")
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--command-config", type=click.Path(dir_okay=False), default=None,
              help="Client properties: security.protocol, sasl.mechanism, sasl.jaas.config, ssl.*")
def topics_command(bootstrap_server, action, topic, partitions, replication_factor, configs, if_not_exists,
                   if_exists, under_replicated_partitions, exclude_internal, output, command_config):
    """Create, list, describe, alter and delete topics (as kafka-topics.sh)."""
    if action is None:
        fail("one of --create, --list, --describe, --delete, --alter is required")
    try:
        admin = AdminClient(bootstrap_server, command_config=command_config)
        if action == "create":
            _create(admin, topic, partitions, replication_factor, parse_configs(configs), if_not_exists, output)
        elif action == "list":
            _list(admin, topic, exclude_internal, output)
        elif action == "describe":
            _describe(admin, topic, under_replicated_partitions, exclude_internal, if_exists, output)
        elif action == "delete":
            _delete(admin, topic, if_exists, output)
        else:
            _alter(admin, topic, partitions, if_exists, output)
    except AdminError as exc:
        fail(str(exc))


def _need_topic(topic):
    if not topic:
        fail("--topic is required")


def _create(admin, topic, partitions, rf, configs, if_not_exists, output):
    _need_topic(topic)
    body = {"topics": [{"name": topic, "num_partitions": partitions if partitions is not None else -1,
                        "replication_factor": rf if rf is not None else -1, "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in configs]}],
            "timeout_ms": 30000, "validate_only": False}
    resp = admin.call("CreateTopics", body)
    result = resp["topics"][0]
    error = result["error_code"]
    if error == 36 and if_not_exists:  # TOPIC_ALREADY_EXISTS
        error = 0
    if error:
        fail(f"cannot create topic {topic}: {error_name(error)}" +
             (f" ({result['error_message']})" if result.get("error_message") else ""))
    if output == "json":
        click.echo(json.dumps({"topic": topic, "created": True}))
    else:
        click.echo(f"Created topic {topic}.")


def _topics(admin, topic, exclude_internal):
    md = admin.metadata(None)
    topics = [t for t in md["topics"] if t["error_code"] == 0]
    if topic:
        topics = [t for t in topics if t["name"] == topic]
    if exclude_internal:
        topics = [t for t in topics if not t["is_internal"]]
    return md, sorted(topics, key=lambda t: t["name"])


def _list(admin, topic, exclude_internal, output):
    _, topics = _topics(admin, topic, exclude_internal)
    names = [t["name"] for t in topics]
    click.echo(json.dumps(names) if output == "json" else "\n".join(names))


def _describe(admin, topic, under_replicated, exclude_internal, if_exists, output):
    _, topics = _topics(admin, topic, exclude_internal)
    if topic and not topics and not if_exists:
        fail(f"topic '{topic}' does not exist")
    configs = {}
    if topics:
        resp = admin.call("DescribeConfigs", {"resources": [
            {"resource_type": TOPIC_RESOURCE, "resource_name": t["name"], "configuration_keys": None}
            for t in topics], "include_synonyms": False, "include_documentation": False})
        for r in resp["results"]:
            configs[r["resource_name"]] = {c["name"]: c["value"] for c in r["configs"]
                                           if c["config_source"] == 1}
    described = []
    for t in topics:
        parts = sorted(t["partitions"], key=lambda p: p["partition_index"])
        if under_replicated:
            parts = [p for p in parts if len(p["isr_nodes"]) < len(p["replica_nodes"])]
            if not parts:
                continue
        described.append({
            "topic": t["name"], "topic_id": topic_id_text(t["topic_id"]), "partition_count": len(t["partitions"]),
            "replication_factor": len(t["partitions"][0]["replica_nodes"]) if t["partitions"] else 0,
            "configs": configs.get(t["name"], {}),
            "partitions": [{"partition": p["partition_index"], "leader": p["leader_id"],
                            "leader_epoch": p["leader_epoch"], "replicas": p["replica_nodes"],
                            "isr": p["isr_nodes"], "offline": p["offline_replicas"]} for p in parts]})
    if output == "json":
        click.echo(json.dumps(described, indent=2))
        return
    for d in described:
        cfg = ",".join(f"{k}={v}" for k, v in sorted(d["configs"].items()))
        if not under_replicated:
            click.echo(f"Topic: {d['topic']}\tTopicId: {d['topic_id']}\tPartitionCount: {d['partition_count']}\t"
                       f"ReplicationFactor: {d['replication_factor']}\tConfigs: {cfg}")
        for p in d["partitions"]:
            line = (f"\tTopic: {d['topic']}\tPartition: {p['partition']}\tLeader: "
                    f"{p['leader'] if p['leader'] >= 0 else 'none'}\tReplicas: {','.join(map(str, p['replicas']))}\t"
                    f"Isr: {','.join(map(str, p['isr']))}")
            if p["offline"]:
                line += f"\tOffline: {','.join(map(str, p['offline']))}"
            click.echo(line)


def _delete(admin, topic, if_exists, output):
    _need_topic(topic)
    if topic in INTERNAL_TOPICS:  # kafka-topics.sh refuses too: groups would lose their offsets
        fail(f"topic {topic} is a kafka internal topic and is not allowed to be marked for deletion")
    resp = admin.call("DeleteTopics", {"topic_names": [topic], "topics": [{"name": topic}],
                                       "timeout_ms": 30000})
    result = resp["responses"][0]
    error = result["error_code"]
    if error == 3 and if_exists:  # UNKNOWN_TOPIC_OR_PARTITION
        error = 0
    if error:
        fail(f"cannot delete topic {topic}: {error_name(error)}")
    click.echo(json.dumps({"topic": topic, "deleted": True}) if output == "json" else f"Deleted topic {topic}.")


def _alter(admin, topic, partitions, if_exists, output):
    _need_topic(topic)
    if partitions is None:
        fail("--alter needs --partitions N")
    resp = admin.call("CreatePartitions", {"topics": [{"name": topic, "count": partitions, "assignments": None}],
                                           "timeout_ms": 30000, "validate_only": False})
    result = resp["results"][0]
    error = result["error_code"]
    if error == 3 and if_exists:
        error = 0
    if error:
        fail(f"cannot alter topic {topic}: {error_name(error)}" +
             (f" ({result['error_message']})" if result.get("error_message") else ""))
    click.echo(json.dumps({"topic": topic, "partitions": partitions}) if output == "json"
               else f"Topic {topic} now has {partitions} partitions.")
