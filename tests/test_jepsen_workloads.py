"""Workload generators and client error classification (no cluster needed)."""

from __future__ import annotations

import pytest

from jepsen.workloads import (ClientError, QueueGenerator, RegisterGenerator, classify,
                              make_workload)
from jepsen.workloads.clients import DEFINITE_FAILURES, error_name
from jepsen.workloads.queue import QueueWorkload, drain_targets
from jepsen.workloads.register import RegisterWorkload, keys_needed, topic_of
from jepsen.history import Op


def test_queue_generator_assigns_first_and_sends_unique_values():
    g = QueueGenerator(keys=4, seed=3)
    ops = {p: [] for p in range(5)}
    for _ in range(400):
        for p in ops:
            ops[p].append(g.next(p))
    values = []
    for p, seq in ops.items():
        assert seq[0][0] == "assign"
        for i, (f, v) in enumerate(seq):
            if f in ("assign",):
                assert v and v == sorted(set(v)) and set(v) <= {0, 1, 2, 3}
            if f == "send":
                assert v[0] in range(4)
                values.append(v[1])
            if f == "poll":
                assert v is None
            if f == "crash":  # after a crash the next op re-assigns
                assert seq[i + 1][0] == "assign" if i + 1 < len(seq) else True
    assert len(values) == len(set(values)) > 500
    fs = {f for seq in ops.values() for f, _ in seq}
    assert fs == {"send", "poll", "assign", "crash"}


def test_queue_generator_is_seeded_and_retire_reassigns():
    a = [QueueGenerator(3, seed=9).next(p % 3) for p in range(50)]
    b = [QueueGenerator(3, seed=9).next(p % 3) for p in range(50)]
    assert a[:3] == b[:3]
    g1, g2 = QueueGenerator(3, seed=9), QueueGenerator(3, seed=9)
    assert [g1.next(p % 3) for p in range(60)] == [g2.next(p % 3) for p in range(60)]
    g = QueueGenerator(2, seed=1, weights={"send": 1})
    assert g.next(7)[0] == "assign"
    assert g.next(7)[0] == "send"
    g.retire(7)
    assert g.next(7)[0] == "assign"


def test_queue_generator_subscribe_mode():
    g = QueueGenerator(3, seed=1, sub_via="subscribe")
    seq = [g.next(0) for _ in range(300)]
    assert seq[0] == ("subscribe", [0, 1, 2])
    assert "assign" not in {f for f, _ in seq}
    with pytest.raises(ValueError):
        QueueGenerator(0)


def test_register_generator_rotates_keys_and_writes_increase():
    g = RegisterGenerator(max_keys=10, seed=2, active=2, ops_per_key=20)
    seq = [g.next(0) for _ in range(150)]
    keys = [v[0] for _, v in seq]
    assert set(keys) <= set(range(10)) and len(set(keys)) >= 6
    last: dict = {}
    for f, (k, v) in seq:
        assert f in ("read", "write")
        if f == "read":
            assert v is None
        else:
            assert v > last.get(k, 0)
            last[k] = v
    from collections import Counter
    assert max(Counter(keys).values()) <= 20 + 1
    assert keys_needed(30000, 200, 2) == 64
    assert keys_needed(100, 200, 2) == 3
    assert topic_of(3) == "jepsen-reg-3"
    assert [t for t, _ in RegisterWorkload(keys=3).topics()] == [topic_of(k) for k in range(3)]


class _KErr:
    """Stands in for confluent_kafka.KafkaError (name()/code())."""

    def __init__(self, name, code=0):
        self._n, self._c = name, code

    def name(self):
        return self._n

    def code(self):
        return self._c

    def __str__(self):
        return f"KafkaError{{code={self._n}}}"


class _KExc(Exception):
    pass


