"""Kafka clients for the workloads, and how their errors map to Jepsen outcomes.

Two client libraries sit behind one small synchronous interface (workers call it from
threads through ``trio.to_thread.run_sync``):

* ``confluent`` (librdkafka, the default) and
* ``kafka-python`` (``--client kafka-python``).

``QueueClient``: ``send(key, value) -> offset``, ``assign(keys)``, ``poll() -> {key:
[[offset, value], ...]}``, ``subscribe(keys)`` (consumer groups, optional),
``end_offsets(keys)``, ``close()``.  ``RegisterClient``: ``write(key, value)``, ``read(key)``.
Keys of the queue are partitions of one topic; register keys are single-partition topics.
Values travel as decimal text.

Error classification
--------------------
``classify(exc, idempotent=False)`` returns ``(type, error)``: ``fail`` only when the error
proves the operation did not take effect, ``info`` otherwise.  A produce fails for sure when
the client never sent it (local queue full, unknown partition, message too large, bad
arguments) or when the broker rejected the request as a whole before appending
(``NOT_ENOUGH_REPLICAS``, ``INVALID_TOPIC_EXCEPTION``, ``MESSAGE_TOO_LARGE``, ...).
Timeouts, disconnects, ``NOT_LEADER_OR_FOLLOWER``, ``NOT_ENOUGH_REPLICAS_AFTER_APPEND``
(appended, not replicated), sequence errors and anything unrecognised are ``info``: the
write may have happened.  Reads change nothing, so for them (``idempotent=True``) every
error is a ``fail``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from jepsen import security

CLIENTS = ("confluent", "kafka-python")

# Kafka error code -> name, for clients that report numbers (kafka-python).
ERROR_NAMES = {
    -1: "UNKNOWN_SERVER_ERROR", 2: "CORRUPT_MESSAGE", 3: "UNKNOWN_TOPIC_OR_PART",
    5: "LEADER_NOT_AVAILABLE", 6: "NOT_LEADER_OR_FOLLOWER", 7: "REQUEST_TIMED_OUT",
    10: "MESSAGE_TOO_LARGE", 13: "NETWORK_EXCEPTION", 17: "INVALID_TOPIC_EXCEPTION",
    18: "RECORD_LIST_TOO_LARGE", 19: "NOT_ENOUGH_REPLICAS",
    20: "NOT_ENOUGH_REPLICAS_AFTER_APPEND", 21: "INVALID_REQUIRED_ACKS",
    29: "TOPIC_AUTHORIZATION_FAILED", 31: "CLUSTER_AUTHORIZATION_FAILED",
    45: "OUT_OF_ORDER_SEQUENCE_NUMBER", 46: "DUPLICATE_SEQUENCE_NUMBER",
    47: "INVALID_PRODUCER_EPOCH", 74: "FENCED_LEADER_EPOCH", 87: "INVALID_RECORD",
}

#: Errors that prove a write did not happen.
DEFINITE_FAILURES = frozenset({
    # never left the client
    "_QUEUE_FULL", "_MSG_SIZE_TOO_LARGE", "_UNKNOWN_PARTITION", "_UNKNOWN_TOPIC",
    "_INVALID_ARG", "_INVALID_TYPE", "_NOT_IMPLEMENTED",
    # the broker refused the whole request before appending anything
    "NOT_ENOUGH_REPLICAS", "INVALID_TOPIC_EXCEPTION", "MESSAGE_TOO_LARGE",
    "RECORD_LIST_TOO_LARGE", "INVALID_REQUIRED_ACKS", "TOPIC_AUTHORIZATION_FAILED",
    "CLUSTER_AUTHORIZATION_FAILED", "CORRUPT_MESSAGE", "INVALID_RECORD",
})

# kafka-python exception classes that carry no errno but are definite.
_DEFINITE_CLASSES = frozenset({"MessageSizeTooLargeError", "IllegalArgumentError",
                               "UnknownTopicOrPartitionError"})


class ClientError(Exception):
    """An operation's error, already named: ``name`` is a Kafka error name or ``_LOCAL``."""

    def __init__(self, name: str, message: str = ""):
        super().__init__(f"{name}: {message}" if message else name)
        self.name = name


def error_name(exc: BaseException) -> str:
    """A Kafka-style name for an exception from either client library (or the harness)."""
    if isinstance(exc, ClientError):
        return exc.name
    err = exc.args[0] if getattr(exc, "args", None) else None
    # confluent_kafka.KafkaException wraps a KafkaError; a KafkaError itself has .name().
    for cand in (err, exc):
        name = getattr(cand, "name", None)
        if callable(name) and hasattr(cand, "code"):
            try:
                return str(name())
            except Exception:  # noqa: BLE001
                pass
    errno = getattr(type(exc), "errno", None)
    if isinstance(errno, int) and errno in ERROR_NAMES:
        return ERROR_NAMES[errno]
    cls = type(exc).__name__
    if cls == "KafkaTimeoutError" or isinstance(exc, TimeoutError):
        return "_TIMED_OUT"
    if isinstance(exc, (ConnectionError, OSError)) or cls in ("KafkaConnectionError",
                                                             "NoBrokersAvailable"):
        return "_TRANSPORT"
    return cls


