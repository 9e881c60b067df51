"""The txn workload: Jepsen's Kafka test with transactions.

Operations (values as ``jepsen.history`` documents them)::

    txn     invoke [["send", k, v], ["poll"], ...]
            ok     [["send", k, [offset, v]], ["poll", {k: [[offset, v], ...]}], ...]
            fail   the invocation's micro-ops (the transaction certainly aborted)
            info   the invocation's micro-ops (it may have committed)
    assign  invoke [k, ...]   ok the same (every key, at a process's start)

Keys are integers; key ``k`` is partition ``k // topics`` of topic
``jepsen-txn-<k % topics>``, so one transaction spans partitions of several topics.
Values are integers, unique per key and increasing (so increasing per process too).

Every process owns a transactional producer (``transactional.id`` ``jepsen-txn-<process>``,
``init_transactions`` when it opens) and a ``read_committed`` consumer assigned to every
key.  A transaction is ``begin_transaction``, its micro-ops in order (a send waits for its
delivery report, to learn its offset; a poll is one ``consume``), then, when a poll came
before a send (consume-transform-produce), ``send_offsets_to_transaction`` with the
consumer's positions, then ``commit_transaction``.  A fraction ``abort_rate`` of the
transactions with sends is aborted on purpose (``fail``, error ``aborted by the client``).

Outcomes: an error before the commit, or a commit error Kafka says requires an abort, is
followed by ``abort_transaction``; when that succeeds the transaction is ``fail``.  A
commit that failed otherwise, or an abort that failed, is ``info``: the runner retires
the process and its successor has a new ``transactional.id``.  After a ``fail`` the
consumer is rewound to where the transaction started, as a consume-transform-produce
application does (its committed offsets did not move), so its polls are read again.

The final drain (:func:`drain`) reads every key from the beginning with a fresh process,
as ``txn`` operations of one poll, up to the highest offset an ok transaction saw.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from jepsen import security
from jepsen.history import FAIL, INFO, OK
from jepsen.workloads.clients import (
    _librdkafka_debug,
    classify,
    close_librdkafka,
    consume_records,
    produce_and_wait,
)
from jepsen.workloads.drain import read_to_targets

TOPIC_PREFIX = "jepsen-txn"
ABORTED = "aborted by the client"


def topic_of(key: int, topics: int) -> tuple[str, int]:
    """``(topic, partition)`` of a key."""
    return f"{TOPIC_PREFIX}-{key % topics}", key // topics


class TxnGenerator:
    """A seeded source of txn operations; ``next(process)`` -> ``(f, value)``."""

    def __init__(self, keys: int, seed: int = 0, max_mops: int = 4,
                 send_fraction: float = 0.5):
        if keys < 1:
            raise ValueError("the txn workload needs at least one key")
        self.keys = list(range(keys))
        self.rng = random.Random(seed)
        self.max_mops = max_mops
        self.send_fraction = send_fraction
        self.next_value = {k: 0 for k in self.keys}
        self.ready: set[Any] = set()

    def next(self, process: Any) -> tuple[str, Any]:
        if process not in self.ready:
            self.ready.add(process)
            return "assign", self.keys[:]
        mops = []
        for _ in range(self.rng.randint(1, self.max_mops)):
            if self.rng.random() < self.send_fraction:
                k = self.rng.choice(self.keys)
                mops.append(["send", k, self.next_value[k]])
                self.next_value[k] += 1
            else:
                mops.append(["poll"])
        return "txn", mops

    def retire(self, process: Any) -> None:
        self.ready.discard(process)


class TxnClient:
    """A transactional producer and a read_committed, assign-based consumer (librdkafka)."""

    def __init__(self, bootstrap: str, process: Any, topics: int, *, timeout_s: float = 5.0,
                 max_poll: int = 100):
        from confluent_kafka import Consumer, Producer

        self.topics = topics
        self.timeout_s = timeout_s
        self.max_poll = max_poll
        ms = int(timeout_s * 1000)
        self.producer = Producer(security.librdkafka({
            "bootstrap.servers": bootstrap, "transactional.id": f"{TOPIC_PREFIX}-{process}",
            "acks": "all", "enable.idempotence": True, "linger.ms": 0,
            "transaction.timeout.ms": max(10_000, 2 * ms), "message.timeout.ms": ms,
            "request.timeout.ms": ms, "socket.timeout.ms": ms, "log_level": 0,
            "retry.backoff.ms": 50, **_librdkafka_debug(),
        }))
        self.consumer = Consumer(security.librdkafka({
            "bootstrap.servers": bootstrap, "group.id": f"{TOPIC_PREFIX}-{process}",
            "isolation.level": "read_committed", "enable.auto.commit": False,
            "enable.auto.offset.store": False, "auto.offset.reset": "earliest",
            "log_level": 0, "socket.timeout.ms": ms, "fetch.wait.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000, **_librdkafka_debug(),
        }))
        self.positions: dict[int, int] = {}
        self.assigned: list[int] = []
        try:
            self.producer.init_transactions(timeout_s)
        except BaseException:
            close_librdkafka(self.producer, self.consumer)
            raise

    def _tp(self, key: int, offset: int | None = None):
        from confluent_kafka import TopicPartition

        topic, part = topic_of(key, self.topics)
        return TopicPartition(topic, part) if offset is None else \
            TopicPartition(topic, part, offset)

    def _key(self, topic: str, partition: int) -> int:
        return partition * self.topics + int(topic.rsplit("-", 1)[1])

    def assign(self, keys: list[int], from_start: bool = False) -> None:
        # Offset 0 rather than OFFSET_BEGINNING: see ConfluentQueue.assign.
        self.consumer.assign([self._tp(k, 0 if from_start or k not in self.positions
                                       else self.positions[k]) for k in keys])
        self.positions = {k: v for k, v in self.positions.items() if k in keys}
        self.assigned = list(keys)

    def rewind(self, positions: dict[int, int]) -> None:
        """Moves the consumer back to ``positions`` (after an aborted transaction)."""
        self.positions = dict(positions)
        self.assign(self.assigned)

    def send(self, key: int, value: Any) -> int:
        topic, part = topic_of(key, self.topics)
        return produce_and_wait(self.producer, topic, part, value, self.timeout_s)

    def poll(self, timeout_s: float = 0.05) -> dict[int, list[list]]:
        return consume_records(self.consumer, self.max_poll, timeout_s,
                               lambda m: self._key(m.topic(), m.partition()), self.positions)

    def send_offsets(self) -> None:
        """Commits the consumer's positions with the transaction (consume-transform-produce)."""
        tps = [self._tp(k, off) for k, off in sorted(self.positions.items())]
        if tps:
            self.producer.send_offsets_to_transaction(
                tps, self.consumer.consumer_group_metadata(), self.timeout_s)

    def close(self) -> None:
        close_librdkafka(self.producer, self.consumer)