@pytest.mark.parametrize("name, expected", [
    ("_MSG_TIMED_OUT", "info"), ("_TIMED_OUT", "info"), ("_TRANSPORT", "info"),
    ("REQUEST_TIMED_OUT", "info"), ("NOT_LEADER_OR_FOLLOWER", "info"),
    ("NOT_ENOUGH_REPLICAS_AFTER_APPEND", "info"), ("NETWORK_EXCEPTION", "info"),
    ("OUT_OF_ORDER_SEQUENCE_NUMBER", "info"), ("UNKNOWN_TOPIC_OR_PART", "info"),
    ("LEADER_NOT_AVAILABLE", "info"), ("SOMETHING_NEW", "info"),
    ("NOT_ENOUGH_REPLICAS", "fail"), ("_QUEUE_FULL", "fail"), ("MESSAGE_TOO_LARGE", "fail"),
    ("INVALID_TOPIC_EXCEPTION", "fail"), ("_UNKNOWN_PARTITION", "fail"),
    ("TOPIC_AUTHORIZATION_FAILED", "fail"),
])
def test_classify_confluent_style_errors(name, expected):
    exc = _KExc(_KErr(name))
    t, err = classify(exc)
    assert t == expected and err.startswith(name)
    # reads change nothing: any error is a fail
    assert classify(exc, idempotent=True)[0] == "fail"


def test_classify_real_confluent_and_kafka_python_errors():
    from confluent_kafka import KafkaError, KafkaException

    assert classify(KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT)))[0] == "info"
    assert classify(KafkaException(KafkaError(KafkaError.NOT_ENOUGH_REPLICAS)))[0] == "fail"
    assert classify(KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION)))[0] == "info"
    assert error_name(KafkaException(KafkaError(KafkaError.NOT_ENOUGH_REPLICAS))) == \
        "NOT_ENOUGH_REPLICAS"

    import kafka.errors as ke
    assert classify(ke.KafkaTimeoutError("t"))[0] == "info"
    assert classify(ke.NotLeaderForPartitionError())[0] == "info"
    assert classify(ke.RequestTimedOutError())[0] == "info"
    assert classify(ke.NotEnoughReplicasError())[0] == "fail"
    assert classify(ke.NotEnoughReplicasAfterAppendError())[0] == "info"
    assert classify(ke.MessageSizeTooLargeError())[0] == "fail"
    assert classify(ke.KafkaConnectionError())[0] == "info"
    # the harness's own errors and plain exceptions
    assert classify(ClientError("_TIMED_OUT", "no report")) == ("info", "_TIMED_OUT: no report")
    assert classify(ClientError("_QUEUE_FULL"))[0] == "fail"
    assert classify(TimeoutError("x"))[0] == "info"
    assert classify(ConnectionResetError("x"))[0] == "info"
    assert classify(RuntimeError("weird"))[0] == "info"
    assert "NOT_LEADER_OR_FOLLOWER" not in DEFINITE_FAILURES


class _FakeQueueClient:
    def __init__(self, fail=None):
        self.fail = fail
        self.assigned = None

    def send(self, key, value):
        if self.fail:
            raise self.fail
        return 41

    def poll(self):
        if self.fail:
            raise self.fail
        return {1: [[0, 5], [1, 6]]}

    def assign(self, keys, from_start=False):
        self.assigned = keys

    def subscribe(self, keys):
        self.assigned = keys


def test_queue_workload_invoke_shapes_and_outcomes():
    w = QueueWorkload(keys=2)
    c = _FakeQueueClient()
    assert w.invoke(c, "send", [1, 7]) == ("ok", [1, [41, 7]], None)
    assert w.invoke(c, "poll", None) == ("ok", {1: [[0, 5], [1, 6]]}, None)
    assert w.invoke(c, "assign", [0, 1]) == ("ok", [0, 1], None) and c.assigned == [0, 1]
    assert w.invoke(c, "crash", None)[0] == "info"
    bad = _FakeQueueClient(_KExc(_KErr("NOT_ENOUGH_REPLICAS")))
    assert w.invoke(bad, "send", [0, 1])[:2] == ("fail", None)
    # a failed poll retires the consumer: info, never fail
    assert w.invoke(bad, "poll", None)[0] == "info"
    timeout = _FakeQueueClient(_KExc(_KErr("_MSG_TIMED_OUT")))
    assert w.invoke(timeout, "send", [0, 1])[0] == "info"
    assert w.topics() == [("jepsen-queue", 2)]
    with pytest.raises(ValueError):
        make_workload("bank")


