"""Configs that change what a leader writes or keeps, with real clients against a 3-node
cluster: ``message.timestamp.type`` (LogAppendTime stamps), ``compression.type`` (client
batches rewritten in the topic's codec) and ``message.timestamp.before/after.max.ms``
(records outside them refused), each as a topic's own config or the brokers' dynamic
default, and the dynamic ``producer.id.expiration.ms``, as in Kafka."""

import time

import pytest

from cluster_helpers import alter_config, create_led_topic, describe_quorum, fast_overrides, partitions_of, request, \
    start_cluster, wait_until
from kraft.local_cluster import LocalCluster
from kraft.records import iter_batches


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = LocalCluster(tmp_path_factory.mktemp("write-configs"), controllers=3, brokers=0,
                     overrides=fast_overrides(producer_id_expiration_check_interval_ms=500))
    try:
        yield start_cluster(c)
    finally:
        c.stop_all()


def described(cluster, topic: str, key: str) -> str:
    """``key`` of ``topic`` as its leader describes it."""
    leader = cluster.nodes[partitions_of(cluster, topic)[0]["leader_id"]]
    resp = request(leader.host, leader.broker_port, "DescribeConfigs", 4, {"resources": [
        {"resource_type": 2, "resource_name": topic, "configuration_keys": [key]}],
        "include_synonyms": False, "include_documentation": False})
    return resp["results"][0]["configs"][0]["value"]


def test_log_append_time_topics_are_stamped_by_the_leader(cluster):
    """message.timestamp.type=LogAppendTime (a topic's, or the brokers' dynamic default):
    the leader stamps each batch with its append time, which consumers read as the
    records' timestamp (type LogAppendTime) and the producer gets in its answer; a
    CreateTime topic keeps the producer's timestamp.  Before, kraft ignored the key."""
    from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer

    create_led_topic(cluster, "stamped-by-topic", 1, 3)
    create_led_topic(cluster, "stamped-by-default", 1, 3)
    create_led_topic(cluster, "create-time", 1, 3)

    alter_config(cluster, 2, "stamped-by-topic", "message.timestamp.type", "LogAppendTime")
    alter_config(cluster, 2, "create-time", "message.timestamp.type", "CreateTime")  # the topic's own beats the default
    alter_config(cluster, 4, "", "log.message.timestamp.type", "LogAppendTime")
    try:
        for topic, want in (("stamped-by-topic", "LogAppendTime"), ("stamped-by-default", "LogAppendTime"),
                            ("create-time", "CreateTime")):
            wait_until(lambda: described(cluster, topic, "message.timestamp.type") == want,
                       what=f"{topic} is {want} on its leader")
        old = 1_000_000_000_000  # 2001: a producer's timestamp no broker clock is near
        delivered = {}
        p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 0})
        before = int(time.time() * 1000)
        for topic in ("stamped-by-topic", "stamped-by-default", "create-time"):
            p.produce(topic, b"v", timestamp=old,
                      on_delivery=lambda err, msg: delivered.__setitem__(msg.topic(), (err, msg.timestamp())))
        p.flush(30)
        after = int(time.time() * 1000)
        for topic in ("stamped-by-topic", "stamped-by-default"):
            err, (kind, ts) = delivered[topic]
            assert err is None and kind == TIMESTAMP_LOG_APPEND_TIME and before - 1000 <= ts <= after + 1000, (
                topic, delivered[topic])
        assert delivered["create-time"][0] is None
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "stamp-reader",
                             "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe(["stamped-by-topic", "stamped-by-default", "create-time"])
            seen, deadline = {}, time.monotonic() + 30
            while len(seen) < 3 and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    seen[msg.topic()] = msg.timestamp()
        finally:
            consumer.close()
        assert seen["create-time"] == (TIMESTAMP_CREATE_TIME, old)
        for topic in ("stamped-by-topic", "stamped-by-default"):
            kind, ts = seen[topic]
            assert kind == TIMESTAMP_LOG_APPEND_TIME and ts == delivered[topic][1][1], (topic, seen[topic])
    finally:
        alter_config(cluster, 4, "", "log.message.timestamp.type", None)