def run_txn(client, mops: list, abort: bool, timeout_s: float) -> tuple[str, Any, str | None]:
    """One transaction on ``client``: ``(type, value, error)`` (see the module docstring)."""
    start = dict(client.positions)
    out: list = []
    committing = False
    try:
        client.producer.begin_transaction()
        polled = ctp = False
        for m in mops:
            if m[0] == "send":
                ctp = ctp or polled
                out.append(["send", m[1], [client.send(m[1], m[2]), m[2]]])
            else:
                out.append(["poll", client.poll()])
                polled = True
        if ctp:
            client.send_offsets()
        if abort:
            client.producer.abort_transaction(timeout_s)
            client.rewind(start)
            return FAIL, mops, ABORTED
        committing = True
        client.producer.commit_transaction(timeout_s)
        return OK, out, None
    except Exception as exc:  # noqa: BLE001 - every client error is an outcome
        _, err = classify(exc)
        if committing and not _requires_abort(exc):
            return INFO, mops, err
        try:
            client.producer.abort_transaction(timeout_s)
        except Exception as exc2:  # noqa: BLE001
            return INFO, mops, f"{err}; abort: {classify(exc2)[1]}"
        try:
            client.rewind(start)
        except Exception:  # noqa: BLE001 - the next poll would show the gap: retire
            return INFO, mops, f"{err}; aborted, but the consumer could not rewind"
        return FAIL, mops, err


