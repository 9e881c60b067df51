"""Transactions end to end on a real 3-node cluster (every node a controller and a broker,
topics with replication factor 3): confluent-kafka, kafka-python and aiokafka transactional
producers seen by read_committed consumers, consume-transform-produce with
send_offsets_to_transaction, fencing by a second producer, a vanished producer aborted by
its transaction timeout, and a SIGKILLed coordinator."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from cluster_helpers import active_controller, alter_config, fast_overrides, request, start_cluster, wait_until
from kraft.protocol.error_codes import ErrorCode
from kraft.local_cluster import LocalCluster

OVERRIDES = dict(group_initial_rebalance_delay_ms=0,
                 transaction_abort_timed_out_transaction_cleanup_interval_ms=500)


def _make(path):
    return start_cluster(LocalCluster(path, controllers=3, brokers=0, overrides=fast_overrides(**OVERRIDES)))


def _kill_all(cluster):
    for node in cluster.nodes.values():
        if node.running:
            node.process.kill()
            node.process.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = _make(tmp_path_factory.mktemp("txn"))
    try:
        yield c
    finally:
        _kill_all(c)


def create_topic(bootstrap, name, partitions=3):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=3)])[name].result(30)
    wait_until(lambda: all(p.leader >= 0 for p in admin.list_topics(name, timeout=5).topics[name].partitions.values()),
               what=f"leaders of {name}")


def txn_producer(bootstrap, txn_id, **extra):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, **extra})
    p.init_transactions(30)
    return p


def consume(bootstrap, topic, isolation, *, expect=None, idle_s=3.0, timeout_s=30.0) -> list[bytes]:
    """Every value of ``topic`` from the beginning, until ``expect`` values arrived (then a
    short wait for extras) or nothing came for ``idle_s``."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                  "isolation.level": isolation, "enable.auto.commit": False})
    md = c.list_topics(topic, timeout=10).topics[topic]
    c.assign([TopicPartition(topic, p, -2) for p in md.partitions])
    values, deadline, last = [], time.monotonic() + timeout_s, time.monotonic()
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                values.append(m.value())
                last = time.monotonic()
                continue
            quiet = time.monotonic() - last
            if (expect is not None and len(values) >= expect and quiet > 1.0) or (expect is None and quiet > idle_s):
                break
    finally:
        c.close()
    return values


def describe(cluster, txn_id):
    b = next(b for b in cluster.brokers if b.running)
    find = request(b.host, b.broker_port, "FindCoordinator", 4, {"key_type": 1, "coordinator_keys": [txn_id]})
    c = find["coordinators"][0]
    assert c["error_code"] == 0, c
    resp = request(c["host"], c["port"], "DescribeTransactions", 0, {"transactional_ids": [txn_id]})
    return c["node_id"], resp["transaction_states"][0]


def test_confluent_commit_and_abort_seen_by_read_committed(cluster):
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, "ca")
    p = txn_producer(bootstrap, "ca-1")
    for tag, commit in (("c1", True), ("ab", False), ("c3", True)):
        p.begin_transaction()
        for i in range(30):
            p.produce("ca", key=b"%d" % i, value=f"{tag}-{i}".encode())
        if commit:
            p.commit_transaction(30)
        else:
            assert p.flush(30) == 0
            p.abort_transaction(30)
    committed = consume(bootstrap, "ca", "read_committed", expect=60)
    assert sorted(committed) == sorted(f"{t}-{i}".encode() for t in ("c1", "c3") for i in range(30))
    everything = consume(bootstrap, "ca", "read_uncommitted", expect=90)
    assert len(everything) == 90 and sum(v.startswith(b"ab-") for v in everything) == 30
    _, state = describe(cluster, "ca-1")
    assert state["transaction_state"] == "CompleteCommit" and state["topics"] == []