def classify(exc: BaseException, idempotent: bool = False) -> tuple[str, str]:
    """``(type, error)`` for a failed operation: ``fail`` if it certainly did not happen,
    else ``info``.  ``idempotent`` operations (reads) always ``fail``."""
    name = error_name(exc)
    msg = str(exc)
    text = msg if msg.startswith(name) else f"{name}: {msg}" if msg else name
    text = text[:300]
    if idempotent:
        return "fail", text
    if name in DEFINITE_FAILURES or type(exc).__name__ in _DEFINITE_CLASSES:
        return "fail", text
    return "info", text


# ---------------------------------------------------------------- confluent-kafka


#: A client call still running after this many client timeouts is abandoned.
HUNG_CALL_TIMEOUTS = 8
HUNG = "client call hung: abandoned"


async def invoke_bounded(workload, client, f: str, value: Any, timeout_s: float,
                         limiter=None) -> tuple[str, Any, str | None, bool]:
    """``workload.invoke`` in a thread, abandoned if it outlives ``HUNG_CALL_TIMEOUTS`` client
    timeouts: ``(type, value, error, abandoned)``.  An abandoned call completes as ``info``
    (it may yet take effect) and its client must be dropped unclosed, its thread still
    inside it.  librdkafka's ``send_offsets_to_transaction`` ignores its timeout once the
    group coordinator was killed (librdkafka issues 5456 and 5511) and held a whole run.
    Jepsen bounds its client calls the same way."""
    import trio

    with trio.move_on_after(HUNG_CALL_TIMEOUTS * timeout_s) as watchdog:
        t, v, err = await trio.to_thread.run_sync(workload.invoke, client, f, value,
                                                  limiter=limiter, abandon_on_cancel=True)
        return t, v, err, False
    assert watchdog.cancelled_caught
    return "info", value, HUNG, True


def close_librdkafka(producer, consumer) -> None:
    """Close both, best-effort, so that their librdkafka threads end now: a producer only
    flushed lived on (with a thread per broker, reconnecting to the stopped cluster) until
    garbage collection, and a 20-run campaign process reached 2,000 threads and a load
    average of 50 on 2 cores."""
    try:
        consumer.close()
    except Exception:  # noqa: BLE001 - a crashed client is closed best-effort
        pass
    try:
        producer.purge()  # queued records are abandoned: the operation was already decided
        producer.close()
    except Exception:  # noqa: BLE001
        pass


def _enc(v: Any) -> bytes:
    return str(v).encode()


def _dec(b: bytes | None) -> Any:
    if b is None:
        return None
    s = b.decode()
    try:
        return int(s)
    except ValueError:
        return s


def produce_and_wait(producer, topic: str, partition: int, value: Any, timeout_s: float) -> int:
    """Produces one record and waits for its delivery report (to learn its offset).

    Returns the record's offset; raises ``ClientError`` ``_QUEUE_FULL`` when librdkafka's
    queue refused it, ``_TIMED_OUT`` when no report came within ``timeout_s`` (plus a
    second of slack: ``message.timeout.ms`` should report first), and the report's
    ``KafkaException`` when delivery failed.
    """
    out: list = []
    try:
        producer.produce(topic, value=_enc(value), partition=partition,
                         on_delivery=lambda err, msg: out.append((err, msg)))
    except BufferError as exc:
        raise ClientError("_QUEUE_FULL", str(exc)) from None
    deadline = time.monotonic() + timeout_s + 1.0
    while not out and time.monotonic() < deadline:
        producer.poll(0.05)
    if not out:
        raise ClientError("_TIMED_OUT", "no delivery report")
    err, msg = out[0]
    if err is not None:
        from confluent_kafka import KafkaException
        raise KafkaException(err)
    return msg.offset()


def consume_records(consumer, max_poll: int, timeout_s: float, key_of: Callable[[Any], int],
                    positions: dict[int, int]) -> dict[int, list[list]]:
    """One ``consume`` of at most ``max_poll`` messages: ``{key: [[offset, value], ...]}``.

    ``key_of(message)`` names a message's key; ``positions[key]`` moves past every record
    returned.  End-of-partition events are skipped; any other error raises
    ``KafkaException``.
    """
    from confluent_kafka import KafkaException

    out: dict[int, list[list]] = {}
    for m in consumer.consume(max_poll, timeout_s):
        if m.error() is not None:
            if m.error().code() == -191:  # _PARTITION_EOF
                continue
            raise KafkaException(m.error())
        k = key_of(m)
        out.setdefault(k, []).append([m.offset(), _dec(m.value())])
        positions[k] = m.offset() + 1
    return out


