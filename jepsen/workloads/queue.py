"""The queue workload: Jepsen's Kafka test, with keys = partitions of one topic.

Operations (values as ``jepsen.history`` documents them)::

    send       invoke [key, v]          ok [key, [offset, v]]   (v unique across the run)
    poll       invoke null              ok {key: [[offset, v], ...]}
    assign     invoke [key, ...]        ok the same     (the consumer's partitions)
    subscribe  invoke [key, ...]        ok the same     (consumer groups; optional)
    crash      invoke null              info            (the client is thrown away)

Every process owns one producer (acks=all, idempotent) and one consumer.  A fresh process
first assigns (or subscribes), so polls always have partitions; then it sends, polls,
now and then re-assigns a random subset of partitions, and rarely crashes.  An ``info``
completion retires the process (the runner carries on with a fresh process number and
fresh clients).

The final drain (:func:`drain`) runs after the nemesis healed everything: a fresh
consumer assigns every partition from the beginning and polls until each has been read up
to the highest offset any ok operation saw, or the drain deadline passes.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from jepsen.history import OK
from jepsen.workloads.clients import classify, queue_client
from jepsen.workloads.drain import read_to_targets

TOPIC = "jepsen-queue"
DEFAULT_WEIGHTS = {"send": 50, "poll": 40, "assign": 6, "crash": 1}


class QueueGenerator:
    """A seeded source of queue operations; ``next(process)`` -> ``(f, value)``.

    Pure bookkeeping (no I/O): which processes have partitions, the next unique value.
    """

    def __init__(self, keys: int, seed: int = 0, weights: dict[str, int] | None = None,
                 sub_via: str = "assign"):
        if keys < 1:
            raise ValueError("the queue needs at least one key")
        if sub_via not in ("assign", "subscribe"):
            raise ValueError("sub_via is assign or subscribe")
        self.keys = list(range(keys))
        self.rng = random.Random(seed)
        w = dict(DEFAULT_WEIGHTS if weights is None else weights)
        if sub_via == "subscribe":
            w["subscribe"] = w.pop("assign", 0)
        self.fs = [f for f in w if w[f] > 0]
        self.weights = [w[f] for f in self.fs]
        self.sub_via = sub_via
        self.next_value = 0
        self.ready: set[Any] = set()

    def _subset(self) -> list[int]:
        k = self.rng.randint(1, len(self.keys))
        return sorted(self.rng.sample(self.keys, k))

    def next(self, process: Any) -> tuple[str, Any]:
        if process not in self.ready:
            self.ready.add(process)
            return self.sub_via, (self._subset() if self.sub_via == "assign" else self.keys[:])
        f = self.rng.choices(self.fs, self.weights)[0]
        if f == "send":
            v = self.next_value
            self.next_value += 1
            return "send", [self.rng.choice(self.keys), v]
        if f == "poll":
            return "poll", None
        if f == "assign":
            return "assign", self._subset()
        if f == "subscribe":
            return "subscribe", self.keys[:]
        if f == "crash":
            self.ready.discard(process)
            return "crash", None
        raise AssertionError(f)

    def retire(self, process: Any) -> None:
        """The process ended (an ``info``); its successor starts by assigning."""
        self.ready.discard(process)


GROUP_PROTOCOLS = ("classic", "consumer", "mixed")
MIXED_BLOCK = 10  # the runner's default concurrency: the first processes are one block


class QueueWorkload:
    name = "queue"
    checker = "queue"

    def __init__(self, keys: int = 4, client: str = "confluent", sub_via: str = "assign",
                 timeout_s: float = 5.0, weights: dict[str, int] | None = None,
                 group_protocol: str = "classic", racks: list[str] | None = None, **_ignored):
        if group_protocol not in GROUP_PROTOCOLS:
            raise ValueError(f"group_protocol must be one of {', '.join(GROUP_PROTOCOLS)}")
        if group_protocol != "classic" and (sub_via != "subscribe" or client != "confluent"):
            raise ValueError(f"group_protocol={group_protocol} needs sub_via=subscribe and the confluent client")
        self.keys = keys
        self.client = client
        self.sub_via = sub_via
        self.group_protocol = group_protocol
        self.timeout_s = timeout_s
        self.weights = weights
        if racks and client != "confluent":
            raise ValueError("racks (client.rack) need the confluent client")
        self.racks = racks  # each process's consumer in one of them, in turn (KIP-392)

    def topics(self) -> list[tuple[str, int]]:
        return [(TOPIC, self.keys)]

    def generator(self, seed: int) -> QueueGenerator:
        return QueueGenerator(self.keys, seed, self.weights, self.sub_via)

    def open_client(self, bootstrap: str, process: Any):
        protocol, group = self.group_of(process)
        extra = {"group_protocol": protocol} if protocol != "classic" else {}
        if self.racks:
            turn = process if isinstance(process, int) else sum(map(ord, str(process)))  # no hash(): seeded runs repeat
            extra["client_rack"] = self.racks[turn % len(self.racks)]
        return queue_client(self.client, bootstrap, TOPIC, timeout_s=self.timeout_s, group=group, **extra)

    def group_of(self, process: Any) -> tuple[str, str | None]:
        """(group.protocol, group id) of ``process``'s consumer: with ``subscribe``, a group of
        its own.  ``mixed`` puts every process in one group and alternates the protocol by
        blocks of ``MIXED_BLOCK`` process ids (the first block classic, the next KIP-848,
        ...).  Retired processes are replaced one at a time, so the group holds both kinds
        of member while a block gives way to the next, and goes both ways between a classic
        and a consumer group (KIP-848's online upgrade when a KIP-848 member joins a classic
        group, the downgrade when the last KIP-848 member leaves) again and again."""
        if self.sub_via != "subscribe":
            return "classic", None
        if self.group_protocol == "mixed":
            return ("consumer" if int(process) // MIXED_BLOCK % 2 else "classic"), "jepsen-mixed"
        return self.group_protocol, f"jepsen-{process}"

    def invoke(self, client, f: str, value: Any) -> tuple[str, Any, str | None]:
        """One operation (blocking, in a worker thread): ``(type, value, error)``."""
        try:
            if f == "send":
                key, v = value
                return OK, [key, [client.send(key, v), v]], None
            if f == "poll":
                return OK, client.poll(), None
            if f == "assign":
                client.assign(list(value))
                return OK, value, None
            if f == "subscribe":
                client.subscribe(list(value))
                return OK, value, None
            if f == "crash":
                return "info", None, "crashed"
        except Exception as exc:  # noqa: BLE001 - every client error is an outcome
            # A failed poll may have moved the consumer on: retire it (info), so the
            # checker never sees the gap as a skip.
            t, err = classify(exc)
            return ("info" if f == "poll" else t), None, err
        raise ValueError(f"the queue workload has no operation {f!r}")


def drain_targets(ops) -> dict[int, int]:
    """Per key, the highest offset any ok send or poll saw."""
    top: dict[int, int] = {}
    for op in ops:
        if op.type != OK:
            continue
        if op.f == "send" and isinstance(op.value, list) and len(op.value) == 2 \
                and isinstance(op.value[1], list):
            k, off = op.value[0], op.value[1][0]
            if off is not None and off >= top.get(k, -1):
                top[k] = off
        elif op.f == "poll" and isinstance(op.value, dict):
            for k, pairs in op.value.items():
                for off, _v in pairs:
                    if off >= top.get(k, -1):
                        top[k] = off
    return top


async def drain(workload: QueueWorkload, bootstrap: str, ops: Callable[[], list],
                record: Callable[..., Any], new_process: Callable[[], Any],
                deadline: float, say: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Reads every partition from the beginning up to the highest offset seen.

    ``record(process, type, f, value, error=None)`` appends history records;
    ``new_process()`` hands out a fresh process number.  Returns
    ``{"targets", "reached", "complete"}``.
    """
    return await read_to_targets(workload, bootstrap, drain_targets(ops()), ("poll", None),
                                 lambda v: v or {}, record, new_process, deadline, say)