def test_kafka_python_and_aiokafka_transactional_producers(cluster):
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, "py")
    from kafka import KafkaProducer

    kp = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-1")
    kp.init_transactions()
    kp.begin_transaction()
    for i in range(10):
        kp.send("py", key=b"k", value=f"kp-ok-{i}".encode())
    kp.commit_transaction()
    kp.begin_transaction()
    kp.send("py", key=b"k", value=b"kp-aborted")
    kp.flush()
    kp.abort_transaction()
    kp.close()

    import asyncio

    from aiokafka import AIOKafkaProducer
    from aiokafka.structs import OffsetAndMetadata
    from aiokafka.structs import TopicPartition as AioTopicPartition

    async def aio():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio-1")
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(10):
                    await producer.send("py", key=b"a", value=f"aio-ok-{i}".encode())
                await producer.send_offsets_to_transaction(
                    {AioTopicPartition("py", 0): OffsetAndMetadata(5, "")}, "aio-group")
            await producer.begin_transaction()
            await (await producer.send("py", key=b"a", value=b"aio-aborted"))
            await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(aio())
    values = consume(bootstrap, "py", "read_committed", expect=20)
    assert sorted(values) == sorted([f"kp-ok-{i}".encode() for i in range(10)] +
                                    [f"aio-ok-{i}".encode() for i in range(10)])
    assert len(consume(bootstrap, "py", "read_uncommitted", expect=22)) == 22
    from confluent_kafka import Consumer, TopicPartition

    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "aio-group", "isolation.level": "read_committed"})
    try:  # aiokafka's TxnOffsetCommit, committed with its transaction
        assert reader.committed([TopicPartition("py", 0)], timeout=10)[0].offset == 5
    finally:
        reader.close()


def test_consume_transform_produce_is_exactly_once(cluster):
    from confluent_kafka import Consumer, Producer, TopicPartition

    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, "etl-in")
    create_topic(bootstrap, "etl-out")
    source = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(1000):
        source.produce("etl-in", key=b"%d" % i, value=b"%d" % i)
    assert source.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "etl", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    consumer.subscribe(["etl-in"])
    producer = txn_producer(bootstrap, "etl-1")
    done, rounds, aborted_once = 0, 0, False
    deadline = time.monotonic() + 45
    while done < 1000 and time.monotonic() < deadline:
        batch = [m for m in consumer.consume(100, timeout=1.0) if not m.error()]
        if not batch:
            continue
        rounds += 1
        producer.begin_transaction()
        for m in batch:
            producer.produce("etl-out", key=m.key(), value=b"out-" + m.value())
        positions = consumer.position(consumer.assignment())
        if rounds == 3 and not aborted_once:
            # abort one round: its output must never be read, its input is processed again
            aborted_once = True
            producer.abort_transaction(30)
            committed = consumer.committed(consumer.assignment(), timeout=10)
            for tp in committed:
                consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else -2))
            continue
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        done += len(batch)
    assert (done, aborted_once) == (1000, True), rounds
    committed = consumer.committed([TopicPartition("etl-in", p) for p in range(3)], timeout=10)
    consumer.close()
    assert sum(tp.offset for tp in committed) == 1000, [(tp.partition, tp.offset, tp.error) for tp in committed]
    out = consume(bootstrap, "etl-out", "read_committed", expect=1000)
    repeated = sorted({v for v in out if out.count(v) > 1})
    missing = sorted(set(b"out-%d" % i for i in range(1000)) - set(out))
    assert (len(out), repeated[:5], missing[:5]) == (1000, [], [])  # each record exactly once


