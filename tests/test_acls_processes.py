"""ACL authorization with real nodes and real clients (issue 21).

One 3-node cluster (every node controller and broker) on SASL_PLAINTEXT with Kafka's
StandardAuthorizer on (``authorizer.class.name``); its nodes and the ``admin`` user are
``super.users``, so replication, the quorum and the admin keep working while SCRAM users
``alice`` (granted ACLs), ``bob`` (few) and ``carol`` (none) get what their ACLs allow, through
confluent-kafka (Producer, Consumer, AdminClient's create/describe/delete_acls),
kafka-python and ``kraftctl acls``.  Snapshots are frequent, so the restart at the end
rebuilds the ACLs from a snapshot as well as from the log.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import pytest

from cluster_helpers import fast_overrides, request, start_cluster, wait_cluster_ready, wait_until
from kraft.local_cluster import LocalCluster
from kraft.properties import format_properties
from kraft.security.dev_cluster import ClusterSecurity

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

USERS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    security = ClusterSecurity("SASL_PLAINTEXT", users=dict(USERS), authorizer=True)
    c = LocalCluster(tmp_path_factory.mktemp("acls"), controllers=3, security=security,
                     overrides=fast_overrides(**{"metadata.log.max.record.bytes.between.snapshots": "8192"}))
    try:
        start_cluster(c)
        yield c
    finally:
        c.stop_all()


def conf(cluster, user="admin", **extra):
    return {"bootstrap.servers": cluster.bootstrap_servers, "broker.address.family": "v4",
            **cluster.security.librdkafka_config(user=user), **extra}


def admin(cluster, user="admin") -> AdminClient:
    return AdminClient(conf(cluster, user))


def grant(cluster, *bindings):
    client = admin(cluster)  # (kept: a client destroyed fails its futures)
    for future in client.create_acls(list(bindings)).values():
        future.result(30)


def topic_acl(name, principal, op, permission=ALLOW, pattern=LITERAL, rtype=ResourceType.TOPIC):
    return AclBinding(rtype, name, pattern, principal, "*", op, permission)


def wait_visible(cluster, user, topic):
    """Until every broker lets ``user`` describe ``topic``: a new ACL applies on a broker once
    its metadata image has it, a moment after CreateAcls returns (as in Kafka)."""
    security = cluster.security.client_security(user=user)

    def visible():
        return all(request(b.host, b.broker_port, "Metadata", 12, {"topics": [{"name": topic}],
                                                                    "allow_auto_topic_creation": False},
                           security=security)["topics"][0]["error_code"] == 0 for b in cluster.brokers)
    wait_until(visible, timeout_s=60, what=f"{topic} visible to {user} on every broker")


def create_topic(cluster, name, rf=3):
    client = admin(cluster)
    client.create_topics([NewTopic(name, 1, rf)])[name].result(60)


def produce(cluster, user, topic, values=(b"v",), timeout_s=15):
    """The delivery errors (None for a delivered message) of ``values`` sent as ``user``."""
    producer = Producer(conf(cluster, user, **{"message.timeout.ms": timeout_s * 1000, "acks": "all"}))
    delivered = []
    for v in values:
        producer.produce(topic, v, on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(timeout_s + 30)
    return delivered


def produce_code(cluster, user, topic, timeout_s=15):
    errors = produce(cluster, user, topic, timeout_s=timeout_s)
    assert len(errors) == 1
    return errors[0].code() if errors[0] is not None else 0


def consume(cluster, user, topic, count, group=None, subscribe=True, timeout_s=30):
    """(values read, the first error the consumer reported): subscribed in ``group``, or
    assigned partition 0 (a consumer with a group.id still finds its coordinator)."""
    subscribe = subscribe and group is not None
    consumer = Consumer(conf(cluster, user, **{"group.id": group or f"g-{uuid.uuid4()}",
                                               "enable.auto.commit": False, "auto.offset.reset": "earliest"}))
    if subscribe:
        consumer.subscribe([topic])
    else:
        consumer.assign([TopicPartition(topic, 0, 0)])
    got, error = [], None
    deadline = time.monotonic() + timeout_s
    try:
        while len(got) < count and error is None and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() != KafkaError._PARTITION_EOF:
                    error = m.error().code()
            else:
                got.append(m.value())
        if subscribe and error is None and got:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got, error


def describe_all(cluster) -> set[str]:
    client = admin(cluster)
    every = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                             AclPermissionType.ANY)
    return {str(b) for b in client.describe_acls(every).result(30)}


def kraftctl(cluster, *args, input_text=None) -> subprocess.CompletedProcess:
    props = cluster.base_dir / "admin.properties"
    if not props.exists():
        props.write_text(format_properties(cluster.security.client_properties()))
    return subprocess.run([sys.executable, "-m", "cli.main", "acls", "--bootstrap-server", cluster.bootstrap_servers,
                           "--command-config", str(props), *args], capture_output=True, text=True,
                          timeout=120, input=input_text, env={**os.environ, "PYTHONPATH": os.getcwd()})


def test_nodes_and_super_users_keep_working_with_the_authorizer_on(cluster):
    """Followers fetch as the brokers' own principal (a super user): an RF 3 topic's ISR
    fills; the admin may do anything, even where a DENY of everything for everyone stands."""
    create_topic(cluster, "locked")
    node = cluster.brokers[0]
    security = cluster.security.client_security()

    def isr():
        md = request(node.host, node.broker_port, "Metadata", 12, {"topics": [{"name": "locked"}]}, security=security)
        partitions = md["topics"][0]["partitions"]  # (empty until this broker has the topic)
        return len(partitions[0]["isr_nodes"]) if partitions else 0
    wait_until(lambda: isr() == 3, timeout_s=60, what="the ISR of 3 (follower fetches authorized)")
    grant(cluster, topic_acl("locked", "User:*", AclOperation.ALL, DENY))
    assert produce(cluster, "admin", "locked", [b"a", b"b"]) == [None, None]
    assert consume(cluster, "admin", "locked", 2)[0] == [b"a", b"b"]
    assert produce_code(cluster, "alice", "locked") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # the controller listener authorizes too: DescribeQuorum needs DESCRIBE on the cluster
    controller = cluster.controllers[0]
    body = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}
    as_alice = request(controller.host, controller.controller_port, "DescribeQuorum", 0, body,
                       security=cluster.security.client_security("CONTROLLER", user="alice"))
    assert as_alice["error_code"] == 31  # CLUSTER_AUTHORIZATION_FAILED
    as_admin = request(controller.host, controller.controller_port, "DescribeQuorum", 0, body,
                       security=cluster.security.client_security("CONTROLLER"))
    assert as_admin["error_code"] == 0 and as_admin["topics"][0]["partitions"][0]["leader_id"] >= 0


def test_acl_matrix_with_confluent_kafka_and_kafka_python(cluster):
    create_topic(cluster, "matrix")
    grant(cluster,
          topic_acl("matrix", "User:alice", AclOperation.READ), topic_acl("matrix", "User:alice", AclOperation.WRITE),
          topic_acl("matrix", "User:alice", AclOperation.ALTER_CONFIGS),
          topic_acl("g-alice", "User:alice", AclOperation.READ, rtype=ResourceType.GROUP),
          topic_acl("alice-", "User:alice", AclOperation.CREATE, pattern=PREFIXED),
          topic_acl("alice-", "User:alice", AclOperation.DELETE, pattern=PREFIXED))
    client = admin(cluster)
    bindings = client.describe_acls(AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice", None, AclOperation.ANY,
        AclPermissionType.ANY)).result(30)
    assert len(bindings) == 6
    wait_visible(cluster, "alice", "matrix")  # the six came in one request: one batch

    # write: alice yes, bob no
    assert produce(cluster, "alice", "matrix", [b"m1", b"m2"]) == [None, None]
    assert produce_code(cluster, "bob", "matrix") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # read: in her group alice reads; bob's group read is refused, and so is his fetch
    got, error = consume(cluster, "alice", "matrix", 2, group="g-alice")
    assert (got, error) == ([b"m1", b"m2"], None)
    assert consume(cluster, "bob", "matrix", 1, group="g-alice")[1] == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert consume(cluster, "bob", "matrix", 1)[1] == KafkaError.GROUP_AUTHORIZATION_FAILED
    # with his own group, and DESCRIBE (not READ) on the topic, bob's Fetch itself is refused
    grant(cluster, topic_acl("g-bob", "User:bob", AclOperation.READ, rtype=ResourceType.GROUP),
          topic_acl("matrix", "User:bob", AclOperation.DESCRIBE))
    wait_until(lambda: consume(cluster, "bob", "matrix", 1, group="g-bob", subscribe=False)[1] ==
               KafkaError.TOPIC_AUTHORIZATION_FAILED, timeout_s=60, what="bob's fetch refused")
    # describe: Metadata lists only the topics one may describe
    assert "matrix" in admin(cluster, "alice").list_topics(timeout=30).topics
    assert "matrix" not in admin(cluster, "carol").list_topics(timeout=30).topics
    # and so does DescribeTopicPartitions (Kafka 4's describeTopics): carol's page counts only
    # what she may see, a topic she names is refused without saying whether it exists
    node = cluster.brokers[0]

    def described(user, names):
        return request(node.host, node.broker_port, "DescribeTopicPartitions", 0, {
            "topics": [{"name": n} for n in names], "response_partition_limit": 2000, "cursor": None},
            security=cluster.security.client_security(user=user))["topics"]
    assert [(t["name"], t["error_code"], t["topic_authorized_operations"]) for t in described("alice", ["matrix"])] \
        == [("matrix", 0, (1 << 3) | (1 << 4) | (1 << 8) | (1 << 10) | (1 << 11))]  # read write describe *_configs
    assert [(t["name"], t["error_code"]) for t in described("carol", ["matrix", "nope"])] == [
        ("matrix", KafkaError.TOPIC_AUTHORIZATION_FAILED), ("nope", KafkaError.TOPIC_AUTHORIZATION_FAILED)]
    assert "matrix" not in {t["name"] for t in described("carol", [])}
    # create: alice under her prefix only
    a, b = admin(cluster, "alice"), admin(cluster, "bob")
    a.create_topics([NewTopic("alice-new", 1, 3)])["alice-new"].result(60)
    for client, name in ((a, "elsewhere"), (b, "bob-new")):
        with pytest.raises(confluent_kafka.KafkaException) as refused:
            client.create_topics([NewTopic(name, 1, 3)])[name].result(60)
        assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # alter and describe configs
    resource = ConfigResource(ConfigResource.Type.TOPIC, "matrix",
                              incremental_configs=[ConfigEntry("retention.ms", "3600000",
                                                               incremental_operation=confluent_kafka.admin.AlterConfigOpType.SET)])
    a.incremental_alter_configs([resource])[resource].result(30)
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        b.incremental_alter_configs([resource])[resource].result(30)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # ALTER_CONFIGS implies DESCRIBE_CONFIGS. The answering broker may learn the change from the
    # metadata log a little after the controller committed it (as in Kafka), hence the wait.
    wait_until(lambda: list(a.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "matrix")])
                            .values())[0].result(30)["retention.ms"].value == "3600000",
               timeout_s=30, what="alice sees her retention.ms")
    with pytest.raises(confluent_kafka.KafkaException):
        list(b.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "matrix")]).values())[0].result(30)
    # delete: alice's own prefixed topic, never bob
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        b.delete_topics(["matrix"])["matrix"].result(30)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    a.delete_topics(["alice-new"])["alice-new"].result(30)
    # ACL changes need ALTER on the cluster
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        list(b.create_acls([topic_acl("matrix", "User:bob", AclOperation.READ)]).values())[0].result(30)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED

    # kafka-python: alice's producer (idempotent: WRITE on a topic gets a producer id) and
    # consumer work; bob's producer is refused
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import ClusterAuthorizationFailedError, TopicAuthorizationFailedError

    def kp(user):
        return {"bootstrap_servers": cluster.bootstrap_servers.split(","), "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": user,
                "sasl_plain_password": USERS[user], "request_timeout_ms": 20000}
    producer = KafkaProducer(acks="all", **kp("alice"))
    producer.send("matrix", b"kp").get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(auto_offset_reset="earliest", enable_auto_commit=False, **kp("alice"))
    consumer.assign([kafka.TopicPartition("matrix", 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 3 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(r.value for r in records)
    consumer.close()
    assert got == [b"m1", b"m2", b"kp"]
    with pytest.raises((TopicAuthorizationFailedError, ClusterAuthorizationFailedError)):
        producer = KafkaProducer(acks="all", enable_idempotence=False, max_block_ms=20000, **kp("bob"))
        try:
            producer.send("matrix", b"no").get(timeout=30)
        finally:
            producer.close(timeout=5)


def test_kraftctl_acls_grants_and_revokes(cluster):
    create_topic(cluster, "granted")
    assert produce_code(cluster, "bob", "granted") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    added = kraftctl(cluster, "--add", "--allow-principal", "User:bob", "--producer", "--topic", "granted")
    assert added.returncode == 0, added.stderr
    assert "ResourcePattern(resourceType=TOPIC, name=granted, patternType=LITERAL)" in added.stdout
    listed = kraftctl(cluster, "--list", "--topic", "granted")
    assert "(principal=User:bob, host=*, operation=WRITE, permissionType=ALLOW)" in listed.stdout
    assert "operation=CREATE" in listed.stdout and "operation=DESCRIBE" in listed.stdout
    wait_until(lambda: produce_code(cluster, "bob", "granted") == 0, timeout_s=60, what="bob's write allowed")
    # --remove asks first; "n" keeps the ACLs
    kept = kraftctl(cluster, "--remove", "--allow-principal", "User:bob", "--operation", "Write", "--topic", "granted",
                    input_text="n\n")
    assert kept.returncode == 0 and "Are you sure" in kept.stdout
    assert "operation=WRITE" in kraftctl(cluster, "--list", "--topic", "granted").stdout
    removed = kraftctl(cluster, "--remove", "--allow-principal", "User:bob", "--operation", "Write",
                       "--topic", "granted", "--force")
    assert removed.returncode == 0, removed.stderr
    listed = kraftctl(cluster, "--list", "--topic", "granted").stdout
    assert "operation=WRITE" not in listed and "operation=CREATE" in listed
    wait_until(lambda: produce_code(cluster, "bob", "granted") == KafkaError.TOPIC_AUTHORIZATION_FAILED,
               timeout_s=60, what="bob's write denied again")
    bad = kraftctl(cluster, "--add", "--allow-principal", "User:bob", "--operation", "Read", "--cluster")
    assert bad.returncode != 0 and "CLUSTER only supports" in bad.stderr


def test_kafka_acls_tool_adds_lists_and_removes(cluster):
    """Kafka's own kafka-acls.sh (Java AdminClient, CreateAcls/DescribeAcls/DeleteAcls v3)."""
    from kafka_helpers import kafka_libs, run_tool

    kafka_libs()
    props = cluster.base_dir / "admin.properties"
    props.write_text(format_properties(cluster.security.client_properties()))
    common = ("--bootstrap-server", cluster.bootstrap_servers, "--command-config", str(props))
    added = run_tool("kafka-acls", *common, "--add", "--allow-principal", "User:carol", "--consumer",
                     "--topic", "java-", "--group", "java-group", "--resource-pattern-type", "prefixed")
    assert added.returncode == 0, added.stderr
    listed = run_tool("kafka-acls", *common, "--list", "--topic", "java-", "--resource-pattern-type", "prefixed")
    assert "(principal=User:carol, host=*, operation=READ, permissionType=ALLOW)" in listed.stdout, listed.stderr
    assert "operation=DESCRIBE" in kraftctl(cluster, "--list", "--topic", "java-",
                                           "--resource-pattern-type", "prefixed").stdout
    removed = run_tool("kafka-acls", *common, "--remove", "--force", "--topic", "java-", "--group", "java-group",
                       "--resource-pattern-type", "prefixed")
    assert removed.returncode == 0, removed.stderr
    assert "User:carol" not in kraftctl(cluster, "--list").stdout


