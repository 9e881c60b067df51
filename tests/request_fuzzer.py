"""A request fuzzer for a live node: frames generated from kraft's own schema table.

``RequestFuzzer`` is sans-IO: from one seed it makes framed requests for every API and
version a node advertises, with values drawn per field type (boundaries, nulls where the
version allows them, names of real and invalid topics, valid and broken record batches),
and a share of them mutated after encoding (flipped bytes, lying lengths, truncation,
junk).  ``FuzzSession`` sends them over real TCP connections, one frame then an ApiVersions
probe, so every frame ends in exactly one outcome:

* ``answered``: a response that decodes at the request's version, every error code 0;
* ``refused``: a response that decodes and carries a non-zero error code somewhere;
* ``closed``: the node closed the connection (what Kafka does with a request it cannot parse);
* ``silent``: no response is due (Produce with acks=0), or none came within the patience
  (a long poll the fuzzer asked for); the connection is then dropped.

A response that does not decode at the request's version, or that answers the wrong
correlation id, is a ``bad_answer``: always a bug.  The node must outlive every frame.

Run by hand against a node of your own or a fresh one:
    python tests/request_fuzzer.py --frames 100000 --seed 1
    python tests/request_fuzzer.py --bootstrap 127.0.0.1:9092 --frames 5000
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
import uuid
from collections import Counter, deque
from dataclasses import dataclass, field

from kraft.protocol import codec, rpc
from kraft.protocol.errors import ProtocolError
from kraft.protocol.framing import frame
from kraft.protocol.schema import INFINITE, Field, Versions
from kraft.records.batch import build_batch

_INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1), "int16": (-(1 << 15), (1 << 15) - 1),
    "uint16": (0, (1 << 16) - 1), "int32": (-(1 << 31), (1 << 31) - 1),
    "uint32": (0, (1 << 32) - 1), "int64": (-(1 << 63), (1 << 63) - 1),
}
# Fields whose large values make a well-behaved node wait that long (long polls, rebalance
# and session timeouts): mostly small, so that the run covers many frames, sometimes huge.
_WAIT_WORDS = ("timeout", "wait", "interval", "backoff", "lag")
# Fields that size what a request creates: a 1,000-partition topic per frame would measure
# the machine's disk, not the node's robustness.
_SIZE_FIELDS = ("num_partitions", "count", "replication_factor")
PROBE_API = "ApiVersions"


def _is_wait_field(f: Field) -> bool:
    name = f.key
    return any(word in name for word in _WAIT_WORDS)


class RequestFuzzer:
    """Makes framed requests from a seed.  ``apis`` maps API name -> the versions to cover;
    ``topics`` are names the fuzzer may use (the target's data topics must not be among
    them: a random DeleteTopics would take them)."""

    def __init__(self, rng: random.Random, apis: dict[str, Versions], topics: list[str],
                 mutate_share: float = 0.3):
        self.rng = rng
        self.apis = sorted(apis.items())
        self.topics = list(topics)
        self.mutate_share = mutate_share
        self.correlation_id = 0

    # -- values -----------------------------------------------------------------------

    def _int(self, f: Field, type_: str) -> int:
        lo, hi = _INT_RANGES[type_]
        rng = self.rng
        if _is_wait_field(f) and rng.random() < 0.97:
            return rng.choice((0, 1, 10, 50, 100, 250))
        if f.key == "acks":
            return rng.choice((-1, 0, 1, 1, -1, 2, -2))
        if f.key in _SIZE_FIELDS:  # small, or past Kafka's 10,000-records-per-request limit
            return rng.choice((-1, 0, 1, 2, 3, 10, 20_001, hi))
        roll = rng.random()
        if roll < 0.35:
            return rng.choice((0, 0, 1, -1, 2, 3)) if lo < 0 else rng.choice((0, 1, 2, 3))
        if roll < 0.6:
            return rng.choice((lo, hi, lo + 1, hi - 1))
        if roll < 0.85:
            return max(lo, min(hi, rng.randint(-100, 1000)))
        return rng.randint(lo, hi)

    def _string(self, f: Field, nullable: bool) -> str | None:
        rng = self.rng
        if nullable and rng.random() < 0.15:
            return None
        roll = rng.random()
        if "topic" in f.key or f.key in ("name", "resource_name") or roll < 0.3:
            if rng.random() < 0.7:
                return rng.choice(self.topics)
        roll = rng.random()
        if roll < 0.15:
            return ""
        if roll < 0.3:
            return rng.choice(("__consumer_offsets", "__cluster_metadata", ".", "..",
                               "a/b", "bad name", "x" * 250, "ümlaut", "\x00", "group-0"))
        if roll < 0.4:
            return "".join(chr(rng.randint(0x20, 0x2FFF)) for _ in range(rng.randint(1, 12)))
        alphabet = "abcdefghijklmnopqrstuvwxyz0123456789._-"
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 24)))

    def _records(self, nullable: bool) -> bytes | None:
        rng = self.rng
        roll = rng.random()
        if roll < 0.1 and nullable:
            return None
        if roll < 0.2:
            return b""
        records = [(None if rng.random() < 0.3 else rng.randbytes(rng.randint(0, 8)),
                    rng.randbytes(rng.randint(0, 32))) for _ in range(rng.randint(1, 4))]
        options = {}
        if rng.random() < 0.3:
            options.update(producer_id=rng.randint(0, 5), producer_epoch=rng.randint(0, 2),
                           base_sequence=rng.randint(0, 3))
        data = build_batch(records, compression=rng.choice((0, 0, 0, 1, 2, 3, 4)), **options)
        if roll < 0.75:
            return data
        data = bytearray(data)
        for _ in range(rng.randint(1, 4)):  # a corrupted batch: bad CRC, lying lengths, ...
            data[rng.randrange(len(data))] = rng.randrange(256)
        if rng.random() < 0.3:
            data = data[: rng.randrange(len(data))]
        return bytes(data)

    def _scalar(self, f: Field, type_: str, version: int):
        nullable = version in f.nullable and not f.is_array
        rng = self.rng
        if type_ in _INT_RANGES:
            return self._int(f, type_)
        if type_ == "bool":
            return rng.random() < 0.5
        if type_ == "float64":
            return rng.choice((0.0, 1.5, -1.0, float("inf"), 1e300))
        if type_ == "string":
            return self._string(f, nullable)
        if type_ == "bytes":
            if nullable and rng.random() < 0.2:
                return None
            return rng.randbytes(rng.randint(0, 40))
        if type_ == "records":
            return self._records(nullable)
        if type_ == "uuid":
            return rng.choice((uuid.UUID(int=0), uuid.UUID(int=rng.getrandbits(128))))
        raise ValueError(f"no generator for {type_}")

    def _value(self, f: Field, version: int, depth: int):
        rng = self.rng
        nullable = version in f.nullable
        if f.is_array:
            if nullable and rng.random() < 0.15:
                return None
            n = rng.choice((0, 1, 1, 1, 2, 3)) if depth < 3 else rng.choice((0, 1))
            if f.is_struct:
                return [self._struct(f.fields, version, depth + 1) for _ in range(n)]
            return [self._scalar(f, f.element_type, version) for _ in range(n)]
        if f.is_struct:
            if nullable and rng.random() < 0.3:
                return None
            return self._struct(f.fields, version, depth + 1)
        return self._scalar(f, f.type, version)

    def _struct(self, fields: tuple[Field, ...], version: int, depth: int) -> dict:
        out = {}
        for f in fields:
            if version not in f.versions and not (f.tag is not None and version in f.tagged_versions):
                continue
            if f.tag is not None and self.rng.random() < 0.5:
                continue  # tagged fields are optional
            out[f.key] = self._value(f, version, depth)
        return out

    def body(self, api: str, version: int) -> dict:
        return self._struct(codec.spec_for(api, "request").fields, version, 0)

    # -- frames -----------------------------------------------------------------------

    def next_correlation_id(self) -> int:
        self.correlation_id = (self.correlation_id + 1) & 0x7FFFFFFF
        return self.correlation_id

    def request(self) -> "FuzzFrame":
        rng = self.rng
        api, versions = rng.choice(self.apis)
        hi = min(versions.hi, codec.versions_of(api).hi)
        version = rng.randint(versions.lo, hi) if hi < INFINITE else versions.lo
        cid = self.next_correlation_id()
        client_id = rng.choice(("fuzz", None, "", "fuzz-" + "x" * rng.randint(0, 300)))
        body = self.body(api, version)
        data = rpc.encode_request(api, version, cid, body, client_id=client_id)
        mutated = rng.random() < self.mutate_share
        if mutated:
            data = self._mutate(data)
        expects_answer = not (api == "Produce" and body.get("acks") == 0)
        return FuzzFrame(api, version, cid, data, mutated, expects_answer)

    def _mutate(self, data: bytes) -> bytes:
        """Mutate the payload after the header's api key, version and correlation id (so
        the answer can still be told apart), keeping the frame's size prefix honest most of
        the time."""
        rng = self.rng
        payload = bytearray(data[4:])
        keep = 8
        for _ in range(rng.randint(1, 3)):
            roll = rng.random()
            if len(payload) > keep and roll < 0.35:
                payload[rng.randrange(keep, len(payload))] = rng.randrange(256)
            elif len(payload) > keep + 4 and roll < 0.55:  # a lying length or count
                at = rng.randrange(keep, len(payload) - 3)
                payload[at:at + 4] = struct.pack(">i", rng.choice((-2, -1, 0x7FFFFFFF, 1 << 20, 255)))
            elif roll < 0.7:
                payload = payload[: rng.randint(keep, len(payload))]
            elif roll < 0.85:
                at = rng.randint(keep, len(payload))
                payload[at:at] = rng.randbytes(rng.randint(1, 16))
            else:
                payload += rng.randbytes(rng.randint(1, 64))
        if rng.random() < 0.02:  # a header that lies about the version or api
            payload[rng.randrange(0, 4)] = rng.randrange(256)
        return frame(payload)


@dataclass
class FuzzFrame:
    api: str
    version: int
    correlation_id: int
    data: bytes
    mutated: bool
    expects_answer: bool


# ---------------------------------------------------------------------------------------
# Driving a live node


class _Connection:
    def __init__(self, host: str, port: int, timeout_s: float):
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()

    def read_frame(self) -> bytes | None:
        """One response payload, or None when the node closed the connection."""
        while True:
            if len(self.buf) >= 4:
                (size,) = struct.unpack_from(">i", self.buf)
                if len(self.buf) >= 4 + size:
                    payload = bytes(self.buf[4:4 + size])
                    del self.buf[:4 + size]
                    return payload
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                return None
            self.buf += chunk

    def close(self):
        self.sock.close()


def has_error(value) -> bool:
    if isinstance(value, dict):
        for key, v in value.items():
            if key.endswith("error_code") and isinstance(v, int) and v != 0:
                return True
            if isinstance(v, (dict, list)) and has_error(v):
                return True
    elif isinstance(value, list):
        return any(has_error(v) for v in value)
    return False


@dataclass
class FuzzSession:
    """Sends a fuzzer's frames to host:port over ``connections`` connections in turn."""

    host: str
    port: int
    fuzzer: RequestFuzzer
    connections: int = 4
    patience_s: float = 3.0
    outcomes: Counter = field(default_factory=Counter)
    by_api: Counter = field(default_factory=Counter)
    bad_answers: list = field(default_factory=list)
    recent: deque = field(default_factory=lambda: deque(maxlen=20))  # (frame, outcome): for a post-mortem

    def __post_init__(self):
        self._open: list[_Connection | None] = [None] * self.connections
        self._lock = threading.Lock()

    def _connection(self, i: int) -> _Connection:
        if self._open[i] is None:
            self._open[i] = _Connection(self.host, self.port, self.patience_s)
        return self._open[i]

    def _drop(self, i: int) -> None:
        if self._open[i] is not None:
            self._open[i].close()
            self._open[i] = None

    def run(self, frames: int) -> Counter:
        """Sends ``frames`` frames, frame n on connection n % ``connections``.  The frames
        are drawn first, in the seed's order, and each connection sends its share in a
        thread of its own: a frame the node may rightly sit on (a Fetch's long poll, a
        JoinGroup waiting for its rebalance) costs its connection up to ``patience_s``,
        and the other connections go on meanwhile (one after another, 22 such frames were
        most of a 2,000-frame run's 70 s)."""
        drawn = [(self.fuzzer.request(), self.fuzzer.next_correlation_id()) for _ in range(frames)]
        threads = [threading.Thread(target=self._send_share, args=(i, drawn[i::self.connections]),
                                    name=f"fuzz-connection-{i}", daemon=True)
                   for i in range(self.connections)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return self.outcomes

    def _send_share(self, i: int, frames: list) -> None:
        try:
            for fz, probe_cid in frames:
                self.send_one(i, fz, probe_cid)
        finally:
            self._drop(i)

    def send_one(self, i: int, fz: "FuzzFrame", probe_cid: int) -> str:
        probe = rpc.encode_request(PROBE_API, 0, probe_cid, {}, client_id="fuzz-probe")
        conn = self._connection(i)
        outcome = None
        try:
            conn.sock.sendall(fz.data + probe)
            while outcome is None:
                payload = conn.read_frame()
                if payload is None:
                    outcome = "closed"
                    break
                (cid,) = struct.unpack_from(">i", payload)
                if cid == fz.correlation_id:
                    outcome = self._judge(fz, payload)
                elif cid == probe_cid:
                    outcome = "silent" if not fz.expects_answer or fz.mutated else "bad_answer"
                    if outcome == "bad_answer":
                        self.bad_answers.append((fz, "no answer before the probe's"))
                    break
                else:
                    outcome = "bad_answer"
                    self.bad_answers.append((fz, f"answer to unknown correlation id {cid}"))
            if outcome in ("answered", "refused"):
                payload = conn.read_frame()  # the probe's answer follows in order
                if payload is None:
                    outcome = "closed"
        except socket.timeout:
            outcome = "silent"
        except (ConnectionError, OSError):
            outcome = "closed"
        if outcome in ("closed", "silent", "bad_answer"):
            self._drop(i)
        with self._lock:  # the connections' threads count into the same counters
            self.outcomes[outcome] += 1
            self.by_api[(fz.api, outcome)] += 1
            self.recent.append((fz, outcome))
        return outcome

    def _judge(self, fz: FuzzFrame, payload: bytes) -> str:
        try:
            api_key, version = struct.unpack_from(">hh", fz.data, 4)
        except struct.error:
            return "refused"
        api = rpc.API_NAMES.get(api_key)
        if api is None:
            self.bad_answers.append((fz, f"an answer to unknown api key {api_key}"))
            return "bad_answer"
        if version not in codec.versions_of(api) or (api == "ApiVersions" and version > 3):
            return "refused"  # an UNSUPPORTED_VERSION answer (KIP-511) at v0
        try:
            _, body = rpc.decode_response(api, version, payload)
        except (ProtocolError, ValueError) as exc:
            if api == "ApiVersions":  # a version the node refuses: answered at v0
                try:
                    rpc.decode_response(api, 0, payload)
                    return "refused"
                except (ProtocolError, ValueError):
                    pass
            self.bad_answers.append((fz, f"undecodable {api} v{version} answer: {exc}"))
            return "bad_answer"
        return "refused" if has_error(body) else "answered"


def advertised_apis(host: str, port: int) -> dict[str, Versions]:
    """The APIs and versions a node advertises (ApiVersions v0)."""
    conn = _Connection(host, port, 5.0)
    try:
        conn.sock.sendall(rpc.encode_request("ApiVersions", 0, 1, {}, client_id="fuzz"))
        _, body = rpc.decode_response("ApiVersions", 0, conn.read_frame())
    finally:
        conn.close()
    return {rpc.API_NAMES[a["api_key"]]: Versions(a["min_version"], a["max_version"])
            for a in body["api_keys"] if a["api_key"] in rpc.API_NAMES}


def fuzz_topics(count: int = 4) -> list[str]:
    return [f"fuzz-{i}" for i in range(count)]


def main(argv=None) -> int:
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="host:port of a running node (default: start a 1-node cluster)")
    parser.add_argument("--frames", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if args.bootstrap:
        host, _, port = args.bootstrap.rpartition(":")
        return _report(host, int(port), args.frames, args.seed)
    from kraft.local_cluster import LocalCluster

    with tempfile.TemporaryDirectory() as tmp, LocalCluster(tmp, controllers=1) as cluster:
        cluster.format()
        cluster.start_all()
        node = cluster.brokers[0]
        _wait_for_port(node.host, node.broker_port)
        try:
            code = _report(node.host, node.broker_port, args.frames, args.seed)
        finally:
            alive = node.process.poll() is None
            print(f"node alive after the run: {alive}")
            if not alive:
                print("".join(node.log_path.read_text(errors="replace").splitlines(True)[-40:]))
        return code if alive else 1


def _wait_for_port(host: str, port: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection((host, port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _report(host: str, port: int, frames: int, seed: int) -> int:
    session = FuzzSession(host, port, RequestFuzzer(random.Random(seed), advertised_apis(host, port),
                                                    fuzz_topics()))
    start = time.monotonic()
    outcomes = session.run(frames)
    print(f"seed {seed}: {frames} frames in {time.monotonic() - start:.1f} s: {dict(outcomes)}")
    for fz, why in session.bad_answers[:20]:
        print(f"  bad answer: {fz.api} v{fz.version} (mutated={fz.mutated}): {why}")
    return 1 if session.bad_answers else 0


if __name__ == "__main__":
    raise SystemExit(main())