def test_the_next_transaction_waits_for_the_last_ones_markers_instead_of_failing(cluster):
    """EndTxn(commit) is answered once PrepareCommit is durable, before the markers are out.
    A producer's next AddPartitionsToTxn, sent at once, must wait for them rather than get
    CONCURRENT_TRANSACTIONS: while its retry is in flight, librdkafka's abort_transaction sends
    EndTxn(abort), which then found the old PrepareCommit and got INVALID_TXN_STATE (fatal;
    seen in test_consume_transform_produce_is_exactly_once under load)."""
    import trio

    from kraft.client import KafkaClient
    from kraft.trio_run import run_trio

    create_topic(cluster.bootstrap_servers, "next", partitions=3)
    b = next(b for b in cluster.brokers if b.running)

    async def main():
        async with trio.open_nursery() as nursery:
            client = KafkaClient(nursery, connect_timeout_s=10)

            async def call(host, port, api, version, body):
                return await client.request(host, port, api, version, body, timeout_s=30)

            while True:
                find = await call(b.host, b.broker_port, "FindCoordinator", 4,
                                  {"key_type": 1, "coordinator_keys": ["next-1"]})
                coordinator = find["coordinators"][0]
                if coordinator["error_code"] == 0:
                    break
                await trio.sleep(0.2)
            at = (coordinator["host"], coordinator["port"])
            while True:  # the coordinator itself knows the topic (its metadata may lag the others')
                md = await call(*at, "Metadata", 12, {"topics": [{"name": "next"}]})
                if md["topics"][0]["error_code"] == 0 and len(md["topics"][0]["partitions"]) == 3:
                    break
                await trio.sleep(0.1)
            while True:
                init = await call(*at, "InitProducerId", 4, {"transactional_id": "next-1",
                                  "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1})
                if init["error_code"] == 0:
                    break
                await trio.sleep(0.2)
            ids = {"v3_and_below_transactional_id": "next-1", "v3_and_below_producer_id": init["producer_id"],
                   "v3_and_below_producer_epoch": init["producer_epoch"]}
            answers = []
            for round_ in range(20):
                added = await call(*at, "AddPartitionsToTxn", 3, {**ids, "v3_and_below_topics": [
                    {"name": "next", "partitions": [0, 1, 2]}]})
                codes = sorted({p["partition_error_code"] for t in added["results_by_topic_v3_and_below"]
                                for p in t["results_by_partition"]})
                ended = await call(*at, "EndTxn", 3, {"transactional_id": "next-1", "producer_id": init["producer_id"],
                                                      "producer_epoch": init["producer_epoch"],
                                                      "committed": round_ % 2 == 0})
                answers.append((codes, ended["error_code"]))
            await client.aclose()
            nursery.cancel_scope.cancel()
            return answers

    # every AddPartitionsToTxn and EndTxn answered NONE, none CONCURRENT_TRANSACTIONS (51)
    assert run_trio(main) == [([0], 0)] * 20


def test_second_producer_with_the_same_id_fences_the_first(cluster):
    from confluent_kafka import KafkaException

    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, "fence")
    first = txn_producer(bootstrap, "fence-1")
    first.begin_transaction()
    first.produce("fence", value=b"zombie")
    assert first.flush(30) == 0
    second = txn_producer(bootstrap, "fence-1")  # aborts the first one's transaction
    with pytest.raises(KafkaException) as raised:
        first.commit_transaction(30)
    assert raised.value.args[0].fatal() or "fenc" in str(raised.value).lower()
    second.begin_transaction()
    second.produce("fence", value=b"winner")
    second.commit_transaction(30)
    assert consume(bootstrap, "fence", "read_committed", expect=1) == [b"winner"]
    _, state = describe(cluster, "fence-1")
    assert state["producer_epoch"] >= 2  # bumped by the fence and by the second init


VANISHING = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": "vanish-1",
                  "transaction.timeout.ms": 3000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("vanish", value=b"lost", partition=0)
    assert p.flush(30) == 0
    print("ready", flush=True)
    time.sleep(120)
""")


def test_vanished_producer_is_aborted_by_its_transaction_timeout(cluster):
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, "vanish", partitions=1)
    proc = subprocess.Popen([sys.executable, "-c", VANISHING, bootstrap], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    later = txn_producer(bootstrap, "vanish-later")
    later.begin_transaction()
    later.produce("vanish", value=b"after", partition=0)
    later.commit_transaction(30)
    # readable only once the coordinator aborted the open transaction that precedes it
    assert consume(bootstrap, "vanish", "read_committed", expect=1, timeout_s=30) == [b"after"]
    _, state = describe(cluster, "vanish-1")
    assert state["transaction_state"] == "CompleteAbort" and state["producer_epoch"] == 1


def test_sigkill_of_the_coordinator_leaves_no_torn_transaction(tmp_path):
    from confluent_kafka import KafkaException

    cluster = _make(tmp_path)
    try:
        bootstrap = cluster.bootstrap_servers
        create_topic(bootstrap, "torn", partitions=6)
        p = txn_producer(bootstrap, "torn-1")
        p.begin_transaction()
        for i in range(60):
            p.produce("torn", key=b"%d" % i, value=b"mid-%d" % i)
        assert p.flush(30) == 0
        coordinator, state = describe(cluster, "torn-1")
        assert state["transaction_state"] == "Ongoing"
        cluster.kill(coordinator)
        try:
            p.commit_transaction(45)
            outcome = "committed"
        except KafkaException as exc:
            assert exc.args[0].txn_requires_abort() or exc.args[0].retriable(), exc
            p.abort_transaction(30)
            outcome = "aborted"
        p.begin_transaction()
        for i in range(10):
            p.produce("torn", key=b"%d" % i, value=b"after-%d" % i)
        p.commit_transaction(30)
        values = consume(bootstrap, "torn", "read_committed", expect=70 if outcome == "committed" else 10)
        mid = [v for v in values if v.startswith(b"mid-")]
        assert sorted(v for v in values if v.startswith(b"after-")) == sorted(b"after-%d" % i for i in range(10))
        assert len(mid) == (60 if outcome == "committed" else 0), (outcome, len(mid))
        new_coordinator, state = describe(cluster, "torn-1")
        assert new_coordinator != coordinator and state["transaction_state"] == "CompleteCommit"
    finally:
        _kill_all(cluster)


def kraftctl(*args):
    return subprocess.run([sys.executable, "-m", "cli.main", *args], capture_output=True, text=True, timeout=60)


def write_hanging_transaction(cluster, leader, topic: str, partition: int, batch: bytes) -> None:
    """``batch`` (transactional, of a producer no coordinator knows) written to the leader of
    ``topic``-``partition``: a transaction that hangs.  KIP-890's verification refuses it
    (INVALID_PRODUCER_ID_MAPPING) until transaction.partition.verification.enable is turned
    off, as before Kafka 3.6, which is how such a transaction came about."""
    def produce():
        return request(leader.host, leader.broker_port, "Produce", 9, {
            "transactional_id": "ghost", "acks": -1, "timeout_ms": 30000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}]}
        )["responses"][0]["partition_responses"][0]["error_code"]
    assert produce() == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    alter_config(cluster, 4, "", "transaction.partition.verification.enable", "false")
    try:
        wait_until(lambda: produce() == 0, what="the hanging transaction written")
    finally:
        alter_config(cluster, 4, "", "transaction.partition.verification.enable", None)


def test_kraftctl_transactions_lists_describes_and_aborts_a_hanging_transaction(cluster):
    from kraft.records import build_batch

    bootstrap = cluster.bootstrap_servers
    bs = f"--bootstrap-server={bootstrap}"
    create_topic(bootstrap, "hang", partitions=2)
    live = txn_producer(bootstrap, "cli-1")
    live.begin_transaction()
    live.produce("hang", value=b"live", partition=0)
    assert live.flush(30) == 0
    # A transaction its coordinator never heard of (as a producer whose AddPartitionsToTxn was
    # lost would leave): the partition holds it open, and its LSO with it.
    ghost = build_batch([(None, b"ghost")], producer_id=424242, producer_epoch=0, base_sequence=0,
                        timestamp=int(time.time() * 1000) - 1000, transactional=True)
    leader = next(b for b in cluster.brokers
                  if describe_leader(cluster, "hang", 1) == b.node_id)
    write_hanging_transaction(cluster, leader, "hang", 1, ghost)

    listed = kraftctl("transactions", bs, "list")
    assert listed.returncode == 0, listed.stderr
    assert any(line.split("\t")[0] == "cli-1" and line.split("\t")[3] == "Ongoing"
               for line in listed.stdout.splitlines()[1:])
    described = json.loads(kraftctl("transactions", bs, "--output=json", "describe", "--transactional-id=cli-1").stdout)
    assert described[0]["transaction_state"] == "Ongoing" and described[0]["topic_partitions"] == "hang-0"
    producers = json.loads(kraftctl("transactions", bs, "--output=json", "describe-producers", "--topic=hang",
                                    "--partition=1").stdout)
    assert [(p["producer_id"], p["current_txn_start_offset"]) for p in producers] == [(424242, 0)]

    hanging = json.loads(kraftctl("transactions", bs, "--output=json", "find-hanging", "--topic=hang",
                                  "--max-transaction-timeout=0").stdout)
    assert [(h["partition"], h["producer_id"], h["start_offset"]) for h in hanging] == [(1, 424242, 0)]
    aborted = kraftctl("transactions", bs, "abort", "--topic=hang", "--partition=1", "--start-offset=0")
    assert aborted.returncode == 0, aborted.stderr
    assert json.loads(kraftctl("transactions", bs, "--output=json", "find-hanging", "--topic=hang",
                               "--max-transaction-timeout=0").stdout) == []
    live.commit_transaction(30)
    assert consume(bootstrap, "hang", "read_committed", expect=1) == [b"live"]
    missing = kraftctl("transactions", bs, "describe", "--transactional-id=nobody")
    assert missing.returncode != 0 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr


def describe_leader(cluster, topic, partition):
    b = next(b for b in cluster.brokers if b.running)
    md = request(b.host, b.broker_port, "Metadata", 12, {"topics": [{"name": topic}]})
    return next(p["leader_id"] for p in md["topics"][0]["partitions"] if p["partition_index"] == partition)


def test_coordinator_killed_while_committing_is_completed_by_its_successor(tmp_path):
    """The coordinator is SIGKILLed as soon as it is seen in PrepareCommit (the commit is
    decided, its markers are being written): the next leader of its __transaction_state
    partition loads PrepareCommit and writes the markers itself."""
    import threading

    cluster = _make(tmp_path)
    try:
        bootstrap = cluster.bootstrap_servers
        create_topic(bootstrap, "decided", partitions=6)
        p = txn_producer(bootstrap, "decided-1")
        p.begin_transaction()
        for i in range(60):
            p.produce("decided", key=b"%d" % i, value=b"v-%d" % i)
        assert p.flush(30) == 0
        coordinator, _ = describe(cluster, "decided-1")
        node = cluster.nodes[coordinator]
        outcome = {}
        committing = threading.Thread(target=lambda: outcome.setdefault("commit", _try(p.commit_transaction, 45)))
        committing.start()
        seen = set()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            state = request(node.host, node.broker_port, "DescribeTransactions", 0,
                            {"transactional_ids": ["decided-1"]})["transaction_states"][0]["transaction_state"]
            seen.add(state)
            if state != "Ongoing":
                break
        cluster.kill(coordinator)
        committing.join(60)
        assert "PrepareCommit" in seen or "CompleteCommit" in seen, seen
        # the commit was decided before the kill: every record becomes readable, exactly once
        values = consume(bootstrap, "decided", "read_committed", expect=60, timeout_s=40)
        assert sorted(values) == sorted(b"v-%d" % i for i in range(60))
        wait_until(lambda: describe(cluster, "decided-1")[1]["transaction_state"] == "CompleteCommit",
                   timeout_s=30, what="the successor to complete the commit")
        assert describe(cluster, "decided-1")[0] != coordinator
    finally:
        _kill_all(cluster)


def _try(fn, *args):
    try:
        fn(*args)
        return None
    except Exception as exc:  # noqa: BLE001 - the test reports what the client saw
        return exc


def test_kafka_transactions_tool_and_java_transactional_producer(cluster):
    """Apache Kafka's own kafka-transactions (list, describe, describe-producers, find-hanging
    by topic and by broker, abort) and its Java producer's transactions
    (kafka-producer-perf-test --transactional-id) against kraft."""
    from kafka_helpers import kafka_libs, run_tool

    from kraft.apache_kafka import java_command
    from kraft.records import build_batch

    kafka_libs()
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, "jt", partitions=2)
    live = txn_producer(bootstrap, "jt-1")
    live.begin_transaction()
    live.produce("jt", value=b"live", partition=0)
    assert live.flush(30) == 0
    leader = describe_leader(cluster, "jt", 1)
    node = cluster.nodes[leader]
    ghost = build_batch([(None, b"ghost")], producer_id=535353, producer_epoch=0, base_sequence=0,
                        timestamp=int(time.time() * 1000) - 120_000, transactional=True)
    write_hanging_transaction(cluster, node, "jt", 1, ghost)

    def tool(*args):
        r = subprocess.run(java_command("org.apache.kafka.tools.TransactionsCommand",
                                        ["--bootstrap-server", bootstrap, *args]),
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"{args}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
        return [line.split() for line in r.stdout.splitlines()[1:] if line.strip()]

    assert ["jt-1", "Ongoing"] in [[row[0], row[3]] for row in tool("list")]
    (described,) = tool("describe", "--transactional-id", "jt-1")
    assert described[4] == "Ongoing" and described[-1] == "jt-0"
    assert [row[0] for row in tool("describe-producers", "--topic", "jt", "--partition", "1")] == ["535353"]
    hanging = tool("find-hanging", "--topic", "jt", "--max-transaction-timeout", "1")
    assert [(row[1], row[2], row[5]) for row in hanging] == [("1", "535353", "0")]
    by_broker = tool("find-hanging", "--broker-id", str(leader), "--max-transaction-timeout", "1")
    assert [(row[0], row[1], row[2]) for row in by_broker] == [("jt", "1", "535353")]
    tool("abort", "--topic", "jt", "--partition", "1", "--start-offset", "0")
    assert tool("find-hanging", "--topic", "jt", "--max-transaction-timeout", "1") == []
    live.commit_transaction(30)

    perf = run_tool("kafka-producer-perf-test", "--topic", "jt-perf", "--num-records", "2000", "--record-size",
                    "100", "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}",
                    "--transactional-id", "jt-perf-1", "--transaction-duration-ms", "200")
    assert perf.returncode == 0, perf.stderr
    assert len(consume(bootstrap, "jt-perf", "read_committed", expect=2000)) == 2000
    (perf_state,) = tool("describe", "--transactional-id", "jt-perf-1")
    assert perf_state[4] == "CompleteCommit"


def test_a_commit_whose_partition_leader_is_paused_completes_once_the_leader_is_replaced(tmp_path):
    """A partition leader of the transaction is SIGSTOPped just before the commit.  The
    controller fences it after broker.session.timeout.ms (3 s) and elects another leader; the
    markers must follow at once, not after the 30 s WriteTxnMarkers request timeout, since
    until they are written the producer cannot start its next transaction.
    (``__transaction_state`` has one replica here, so the commit is durable at once and the
    markers leave while the paused node still leads.)"""
    cluster = start_cluster(LocalCluster(tmp_path, controllers=3, brokers=0, overrides=fast_overrides(
        **OVERRIDES, transaction_state_log_replication_factor=1, transaction_state_log_min_isr=1)))
    paused = None
    try:
        bootstrap = cluster.bootstrap_servers
        create_topic(bootstrap, "paused", partitions=3)
        producer = txn_producer(bootstrap, "paused-1")
        coordinator_id, _ = describe(cluster, "paused-1")
        controller = active_controller(cluster)[0]
        leaders = {p: describe_leader(cluster, "paused", p) for p in range(3)}
        others = [p for p, leader in leaders.items() if leader != coordinator_id]
        partition = next((p for p in others if leaders[p] != controller), others[0])
        coordinator = cluster.nodes[coordinator_id]

        def state():
            resp = request(coordinator.host, coordinator.broker_port, "DescribeTransactions", 0,
                           {"transactional_ids": ["paused-1"]})
            return resp["transaction_states"][0]["transaction_state"]

        producer.begin_transaction()
        producer.produce("paused", value=b"kept", partition=partition)
        assert producer.flush(30) == 0
        paused = cluster.nodes[leaders[partition]]
        paused.process.send_signal(signal.SIGSTOP)
        producer.commit_transaction(60)
        committed_at = time.monotonic()
        wait_until(lambda: state() == "CompleteCommit", timeout_s=60, interval_s=0.2, what="CompleteCommit")
        took = time.monotonic() - committed_at
        assert took < 15, f"the markers took {took:.1f}s to reach the new leader"
        # the next transaction goes ahead while the old leader is still paused
        live = next(p for p, leader in leaders.items() if leader != paused.node_id)
        producer.begin_transaction()
        producer.produce("paused", value=b"next", partition=live)
        producer.commit_transaction(60)
        print(f"CompleteCommit {took:.1f}s after the commit returned")
    finally:
        if paused is not None:
            paused.process.send_signal(signal.SIGCONT)
        _kill_all(cluster)