def stored_codecs(cluster, topic: str) -> dict[int, list[int]]:
    """Node id -> the codec of each data batch in ``topic``'s partition 0, read from the
    segment files on that node's disk."""
    out = {}
    for node_id, node in cluster.nodes.items():
        codecs = []
        for path in sorted((node.data_dir / f"{topic}-0").glob("*.log")):
            data = path.read_bytes()
            codecs += [h.compression for _, h in iter_batches(data, check_crc=True) if not h.is_control]
        out[node_id] = codecs
    return out


def test_compression_type_rewrites_client_batches_in_the_topics_codec(cluster):
    """compression.type other than ``producer`` (a topic's, or the brokers' dynamic
    default): the leader writes each client batch in that codec, whatever the producer
    used, at the topic's level; the replicas hold the same batches, consumers read every
    record.  ``producer`` keeps each batch as it came.  Before, kraft stored every batch as
    its producer compressed it."""
    from confluent_kafka import Consumer, Producer

    topics = {"in-zstd": 4, "in-lz4-by-default": 3, "uncompressed-topic": 0, "as-produced": None}
    for topic in topics:
        create_led_topic(cluster, topic, 1, 3)
    alter_config(cluster, 2, "in-zstd", "compression.type", "zstd")
    alter_config(cluster, 2, "in-zstd", "compression.zstd.level", "9")
    alter_config(cluster, 2, "uncompressed-topic", "compression.type", "uncompressed")
    alter_config(cluster, 2, "as-produced", "compression.type", "producer")
    alter_config(cluster, 4, "", "compression.type", "lz4")
    try:
        for topic, want in (("in-zstd", "zstd"), ("in-lz4-by-default", "lz4"),
                            ("uncompressed-topic", "uncompressed"), ("as-produced", "producer")):
            wait_until(lambda: described(cluster, topic, "compression.type") == want,
                       what=f"{topic}'s leader sees compression.type={want}")
        values = [b"record %d " % i * 30 for i in range(20)]
        for codec, idempotent in (("gzip", True), ("none", False), ("snappy", False)):
            p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "compression.type": codec,
                          "enable.idempotence": idempotent, "linger.ms": 5})
            failed = []
            for topic in topics:
                for v in values:
                    p.produce(topic, v, on_delivery=lambda err, msg: err is not None and failed.append(err))
            assert p.flush(30) == 0 and not failed, failed
    finally:
        alter_config(cluster, 4, "", "compression.type", None)

    as_sent = {"gzip": 1, "none": 0, "snappy": 2}
    for topic, codec in topics.items():
        def replicated():
            stored = stored_codecs(cluster, topic)
            return len({tuple(c) for c in stored.values()}) == 1 and stored[1] and stored
        stored = wait_until(replicated, what=f"{topic}'s batches on every replica")[1]
        if codec is None:
            assert set(stored) == set(as_sent.values()), (topic, stored)
        else:
            assert set(stored) == {codec}, (topic, stored)

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "codec-reader",
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe(list(topics))
        read, deadline = {t: [] for t in topics}, time.monotonic() + 30
        while sum(map(len, read.values())) < 60 * len(topics) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                read[msg.topic()].append(msg.value())
    finally:
        consumer.close()
    for topic in topics:
        assert read[topic] == values * 3, topic


