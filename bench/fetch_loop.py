"""The broker's side of consuming, with the client taken out: a fetch loop that reads every
partition of a topic from the beginning and counts records from the batch headers, the way
a follower replica reads (no record decoded, no record handed to an application).

Why it exists: a consumer that decodes every record (librdkafka, Kafka's Java consumer) is
the bound on a 2-core machine that also runs the broker: kcat reading kraft took 1.3-1.5
cores at 1.8M records/s while the broker took 0.1 (``nodes' CPU per record`` rows).  The
question "is a fetch cheaper than a produce" (the design chapter's sendfile argument) is
then answered by the client, not the broker.  This loop costs the client a ``recv_into``
per response and a few struct reads per batch.

It asks like a consumer with Kafka's defaults: Fetch v12 (topic names, no session), one
request in flight per leader, ``fetch.max.wait.ms`` 500, ``fetch.min.bytes`` 1,
``fetch.max.bytes`` 50 MiB, ``max.partition.fetch.bytes`` 1 MiB, read_uncommitted.  The
clock runs from the first Fetch sent to the last record counted (the Metadata and
connection set-up before it are left out, as kafka-consumer-perf-test leaves out its
group join).
"""

from __future__ import annotations

import selectors
import socket
import struct
import time

from kraft.protocol import codec
from kraft.protocol.rpc import decode_response, encode_request

_SIZE = struct.Struct(">i")
# v2 batch header: baseOffset int64 @0, batchLength int32 @8, attributes int16 @21,
# lastOffsetDelta int32 @23, recordsCount int32 @57 (61 bytes in all).
_BASE_LENGTH = struct.Struct(">qi")
_ATTRIBUTES_DELTA = struct.Struct(">hi")
_COUNT = struct.Struct(">i")
_HEADER_BYTES = 61
_CONTROL = 0x20
FETCH_VERSION = 12


def count_batches(records) -> tuple[int, int | None]:
    """(data records in the whole batches of ``records``, the offset after the last whole
    batch or None when there is none): a partial batch at the end (a fetch cut at its
    byte limit) is left for the next fetch, as a consumer leaves it."""
    view = memoryview(records)
    pos, total, next_offset = 0, 0, None
    end = len(view)
    while pos + _HEADER_BYTES <= end:
        base, length = _BASE_LENGTH.unpack_from(view, pos)
        if pos + 12 + length > end:
            break
        attributes, last_delta = _ATTRIBUTES_DELTA.unpack_from(view, pos + 21)
        if not attributes & _CONTROL:
            total += _COUNT.unpack_from(view, pos + 57)[0]
        next_offset = base + last_delta + 1
        pos += 12 + length
    return total, next_offset