def test_prefixed_allow_and_literal_deny(cluster):
    for name in ("pub-open", "pub-locked"):
        create_topic(cluster, name)
    grant(cluster, topic_acl("pub-", "User:*", AclOperation.WRITE, pattern=PREFIXED),
          topic_acl("pub-locked", "User:bob", AclOperation.WRITE, DENY))
    # (one request, one batch: once alice may write pub-locked, its leader has both ACLs)
    wait_until(lambda: produce_code(cluster, "alice", "pub-locked") == 0, timeout_s=60, what="alice writes pub-locked")
    assert produce_code(cluster, "bob", "pub-locked") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    wait_until(lambda: produce_code(cluster, "bob", "pub-open") == 0, timeout_s=60, what="bob writes pub-open")
    # kraftctl --list with --resource-pattern-type match: the ACLs that apply to one name
    listed = kraftctl(cluster, "--list", "--topic", "pub-locked", "--resource-pattern-type", "match").stdout
    assert "name=pub-, patternType=PREFIXED" in listed and "name=pub-locked, patternType=LITERAL" in listed


def test_acls_survive_a_restart_of_every_node(cluster):
    """The ACLs are in the metadata log (and snapshots): after every node restarts, alice
    still writes matrix and bob still may not."""
    before = describe_all(cluster)
    assert len(before) >= 8
    cluster.stop_all()
    cluster.start_all()
    wait_cluster_ready(cluster)
    after = describe_all(cluster)
    assert after == before
    assert any(cluster.nodes[1].directory.rglob("*.checkpoint")), \
        "expected a metadata snapshot"
    wait_until(lambda: produce_code(cluster, "alice", "matrix") == 0, timeout_s=60, what="alice writes after restart")
    assert produce_code(cluster, "bob", "matrix") == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_kip848_regex_is_given_only_the_topics_its_member_may_describe(cluster):
    """Kafka 4 (KAFKA-18813): a ``group.protocol=consumer`` member subscribing to a regex is
    assigned only the matching topics it may DESCRIBE.  Without the filter it was handed the
    other match too, and its fetches of it failed with TOPIC_AUTHORIZATION_FAILED."""
    suffix = uuid.uuid4().hex[:8]
    mine, secret, group = f"rx-{suffix}-mine", f"rx-{suffix}-secret", f"rx-{suffix}-group"
    for topic in (mine, secret):
        create_topic(cluster, topic)
        assert produce(cluster, "admin", topic, values=(topic.encode(),)) == [None]
    grant(cluster, topic_acl(mine, "User:bob", AclOperation.READ),
          topic_acl(group, "User:bob", AclOperation.READ, rtype=ResourceType.GROUP))
    wait_visible(cluster, "bob", mine)
    consumer = Consumer(conf(cluster, "bob", **{"group.id": group, "group.protocol": "consumer",
                                                "enable.auto.commit": False, "auto.offset.reset": "earliest"}))
    assigned: set[str] = set()
    consumer.subscribe([f"^rx-{suffix}-.*"], on_assign=lambda c, ps: assigned.update(p.topic for p in ps))
    got, errors = [], []
    deadline = time.monotonic() + 30
    try:
        while not got and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None:
                (errors.append(m.error().code()) if m.error() else got.append(m.value()))
        time.sleep(1)  # a second heartbeat: nothing else is handed over
        consumer.poll(0.5)
        security = cluster.security.client_security()
        b = cluster.brokers[0]
        node = request(b.host, b.broker_port, "FindCoordinator", 4, {"key_type": 0, "coordinator_keys": [group]},
                       security=security)["coordinators"][0]["node_id"]
        c = cluster.nodes[node]
        described = request(c.host, c.broker_port, "ConsumerGroupDescribe", 0,
                            {"group_ids": [group], "include_authorized_operations": False},
                            security=security)["groups"][0]
    finally:
        consumer.close()
    assert got == [mine.encode()] and errors == [] and assigned == {mine}, (got, errors, assigned)
    # the regex went to the coordinator (librdkafka 2.10+ sends it rather than matching itself)
    member = described["members"][0] if described["error_code"] == 0 else {}
    assert f"^rx-{suffix}-.*" in (member.get("subscribed_topic_regex") or ""), described
    assert {t["topic_name"] for t in member["target_assignment"]["topic_partitions"]} == {mine}