def _requires_abort(exc: BaseException) -> bool:
    err = exc.args[0] if getattr(exc, "args", None) else None
    f = getattr(err, "txn_requires_abort", None)
    return bool(f()) if callable(f) else False


class TxnWorkload:
    name = "txn"
    checker = "txn"

    def __init__(self, keys: int = 4, client: str = "confluent", sub_via: str = "assign",
                 timeout_s: float = 5.0, abort_rate: float = 0.1, topics: int = 2,
                 max_mops: int = 4, **_ignored):
        if client != "confluent":
            raise ValueError("the txn workload runs on confluent-kafka (--client confluent)")
        if sub_via != "assign":
            raise ValueError("the txn workload assigns partitions (--sub-via assign)")
        self.keys = keys
        self.timeout_s = timeout_s
        self.abort_rate = abort_rate
        self.topic_count = max(1, min(topics, keys))
        self.max_mops = max_mops
        self._aborts = random.Random(0)

    def topics(self) -> list[tuple[str, int]]:
        t = self.topic_count
        return [(f"{TOPIC_PREFIX}-{i}", len(range(i, self.keys, t))) for i in range(t)]

    def generator(self, seed: int) -> TxnGenerator:
        self._aborts = random.Random(f"{seed}:aborts")
        return TxnGenerator(self.keys, seed, self.max_mops)

    def open_client(self, bootstrap: str, process: Any) -> TxnClient:
        return TxnClient(bootstrap, process, self.topic_count, timeout_s=self.timeout_s)

    def invoke(self, client, f: str, value: Any) -> tuple[str, Any, str | None]:
        """One operation (blocking, in a worker thread): ``(type, value, error)``."""
        if f == "assign":
            try:
                client.assign(list(value))
                return OK, value, None
            except Exception as exc:  # noqa: BLE001
                return INFO, value, classify(exc)[1]
        if f == "txn":
            sends = any(m[0] == "send" for m in value)
            abort = sends and self._aborts.random() < self.abort_rate
            return run_txn(client, value, abort, self.timeout_s)
        raise ValueError(f"the txn workload has no operation {f!r}")


def drain_targets(ops) -> dict[int, int]:
    """Per key, the highest offset any ok transaction sent or polled."""
    top: dict[int, int] = {}
    for op in ops:
        if op.type != OK or op.f != "txn" or not isinstance(op.value, list):
            continue
        seen = []
        for m in op.value:
            if m[0] == "send" and isinstance(m[2], list):
                seen.append((m[1], m[2][0]))
            elif m[0] == "poll" and len(m) == 2:
                seen += [(k, off) for k, pairs in m[1].items() for off, _v in pairs]
        for k, off in seen:
            if off is not None and off >= top.get(k, -1):
                top[k] = off
    return top


async def drain(workload: TxnWorkload, bootstrap: str, ops: Callable[[], list],
                record: Callable[..., Any], new_process: Callable[[], Any],
                deadline: float, say: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Reads every key from the beginning up to the highest offset an ok txn saw.

    Records ``assign`` and one-poll ``txn`` operations of fresh processes (a failed one
    retires its process); returns ``{"targets", "reached", "complete"}``.
    """
    # An ok one-poll txn's value is [["poll", {key: [[offset, value], ...]}]].
    return await read_to_targets(workload, bootstrap, drain_targets(ops()), ("txn", [["poll"]]),
                                 lambda v: v[0][1], record, new_process, deadline, say)
