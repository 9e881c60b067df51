"""The register workload: independent read/write registers over Kafka.

Each register key is its own single-partition topic ``jepsen-reg-<key>``::

    write  invoke [key, v]      ok [key, v]     acks=all produce of v
    read   invoke [key, null]   ok [key, v]     ListOffsets latest (the high watermark),
                                                then fetch the record just below it;
                                                null when the partition is empty

Writes to one key carry increasing unique values.  As in Jepsen's independent-key tests,
the generator keeps a few keys active at a time and retires each after ``ops_per_key``
operations, so every key's sub-history stays small enough for the linearizability search.
"""

from __future__ import annotations

import math
import random
from typing import Any

from jepsen.history import OK
from jepsen.workloads.clients import classify, register_client

TOPIC_PREFIX = "jepsen-reg-"


def topic_of(key: Any) -> str:
    return f"{TOPIC_PREFIX}{key}"


def keys_needed(expected_ops: float, ops_per_key: int, active: int,
                max_keys: int = 64) -> int:
    return max(active, min(max_keys, math.ceil(expected_ops / max(1, ops_per_key)) + active))


class RegisterGenerator:
    """``next(process)`` -> ``(f, [key, value])``; keys rotate, wrapping at ``max_keys``."""

    def __init__(self, max_keys: int, seed: int = 0, active: int = 2, ops_per_key: int = 200,
                 read_fraction: float = 0.5):
        self.rng = random.Random(seed)
        self.max_keys = max(1, max_keys)
        self.active = [k % self.max_keys for k in range(min(active, self.max_keys))]
        self.fresh = len(self.active)
        self.left = {k: ops_per_key for k in self.active}
        self.ops_per_key = ops_per_key
        self.read_fraction = read_fraction
        self.next_value: dict[int, int] = {}

    def next(self, process: Any) -> tuple[str, Any]:
        i = self.rng.randrange(len(self.active))
        key = self.active[i]
        self.left[key] -= 1
        if self.left[key] <= 0:
            new = self.fresh % self.max_keys
            self.fresh += 1
            self.active[i] = new
            self.left[new] = self.ops_per_key
        if self.rng.random() < self.read_fraction:
            return "read", [key, None]
        v = self.next_value.get(key, 0) + 1
        self.next_value[key] = v
        return "write", [key, v]

    def retire(self, process: Any) -> None:
        pass


class RegisterWorkload:
    name = "register"
    checker = "linearizable"

    def __init__(self, keys: int = 8, client: str = "confluent", timeout_s: float = 5.0,
                 active: int = 2, ops_per_key: int = 200, **_ignored):
        self.keys = keys
        self.client = client
        self.timeout_s = timeout_s
        self.active = active
        self.ops_per_key = ops_per_key

    def topics(self) -> list[tuple[str, int]]:
        return [(topic_of(k), 1) for k in range(self.keys)]

    def generator(self, seed: int) -> RegisterGenerator:
        return RegisterGenerator(self.keys, seed, self.active, self.ops_per_key)

    def open_client(self, bootstrap: str, process: Any):
        return register_client(self.client, bootstrap, topic_of, timeout_s=self.timeout_s)

    def invoke(self, client, f: str, value: Any) -> tuple[str, Any, str | None]:
        key, v = value
        try:
            if f == "write":
                client.write(key, v)
                return OK, [key, v], None
            if f == "read":
                return OK, [key, client.read(key)], None
        except Exception as exc:  # noqa: BLE001
            t, err = classify(exc, idempotent=(f == "read"))
            return t, None, err
        raise ValueError(f"the register workload has no operation {f!r}")