def test_records_outside_the_timestamp_bounds_are_refused(cluster):
    """message.timestamp.before.max.ms / after.max.ms: a CreateTime record further behind or
    ahead of the leader's clock is refused with INVALID_TIMESTAMP (the producer's delivery
    fails) and not written; records within them are written.  A topic that sets no bounds
    has Kafka 4's defaults: any age, at most an hour ahead (before, kraft had Kafka 3's,
    no bound: a producer whose clock ran a day ahead was accepted); one that sets
    after.max.ms to Long.MAX_VALUE bounds nothing."""
    from confluent_kafka import Consumer, KafkaError, Producer

    for topic in ("bounded", "defaults", "unbounded"):
        create_led_topic(cluster, topic, 1, 3)
    alter_config(cluster, 2, "bounded", "message.timestamp.after.max.ms", "60000")
    alter_config(cluster, 2, "bounded", "message.timestamp.before.max.ms", "3600000")
    alter_config(cluster, 2, "unbounded", "message.timestamp.after.max.ms", str(2**63 - 1))
    wait_until(lambda: described(cluster, "bounded", "message.timestamp.before.max.ms") == "3600000"
               and described(cluster, "unbounded", "message.timestamp.after.max.ms") == str(2**63 - 1),
               what="the bounds seen by the leader")
    assert described(cluster, "defaults", "message.timestamp.after.max.ms") == "3600000"
    hour = 3_600_000
    now = int(time.time() * 1000)
    sent = {"future": now + hour // 2, "day ahead": now + 24 * hour, "past": now - 2 * hour,
            "now": now, "a minute ago": now - 60_000}
    outcome = {}
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 0, "retries": 0})
    for topic in ("bounded", "defaults", "unbounded"):
        for name, ts in sent.items():  # a batch each: a refused record fails its whole batch
            p.produce(topic, name.encode(), timestamp=ts,
                      on_delivery=lambda err, msg: outcome.__setitem__((msg.topic(), msg.value().decode()),
                                                                       None if err is None else err.code()))
            assert p.flush(30) == 0
    refused = {("bounded", "future"), ("bounded", "day ahead"), ("bounded", "past"), ("defaults", "day ahead")}
    assert outcome == {(topic, name): KafkaError.INVALID_TIMESTAMP if (topic, name) in refused else None
                       for topic in ("bounded", "defaults", "unbounded") for name in sent}, outcome

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "bounds-reader",
                         "auto.offset.reset": "earliest"})
    expected = sorted((topic, name, ts) for topic in ("bounded", "defaults", "unbounded")
                      for name, ts in sent.items() if (topic, name) not in refused)
    try:
        consumer.subscribe(["bounded", "defaults", "unbounded"])
        read, deadline = [], time.monotonic() + 30
        while len(read) < len(expected) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                read.append((msg.topic(), msg.value().decode(), msg.timestamp()[1]))
    finally:
        consumer.close()
    assert sorted(read) == expected