def test_register_workload_invoke():
    class C:
        def write(self, k, v):
            if v == 99:
                raise _KExc(_KErr("_MSG_TIMED_OUT"))

        def read(self, k):
            if k == 9:
                raise _KExc(_KErr("NOT_LEADER_OR_FOLLOWER"))
            return 3

    w = RegisterWorkload(keys=2)
    assert w.invoke(C(), "write", [0, 4]) == ("ok", [0, 4], None)
    assert w.invoke(C(), "read", [0, None]) == ("ok", [0, 3], None)
    assert w.invoke(C(), "write", [0, 99])[:2] == ("info", None)
    assert w.invoke(C(), "read", [9, None])[:2] == ("fail", None)


def test_drain_targets_from_sends_and_polls():
    ops = [Op(0, 0, "ok", 0, "send", [0, [5, 1]]),
           Op(1, 1, "ok", 1, "poll", {0: [[6, 2]], 1: [[2, 3]]}),
           Op(2, 2, "info", 2, "send", None),
           Op(3, 3, "ok", 0, "send", [2, [0, 9]])]
    assert drain_targets(ops) == {0: 6, 1: 2, 2: 0}


async def test_a_client_call_that_hangs_is_abandoned_as_info():
    """librdkafka's send_offsets_to_transaction can ignore its timeout for good once the
    group coordinator was killed; the run must go on, the operation indeterminate."""
    import threading

    import trio

    from jepsen.workloads.clients import HUNG, invoke_bounded

    release = threading.Event()

    class Hanging:
        def invoke(self, client, f, value):
            if value == "hang":
                release.wait(30)
            return "ok", value, None

    try:
        started = trio.current_time()
        assert await invoke_bounded(Hanging(), None, "txn", "hang", 0.05) == ("info", "hang", HUNG, True)
        assert trio.current_time() - started < 5
        assert await invoke_bounded(Hanging(), None, "txn", 1, 0.05) == ("ok", 1, None, False)
    finally:
        release.set()


def test_mixed_groups_put_every_consumer_in_one_group_alternating_protocols_by_blocks():
    """--group-protocol mixed: one group for all, classic and KIP-848 members by blocks of
    process ids, so the group migrates both ways as processes are replaced."""
    from jepsen.workloads.queue import MIXED_BLOCK

    mixed = QueueWorkload(sub_via="subscribe", group_protocol="mixed")
    groups = {mixed.group_of(p) for p in range(4 * MIXED_BLOCK)}
    assert groups == {("classic", "jepsen-mixed"), ("consumer", "jepsen-mixed")}
    assert [mixed.group_of(p)[0] for p in (0, MIXED_BLOCK - 1, MIXED_BLOCK, 2 * MIXED_BLOCK)] == [
        "classic", "classic", "consumer", "classic"]
    assert QueueWorkload(sub_via="subscribe", group_protocol="consumer").group_of(7) == ("consumer", "jepsen-7")
    assert QueueWorkload(sub_via="subscribe").group_of(7) == ("classic", "jepsen-7")
    assert QueueWorkload().group_of(7) == ("classic", None)  # assign: no group
    with pytest.raises(ValueError, match="group_protocol=mixed needs sub_via=subscribe"):
        QueueWorkload(group_protocol="mixed")
    with pytest.raises(ValueError, match="one of classic, consumer, mixed"):
        QueueWorkload(sub_via="subscribe", group_protocol="cooperative")
