"""TLS and SASL with real nodes and real clients (issue 21).

One 3-node cluster (every node controller and broker) whose every listener is secured:
SASL_SSL (SCRAM-SHA-512 and PLAIN; the inter-broker listener, so replication runs over it),
CONTROLLER on SASL_SSL with PLAIN (the Raft quorum and broker-to-controller traffic), MTLS
(SSL with ssl.client.auth=required) and SASL_PLAINTEXT.  SCRAM credentials are bootstrapped
by ``kraftctl format --add-scram``; certificates are generated for the test.
"""

from __future__ import annotations

import os
import random
import socket
import ssl
import struct
import subprocess
import sys
import time
import uuid

import pytest

from cluster_helpers import request, start_cluster, wait_until
from kraft.client import AuthenticationFailed, NodeUnavailable
from kraft.local_cluster import LocalCluster
from kraft.properties import format_properties
from kraft.protocol import rpc
from kraft.security.dev_cluster import ClusterSecurity

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")

USERS = {"alice": "alice-secret"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    security = ClusterSecurity("SASL_SSL", users=dict(USERS), client_certificates=("alice-client",),
                               extra_listeners={"MTLS": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT"})
    c = LocalCluster(tmp_path_factory.mktemp("secure"), controllers=3, security=security,
                     overrides={"listener.name.mtls.ssl.client.auth": "required"})
    try:
        start_cluster(c)
        yield c
    finally:
        c.stop_all()


def _confluent(cluster, listener=None, **extra):
    servers = cluster.bootstrap_servers if listener is None else cluster.bootstrap_for(listener)
    return {"bootstrap.servers": servers, "broker.address.family": "v4", **extra}


def _create_topic(cluster, name, rf=3):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(_confluent(cluster, **cluster.security.librdkafka_config()))
    admin.create_topics([NewTopic(name, 1, rf)])[name].result(60)
    wait_until(lambda: _isr(cluster, name) == 3, what=f"{name}'s ISR of 3")


def _isr(cluster, topic):
    node = cluster.brokers[0]
    md = request(node.host, node.broker_port, "Metadata", 12, {"topics": [{"name": topic}]},
                 security=cluster.security.client_security())
    partitions = md["topics"][0]["partitions"]
    return len(partitions[0]["isr_nodes"]) if partitions else 0


def _confluent_produce(conf, topic, values):
    from confluent_kafka import Producer

    errors = []
    producer = Producer({"message.timeout.ms": 30000, **conf, "acks": "all", "error_cb": errors.append})
    delivered = []
    for v in values:
        producer.produce(topic, v, on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(60)
    return delivered, errors


def _confluent_consume(conf, topic, count, timeout_s=60):
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**conf, "group.id": f"g-{uuid.uuid4()}", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    consumer.close()
    return got


def _kafka_python_config(cluster, listener, user="alice", mechanism="SCRAM-SHA-512", password=None):
    protocol = cluster.security.listener_protocols[listener]
    conf = {"bootstrap_servers": (cluster.bootstrap_servers if listener == "SASL_SSL"
                                  else cluster.bootstrap_for(listener)).split(","),
            "security_protocol": protocol, "request_timeout_ms": 20000}
    if "SASL" in protocol:
        conf.update(sasl_mechanism=mechanism, sasl_plain_username=user,
                    sasl_plain_password=password if password is not None else cluster.security.all_users[user])
    if "SSL" in protocol:
        conf["ssl_cafile"] = str(cluster.security.certificates.ca)
    if protocol == "SSL":
        client = cluster.security.certificates.clients["alice-client"]
        conf.update(ssl_certfile=str(client.certificate), ssl_keyfile=str(client.key))
    return conf


def _kafka_python_round_trip(cluster, listener, topic, n, **kw):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    conf = _kafka_python_config(cluster, listener, **kw)
    producer = KafkaProducer(acks="all", **conf)
    for i in range(n):
        producer.send(topic, f"kp-{i}".encode()).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(auto_offset_reset="earliest", enable_auto_commit=False, **conf)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek(TopicPartition(topic, 0), 0)
    got = []
    deadline = time.monotonic() + 60
    while len(got) < n and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(r.value for r in records)
    consumer.close()
    return got


def test_sasl_ssl_scram_sha_512_produce_and_consume_with_replication_over_sasl_ssl(cluster):
    """confluent-kafka and kafka-python as alice (SCRAM-SHA-512, bootstrapped at format) on
    a cluster whose replication and quorum run over SASL_SSL: the ISR of an RF 3 topic is
    full, so followers fetched over the secured inter-broker listener."""
    _create_topic(cluster, "secure")
    conf = _confluent(cluster, **cluster.security.librdkafka_config(user="alice"))
    delivered, errors = _confluent_produce(conf, "secure", [f"ck-{i}".encode() for i in range(200)])
    assert delivered == [None] * 200 and not errors
    got = _kafka_python_round_trip(cluster, "SASL_SSL", "secure", 100)
    assert len(got) >= 100
    everything = _confluent_consume(conf, "secure", 300)
    assert everything == [f"ck-{i}".encode() for i in range(200)] + [f"kp-{i}".encode() for i in range(100)]
    assert _isr(cluster, "secure") == 3
    # the nodes' own connections (as admin) were never refused
    for node in cluster.nodes.values():
        log = node.log_path.read_text()
        assert "authentication as admin" not in log and "does not offer SASL" not in log, log[-3000:]


def test_mutual_tls_produce_and_consume(cluster):
    _create_topic(cluster, "mtls")
    conf = _confluent(cluster, "MTLS", **cluster.security.librdkafka_config("MTLS"))
    delivered, errors = _confluent_produce(conf, "mtls", [b"m-%d" % i for i in range(50)])
    assert delivered == [None] * 50 and not errors
    assert _kafka_python_round_trip(cluster, "MTLS", "mtls", 20)[:20] == [b"m-%d" % i for i in range(20)]
    # without a client certificate the handshake fails: nothing produced
    no_cert = {k: v for k, v in conf.items() if not k.startswith(("ssl.certificate", "ssl.key"))}
    delivered, errors = _confluent_produce({**no_cert, "message.timeout.ms": 5000}, "mtls", [b"nope"])
    assert delivered and all(e is not None for e in delivered)
    assert len(_confluent_consume(conf, "mtls", 70)) == 70
    assert _confluent_consume(conf, "mtls", 71, timeout_s=2)[70:] == []


def test_sasl_plaintext_with_plain_for_kafka_python(cluster):
    _create_topic(cluster, "plain")
    got = _kafka_python_round_trip(cluster, "SASL_PLAINTEXT", "plain", 30, mechanism="PLAIN")
    assert got == [f"kp-{i}".encode() for i in range(30)]


@pytest.mark.parametrize("user,password", [("alice", "wrong"), ("mallory", "alice-secret")],
                         ids=["wrong-password", "unknown-user"])
def test_bad_credentials_get_sasl_authentication_failed_and_no_data(cluster, user, password):
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    topic = f"denied-{user}"
    _create_topic(cluster, topic)
    conf = _confluent(cluster, **{**cluster.security.librdkafka_config(user="alice"),
                                  "sasl.username": user, "sasl.password": password})
    delivered, errors = _confluent_produce({**conf, "message.timeout.ms": 3000}, topic, [b"x"])
    assert delivered and all(e is not None for e in delivered)
    assert any("Authentication failed" in str(e) or "SASL authentication error" in str(e) for e in errors), errors
    with pytest.raises(KafkaError):
        KafkaProducer(max_block_ms=3000, bootstrap_timeout_ms=3000,
                      **_kafka_python_config(cluster, "SASL_SSL", user=user, password=password))
    # kraft's own client sees the broker's answer: SASL_AUTHENTICATION_FAILED with a message
    security = cluster.security.client_security(user="alice")
    from dataclasses import replace

    bad = replace(security, username=user, password=password)
    node = cluster.brokers[0]
    with pytest.raises(AuthenticationFailed, match="Authentication failed"):
        request(node.host, node.broker_port, "Metadata", 12, {"topics": []}, security=bad)
    good = _confluent(cluster, **cluster.security.librdkafka_config(user="alice"))
    assert _confluent_consume(good, topic, 1, timeout_s=3) == []


def _frame(api, version, body, correlation_id=7):
    return rpc.encode_request(api, version, correlation_id, body, client_id="test")


def _tls_socket(cluster, port, cert=False):
    ctx = ssl.create_default_context(cafile=str(cluster.security.certificates.ca))
    if cert:
        client = cluster.security.certificates.clients["alice-client"]
        ctx.load_cert_chain(str(client.certificate), str(client.key))
    return ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname="127.0.0.1")


def _read_all(sock, timeout_s=10.0):
    sock.settimeout(timeout_s)
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return data
            data += chunk
    except (ConnectionError, ssl.SSLError):
        return data
    except TimeoutError:  # still open (a frame the node accepted, waiting for the next)
        return None


def test_plaintext_client_on_a_tls_port_and_a_client_skipping_sasl_are_closed(cluster):
    node = cluster.brokers[0]
    # PLAINTEXT Kafka request on the SASL_SSL port: no Kafka answer (at most a TLS alert), closed
    with socket.create_connection(("127.0.0.1", node.broker_port), timeout=10) as s:
        s.sendall(_frame("ApiVersions", 3, {"client_software_name": "t", "client_software_version": "1"}))
        reply = _read_all(s)
    assert reply == b"" or reply[:1] == b"\x15", reply[:20]  # 0x15: a TLS alert record
    # TLS but no SASL: ApiVersions is answered (with the SASL APIs), Metadata closes the connection
    with _tls_socket(cluster, node.broker_port) as s:
        s.sendall(_frame("ApiVersions", 3, {"client_software_name": "t", "client_software_version": "1"}))
        size = struct.unpack(">i", s.recv(4))[0]
        payload = b""
        while len(payload) < size:
            payload += s.recv(size - len(payload))
        _, versions = rpc.decode_response("ApiVersions", 3, payload)
        keys = {k["api_key"] for k in versions["api_keys"]}
        assert {17, 36, 50, 51} <= keys
        s.sendall(_frame("Metadata", 12, {"topics": None, "allow_auto_topic_creation": False,
                                          "include_topic_authorized_operations": False}))
        assert _read_all(s) == b""
    # the same on SASL_PLAINTEXT, where the SASL APIs are advertised and PLAINTEXT is not
    with socket.create_connection(("127.0.0.1", node.extra_ports["SASL_PLAINTEXT"]), timeout=10) as s:
        s.sendall(_frame("Metadata", 12, {"topics": None, "allow_auto_topic_creation": False,
                                          "include_topic_authorized_operations": False}))
        assert _read_all(s) == b""
    # mTLS listener: no SASL there, so ApiVersions does not offer it
    with _tls_socket(cluster, node.extra_ports["MTLS"], cert=True) as s:
        s.sendall(_frame("ApiVersions", 3, {"client_software_name": "t", "client_software_version": "1"}))
        size = struct.unpack(">i", s.recv(4))[0]
        payload = b""
        while len(payload) < size:
            payload += s.recv(size - len(payload))
        keys = {k["api_key"] for k in rpc.decode_response("ApiVersions", 3, payload)[1]["api_keys"]}
        assert 17 not in keys and 36 not in keys and 50 in keys


def _malformed_sasl_frames():
    header = lambda key, version: struct.pack(">hhi", key, version, 9) + struct.pack(">h", 1) + b"t"  # noqa: E731
    return [
        header(17, 1) + b"\xff\xff\xff",  # SaslHandshake whose mechanism string runs past the end
        header(17, 1) + struct.pack(">h", 5) + b"PLAIN" + b"trailing",
        header(17, 0) + struct.pack(">h", 5) + b"PLAIN",  # v0 (raw tokens) is not served
        header(17, 9) + struct.pack(">h", 5) + b"PLAIN",
        header(36, 1) + struct.pack(">i", 3) + b"abc",  # SaslAuthenticate before the handshake
        header(36, 2) + b"\x05",
        struct.pack(">hh", 17, 1),  # a header cut short
        b"",
    ]


def _send_frames(port, frames, tls_cluster=None, cert=False):
    sock = _tls_socket(tls_cluster, port, cert) if tls_cluster else socket.create_connection(("127.0.0.1", port), 10)
    with sock:
        for f in frames:
            sock.sendall(struct.pack(">i", len(f)) + f)
        return _read_all(sock, 2)


def test_bad_input_leaves_every_listener_serving(cluster):
    node = cluster.brokers[0]
    rng = random.Random(21)
    tls_ports = [node.broker_port, node.controller_port, node.extra_ports["MTLS"]]
    plain_port = node.extra_ports["SASL_PLAINTEXT"]
    # malformed SASL: each on a fresh authenticated-looking connection, after a good handshake too
    good_handshake = _frame("SaslHandshake", 1, {"mechanism": "SCRAM-SHA-512"})[4:]
    for bad in _malformed_sasl_frames():
        for frames in ([bad], [good_handshake, bad],
                       [good_handshake, _frame("SaslAuthenticate", 2, {"auth_bytes": os.urandom(40)})[4:]]):
            _send_frames(node.broker_port, frames, tls_cluster=cluster)
            _send_frames(plain_port, frames)
    # truncated TLS records: a ClientHello cut at random points, then the socket closes
    outgoing = ssl.MemoryBIO()
    obj = ssl.create_default_context().wrap_bio(ssl.MemoryBIO(), outgoing, server_hostname="x")
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    record = outgoing.read()
    for port in tls_ports:
        for cut in (1, 5, 6, 40, len(record) - 1):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                s.sendall(record[:cut])
        # random byte strings, 200 per listener
        for _ in range(200):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                s.sendall(os.urandom(rng.randint(1, 300)))
    for _ in range(200):
        with socket.create_connection(("127.0.0.1", plain_port), timeout=10) as s:
            s.sendall(os.urandom(rng.randint(1, 300)))
    for n in cluster.nodes.values():
        assert n.running, f"node {n.node_id} died"
    # every listener still serves: a SASL_SSL round trip, the quorum, mTLS, SASL_PLAINTEXT
    _create_topic(cluster, "after-fuzz")
    conf = _confluent(cluster, **cluster.security.librdkafka_config(user="alice"))
    assert _confluent_produce(conf, "after-fuzz", [b"ok"])[0] == [None]
    assert request(node.host, node.controller_port, "DescribeQuorum", 0,
                   {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]},
                   security=cluster.security.client_security("CONTROLLER"))["error_code"] == 0
    mtls = _confluent(cluster, "MTLS", **cluster.security.librdkafka_config("MTLS"))
    assert _confluent_consume(mtls, "after-fuzz", 1) == [b"ok"]
    assert _kafka_python_round_trip(cluster, "SASL_PLAINTEXT", "after-fuzz", 1, mechanism="PLAIN")[0] == b"ok"


def _kraftctl(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "cli.main", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_scram_credentials_altered_and_described_with_kraftctl_configs(cluster, tmp_path):
    props = tmp_path / "admin.properties"
    props.write_text(format_properties(cluster.security.client_properties()))
    base = ["configs", "--bootstrap-server", cluster.bootstrap_servers, "--command-config", str(props),
            "--entity-type", "users"]
    bob = _confluent(cluster, **{**cluster.security.librdkafka_config(user="alice"),
                                 "sasl.username": "bob", "sasl.password": "bob-secret"})
    node = cluster.brokers[0]
    bob_security = cluster.security.client_security(user="alice")
    from dataclasses import replace

    bob_security = replace(bob_security, username="bob", password="bob-secret")
    with pytest.raises(AuthenticationFailed):
        request(node.host, node.broker_port, "Metadata", 12, {"topics": []}, security=bob_security)
    r = _kraftctl(*base, "--entity-name", "bob", "--alter", "--add-config",
                  "SCRAM-SHA-512=[iterations=8192,password=bob-secret]")
    assert r.returncode == 0, r.stderr
    assert "Completed updating config for user bob." in r.stdout
    r = _kraftctl(*base, "--entity-name", "bob", "--describe")
    assert r.stdout.strip() == "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=8192"

    def bob_can_connect():  # every broker's image has it once the record is replayed there
        try:
            for b in cluster.brokers:
                request(b.host, b.broker_port, "Metadata", 12, {"topics": []}, security=bob_security)
            return True
        except NodeUnavailable:
            return False

    wait_until(bob_can_connect, what="bob's credential on every broker")
    _create_topic(cluster, "bobs")
    assert _confluent_produce(bob, "bobs", [b"b"])[0] == [None]
    r = _kraftctl(*base, "--entity-name", "bob", "--alter", "--delete-config", "SCRAM-SHA-512")
    assert r.returncode == 0, r.stderr
    wait_until(lambda: not bob_can_connect(), what="bob's credential gone")
    r = _kraftctl(*base, "--entity-name", "bob", "--alter", "--delete-config", "SCRAM-SHA-512")
    assert r.returncode != 0 and "RESOURCE_NOT_FOUND" in r.stderr
    r = _kraftctl(*base, "--entity-name", "carol", "--alter", "--add-config", "SCRAM-SHA-256=[iterations=10,password=x]")
    assert r.returncode != 0 and "iterations" in r.stderr
    r = _kraftctl(*base, "--describe")
    assert "user-principal 'alice' are SCRAM-SHA-256=iterations=4096, SCRAM-SHA-512=iterations=4096" in r.stdout
    assert "bob" not in r.stdout