class _Leader:
    """One connection to one leader, with at most one Fetch in flight on it."""

    def __init__(self, host: str, port: int):
        self.sock = socket.create_connection((host, port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation = 0
        self.offsets: dict[tuple[str, int], int] = {}
        self.high_watermarks: dict[tuple[str, int], int] = {}

    def call(self, api: str, version: int, body: dict) -> dict:
        self.send(api, version, body)
        return self.receive(api, version)

    def send(self, api: str, version: int, body: dict) -> None:
        self.correlation += 1
        self.sock.sendall(encode_request(api, version, self.correlation, body, client_id="fetch-loop"))

    def _read_exactly(self, n: int) -> bytearray:
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if not k:
                raise ConnectionError("the broker closed the connection")
            got += k
        return buf

    def receive(self, api: str, version: int) -> dict:
        size = _SIZE.unpack(self._read_exactly(4))[0]
        _, body = decode_response(api, version, self._read_exactly(size))
        return body

    def fetch_request(self) -> dict:
        by_topic: dict[str, list] = {}
        for (topic, partition), offset in self.offsets.items():
            by_topic.setdefault(topic, []).append(
                {"partition": partition, "fetch_offset": offset, "current_leader_epoch": -1,
                 "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20})
        body = codec.default_message("Fetch", "request")
        body.update(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=50 << 20, isolation_level=0,
                    session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                    topics=[{"topic": t, "partitions": ps} for t, ps in by_topic.items()])
        return body

    def absorb(self, body: dict) -> int:
        """Count the response's records and move each partition's offset on; the count."""
        if body.get("error_code"):
            raise RuntimeError(f"Fetch error {body['error_code']}")
        got = 0
        for topic in body["responses"]:
            for p in topic["partitions"]:
                key = (topic["topic"], p["partition_index"])
                if p["error_code"]:
                    raise RuntimeError(f"Fetch of {key}: error {p['error_code']}")
                self.high_watermarks[key] = p["high_watermark"]
                if p["records"]:
                    n, after = count_batches(p["records"])
                    got += n
                    if after is not None:
                        self.offsets[key] = after
        return got

    def done(self) -> bool:
        return all(self.offsets[k] >= self.high_watermarks.get(k, 1 << 62) for k in self.offsets)


def _leaders(bootstrap: str, topics: list[str]) -> dict[int, _Leader]:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    first = _Leader(host, int(port))
    try:
        meta = first.call("Metadata", 9, {"topics": [{"name": t} for t in topics], "allow_auto_topic_creation": False,
                                          "include_cluster_authorized_operations": False,
                                          "include_topic_authorized_operations": False})
    finally:
        first.sock.close()
    brokers = {b["node_id"]: (b["host"], b["port"]) for b in meta["brokers"]}
    leaders: dict[int, _Leader] = {}
    for t in meta["topics"]:
        if t["error_code"]:
            raise RuntimeError(f"Metadata of {t['name']}: error {t['error_code']}")
        for p in t["partitions"]:
            leader = leaders.get(p["leader_id"])
            if leader is None:
                leader = leaders[p["leader_id"]] = _Leader(*brokers[p["leader_id"]])
            leader.offsets[(t["name"], p["partition_index"])] = 0
    return leaders


def _one_pass(bootstrap: str, topics: list[str], count: int, timeout_s: float) -> tuple[int, float]:
    """(records read, seconds): every partition of ``topics`` from offset 0 to its end."""
    leaders = _leaders(bootstrap, topics)
    sel = selectors.DefaultSelector()
    try:
        got, deadline = 0, time.monotonic() + timeout_s
        t0 = time.monotonic()
        for leader in leaders.values():
            leader.send("Fetch", FETCH_VERSION, leader.fetch_request())
            sel.register(leader.sock, selectors.EVENT_READ, leader)
        while sel.get_map() and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=1.0):
                leader = key.data
                got += leader.absorb(leader.receive("Fetch", FETCH_VERSION))
                if leader.done() or got >= count:
                    sel.unregister(leader.sock)
                else:
                    leader.send("Fetch", FETCH_VERSION, leader.fetch_request())
        return got, time.monotonic() - t0
    finally:
        sel.close()
        for leader in leaders.values():
            leader.sock.close()


def consume(bootstrap: str, topics: list[str], count: int, repeats: int = 3, timeout_s: float = 120.0) -> dict:
    """Read every partition of ``topics`` (``count`` records in all) from offset 0 to its
    end, ``repeats`` times; the median rate (records/s) and each run's."""
    runs = []
    for _ in range(repeats):
        got, seconds = _one_pass(bootstrap, topics, count, timeout_s)
        if got != count:
            return {"error": f"fetch loop of {', '.join(topics)}: {got:,} of {count:,} records in {seconds:.1f} s"}
        runs.append(got / seconds)
    return {"records_per_s": sorted(runs)[len(runs) // 2], "runs": runs, "records": count,
            "command": f"bench/fetch_loop.py: Fetch v{FETCH_VERSION} of {', '.join(topics)}, consumer defaults, "
                       "records counted from batch headers"}