class ConfluentQueue:
    """A producer and an assign-based consumer (librdkafka)."""

    def __init__(self, bootstrap: str, topic: str, *, timeout_s: float = 5.0,
                 group: str | None = None, max_poll: int = 100, group_protocol: str = "classic",
                 client_rack: str | None = None):
        from confluent_kafka import Consumer, Producer

        self.topic = topic
        self.timeout_s = timeout_s
        self.max_poll = max_poll
        ms = int(timeout_s * 1000)
        self.producer = Producer(security.librdkafka({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 0, "message.timeout.ms": ms, "request.timeout.ms": ms,
            "socket.timeout.ms": ms, "log_level": 0, "retry.backoff.ms": 50,
        }))
        # KIP-848 (group.protocol=consumer): the coordinator sets the session and heartbeat
        # interval, which librdkafka then refuses as client settings
        group_settings = ({"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000} if group_protocol == "classic"
                          else {"group.protocol": group_protocol})
        self.consumer = Consumer(security.librdkafka({
            "bootstrap.servers": bootstrap, "group.id": group or f"jepsen-{id(self)}",
            "enable.auto.commit": False, "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest", "log_level": 0, "socket.timeout.ms": ms,
            **group_settings, "fetch.wait.max.ms": 100, "topic.metadata.refresh.interval.ms": 1000,
            **({"client.rack": client_rack} if client_rack else {}),
            **_librdkafka_debug(),
        }))
        self.positions: dict[int, int] = {}

    def send(self, key: int, value: Any) -> int:
        return produce_and_wait(self.producer, self.topic, int(key), value, self.timeout_s)

    def assign(self, keys: list[int], from_start: bool = False) -> None:
        from confluent_kafka import TopicPartition

        # "From the beginning" is offset 0, not OFFSET_BEGINNING: librdkafka (2.x) re-arms
        # its BEGINNING lookup timer when a quick re-assign makes a reply outdated, and the
        # stale timer later fires under the next assignment and moves an explicit position
        # back to the log start (seen with KRAFT_JEPSEN_RDKAFKA_DEBUG as "timed offset
        # query for offset BEGINNING ... in state active", then a poll going 284 -> 0).
        # A log start above 0 still works: OFFSET_OUT_OF_RANGE, then auto.offset.reset.
        tps = [TopicPartition(self.topic, int(k), 0 if from_start or k not in self.positions
                              else self.positions[k]) for k in keys]
        self.consumer.assign(tps)
        self.positions = {k: v for k, v in self.positions.items() if k in keys}

    def subscribe(self, keys: list[int]) -> None:
        self.consumer.subscribe([self.topic])

    def poll(self, timeout_s: float = 0.05) -> dict[int, list[list]]:
        return consume_records(self.consumer, self.max_poll, timeout_s,
                               lambda m: m.partition(), self.positions)

    def end_offsets(self, keys: list[int]) -> dict[int, int]:
        from confluent_kafka import TopicPartition

        return {k: self.consumer.get_watermark_offsets(
            TopicPartition(self.topic, int(k)), timeout=self.timeout_s, cached=False)[1]
            for k in keys}

    def close(self) -> None:
        close_librdkafka(self.producer, self.consumer)


def _librdkafka_debug() -> dict:
    """``KRAFT_JEPSEN_RDKAFKA_DEBUG=fetch,consumer,...``: librdkafka's own debug log on
    stderr, to see why a client did what the history shows."""
    contexts = os.environ.get("KRAFT_JEPSEN_RDKAFKA_DEBUG")
    return {"debug": contexts, "log_level": 7} if contexts else {}


class ConfluentRegister:
    """Write = acks=all produce; read = ListOffsets latest, then fetch the last record."""

    def __init__(self, bootstrap: str, topic_of, *, timeout_s: float = 5.0):
        self.q = ConfluentQueue(bootstrap, "", timeout_s=timeout_s, max_poll=10)
        self.topic_of = topic_of

    def write(self, key: Any, value: Any) -> None:
        self.q.topic = self.topic_of(key)
        self.q.send(0, value)

    def read(self, key: Any) -> Any:
        from confluent_kafka import KafkaException, TopicPartition

        topic = self.topic_of(key)
        c = self.q.consumer
        _low, high = c.get_watermark_offsets(TopicPartition(topic, 0),
                                             timeout=self.q.timeout_s, cached=False)
        if high <= 0:
            return None
        c.assign([TopicPartition(topic, 0, high - 1)])
        deadline = time.monotonic() + self.q.timeout_s
        try:
            while time.monotonic() < deadline:
                for m in c.consume(1, 0.2):
                    if m.error() is not None:
                        if m.error().code() == -191:
                            continue
                        raise KafkaException(m.error())
                    if m.offset() == high - 1:
                        return _dec(m.value())
            raise ClientError("_TIMED_OUT", f"no record at offset {high - 1}")
        finally:
            c.unassign()

    def close(self) -> None:
        self.q.close()


# ---------------------------------------------------------------- kafka-python


class KafkaPythonQueue:
    def __init__(self, bootstrap: str, topic: str, *, timeout_s: float = 5.0,
                 group: str | None = None, max_poll: int = 100):
        from kafka import KafkaConsumer, KafkaProducer

        self.topic = topic
        self.timeout_s = timeout_s
        self.max_poll = max_poll
        ms = int(timeout_s * 1000)
        servers = bootstrap.split(",")
        self.producer = KafkaProducer(**security.kafka_python(dict(
            bootstrap_servers=servers, acks="all", enable_idempotence=True, linger_ms=0,
            request_timeout_ms=ms, max_block_ms=ms)))
        self.consumer = KafkaConsumer(**security.kafka_python(dict(
            bootstrap_servers=servers, group_id=group, enable_auto_commit=False,
            auto_offset_reset="earliest", request_timeout_ms=max(ms, 6000) + 500,
            fetch_max_wait_ms=100)))
        self.positions: dict[int, int] = {}

    def _tp(self, k):
        from kafka import TopicPartition
        return TopicPartition(self.topic, int(k))

    def send(self, key: int, value: Any) -> int:
        fut = self.producer.send(self.topic, value=_enc(value), partition=int(key))
        md = fut.get(timeout=self.timeout_s + 1.0)
        return md.offset

    def assign(self, keys: list[int], from_start: bool = False) -> None:
        tps = [self._tp(k) for k in keys]
        self.consumer.assign(tps)
        for k, tp in zip(keys, tps):
            if from_start or k not in self.positions:
                self.consumer.seek_to_beginning(tp)
            else:
                self.consumer.seek(tp, self.positions[k])
        self.positions = {k: v for k, v in self.positions.items() if k in keys}

    def subscribe(self, keys: list[int]) -> None:
        self.consumer.subscribe([self.topic])

    def poll(self, timeout_s: float = 0.05) -> dict[int, list[list]]:
        got = self.consumer.poll(timeout_ms=int(timeout_s * 1000), max_records=self.max_poll)
        out: dict[int, list[list]] = {}
        for tp, recs in got.items():
            for r in recs:
                out.setdefault(tp.partition, []).append([r.offset, _dec(r.value)])
                self.positions[tp.partition] = r.offset + 1
        return out

    def end_offsets(self, keys: list[int]) -> dict[int, int]:
        ends = self.consumer.end_offsets([self._tp(k) for k in keys])
        return {tp.partition: off for tp, off in ends.items()}

    def close(self) -> None:
        for c in (self.consumer, self.producer):
            try:
                c.close(timeout=1) if c is self.producer else c.close()
            except Exception:  # noqa: BLE001
                pass


class KafkaPythonRegister:
    def __init__(self, bootstrap: str, topic_of, *, timeout_s: float = 5.0):
        self.q = KafkaPythonQueue(bootstrap, "", timeout_s=timeout_s, max_poll=10)
        self.topic_of = topic_of

    def write(self, key: Any, value: Any) -> None:
        self.q.topic = self.topic_of(key)
        self.q.send(0, value)

    def read(self, key: Any) -> Any:
        from kafka import TopicPartition

        tp = TopicPartition(self.topic_of(key), 0)
        c = self.q.consumer
        high = c.end_offsets([tp])[tp]
        if high <= 0:
            return None
        c.assign([tp])
        c.seek(tp, high - 1)
        deadline = time.monotonic() + self.q.timeout_s
        while time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=200, max_records=1).values():
                for r in recs:
                    if r.offset == high - 1:
                        return _dec(r.value)
        raise ClientError("_TIMED_OUT", f"no record at offset {high - 1}")

    def close(self) -> None:
        self.q.close()


def queue_client(kind: str, bootstrap: str, topic: str, **kw):
    if kind == "confluent":
        return ConfluentQueue(bootstrap, topic, **kw)
    if kind == "kafka-python":
        return KafkaPythonQueue(bootstrap, topic, **kw)
    raise ValueError(f"unknown client {kind!r} (one of {', '.join(CLIENTS)})")


def register_client(kind: str, bootstrap: str, topic_of, **kw):
    if kind == "confluent":
        return ConfluentRegister(bootstrap, topic_of, **kw)
    if kind == "kafka-python":
        return KafkaPythonRegister(bootstrap, topic_of, **kw)
    raise ValueError(f"unknown client {kind!r} (one of {', '.join(CLIENTS)})")