def test_batches_a_consumer_could_not_read_are_refused(cluster):
    """As Kafka: a batch whose codec id no client knows, or a zstd batch in a Produce
    older than v7, is refused with UNSUPPORTED_COMPRESSION_TYPE and not written (before,
    kraft stored them, and every consumer of the partition stopped at that batch); a Fetch
    older than v10 of a zstd topic gets UNSUPPORTED_COMPRESSION_TYPE instead of batches it
    cannot decompress."""
    import struct

    from kraft.records import ZSTD, build_batch
    from kraft.records.header import compute_crc

    create_led_topic(cluster, "codecs-checked", 1, 3)
    create_led_topic(cluster, "zstd-only", 1, 3)
    alter_config(cluster, 2, "zstd-only", "compression.type", "zstd")
    wait_until(lambda: described(cluster, "zstd-only", "compression.type") == "zstd",
               what="zstd-only's leader sees compression.type=zstd")

    def produce(topic: str, data: bytes, version: int = 9) -> dict:
        leader = cluster.nodes[partitions_of(cluster, topic)[0]["leader_id"]]
        resp = request(leader.host, leader.broker_port, "Produce", version, {
            "transactional_id": None, "acks": -1, "timeout_ms": 10_000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": data}]}]})
        return resp["responses"][0]["partition_responses"][0]

    def fetch(topic: str, version: int) -> dict:
        leader = cluster.nodes[partitions_of(cluster, topic)[0]["leader_id"]]
        resp = request(leader.host, leader.broker_port, "Fetch", version, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": topic, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]})
        return resp["responses"][0]["partitions"][0]

    now = int(time.time() * 1000)
    for codec in (5, 7):
        data = bytearray(build_batch([(b"k", b"v")], timestamp=now))
        struct.pack_into(">h", data, 21, codec)  # the attributes' codec bits
        struct.pack_into(">I", data, 17, compute_crc(data, 0, len(data)))
        answer = produce("codecs-checked", bytes(data))
        assert answer["error_code"] == 76 and "compression type id" in answer["error_message"], answer
    zstd = build_batch([(b"k", b"v")], timestamp=now, compression=ZSTD)
    assert produce("codecs-checked", zstd, version=6)["error_code"] == 76
    assert fetch("codecs-checked", 12)["high_watermark"] == 0  # nothing was written
    assert produce("codecs-checked", zstd, version=7)["error_code"] == 0

    assert produce("zstd-only", build_batch([(b"k", b"v")], timestamp=now), version=7)["error_code"] == 0
    assert fetch("zstd-only", 9)["error_code"] == 76
    fetched = fetch("zstd-only", 10)
    assert fetched["error_code"] == 0 and [h.compression for _, h in iter_batches(fetched["records"])] == [ZSTD]


def test_a_dynamic_producer_id_expiration_applies_to_running_brokers(cluster):
    """producer.id.expiration.ms set as a cluster-wide dynamic broker config (kafka-configs
    --entity-type brokers --entity-default): the leaders forget an idle idempotent producer
    after it, not after the static value (a day).  Before, the dynamic value was stored and
    described and changed nothing."""
    from confluent_kafka import Producer

    create_led_topic(cluster, "expiring", 1, 3)
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "enable.idempotence": True})
    p.produce("expiring", b"v")
    assert p.flush(30) == 0

    def producers() -> list:
        leader = cluster.nodes[partitions_of(cluster, "expiring")[0]["leader_id"]]
        resp = request(leader.host, leader.broker_port, "DescribeProducers", 0,
                       {"topics": [{"name": "expiring", "partition_indexes": [0]}]})
        return resp["topics"][0]["partitions"][0]["active_producers"]

    assert len(producers()) == 1
    alter_config(cluster, 4, "", "producer.id.expiration.ms", "1500")
    try:
        wait_until(lambda: not producers(), timeout_s=15, what="the idle producer expired")
    finally:
        alter_config(cluster, 4, "", "producer.id.expiration.ms", None)


# Apache Kafka 4.1's topic configs (LogConfig), every one of which CreateTopics v5+ answers
KAFKA_TOPIC_KEYS = {
    "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
    "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages", "flush.ms",
    "follower.replication.throttled.replicas", "index.interval.bytes", "leader.replication.throttled.replicas",
    "local.retention.bytes", "local.retention.ms", "max.compaction.lag.ms", "max.message.bytes",
    "message.timestamp.after.max.ms", "message.timestamp.before.max.ms", "message.timestamp.type",
    "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
    "remote.log.copy.disable", "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes",
    "retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
    "unclean.leader.election.enable",
}


def test_create_topics_answers_every_config_of_the_new_topic(cluster):
    """CreateTopics v5+ answers each created topic's configs (the Java admin client's
    CreateTopicsResult.config()): every topic config Kafka has, the request's own as
    DYNAMIC_TOPIC_CONFIG and the rest as the brokers' defaults, the same as DescribeConfigs
    then describes the topic; validate_only answers them too, a refused topic an empty list.
    Before, kraft answered only the configs the request set.  The active controller's
    listener (``--bootstrap-controller``) answers them as a broker does."""
    node = cluster.nodes[1]

    def create(name, validate_only=False, port=None):
        resp = request(node.host, port or node.broker_port, "CreateTopics", 7, {"topics": [
            {"name": name, "num_partitions": 1, "replication_factor": 3, "assignments": [],
             "configs": [{"name": "retention.ms", "value": "12345"}]}], "timeout_ms": 30_000,
            "validate_only": validate_only})
        return resp["topics"][0]

    checked = create("configs-answered", validate_only=True)
    created = create("configs-answered")
    assert created["error_code"] == 0, created
    answered = {c["name"]: (c["value"], c["config_source"]) for c in created["configs"]}
    assert set(answered) == KAFKA_TOPIC_KEYS
    assert answered["retention.ms"] == ("12345", 1)
    assert answered["cleanup.policy"] == ("delete", 5) and answered["max.compaction.lag.ms"][0] == str(2**63 - 1)
    assert {c["name"]: (c["value"], c["config_source"]) for c in checked["configs"]} == answered
    assert create("configs-answered")["configs"] == []  # it exists now: refused
    active = describe_quorum(cluster, 1)["leader_id"]
    node = cluster.nodes[active]
    via_controller = create("configs-answered-by-controller", validate_only=True, port=node.controller_port)
    assert via_controller["error_code"] == 0, via_controller
    assert {c["name"]: (c["value"], c["config_source"]) for c in via_controller["configs"]} == answered
    node = cluster.nodes[1]

    wait_until(lambda: partitions_of(cluster, "configs-answered").get(0, {}).get("leader_id", -1) >= 0,
               what="configs-answered led")
    leader = cluster.nodes[partitions_of(cluster, "configs-answered")[0]["leader_id"]]
    resp = request(leader.host, leader.broker_port, "DescribeConfigs", 4, {"resources": [
        {"resource_type": 2, "resource_name": "configs-answered", "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False})
    assert {c["name"]: (c["value"], c["config_source"]) for c in resp["results"][0]["configs"]} == answered
