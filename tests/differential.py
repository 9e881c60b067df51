"""Differential testing: one sequence of raw Kafka requests against Apache Kafka and against
kraft, the answers compared field by field.

Apache Kafka (the pinned release, :class:`kraft.apache_kafka.ApacheKafkaCluster`) is the
oracle.  :func:`scenario` is the sequence: admin requests (good and bad topic creations,
deletions, partition increases, configs), Metadata, Produce, Fetch, ListOffsets, the classic
consumer group APIs and InitProducerId, each sent with kraft's own client
(:mod:`kraft.client`) at the highest version both brokers serve, and a few at older versions.
Both clusters get the same topic and group names and records with fixed timestamps, so their
answers should be equal but for what legitimately differs: :func:`normalise` masks it (ids,
host names, ports, throttle times, free-text error messages) and nothing else.

A difference is ``(step, path, kafka value, kraft value)``.  docs/DIFFERENCES.md lists the
known ones (a table of step/path glob patterns with the reason for each); a difference that
no row matches is a failure.  ApiVersions is reported as data (which API ranges differ), not
compared.

    python tests/differential.py --kafka-nodes 1 --kraft-nodes 1 [--report out.md]
    python tests/differential.py --kafka 127.0.0.1:9092 --kraft 127.0.0.1:9192   # running clusters
"""

from __future__ import annotations

import argparse
import faulthandler
import re
import signal
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for _p in (ROOT, ROOT / "tests"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import trio  # noqa: E402

from kraft.client import KafkaClient, NodeUnavailable  # noqa: E402
from kraft.protocol import codec  # noqa: E402
from kraft.protocol.rpc import API_KEYS, API_NAMES  # noqa: E402
from kraft.records import build_batch, decode_batches  # noqa: E402
from kraft.trio_run import run_trio  # noqa: E402

DIFFERENCES_MD = ROOT / "docs" / "DIFFERENCES.md"

# Settings given to both clusters: quick elections and no wait before the first rebalance
# (both brokers default to 3 s, which a JoinGroup of a new group would sit out).
OVERRIDES = {
    "controller.quorum.election.timeout.ms": "500",
    "controller.quorum.fetch.timeout.ms": "1000",
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "3000",
    "group.initial.rebalance.delay.ms": "0",
    # ACLs on (acl_steps); PLAINTEXT clients are User:ANONYMOUS, a super user, so every
    # other step is allowed as it was without an authorizer
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
}

BASE_TIMESTAMP = 1_700_000_000_000  # records carry fixed CreateTimes: comparable ListOffsets
ZERO_UUID = uuid.UUID(int=0)
# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
RETRIABLE = {14, 15, 16}
STEP_TIMEOUT_S = 15.0  # an unanswered request is a difference ("<error: NodeUnavailable>")

# ------------------------------------------------------------------------------ normaliser

# Fields whose values legitimately differ between two clusters, masked wherever they appear.
# An id is masked only when set, so "no id" (0 / -1 / the zero UUID / "") still compares.
MASKED = {
    "throttle_time_ms": "<time>",
    "cluster_id": "<cluster id>",
    "host": "<host>",
    "port": "<port>",
    "client_host": "<host>",
    "topic_id": "<topic id>",
    "member_id": "<member id>",
    "leader": "<member id>",           # JoinGroup's leader: a member id
    "producer_id": "<producer id>",
    "session_id": "<session id>",
    "log_dir": "<log dir>",
    "usable_bytes": "<free space>",  # the disk's, moving while the test writes
    "transaction_start_time_ms": "<time>",
}
# Free text (null, empty or a sentence, as each broker likes): the error code is compared.
MESSAGES = {"error_message", "batch_index_error_message"}
_UNSET = (None, "", -1, ZERO_UUID)


def normalise(value, key: str | None = None):
    """A response with :data:`MASKED` fields replaced by placeholders and the lists whose
    order the protocol leaves open sorted; record sets decoded to comparable tuples."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in MESSAGES:
                out[k] = "<message>"
            elif k in MASKED and not isinstance(v, (dict, list)):
                out[k] = v if v in _UNSET else MASKED[k]
            elif k == "records":
                out[k] = _records(v)
            else:
                out[k] = normalise(v, k)
        return out
    if isinstance(value, list):
        items = [normalise(v, key) for v in value]
        if key in ("topics", "groups", "brokers", "results", "responses", "configs", "partitions", "members",
                   "resources", "acls", "matching_acls", "entries", "entity", "credential_infos"):
            items.sort(key=_sort_key)
        return items
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return value


def _error_codes(value) -> set[int]:
    if isinstance(value, dict):
        out = {value["error_code"]} if isinstance(value.get("error_code"), int) else set()
        for v in value.values():
            if isinstance(v, (dict, list)):
                out |= _error_codes(v)
        return out
    if isinstance(value, list):
        return set().union(*map(_error_codes, value)) if value else set()
    return set()


def _sort_key(item) -> tuple[str, str]:
    """By name (or the first id-like field), then by the whole item: two ACLs on one resource,
    two quota entities, keep one order."""
    if isinstance(item, dict):
        for k in ("name", "group_id", "resource_name", "node_id", "topic", "key", "partition_index"):
            if k in item:
                return str(item[k]), repr(item)
    return repr(item), ""


def _records(data):
    """Batches as (base offset, leader epoch, producer id set?, records); records as
    (offset, timestamp, key, value, headers)."""
    if not data:
        return data if data is None else []
    out = []
    for batch in decode_batches(bytes(data)):
        out.append({
            "base_offset": batch.base_offset,
            "partition_leader_epoch": batch.partition_leader_epoch,
            "compression": batch.compression, "timestamp_type": batch.timestamp_type,
            "records": [[batch.base_offset + r.offset_delta, r.timestamp,
                         r.key.hex() if r.key is not None else None,
                         r.value.hex() if r.value is not None else None,
                         [[hk, hv.hex() if hv is not None else None] for hk, hv in r.headers]]
                        for r in batch.records],
        })
    return out


def diff(kafka, kraft, path: str = "") -> list[tuple[str, object, object]]:
    """Every place where two normalised answers differ, as (path, kafka value, kraft value)."""
    if isinstance(kafka, dict) and isinstance(kraft, dict):
        out = []
        for k in sorted(set(kafka) | set(kraft)):
            sub = f"{path}.{k}" if path else k
            if k not in kafka or k not in kraft:
                out.append((sub, kafka.get(k, "<absent>"), kraft.get(k, "<absent>")))
            else:
                out += diff(kafka[k], kraft[k], sub)
        return out
    if isinstance(kafka, list) and isinstance(kraft, list):
        out = []
        if len(kafka) != len(kraft):
            out.append((f"{path}.len", len(kafka), len(kraft)))
        for i, (a, b) in enumerate(zip(kafka, kraft)):
            out += diff(a, b, f"{path}[{i}]")
        return out
    return [] if kafka == kraft else [(path, kafka, kraft)]


# ------------------------------------------------------------------------------ the sessions


@dataclass
class Step:
    label: str
    api: str
    version: int
    response: object  # the normalised answer, or "<error: ...>"


@dataclass
class Session:
    """One broker's side of the run: sends requests, keeps every answer by step label."""
    client: KafkaClient
    host: str
    port: int
    versions: dict[str, int]  # api -> the version to use (highest both serve)
    steps: list[Step] = field(default_factory=list)
    verbose: bool = False
    p: str = "diff"  # the prefix of every topic and group name
    nodes: dict[int, tuple[str, int]] = field(default_factory=dict)  # broker id -> address
    coordinators: dict[str, tuple[str, int]] = field(default_factory=dict)

    async def raw(self, api: str, body: dict, version: int | None = None, timeout_s: float = 30.0):
        """One request to the node a client would send it to (:meth:`route`)."""
        v = self.versions[api] if version is None else version
        if api == "ListGroups" and len(self.nodes) > 1:
            # Each broker lists the groups it coordinates; a client asks them all.
            answers = [await self.client.request(h, p, api, v, body, timeout_s=timeout_s)
                       for h, p in self.nodes.values()]
            merged = dict(answers[0])
            merged["groups"] = [g for a in answers for g in a["groups"]]
            merged["error_code"] = next((a["error_code"] for a in answers if a["error_code"]), 0)
            return merged
        host, port = await self.route(api, body)
        return await self.client.request(host, port, api, v, body, timeout_s=timeout_s)

    async def discover(self) -> None:
        """The cluster's brokers, from the bootstrap node's Metadata."""
        md = await self.client.request(self.host, self.port, "Metadata", 12, {"topics": []}, timeout_s=30)
        self.nodes = {b["node_id"]: (b["host"], b["port"]) for b in md["brokers"]}

    async def route(self, api: str, body: dict) -> tuple[str, int]:
        """Partition requests to the partition's leader, group requests to the group's
        coordinator, the rest (and anything unknown) to the bootstrap node."""
        bootstrap = (self.host, self.port)
        if len(self.nodes) <= 1:
            return bootstrap
        group = _group_of(api, body)
        if group is not None:
            return self.coordinators.get(group) or await self._find_coordinator(group) or bootstrap
        where = _partition_of(api, body)
        if where is None:
            return bootstrap
        topic, partition = where
        md = await self.client.request(self.host, self.port, "Metadata", 12, {
            "topics": [{"name": topic}], "allow_auto_topic_creation": False}, timeout_s=30)
        for p in md["topics"][0]["partitions"]:
            if p["partition_index"] == partition and p["leader_id"] in self.nodes:
                return self.nodes[p["leader_id"]]
        return bootstrap

    async def _find_coordinator(self, group: str) -> tuple[str, int] | None:
        deadline = trio.current_time() + STEP_TIMEOUT_S
        while trio.current_time() < deadline:
            resp = await self.client.request(self.host, self.port, "FindCoordinator", 4, {
                "key_type": 0, "coordinator_keys": [group]}, timeout_s=STEP_TIMEOUT_S)
            c = resp["coordinators"][0]
            if c["error_code"] == 0:
                self.coordinators[group] = (c["host"], c["port"])
                return self.coordinators[group]
            await trio.sleep(0.2)
        return None

    async def call(self, label: str, api: str, body: dict, version: int | None = None) -> dict:
        """Send, record the normalised answer under ``label``, return the raw answer."""
        v = self.versions[api] if version is None else version
        started = trio.current_time()
        try:
            resp = await self.raw(api, body, v, timeout_s=STEP_TIMEOUT_S)
            # A coordinator that is still loading (a new __consumer_offsets partition, a
            # producer id block being fetched) answers with a retriable error; a client
            # retries, so does this, and only the settled answer is compared.
            while RETRIABLE & _error_codes(resp) and trio.current_time() - started < STEP_TIMEOUT_S:
                await trio.sleep(0.2)
                resp = await self.raw(api, body, v, timeout_s=STEP_TIMEOUT_S)
        except (NodeUnavailable, Exception) as exc:  # noqa: BLE001 - an answer to compare
            # A broker answers a connection's requests in order: one it never answers would
            # hold up every later one, so the next step gets new connections.
            for host, port in {(self.host, self.port), *self.nodes.values()}:
                self.client.disconnect(host, port)
            resp, error = {}, f"<error: {type(exc).__name__}>"
        else:
            error = None
        if self.verbose:
            print(f"  {self.port}: {label} ({api} v{v}) {trio.current_time() - started:.2f}s {error or ''}",
                  file=sys.stderr, flush=True)
        if error:
            self.steps.append(Step(label, api, v, error))
            return resp
        self.steps.append(Step(label, api, v, normalise(resp)))
        return resp

    async def metadata(self, topics: list[str]) -> dict:
        return await self.raw("Metadata", {"topics": [{"name": t} for t in topics],
                                           "allow_auto_topic_creation": False})

    async def wait_topic(self, topic: str, partitions: int, timeout_s: float = 30.0) -> dict:
        """Until every partition of ``topic`` has a leader (not a recorded step)."""
        deadline = trio.current_time() + timeout_s
        while True:
            md = await self.metadata([topic])
            t = md["topics"][0]
            if t["error_code"] == 0 and len(t["partitions"]) == partitions and all(
                    p["leader_id"] >= 0 for p in t["partitions"]):
                return t
            if trio.current_time() > deadline:
                raise TimeoutError(f"topic {topic} has no leaders after {timeout_s}s: {t}")
            await trio.sleep(0.1)


    async def wait_config(self, topic: str, key: str, value: str, timeout_s: float = 30.0,
                          resource_type: int = 2) -> None:
        """Until the broker's view of ``topic`` (or a group, with ``resource_type`` 32) has
        ``key=value`` (a change reaches it through its metadata, a moment after the answer;
        not a recorded step)."""
        deadline = trio.current_time() + timeout_s
        while True:
            resp = await self.raw("DescribeConfigs", {
                "resources": [{"resource_type": resource_type, "resource_name": topic, "configuration_keys": [key]}],
                "include_synonyms": False, "include_documentation": False})
            if any(c["value"] == value for c in resp["results"][0]["configs"]):
                return
            if trio.current_time() > deadline:
                raise TimeoutError(f"{topic} has no {key}={value} after {timeout_s}s: {resp}")
            await trio.sleep(0.1)


_GROUP_APIS = {"JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit", "OffsetFetch",
               "DescribeGroups", "DeleteGroups", "ConsumerGroupHeartbeat", "ConsumerGroupDescribe"}


def _group_of(api: str, body: dict) -> str | None:
    if api not in _GROUP_APIS:
        return None
    if body.get("group_id"):
        return body["group_id"]
    for key, pick in (("groups", lambda g: g["group_id"] if isinstance(g, dict) else g),
                      ("groups_names", lambda g: g), ("group_ids", lambda g: g)):
        if body.get(key):
            return pick(body[key][0])
    return None


def _partition_of(api: str, body: dict) -> tuple[str, int] | None:
    try:
        if api == "Produce":
            t = body["topic_data"][0]
            return t["name"], t["partition_data"][0]["index"]
        if api == "Fetch":
            t = body["topics"][0]
            return t["topic"], t["partitions"][0]["partition"]
        if api == "ListOffsets":
            t = body["topics"][0]
            return t["name"], t["partitions"][0]["partition_index"]
    except (KeyError, IndexError):
        pass
    return None


async def common_versions(sessions: list[Session]) -> tuple[dict[str, int], list[dict]]:
    """The highest version of each API that every broker serves and kraft's codec knows, and
    each broker's advertised ranges (for the report)."""
    ranges = []
    for s in sessions:
        resp = await s.client.request(s.host, s.port, "ApiVersions", 3,
                                      {"client_software_name": "kraft-differential",
                                       "client_software_version": "1"})
        ranges.append({a["api_key"]: (a["min_version"], a["max_version"]) for a in resp["api_keys"]})
    versions = {}
    for api, key in API_KEYS.items():
        known = codec.versions_of(api)
        highs = [r[key][1] for r in ranges if key in r]
        lows = [r[key][0] for r in ranges if key in r]
        if len(highs) == len(sessions):
            v = min(min(highs), known.hi)
            if v >= max(lows):
                versions[api] = v
    return versions, ranges


# ------------------------------------------------------------------------------ the scenario

def batch(values: list[bytes], first_ts: int = BASE_TIMESTAMP, keys=None) -> bytes:
    keys = keys or [None] * len(values)
    return build_batch([(k, v) for k, v in zip(keys, values)], timestamp=first_ts)


def _topic(name: str, partitions: int = 1, rf: int = 1, configs: dict | None = None) -> dict:
    return {"name": name, "num_partitions": partitions, "replication_factor": rf, "assignments": [],
            "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}


def _with_codec(data: bytes, codec: int) -> bytes:
    """``data``'s one batch claiming ``codec`` in its attributes (CRC made right)."""
    import struct

    from kraft.records.header import compute_crc

    out = bytearray(data)
    struct.pack_into(">h", out, 21, (struct.unpack_from(">h", out, 21)[0] & ~7) | codec)
    struct.pack_into(">I", out, 17, compute_crc(out, 0, len(out)))
    return bytes(out)


def _produce(topic: str, partition: int, records: bytes | None, acks: int = -1) -> dict:
    return {"transactional_id": None, "acks": acks, "timeout_ms": 10_000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}


def _fetch(topic: str, topic_id, partition: int, offset: int, *, epoch: int = -1,
           last_fetched_epoch: int = -1, max_wait_ms: int = 0) -> dict:
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "topic_id": topic_id, "partitions": [
                {"partition": partition, "current_leader_epoch": epoch, "fetch_offset": offset,
                 "last_fetched_epoch": last_fetched_epoch, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def _list_offsets(topic: str, partition: int, timestamp: int, epoch: int = -1) -> dict:
    return {"replica_id": -1, "isolation_level": 0, "timeout_ms": 10_000,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": partition, "current_leader_epoch": epoch, "timestamp": timestamp}]}]}


def _offset_fetch(group: str, topic: str, partitions: list[int], version: int) -> dict:
    if version >= 8:
        return {"groups": [{"group_id": group, "topics": [{"name": topic, "partition_indexes": partitions}]}],
                "require_stable": False}
    return {"group_id": group, "topics": [{"name": topic, "partition_indexes": partitions}],
            "require_stable": False}


def _offset_commit(group: str, generation: int, member: str, topic: str, offsets: dict[int, int]) -> dict:
    return {"group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
            "group_instance_id": None,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                 "committed_metadata": f"m{o}"} for p, o in offsets.items()]}]}


def _join_group(group: str, metadata: bytes, instance_id: str | None = None) -> dict:
    """A JoinGroup of a consumer (protocol ``range``) not yet given a member id."""
    return {"group_id": group, "session_timeout_ms": 30_000, "rebalance_timeout_ms": 30_000, "member_id": "",
            "group_instance_id": instance_id, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": metadata}], "reason": None}


def _sync_group(group: str, generation: int, member: str, assignment: bytes, instance_id: str | None = None) -> dict:
    """A leader's SyncGroup giving itself ``assignment``."""
    return {"group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": instance_id,
            "protocol_type": "consumer", "protocol_name": "range",
            "assignments": [{"member_id": member, "assignment": assignment}]}


CONSUMER_METADATA = bytes.fromhex("0003000000010004646966660000000000000000")  # v3 subscription to "diff"


async def scenario(s: Session, *, replication: int = 1) -> None:
    """The sequence of requests; every answer it records is compared across brokers.

    Ids that differ by nature (topic ids, member ids) are read from the same broker's earlier
    answers, so each broker is asked the same question in its own terms."""
    rf = replication
    await admin_steps(s, rf)
    await data_steps(s, rf)
    await log_admin_steps(s)
    await idempotence_steps(s)
    await transaction_steps(s)
    await group_steps(s)
    await consumer_group_steps(s)
    await migration_steps(s)
    await acl_steps(s)
    await quota_and_scram_steps(s)
    await cluster_operation_steps(s)
    await s.call("InitProducerId without transactional id", "InitProducerId",
                 {"transactional_id": None, "transaction_timeout_ms": 60_000,
                  "producer_id": -1, "producer_epoch": -1})


async def admin_steps(s: Session, rf: int) -> None:
    create = "CreateTopics"
    await s.call("CreateTopics good (3 partitions, one config)", create, {
        # No time-based retention: the records carry 2023 timestamps, and a retention pass
        # (Kafka's first runs 30 s after start) must not delete them mid-run.
        "topics": [_topic(s.p, 3, rf, {"retention.ms": "-1"})], "timeout_ms": 30_000,
        "validate_only": False})
    await s.wait_topic(s.p, 3)
    await s.call("CreateTopics validate_only", create, {
        "topics": [_topic(s.p + "-validate", 2, rf)], "timeout_ms": 30_000, "validate_only": True})
    await s.call("Metadata after validate_only", "Metadata", {
        "topics": [{"name": s.p + "-validate"}], "allow_auto_topic_creation": False})
    await s.call("CreateTopics existing topic", create, {
        "topics": [_topic(s.p, 3, rf)], "timeout_ms": 30_000, "validate_only": False})
    for label, name in (("slash", "bad/name"), ("empty", ""), ("dot", "."), ("dotdot", ".."),
                        ("250 chars", "x" * 250), ("space", "bad name")):
        await s.call(f"CreateTopics bad name: {label}", create, {
            "topics": [_topic(name)], "timeout_ms": 30_000, "validate_only": False})
    await s.call("CreateTopics replication factor 0", create, {
        "topics": [_topic(s.p + "-rf0", 1, 0)], "timeout_ms": 30_000, "validate_only": False})
    await s.call("CreateTopics replication factor above brokers", create, {
        "topics": [_topic(s.p + "-rf9", 1, 9)], "timeout_ms": 30_000, "validate_only": False})
    await s.call("CreateTopics 0 partitions", create, {
        "topics": [_topic(s.p + "-p0", 0, rf)], "timeout_ms": 30_000, "validate_only": False})
    await s.call("CreateTopics invalid config value", create, {
        "topics": [_topic(s.p + "-badcfg", 1, rf, {"cleanup.policy": "sometimes"})], "timeout_ms": 30_000,
        "validate_only": False})
    await s.call("CreateTopics unknown config key", create, {
        "topics": [_topic(s.p + "-unknowncfg", 1, rf, {"no.such.config": "1"})], "timeout_ms": 30_000,
        "validate_only": False})
    await s.call("CreateTopics non-numeric retention.ms", create, {
        "topics": [_topic(s.p + "-badnum", 1, rf, {"retention.ms": "soon"})], "timeout_ms": 30_000,
        "validate_only": False})
    await s.call("CreateTopics v4 (older) good + duplicate", create, {
        "topics": [_topic(s.p + "-v4", 1, rf), _topic(s.p, 1, rf)], "timeout_ms": 30_000,
        "validate_only": False}, version=4)
    await s.call("CreateTopics small max.message.bytes", create, {
        "topics": [_topic(s.p + "-small", 1, rf, {"max.message.bytes": "200"})], "timeout_ms": 30_000,
        "validate_only": False})
    await s.wait_topic(s.p + "-small", 1)
    await s.call("CreateTopics compacted", create, {
        "topics": [_topic(s.p + "-compact", 1, rf, {"cleanup.policy": "compact"})], "timeout_ms": 30_000,
        "validate_only": False})
    await s.wait_topic(s.p + "-compact", 1)

    await s.call("DeleteTopics unknown name", "DeleteTopics", {
        "topics": [{"name": s.p + "-no-such-topic", "topic_id": ZERO_UUID}],
        "topic_names": [s.p + "-no-such-topic"], "timeout_ms": 30_000})
    await s.call("DeleteTopics unknown topic id", "DeleteTopics", {
        "topics": [{"name": None, "topic_id": uuid.UUID(int=12345)}], "timeout_ms": 30_000})
    await s.call("DeleteTopics v3 (older) unknown name", "DeleteTopics", {
        "topic_names": [s.p + "-no-such-topic"], "timeout_ms": 30_000}, version=3)
    await s.call("DeleteTopics existing", "DeleteTopics", {
        "topics": [{"name": s.p + "-v4", "topic_id": ZERO_UUID}], "topic_names": [s.p + "-v4"],
        "timeout_ms": 30_000})

    cp = "CreatePartitions"
    await s.call("CreatePartitions 3 -> 4 validate_only", cp, {
        "topics": [{"name": s.p, "count": 4, "assignments": None}], "timeout_ms": 30_000,
        "validate_only": True})
    await s.call("CreatePartitions 3 -> 4", cp, {
        "topics": [{"name": s.p, "count": 4, "assignments": None}], "timeout_ms": 30_000,
        "validate_only": False})
    await s.wait_topic(s.p, 4)
    await s.call("CreatePartitions decrease 4 -> 2", cp, {
        "topics": [{"name": s.p, "count": 2, "assignments": None}], "timeout_ms": 30_000,
        "validate_only": False})
    await s.call("CreatePartitions same count", cp, {
        "topics": [{"name": s.p, "count": 4, "assignments": None}], "timeout_ms": 30_000,
        "validate_only": False})
    await s.call("CreatePartitions unknown topic", cp, {
        "topics": [{"name": s.p + "-no-such-topic", "count": 2, "assignments": None}], "timeout_ms": 30_000,
        "validate_only": False})

    keys = ["cleanup.policy", "retention.ms", "retention.bytes", "max.message.bytes", "segment.bytes", "min.insync.replicas",
            "compression.type"]
    dc = "DescribeConfigs"
    await s.call("DescribeConfigs topic (some keys)", dc, {
        "resources": [{"resource_type": 2, "resource_name": s.p, "configuration_keys": keys}],
        "include_synonyms": False, "include_documentation": False})
    await s.call("DescribeConfigs unknown topic", dc, {
        "resources": [{"resource_type": 2, "resource_name": s.p + "-no-such-topic", "configuration_keys": keys}],
        "include_synonyms": False, "include_documentation": False})
    await s.call("DescribeConfigs broker 1 (some keys)", dc, {
        "resources": [{"resource_type": 4, "resource_name": "1",
                       "configuration_keys": ["num.partitions", "log.retention.hours", "message.max.bytes",
                                              "auto.create.topics.enable"]}],
        "include_synonyms": False, "include_documentation": False})
    await s.call("DescribeConfigs cluster-wide broker default (all keys)", dc, {
        "resources": [{"resource_type": 4, "resource_name": "", "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False})
    iac = "IncrementalAlterConfigs"

    def alter(name, *ops, validate=False):
        return {"resources": [{"resource_type": 2, "resource_name": name, "configs": [
            {"name": k, "config_operation": op, "value": v} for k, op, v in ops]}], "validate_only": validate}

    await s.call("IncrementalAlterConfigs set + delete", iac,
                 alter(s.p, ("retention.bytes", 0, "1073741824"), ("cleanup.policy", 1, None)))
    await s.call("IncrementalAlterConfigs invalid value", iac, alter(s.p, ("cleanup.policy", 0, "sometimes")))
    await s.call("IncrementalAlterConfigs unknown key", iac, alter(s.p, ("no.such.config", 0, "1")))
    await s.call("IncrementalAlterConfigs unknown topic", iac,
                 alter(s.p + "-no-such-topic", ("retention.ms", 0, "1")))
    await s.call("IncrementalAlterConfigs validate_only", iac,
                 alter(s.p, ("segment.bytes", 0, "10485760"), validate=True))
    await s.wait_config(s.p, "retention.bytes", "1073741824")
    await s.call("DescribeConfigs topic after alter", dc, {
        "resources": [{"resource_type": 2, "resource_name": s.p, "configuration_keys": keys}],
        "include_synonyms": False, "include_documentation": False})

    # A KIP-848 group's own configs (ConfigResource GROUP): no such group need exist.  Only the
    # consumer.* keys are asked for: Kafka 4 also has share.* and streams.* ones.
    group_keys = ["consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"]

    def alter_group(name, *ops):
        return {"resources": [{"resource_type": 32, "resource_name": name, "configs": [
            {"name": k, "config_operation": op, "value": v} for k, op, v in ops]}], "validate_only": False}

    await s.call("IncrementalAlterConfigs group set", iac, alter_group(
        s.p + "-cfg", ("consumer.session.timeout.ms", 0, "50000"), ("consumer.heartbeat.interval.ms", 0, "6000")))
    await s.call("IncrementalAlterConfigs group above its bound", iac,
                 alter_group(s.p + "-cfg", ("consumer.session.timeout.ms", 0, "600000")))
    await s.call("IncrementalAlterConfigs group below its bound", iac,
                 alter_group(s.p + "-cfg", ("consumer.heartbeat.interval.ms", 0, "4000")))
    await s.call("IncrementalAlterConfigs group unknown key", iac,
                 alter_group(s.p + "-cfg", ("no.such.config", 0, "1")))
    await s.wait_config(s.p + "-cfg", "consumer.heartbeat.interval.ms", "6000", resource_type=32)
    await s.call("DescribeConfigs group (consumer keys)", dc, {
        "resources": [{"resource_type": 32, "resource_name": s.p + "-cfg", "configuration_keys": group_keys}],
        "include_synonyms": False, "include_documentation": False})
    await s.call("DescribeConfigs group never configured", dc, {
        "resources": [{"resource_type": 32, "resource_name": s.p + "-nocfg", "configuration_keys": group_keys}],
        "include_synonyms": False, "include_documentation": False})

    # Feature levels (KIP-584): refusals both make whatever levels each cluster runs at.
    uf = "UpdateFeatures"
    await s.call("UpdateFeatures metadata.version downgrade", uf, {"timeout_ms": 30_000, "validate_only": True,
        "feature_updates": [{"feature": "metadata.version", "max_version_level": 20, "upgrade_type": 2,
                             "allow_downgrade": True}]})
    await s.call("UpdateFeatures unknown feature", uf, {"timeout_ms": 30_000, "validate_only": True,
        "feature_updates": [{"feature": "no.such.version", "max_version_level": 1, "upgrade_type": 1,
                             "allow_downgrade": False}]})

    dtp = "DescribeTopicPartitions"
    if dtp in s.versions:  # Kafka 4's describeTopics
        await s.call("DescribeTopicPartitions one topic", dtp, {
            "topics": [{"name": s.p}], "response_partition_limit": 2000, "cursor": None})
        await s.call("DescribeTopicPartitions unknown and invalid topics", dtp, {
            "topics": [{"name": s.p + "-no-such-topic"}, {"name": "bad/name"}], "response_partition_limit": 2000,
            "cursor": None})
        await s.call("DescribeTopicPartitions a page of one from a cursor", dtp, {
            "topics": [{"name": s.p}], "response_partition_limit": 1,
            "cursor": {"topic_name": s.p, "partition_index": 1}})
        await s.call("DescribeTopicPartitions cursor outside the topics", dtp, {
            "topics": [{"name": s.p}], "response_partition_limit": 2000,
            "cursor": {"topic_name": s.p + "-zzz", "partition_index": 0}})

    md = "Metadata"
    one = await s.call("Metadata one topic", md, {"topics": [{"name": s.p}], "allow_auto_topic_creation": False})
    # what an admin UI asks to know which buttons to offer; no authorizer on either side
    await s.call("Metadata with authorized operations", md, {
        "topics": [{"name": s.p}, {"name": s.p + "-no-such-topic"}], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": True, "include_cluster_authorized_operations": True})
    await s.call("Metadata v10 with cluster authorized operations", md, {
        "topics": [{"name": s.p}], "allow_auto_topic_creation": False, "include_topic_authorized_operations": True,
        "include_cluster_authorized_operations": True}, version=10)
    await s.call("DescribeCluster with authorized operations", "DescribeCluster", {
        "include_cluster_authorized_operations": True, "endpoint_type": 1, "include_fenced_brokers": False})
    if s.versions[md] >= 12:  # by topic id, as Kafka 4's consumer asks for the topics it is assigned
        topic_id = one["topics"][0]["topic_id"]
        await s.call("Metadata by topic id", md, {"topics": [{"name": None, "topic_id": topic_id}],
                                                   "allow_auto_topic_creation": False})
        await s.call("Metadata by topic id, empty name", md, {"topics": [{"name": "", "topic_id": topic_id}],
                                                               "allow_auto_topic_creation": False})
        await s.call("Metadata unknown topic id", md, {"topics": [{"name": None, "topic_id": uuid.uuid4()}],
                                                        "allow_auto_topic_creation": False})
    await s.call("Metadata unknown topic", md, {"topics": [{"name": s.p + "-no-such-topic"}],
                                                 "allow_auto_topic_creation": False})
    await s.call("Metadata invalid topic name", md, {"topics": [{"name": "bad/name"}],
                                                      "allow_auto_topic_creation": False})
    await s.call("Metadata v4 (older) one topic", md, {"topics": [{"name": s.p}],
                                                        "allow_auto_topic_creation": False}, version=4)
    await s.call("Metadata v1 (older) one topic", md, {"topics": [{"name": s.p}]}, version=1)


async def data_steps(s: Session, rf: int) -> None:
    topic = (await s.wait_topic(s.p, 4))
    topic_id = topic["topic_id"]
    epoch = topic["partitions"][0]["leader_epoch"]
    values = [b"value-%d" % i for i in range(5)]
    pr = "Produce"
    await s.call("Produce 5 records acks=all", pr,
                 _produce(s.p, 0, batch(values, keys=[b"k%d" % i for i in range(5)])))
    await s.call("Produce 3 records acks=1", pr, _produce(s.p, 0, batch([b"a", b"b", b"c"],
                                                                           BASE_TIMESTAMP + 100), acks=1))
    await s.call("Produce older timestamps", pr, _produce(s.p, 0, batch([b"old"], BASE_TIMESTAMP - 1000)))
    await s.call("Produce v8 (older) to partition 1", pr, _produce(s.p, 1, batch([b"p1"])), version=8)
    await s.call("Produce v3 (older) to partition 2", pr, _produce(s.p, 2, batch([b"p2"])), version=3)
    await s.call("Produce unknown topic", pr, _produce(s.p + "-no-such-topic", 0, batch([b"x"])))
    await s.call("Produce wrong partition", pr, _produce(s.p, 9, batch([b"x"])))
    await s.call("Produce acks=2", pr, _produce(s.p, 0, batch([b"x"]), acks=2))
    await s.call("Produce record over max.message.bytes", pr,
                 _produce(s.p + "-small", 0, batch([b"y" * 500])))
    # Batches no consumer could read (to the -small topic, which no later step reads).
    zstd = build_batch([(None, b"z")], timestamp=BASE_TIMESTAMP, compression=4)
    await s.call("Produce v6 (older) with a zstd batch", pr, _produce(s.p + "-small", 0, zstd), version=6)
    await s.call("Produce a batch with codec id 7", pr, _produce(s.p + "-small", 0, _with_codec(batch([b"u"]), 7)))
    # Kafka 4's message.timestamp.after.max.ms default: a CreateTime an hour or more ahead is refused.
    ahead = int(time.time() * 1000) + 86_400_000
    await s.call("Produce a record a day ahead of the clock", pr, _produce(s.p + "-small", 0, batch([b"f"], ahead)))
    await s.call("Produce keyed and keyless records to a compacted topic", pr,
                 _produce(s.p + "-compact", 0, batch([b"k", b"nokey"], keys=[b"key", None])))
    await s.call("Produce keyed records to a compacted topic", pr,
                 _produce(s.p + "-compact", 0, batch([b"k", b"k2"], keys=[b"key", b"key2"])))

    fe = "Fetch"
    await s.call("Fetch from 0", fe, _fetch(s.p, topic_id, 0, 0))
    await s.call("Fetch from the middle of a batch", fe, _fetch(s.p, topic_id, 0, 2))
    await s.call("Fetch at the end", fe, _fetch(s.p, topic_id, 0, 9, max_wait_ms=10))
    await s.call("Fetch offset out of range", fe, _fetch(s.p, topic_id, 0, 100))
    await s.call("Fetch negative offset", fe, _fetch(s.p, topic_id, 0, -5))
    await s.call("Fetch current leader epoch + 1 (unknown)", fe, _fetch(s.p, topic_id, 0, 0, epoch=epoch + 1))
    if epoch >= 1:  # a fenced (older) epoch exists only once leadership has moved
        await s.call("Fetch current leader epoch - 1 (fenced)", fe, _fetch(s.p, topic_id, 0, 0, epoch=epoch - 1))
    await s.call("Fetch last fetched epoch ahead", fe,
                 _fetch(s.p, topic_id, 0, 5, last_fetched_epoch=epoch + 3))
    await s.call("Fetch unknown topic id", fe, _fetch(s.p, uuid.UUID(int=999), 0, 0))
    await s.call("Fetch unknown partition", fe, _fetch(s.p, topic_id, 9, 0))
    await s.call("Fetch v12 (older, by name)", fe, _fetch(s.p, topic_id, 0, 0), version=12)
    await s.call("Fetch v11 unknown topic name", fe, _fetch(s.p + "-no-such-topic", ZERO_UUID, 0, 0), version=11)
    await s.call("Fetch v4 (older)", fe, _fetch(s.p, topic_id, 1, 0), version=4)

    lo = "ListOffsets"
    for label, ts in (("earliest", -2), ("latest", -1), ("max timestamp", -3), ("by time", BASE_TIMESTAMP + 50),
                      ("time after all", BASE_TIMESTAMP + 10_000)):
        await s.call(f"ListOffsets {label}", lo, _list_offsets(s.p, 0, ts))
    await s.call("ListOffsets bad partition", lo, _list_offsets(s.p, 9, -1))
    await s.call("ListOffsets unknown topic", lo, _list_offsets(s.p + "-no-such-topic", 0, -1))
    await s.call("ListOffsets leader epoch + 1", lo, _list_offsets(s.p, 0, -1, epoch=epoch + 1))
    await s.call("ListOffsets v1 (older) latest", lo, _list_offsets(s.p, 0, -1), version=1)
    await s.call("ListOffsets v5 (older) earliest", lo, _list_offsets(s.p, 0, -2), version=5)


async def log_admin_steps(s: Session) -> None:
    """What operators ask of the partitions data_steps wrote: epochs, producers, log dirs,
    leader elections, record deletion, transactions, configs with synonyms."""
    ofle = "OffsetForLeaderEpoch"

    def epochs(topic, epoch, current=-1):
        return {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}]}]}
    await s.call("OffsetForLeaderEpoch epoch 0", ofle, epochs(s.p, 0))
    await s.call("OffsetForLeaderEpoch epoch ahead", ofle, epochs(s.p, 7))
    await s.call("OffsetForLeaderEpoch fenced current epoch", ofle, epochs(s.p, 0, current=9))
    await s.call("OffsetForLeaderEpoch unknown topic", ofle, epochs(s.p + "-no-such-topic", 0))
    await s.call("DescribeProducers", "DescribeProducers", {"topics": [{"name": s.p, "partition_indexes": [0, 9]}]})
    await s.call("DescribeLogDirs of the topic", "DescribeLogDirs", {"topics": [
        {"topic": s.p, "partitions": [0, 1]}]})
    await s.call("ElectLeaders preferred", "ElectLeaders", {"election_type": 0, "timeout_ms": 30_000,
        "topic_partitions": [{"topic": s.p, "partitions": [0]}, {"topic": s.p + "-no-such-topic", "partitions": [0]}]})
    dr = "DeleteRecords"

    def delete(partition, offset, topic=None):
        return {"timeout_ms": 30_000, "topics": [{"name": topic or s.p, "partitions": [
            {"partition_index": partition, "offset": offset}]}]}
    await s.call("DeleteRecords below the high watermark", dr, delete(2, 1))
    await s.call("DeleteRecords past the high watermark", dr, delete(2, 1_000))
    await s.call("DeleteRecords unknown partition", dr, delete(9, 1))
    await s.call("DeleteRecords unknown topic", dr, delete(0, 1, s.p + "-no-such-topic"))
    await s.call("ListTransactions", "ListTransactions", {"state_filters": [], "producer_id_filters": [],
                                                          "duration_filter": -1, "transactional_id_pattern": None})
    await s.call("DescribeTransactions unknown id", "DescribeTransactions",
                 {"transactional_ids": [s.p + "-no-such-txn"]})
    await s.call("DescribeConfigs topic with synonyms", "DescribeConfigs", {
        "resources": [{"resource_type": 2, "resource_name": s.p,
                       "configuration_keys": ["retention.ms", "cleanup.policy", "max.message.bytes"]}],
        "include_synonyms": True, "include_documentation": False})


def _producer_batch(values, pid, epoch, sequence, transactional=False) -> bytes:
    return build_batch([(None, v) for v in values], timestamp=BASE_TIMESTAMP, producer_id=pid,
                       producer_epoch=epoch, base_sequence=sequence, transactional=transactional)


async def idempotence_steps(s: Session) -> None:
    """An idempotent producer's sequences: in order, a retry, a gap, a stale epoch."""
    init = await s.call("InitProducerId idempotent", "InitProducerId", {
        "transactional_id": None, "transaction_timeout_ms": 60_000, "producer_id": -1, "producer_epoch": -1})
    pid, epoch = init.get("producer_id", -1), init.get("producer_epoch", 0)
    pr = "Produce"
    first = _producer_batch([b"i0", b"i1", b"i2"], pid, epoch, 0)
    await s.call("Produce idempotent sequence 0", pr, _produce(s.p, 3, first))
    await s.call("Produce idempotent retry of sequence 0", pr, _produce(s.p, 3, first))
    await s.call("Produce idempotent sequence 3", pr, _produce(s.p, 3, _producer_batch([b"i3"], pid, epoch, 3)))
    await s.call("Produce idempotent sequence gap", pr, _produce(s.p, 3, _producer_batch([b"i9"], pid, epoch, 9)))
    await s.call("Produce idempotent epoch ahead", pr, _produce(s.p, 3, _producer_batch([b"e"], pid, epoch + 1, 5)))
    await s.call("Produce idempotent unknown producer", pr,
                 _produce(s.p, 3, _producer_batch([b"u"], pid + 1000, 0, 4)))


async def transaction_steps(s: Session) -> None:
    """One transaction committed and one aborted through the coordinator APIs, what
    read_committed then reads, and the coordinator's refusals."""
    txn_id, group = s.p + "-txn", s.p + "-txn-group"
    await s.call("FindCoordinator transaction", "FindCoordinator", {"key_type": 1, "coordinator_keys": [txn_id],
                                                                    "key": txn_id})
    init = await s.call("InitProducerId transactional", "InitProducerId", {
        "transactional_id": txn_id, "transaction_timeout_ms": 60_000, "producer_id": -1, "producer_epoch": -1})
    pid, epoch = init.get("producer_id", -1), init.get("producer_epoch", 0)
    apt = "AddPartitionsToTxn"

    def add(partitions, producer_epoch=None):
        return {"v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch if producer_epoch is None else producer_epoch,
                "v3_and_below_topics": [{"name": s.p, "partitions": partitions}]}

    def end(commit, producer_epoch=None):
        return {"transactional_id": txn_id, "producer_id": pid,
                "producer_epoch": epoch if producer_epoch is None else producer_epoch, "committed": commit}

    async def settled():  # the markers written (not a recorded step)
        for _ in range(100):
            d = await s.raw("DescribeTransactions", {"transactional_ids": [txn_id]})
            if d["transaction_states"][0]["transaction_state"] in ("CompleteCommit", "CompleteAbort", "Empty"):
                return
            await trio.sleep(0.05)

    await s.call("EndTxn with no transaction", "EndTxn", end(True))
    await s.call("AddPartitionsToTxn", apt, add([1]), version=3)
    await s.call("AddPartitionsToTxn stale epoch", apt, add([2], producer_epoch=epoch - 1 if epoch else 5), version=3)
    await s.call("Produce transactional", "Produce", {**_produce(s.p, 1, _producer_batch(
        [b"t0", b"t1"], pid, epoch, 0, transactional=True)), "transactional_id": txn_id})
    await s.call("Produce transactional to a partition not added", "Produce", {**_produce(s.p, 2, _producer_batch(
        [b"x"], pid, epoch, 0, transactional=True)), "transactional_id": txn_id})
    await s.call("AddOffsetsToTxn", "AddOffsetsToTxn", {"transactional_id": txn_id, "producer_id": pid,
                                                        "producer_epoch": epoch, "group_id": group})
    await s.call("TxnOffsetCommit", "TxnOffsetCommit", {
        "transactional_id": txn_id, "group_id": group, "producer_id": pid, "producer_epoch": epoch,
        "generation_id": -1, "member_id": "", "group_instance_id": None, "topics": [
            {"name": s.p, "partitions": [{"partition_index": 1, "committed_offset": 2, "committed_leader_epoch": -1,
                                          "committed_metadata": ""}]}]})
    await s.call("DescribeTransactions ongoing", "DescribeTransactions", {"transactional_ids": [txn_id]})
    await s.call("EndTxn commit", "EndTxn", end(True))
    await settled()
    await s.call("DescribeTransactions committed", "DescribeTransactions", {"transactional_ids": [txn_id]})
    await s.call("OffsetFetch after the commit", "OffsetFetch", _offset_fetch(group, s.p, [1], s.versions["OffsetFetch"]))
    await s.call("AddPartitionsToTxn second transaction", apt, add([1]), version=3)
    await s.call("Produce transactional to abort", "Produce", {**_produce(s.p, 1, _producer_batch(
        [b"a0"], pid, epoch, 2, transactional=True)), "transactional_id": txn_id})
    await s.call("EndTxn abort", "EndTxn", end(False))
    await settled()
    await s.call("EndTxn commit after the abort", "EndTxn", end(True))
    topic_id = (await s.wait_topic(s.p, 4))["topic_id"]
    await s.call("Fetch read_committed after commit and abort", "Fetch", {
        **_fetch(s.p, topic_id, 1, 0), "isolation_level": 1})
    await s.call("ListOffsets read_committed latest", "ListOffsets", {
        **_list_offsets(s.p, 1, -1), "isolation_level": 1})
    await s.call("ListTransactions by state", "ListTransactions", {
        "state_filters": ["CompleteAbort"], "producer_id_filters": [], "duration_filter": -1,
        "transactional_id_pattern": None})
    again = await s.call("InitProducerId transactional again", "InitProducerId", {
        "transactional_id": txn_id, "transaction_timeout_ms": 60_000, "producer_id": -1, "producer_epoch": -1})
    await s.call("AddPartitionsToTxn fenced epoch", apt, add([1]), version=3)
    if again.get("producer_epoch", 0) != epoch:
        await s.call("Produce transactional fenced epoch", "Produce", {**_produce(s.p, 1, _producer_batch(
            [b"f"], pid, epoch, 3, transactional=True)), "transactional_id": txn_id})


async def group_steps(s: Session) -> None:
    group = s.p + "-group"
    await s.call("FindCoordinator group", "FindCoordinator", {"key_type": 0, "coordinator_keys": [group],
                                                              "key": group})
    await s.call("FindCoordinator v3 (older)", "FindCoordinator", {"key_type": 0, "key": group}, version=3)
    join = _join_group(group, CONSUMER_METADATA)
    first = await s.call("JoinGroup without member id", "JoinGroup", join)
    member = first.get("member_id", "")
    joined = await s.call("JoinGroup with the given member id", "JoinGroup", {**join, "member_id": member})
    generation = joined.get("generation_id", -1)
    await s.call("JoinGroup unknown member id", "JoinGroup", {**join, "member_id": "no-such-member"})
    sync = _sync_group(group, generation, member, b"\x00\x03assignment")
    await s.call("SyncGroup bad generation", "SyncGroup", {**sync, "generation_id": generation + 5})
    await s.call("SyncGroup unknown member", "SyncGroup", {**sync, "member_id": "no-such-member"})
    await s.call("SyncGroup good", "SyncGroup", sync)
    hb = {"group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": None}
    await s.call("Heartbeat good", "Heartbeat", hb)
    await s.call("Heartbeat bad generation", "Heartbeat", {**hb, "generation_id": generation + 5})
    await s.call("Heartbeat unknown member", "Heartbeat", {**hb, "member_id": "no-such-member"})
    await s.call("Heartbeat unknown group", "Heartbeat", {**hb, "group_id": s.p + "-no-such-group"})
    oc = "OffsetCommit"
    await s.call("OffsetCommit good", oc, _offset_commit(group, generation, member, s.p, {0: 5, 1: 1}))
    await s.call("OffsetCommit bad generation", oc, _offset_commit(group, generation + 5, member, s.p, {0: 6}))
    await s.call("OffsetCommit unknown member", oc, _offset_commit(group, generation, "no-such", s.p, {0: 6}))
    await s.call("OffsetCommit unknown topic", oc, _offset_commit(group, generation, member, s.p + "-no-such-topic",
                                                                  {0: 1}))
    await s.call("OffsetCommit standalone (generation -1)", oc, _offset_commit(s.p + "-simple", -1, "", s.p, {2: 1}))
    of = "OffsetFetch"
    await s.call("OffsetFetch", of, _offset_fetch(group, s.p, [0, 1, 2], s.versions[of]))
    await s.call("OffsetFetch v7 (older)", of, _offset_fetch(group, s.p, [0, 1, 2], 7), version=7)
    await s.call("OffsetFetch unknown group", of, _offset_fetch(s.p + "-no-such-group", s.p, [0], s.versions[of]))
    # One group per request: in a cluster each goes to its own coordinator.
    for label, g in (("", group), (" standalone group", s.p + "-simple"), (" unknown group", s.p + "-no-such-group")):
        await s.call(f"DescribeGroups{label}", "DescribeGroups", {"groups": [g], "include_authorized_operations": False})
    await s.call("DescribeGroups with authorized operations", "DescribeGroups",
                 {"groups": [group], "include_authorized_operations": True})
    await s.call("ListGroups", "ListGroups", {"states_filter": [], "types_filter": []})
    await s.call("ListGroups state Stable", "ListGroups", {"states_filter": ["Stable"], "types_filter": []})
    await s.call("DeleteGroups non-empty", "DeleteGroups", {"groups_names": [group]})
    await s.call("DeleteGroups unknown", "DeleteGroups", {"groups_names": [s.p + "-no-such-group"]})
    await s.call("LeaveGroup", "LeaveGroup", {"group_id": group, "member_id": member, "members": [
        {"member_id": member, "group_instance_id": None, "reason": None}]})
    await s.call("DeleteGroups after leaving", "DeleteGroups", {"groups_names": [group]})
    await s.call("DeleteGroups standalone group", "DeleteGroups", {"groups_names": [s.p + "-simple"]})
    await s.call("OffsetFetch after delete", of, _offset_fetch(group, s.p, [0], s.versions[of]))


async def consumer_group_steps(s: Session) -> None:
    """A KIP-848 group: ConsumerGroupHeartbeat's join, epochs and errors, member-epoch
    fenced offsets, ConsumerGroupDescribe, ListGroups by type, leaving and deleting."""
    group, member = s.p + "-kip848", str(uuid.uuid4())
    cgh, cgd = "ConsumerGroupHeartbeat", "ConsumerGroupDescribe"
    join = {"group_id": group, "member_id": member, "member_epoch": 0, "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": 30_000, "subscribed_topic_names": [s.p], "subscribed_topic_regex": None,
            "server_assignor": None, "topic_partitions": []}
    await s.call("ConsumerGroupHeartbeat join without rebalance timeout", cgh, {**join, "rebalance_timeout_ms": -1})
    await s.call("ConsumerGroupHeartbeat unknown assignor", cgh, {**join, "server_assignor": "no-such"})
    await s.call("ConsumerGroupHeartbeat unknown group", cgh, {**join, "group_id": s.p + "-no-such-group",
                                                                "member_epoch": 1, "topic_partitions": None})
    joined = await s.call("ConsumerGroupHeartbeat join", cgh, join)
    epoch = joined.get("member_epoch", 1)
    owned = (joined.get("assignment") or {}).get("topic_partitions", [])
    beat = {**join, "member_epoch": epoch, "rebalance_timeout_ms": -1, "subscribed_topic_names": None,
            "topic_partitions": None}
    await s.call("ConsumerGroupHeartbeat nothing new", cgh, beat)
    await s.call("ConsumerGroupHeartbeat full", cgh, {**join, "member_epoch": epoch, "topic_partitions": owned})
    await s.call("ConsumerGroupHeartbeat epoch ahead", cgh, {**beat, "member_epoch": epoch + 5})
    await s.call("ConsumerGroupHeartbeat unknown member", cgh, {**beat, "member_id": str(uuid.uuid4())})
    oc, of = "OffsetCommit", "OffsetFetch"
    await s.call("OffsetCommit by member epoch", oc, _offset_commit(group, epoch, member, s.p, {0: 3}))
    await s.call("OffsetCommit stale member epoch", oc, _offset_commit(group, epoch - 1, member, s.p, {0: 4}))
    await s.call("OffsetCommit simple to a group in use", oc, _offset_commit(group, -1, "", s.p, {0: 4}))
    fetch = _offset_fetch(group, s.p, [0, 1], s.versions[of])
    if s.versions[of] >= 9:
        await s.call("OffsetFetch by member epoch", of, {**fetch, "groups": [
            {**fetch["groups"][0], "member_id": member, "member_epoch": epoch}]})
        await s.call("OffsetFetch stale member epoch", of, {**fetch, "groups": [
            {**fetch["groups"][0], "member_id": member, "member_epoch": epoch + 1}]})
    for label, g in (("", group), (" classic group", s.p + "-group"), (" unknown group", s.p + "-no-such-group")):
        await s.call(f"ConsumerGroupDescribe{label}", cgd, {"group_ids": [g], "include_authorized_operations": False})
    await s.call("DescribeGroups of a consumer group", "DescribeGroups",
                 {"groups": [group], "include_authorized_operations": False})
    await s.call("ConsumerGroupDescribe with authorized operations", cgd,
                 {"group_ids": [group], "include_authorized_operations": True})
    await s.call("ListGroups type consumer", "ListGroups", {"states_filter": [], "types_filter": ["consumer"]})
    await s.call("DeleteGroups consumer group in use", "DeleteGroups", {"groups_names": [group]})
    await s.call("ConsumerGroupHeartbeat leave", cgh, {**beat, "member_epoch": -1})
    await s.call("ConsumerGroupDescribe after leaving", cgd, {"group_ids": [group],
                                                             "include_authorized_operations": False})
    await s.call("DeleteGroups consumer group after leaving", "DeleteGroups", {"groups_names": [group]})


# ACL codes (org.apache.kafka.common.acl / resource): resource TOPIC 2, GROUP 3, CLUSTER 4;
# pattern ANY 1, MATCH 2, LITERAL 3, PREFIXED 4; operation ANY 1, ALL 2, READ 3, WRITE 4;
# permission ANY 1, DENY 2, ALLOW 3.
def _acl(resource_type, name, pattern, principal, operation, permission, host="*") -> dict:
    return {"resource_type": resource_type, "resource_name": name, "resource_pattern_type": pattern,
            "principal": principal, "host": host, "operation": operation, "permission_type": permission}


def _acl_filter(resource_type=1, name=None, pattern=1, principal=None, operation=1, permission=1,
                host=None) -> dict:
    return {"resource_type_filter": resource_type, "resource_name_filter": name, "pattern_type_filter": pattern,
            "principal_filter": principal, "host_filter": host, "operation": operation,
            "permission_type": permission}


async def acl_steps(s: Session) -> None:
    """ACLs through the StandardAuthorizer both run (OVERRIDES: the anonymous principal a
    PLAINTEXT client is, is a super user): creations good and bad, filters, deletions.
    Each step's bindings are on one resource or one principal, so their order is the
    authorizer's order within it."""
    alice, bob = "User:" + s.p + "-alice", "User:" + s.p + "-bob"
    ca, da, xa = "CreateAcls", "DescribeAcls", "DeleteAcls"
    await s.call("DescribeAcls none yet", da, _acl_filter(principal=alice))
    await s.call("CreateAcls literal topic read, prefixed topic write deny", ca, {"creations": [
        _acl(2, s.p, 3, alice, 3, 3), _acl(2, s.p + "-", 4, bob, 4, 2)]})
    await s.call("CreateAcls group and cluster", ca, {"creations": [
        _acl(3, s.p + "-group", 3, alice, 3, 3), _acl(4, "kafka-cluster", 3, alice, 2, 3, host="10.0.0.1")]})
    await s.call("CreateAcls the same binding again", ca, {"creations": [_acl(2, s.p, 3, alice, 3, 3)]})
    for label, acl in (("resource type ANY", _acl(1, s.p, 3, alice, 3, 3)),
                       ("pattern MATCH", _acl(2, s.p, 2, alice, 3, 3)),
                       ("operation ANY", _acl(2, s.p, 3, alice, 1, 3)),
                       ("permission ANY", _acl(2, s.p, 3, alice, 3, 1)),
                       ("principal without a type", _acl(2, s.p, 3, "alice", 3, 3)),
                       ("empty resource name", _acl(2, "", 3, alice, 3, 3)),
                       ("cluster with another name", _acl(4, "other", 3, alice, 2, 3)),
                       ("unknown resource type", _acl(9, s.p, 3, alice, 3, 3))):
        await s.call(f"CreateAcls bad: {label}", ca, {"creations": [acl]})
    await s.call("DescribeAcls by principal alice, topics", da, _acl_filter(resource_type=2, principal=alice))
    await s.call("DescribeAcls by principal alice, groups", da, _acl_filter(resource_type=3, principal=alice))
    await s.call("DescribeAcls cluster", da, _acl_filter(resource_type=4, principal=alice))
    await s.call("DescribeAcls MATCH a topic the prefix covers", da, _acl_filter(2, s.p + "-x", 2))
    await s.call("DescribeAcls literal name the prefix covers", da, _acl_filter(2, s.p + "-x", 3))
    await s.call("DescribeAcls prefixed", da, _acl_filter(2, s.p + "-", 4))
    await s.call("DescribeAcls by host", da, _acl_filter(principal=alice, host="10.0.0.1"))
    await s.call("DescribeAcls unknown principal", da, _acl_filter(principal="User:nobody"))
    await s.call("DescribeAcls bad filter: resource type UNKNOWN", da, _acl_filter(resource_type=0))
    await s.call("DescribeAcls bad filter: pattern UNKNOWN", da, _acl_filter(pattern=0))
    await s.call("DescribeAcls v1 (older) by principal bob", da, _acl_filter(principal=bob), version=1)
    await s.call("DeleteAcls bob's and one of nobody's", xa, {"filters": [
        _acl_filter(principal=bob), _acl_filter(principal="User:nobody")]})
    await s.call("DeleteAcls alice's topic read", xa, {"filters": [_acl_filter(2, s.p, 3, alice, 3, 3)]})
    await s.call("DeleteAcls bad filter", xa, {"filters": [_acl_filter(resource_type=0)]})
    await s.call("DescribeAcls after deleting", da, _acl_filter(resource_type=2, principal=alice))
    await s.call("DeleteAcls the rest of alice's", xa, {"filters": [_acl_filter(principal=alice)]})


async def quota_and_scram_steps(s: Session) -> None:
    """Client quotas (KIP-546) and SCRAM credentials (KIP-554): set, describe, refuse."""
    user = s.p + "-quser"
    acq, dcq = "AlterClientQuotas", "DescribeClientQuotas"

    def entry(entity, *ops):
        return {"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                "ops": [{"key": k, "value": v, "remove": r} for k, v, r in ops]}
    await s.call("AlterClientQuotas user and user+client", acq, {"validate_only": False, "entries": [
        entry([("user", user)], ("producer_byte_rate", 1024.0, False), ("consumer_byte_rate", 2048.0, False)),
        entry([("user", user), ("client-id", "app")], ("request_percentage", 50.0, False))]})
    await s.call("AlterClientQuotas default client-id", acq, {"validate_only": False, "entries": [
        entry([("client-id", None)], ("producer_byte_rate", 4096.0, False))]})
    for label, e in (("unknown key", entry([("user", user)], ("no_such_rate", 1.0, False))),
                     ("unknown entity type", entry([("team", "x")], ("producer_byte_rate", 1.0, False))),
                     ("negative rate", entry([("user", user)], ("producer_byte_rate", -5.0, False))),
                     ("fractional byte rate", entry([("user", user)], ("producer_byte_rate", 1.5, False))),
                     ("ip with a user key", entry([("ip", "10.0.0.1")], ("producer_byte_rate", 1.0, False))),
                     ("the same entity type twice", entry([("user", user), ("user", "other")],
                                                         ("producer_byte_rate", 1.0, False)))):
        await s.call(f"AlterClientQuotas bad: {label}", acq, {"validate_only": False, "entries": [e]})
    await s.call("AlterClientQuotas validate_only", acq, {"validate_only": True, "entries": [
        entry([("user", user)], ("producer_byte_rate", 99.0, False))]})
    await s.call("AlterClientQuotas ip connection rate", acq, {"validate_only": False, "entries": [
        entry([("ip", "10.0.0.2")], ("connection_creation_rate", 10.0, False))]})

    async def settled():  # the controller's records reach the broker (not a recorded step)
        for _ in range(50):
            got = await s.raw(dcq, {"components": [{"entity_type": "user", "match_type": 0, "match": user}],
                                    "strict": True})
            if got.get("entries"):
                return
            await trio.sleep(0.1)
    await settled()
    await s.call("DescribeClientQuotas the user, strict", dcq, {"components": [
        {"entity_type": "user", "match_type": 0, "match": user}], "strict": True})
    await s.call("DescribeClientQuotas the user, not strict", dcq, {"components": [
        {"entity_type": "user", "match_type": 0, "match": user}], "strict": False})
    await s.call("DescribeClientQuotas default client-id", dcq, {"components": [
        {"entity_type": "client-id", "match_type": 1, "match": None}], "strict": True})
    await s.call("DescribeClientQuotas ip", dcq, {"components": [
        {"entity_type": "ip", "match_type": 0, "match": "10.0.0.2"}], "strict": True})
    await s.call("DescribeClientQuotas unknown entity type", dcq, {"components": [
        {"entity_type": "team", "match_type": 0, "match": "x"}], "strict": False})
    await s.call("DescribeClientQuotas bad match type", dcq, {"components": [
        {"entity_type": "user", "match_type": 7, "match": user}], "strict": False})
    await s.call("AlterClientQuotas remove", acq, {"validate_only": False, "entries": [
        entry([("user", user)], ("producer_byte_rate", 0.0, True), ("consumer_byte_rate", 0.0, True))]})

    aus, dus = "AlterUserScramCredentials", "DescribeUserScramCredentials"
    salt = b"s" * 16

    def upsert(name, mechanism=1, iterations=8192):  # a salted password as long as the hash's output
        return {"name": name, "mechanism": mechanism, "iterations": iterations, "salt": salt,
                "salted_password": b"p" * (32 if mechanism == 1 else 64)}
    await s.call("AlterUserScramCredentials upsert", aus, {"deletions": [], "upsertions": [upsert(user)]})
    await s.call("AlterUserScramCredentials two mechanisms of one user", aus, {"deletions": [], "upsertions": [
        upsert(user + "-both"), upsert(user + "-both", 2, 4096)]})
    for label, body in (("too few iterations", {"deletions": [], "upsertions": [upsert(user + "2", 1, 1000)]}),
                        ("too many iterations", {"deletions": [], "upsertions": [upsert(user + "2", 1, 20000)]}),
                        ("unknown mechanism", {"deletions": [], "upsertions": [upsert(user + "2", 0)]}),
                        ("empty user name", {"deletions": [], "upsertions": [upsert("")]}),
                        ("a user both deleted and upserted", {"deletions": [{"name": user, "mechanism": 1}],
                                                              "upsertions": [upsert(user)]}),
                        ("delete what does not exist", {"deletions": [{"name": user + "-none", "mechanism": 1}],
                                                        "upsertions": []})):
        await s.call(f"AlterUserScramCredentials bad: {label}", aus, body)
    async def scram_settled(mechanisms: int):  # the controller's records reach the broker (not a recorded step)
        for _ in range(50):
            got = await s.raw(dus, {"users": [{"name": user}]})
            if len(got["results"][0]["credential_infos"]) == mechanisms:
                return
            await trio.sleep(0.1)

    await scram_settled(1)
    await s.call("DescribeUserScramCredentials the user", dus, {"users": [{"name": user}]})
    await s.call("DescribeUserScramCredentials unknown and duplicate", dus, {"users": [
        {"name": user + "-none"}, {"name": user}, {"name": user}]})
    await s.call("AlterUserScramCredentials upsert another mechanism", aus, {"deletions": [], "upsertions": [
        upsert(user, 2, 4096)]})
    await scram_settled(2)  # (Kafka's broker once answered before it had the second: 1 against kraft's 2)
    await s.call("DescribeUserScramCredentials two mechanisms", dus, {"users": [{"name": user}]})
    await s.call("AlterUserScramCredentials delete one mechanism", aus, {
        "deletions": [{"name": user, "mechanism": 2}], "upsertions": []})
    await scram_settled(1)
    await s.call("DescribeUserScramCredentials after deleting one", dus, {"users": [{"name": user}]})


async def cluster_operation_steps(s: Session) -> None:
    """What an operator does to a running cluster: reassignments, deleting a group's
    offsets, the legacy AlterConfigs, broker and logger configs."""
    lpr, apr = "ListPartitionReassignments", "AlterPartitionReassignments"
    await s.call("ListPartitionReassignments none", lpr, {"timeout_ms": 30_000, "topics": None})
    await s.call("ListPartitionReassignments one topic", lpr, {"timeout_ms": 30_000, "topics": [
        {"name": s.p, "partition_indexes": [0, 9]}]})
    node = min(s.nodes) if s.nodes else 1

    def move(topic, partition, replicas):
        return {"timeout_ms": 30_000, "topics": [{"name": topic, "partitions": [
            {"partition_index": partition, "replicas": replicas}]}]}
    await s.call("AlterPartitionReassignments cancel with none in progress", apr, move(s.p, 0, None))
    await s.call("AlterPartitionReassignments to a broker that does not exist", apr, move(s.p, 0, [99]))
    await s.call("AlterPartitionReassignments duplicate replicas", apr, move(s.p, 0, [node, node]))
    await s.call("AlterPartitionReassignments empty replicas", apr, move(s.p, 0, []))
    await s.call("AlterPartitionReassignments unknown topic", apr, move(s.p + "-no-such-topic", 0, [node]))
    await s.call("AlterPartitionReassignments unknown partition", apr, move(s.p, 9, [node]))

    od, of = "OffsetDelete", "OffsetFetch"
    group = s.p + "-txn-group"  # transaction_steps committed its partition 1; no member
    await s.call("OffsetDelete unknown group", od, {"group_id": s.p + "-no-such-group", "topics": [
        {"name": s.p, "partitions": [{"partition_index": 0}]}]})
    await s.call("OffsetDelete an empty group's offset", od, {"group_id": group, "topics": [
        {"name": s.p, "partitions": [{"partition_index": 1}, {"partition_index": 7}]},
        {"name": s.p + "-no-such-topic", "partitions": [{"partition_index": 0}]}]})
    await s.call("OffsetFetch after OffsetDelete", of, _offset_fetch(group, s.p, [0, 1], s.versions[of]))

    ac, dc, iac = "AlterConfigs", "DescribeConfigs", "IncrementalAlterConfigs"

    def alter_configs(rtype, name, configs, validate=False):
        return {"resources": [{"resource_type": rtype, "resource_name": name, "configs": [
            {"name": k, "value": v} for k, v in configs]}], "validate_only": validate}
    await s.call("AlterConfigs topic (replaces every config)", ac,
                 alter_configs(2, s.p + "-small", [("retention.ms", "-1"), ("max.message.bytes", "300")]))
    await s.call("AlterConfigs topic invalid value", ac, alter_configs(2, s.p + "-small", [("retention.ms", "x")]))
    await s.call("AlterConfigs unknown topic", ac, alter_configs(2, s.p + "-no-such-topic", [("retention.ms", "1")]))
    await s.call("AlterConfigs validate_only", ac, alter_configs(2, s.p + "-small", [("segment.ms", "1000")],
                                                                 validate=True))
    await s.wait_config(s.p + "-small", "max.message.bytes", "300")
    await s.call("DescribeConfigs after AlterConfigs", dc, {"resources": [
        {"resource_type": 2, "resource_name": s.p + "-small",
         "configuration_keys": ["retention.ms", "max.message.bytes", "segment.ms"]}],
        "include_synonyms": False, "include_documentation": False})

    def alter_broker(name, *ops):
        return {"resources": [{"resource_type": 4, "resource_name": name, "configs": [
            {"name": k, "config_operation": op, "value": v} for k, op, v in ops]}], "validate_only": True}
    await s.call("IncrementalAlterConfigs cluster default log.retention.ms", iac,
                 alter_broker("", ("log.retention.ms", 0, "86400000")))
    await s.call("IncrementalAlterConfigs broker read-only key", iac, alter_broker(str(node), ("node.id", 0, "7")))
    await s.call("IncrementalAlterConfigs broker unknown key", iac,
                 alter_broker(str(node), ("no.such.config", 0, "1")))
    await s.call("IncrementalAlterConfigs broker bad value", iac,
                 alter_broker(str(node), ("log.retention.ms", 0, "soon")))
    await s.call("IncrementalAlterConfigs broker that does not exist", iac,
                 alter_broker("99", ("log.retention.ms", 0, "1000")))
    await s.call("IncrementalAlterConfigs broker name not a number", iac,
                 alter_broker("one", ("log.retention.ms", 0, "1000")))

    logger = "root"  # the one logger both have: Kafka's are named by class, kraft's by module
    await s.call("IncrementalAlterConfigs broker logger that does not exist", iac, {"validate_only": True,
        "resources": [{"resource_type": 8, "resource_name": str(node), "configs": [
            {"name": "no.such.logger", "config_operation": 0, "value": "DEBUG"}]}]})
    await s.call("IncrementalAlterConfigs broker logger level", iac, {"validate_only": True, "resources": [
        {"resource_type": 8, "resource_name": str(node), "configs": [
            {"name": logger, "config_operation": 0, "value": "DEBUG"}]}]})
    await s.call("IncrementalAlterConfigs broker logger bad level", iac, {"validate_only": True, "resources": [
        {"resource_type": 8, "resource_name": str(node), "configs": [
            {"name": logger, "config_operation": 0, "value": "LOUD"}]}]})
    await s.call("IncrementalAlterConfigs broker logger APPEND", iac, {"validate_only": True, "resources": [
        {"resource_type": 8, "resource_name": str(node), "configs": [
            {"name": logger, "config_operation": 2, "value": "DEBUG"}]}]})


def _consumer_protocol(name: str, version: int, body: dict) -> bytes:
    """A ConsumerProtocolSubscription or ...Assignment as a client encodes it (int16 version first)."""
    return version.to_bytes(2, "big") + codec.encode(name, "data", version, body)


async def migration_steps(s: Session) -> None:
    """Kafka 4's online migration: a ConsumerGroupHeartbeat member upgrades a classic group,
    the classic member is then served through JoinGroup / SyncGroup / Heartbeat inside the
    consumer group, and the consumer member's leave downgrades the group to a classic one."""
    group, cmember = s.p + "-migrate", str(uuid.uuid4())
    cgh, cgd = "ConsumerGroupHeartbeat", "ConsumerGroupDescribe"
    subscription = _consumer_protocol("ConsumerProtocolSubscription", 1, {
        "topics": [s.p], "user_data": None, "owned_partitions": []})
    join = _join_group(group, subscription)
    first = await s.call("Migration JoinGroup without member id", "JoinGroup", join)
    member = first.get("member_id", "")
    joined = await s.call("Migration JoinGroup classic", "JoinGroup", {**join, "member_id": member})
    generation = joined.get("generation_id", -1)
    everything = _consumer_protocol("ConsumerProtocolAssignment", 1, {
        "assigned_partitions": [{"topic": s.p, "partitions": [0, 1, 2, 3]}], "user_data": None})
    sync = _sync_group(group, generation, member, everything)
    await s.call("Migration SyncGroup classic leader", "SyncGroup", sync)
    upgrade = {"group_id": group, "member_id": cmember, "member_epoch": 0, "instance_id": None, "rack_id": None,
               "rebalance_timeout_ms": 30_000, "subscribed_topic_names": [s.p], "subscribed_topic_regex": None,
               "server_assignor": "range", "topic_partitions": []}
    joined_c = await s.call("Migration ConsumerGroupHeartbeat upgrades the group", cgh, upgrade)
    epoch = joined_c.get("member_epoch", 0)
    beat = {**upgrade, "member_epoch": epoch, "rebalance_timeout_ms": -1, "subscribed_topic_names": None,
            "server_assignor": None, "topic_partitions": []}
    describe = {"group_ids": [group], "include_authorized_operations": False}
    await s.call("Migration ConsumerGroupDescribe of the upgraded group", cgd, describe)
    await s.call("Migration DescribeGroups of the upgraded group", "DescribeGroups",
                 {"groups": [group], "include_authorized_operations": False})
    hb = {"group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": None}
    await s.call("Migration classic Heartbeat told to rejoin", "Heartbeat", hb)
    await s.call("Migration classic Heartbeat unknown member", "Heartbeat", {**hb, "member_id": "no-such-member"})
    await s.call("Migration classic SyncGroup before rejoining", "SyncGroup", {**sync, "assignments": []})
    rejoined = await s.call("Migration classic JoinGroup into the consumer group", "JoinGroup",
                            {**join, "member_id": member})
    generation2 = rejoined.get("generation_id", -1)
    await s.call("Migration classic SyncGroup bad protocol name", "SyncGroup",
                 {**sync, "generation_id": generation2, "protocol_name": "roundrobin", "assignments": []})
    await s.call("Migration classic SyncGroup gets its partitions", "SyncGroup",
                 {**sync, "generation_id": generation2, "assignments": []})
    await s.call("Migration ConsumerGroupHeartbeat gets the released partitions", cgh, beat)
    await s.call("Migration classic Heartbeat", "Heartbeat", {**hb, "generation_id": generation2})
    oc = "OffsetCommit"
    await s.call("Migration OffsetCommit by the classic member", oc,
                 _offset_commit(group, generation2, member, s.p, {0: 2}))
    await s.call("Migration OffsetCommit old generation", oc, _offset_commit(group, generation, member, s.p, {0: 3}))
    await s.call("Migration LeaveGroup of the consumer member", "LeaveGroup", {"group_id": group, "members": [
        {"member_id": cmember, "group_instance_id": None, "reason": None}]})
    await s.call("Migration ConsumerGroupHeartbeat leave downgrades the group", cgh, {**beat, "member_epoch": -1})
    await s.call("Migration ConsumerGroupDescribe of the downgraded group", cgd, describe)
    await s.call("Migration DescribeGroups of the downgraded group", "DescribeGroups",
                 {"groups": [group], "include_authorized_operations": False})
    await s.call("Migration classic Heartbeat after the downgrade", "Heartbeat", {**hb, "generation_id": generation2})
    await s.call("Migration classic JoinGroup after the downgrade", "JoinGroup", {**join, "member_id": member})
    await s.call("Migration LeaveGroup", "LeaveGroup", {"group_id": group, "members": [
        {"member_id": member, "group_instance_id": None, "reason": None}]})
    await static_migration_steps(s, subscription, everything)


async def static_migration_steps(s: Session, subscription: bytes, everything: bytes) -> None:
    """Static members: a classic one and a consumer-protocol one share a group; the latter's
    instance restarts with the classic protocol, which turns the group classic again at once."""
    group, cmember = s.p + "-migrate-static", str(uuid.uuid4())
    cgh = "ConsumerGroupHeartbeat"
    join = _join_group(group, subscription, "classic-1")
    joined = await s.call("Static migration JoinGroup classic static member", "JoinGroup", join)
    member, generation = joined.get("member_id", ""), joined.get("generation_id", -1)
    sync = _sync_group(group, generation, member, everything, "classic-1")
    await s.call("Static migration SyncGroup classic leader", "SyncGroup", sync)
    upgrade = {"group_id": group, "member_id": cmember, "member_epoch": 0, "instance_id": "consumer-1",
               "rack_id": None, "rebalance_timeout_ms": 30_000, "subscribed_topic_names": [s.p],
               "subscribed_topic_regex": None, "server_assignor": "range", "topic_partitions": []}
    joined_c = await s.call("Static migration ConsumerGroupHeartbeat static member upgrades", cgh, upgrade)
    rejoined = await s.call("Static migration classic rejoins", "JoinGroup", {**join, "member_id": member})
    generation2 = rejoined.get("generation_id", -1)
    await s.call("Static migration classic SyncGroup", "SyncGroup",
                 {**sync, "generation_id": generation2, "assignments": []})
    await s.call("Static migration ConsumerGroupHeartbeat gets the released partitions", cgh,
                 {**upgrade, "member_epoch": joined_c.get("member_epoch", 0), "rebalance_timeout_ms": -1,
                  "subscribed_topic_names": None, "server_assignor": None, "topic_partitions": []})
    replaced = await s.call("Static migration classic JoinGroup takes the consumer member's instance",
                            "JoinGroup", {**join, "group_instance_id": "consumer-1"})
    await s.call("Static migration DescribeGroups after the replacement", "DescribeGroups",
                 {"groups": [group], "include_authorized_operations": False})
    await s.call("Static migration SyncGroup of the replacing member", "SyncGroup", {
        **sync, "member_id": replaced.get("member_id", ""), "group_instance_id": "consumer-1",
        "generation_id": replaced.get("generation_id", -1), "assignments": []})
    await s.call("Static migration LeaveGroup", "LeaveGroup", {"group_id": group, "members": [
        {"member_id": "", "group_instance_id": i, "reason": None} for i in ("classic-1", "consumer-1")]})


# ------------------------------------------------------------------------------ known differences


@dataclass(frozen=True)
class KnownDifference:
    step: str  # a pattern (:func:`_glob`) over step labels
    path: str  # a pattern over paths in the answer, e.g. ``topics[0].partitions[*].error_code``
    reason: str

    def matches(self, step: str, path: str) -> bool:
        return _glob(self.step).fullmatch(step) is not None and _glob(self.path).fullmatch(path) is not None


def _glob(pattern: str) -> re.Pattern:
    """``*`` matches anything; every other character, brackets included, only itself."""
    return re.compile(".*".join(map(re.escape, pattern.split("*"))))


def known_differences(path: Path = DIFFERENCES_MD) -> list[KnownDifference]:
    """The rows of docs/DIFFERENCES.md's table: | `step pattern` | `path pattern` | reason |."""
    rows = []
    if not path.exists():
        return rows
    for line in path.read_text().splitlines():
        m = re.match(r"^\|\s*`([^`]*)`\s*\|\s*`([^`]*)`\s*\|(.*)\|\s*$", line)
        if m:
            rows.append(KnownDifference(m.group(1), m.group(2), m.group(3).strip()))
    return rows


@dataclass
class Comparison:
    differences: list[tuple[str, str, object, object, KnownDifference | None]]
    api_ranges: list[tuple[str, object, object]]
    versions: dict[str, int]
    steps: int

    @property
    def unexplained(self):
        return [d for d in self.differences if d[4] is None]

    def unused(self, known: list[KnownDifference]) -> list[KnownDifference]:
        used = {id(d[4]) for d in self.differences if d[4] is not None}
        return [k for k in known if id(k) not in used]


def compare(kafka: Session, kraft: Session, known: list[KnownDifference]) -> list:
    out = []
    kraft_steps = {st.label: st for st in kraft.steps}
    for st in kafka.steps:
        other = kraft_steps.get(st.label)
        label = f"{st.label} [{st.api} v{st.version}]"
        if other is None:
            out.append((label, "<step>", "ran", "not run", None))
            continue
        for path, a, b in diff(st.response, other.response):
            match = next((k for k in known if k.matches(st.label, path)), None)
            out.append((label, path, a, b, match))
    return out


# ------------------------------------------------------------------------------ running


def _hostport(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    return host, int(port)


def run(kafka_bootstrap: str, kraft_bootstrap: str, *, replication: int = 1,
        known: list[KnownDifference] | None = None, verbose: bool = False,
        prefix: str = "diff") -> Comparison:
    """Run :func:`scenario` against both brokers (at once) and compare."""
    known = known_differences() if known is None else known

    async def main():
        async with trio.open_nursery() as nursery:
            client = KafkaClient(nursery, client_id="kraft-differential", connect_timeout_s=10)
            try:
                sessions = [Session(client, *_hostport(b), {}, verbose=verbose, p=prefix)
                            for b in (kafka_bootstrap, kraft_bootstrap)]
                versions, ranges = await common_versions(sessions)

                async def one(s):
                    s.versions = versions
                    await s.discover()
                    await scenario(s, replication=replication)
                # both brokers at once: each session waits on its own broker (answers, configs
                # settling), and neither depends on the other's answers
                async with trio.open_nursery() as both:
                    for s in sessions:
                        both.start_soon(one, s)
                return sessions, versions, ranges
            finally:
                await client.aclose()
                nursery.cancel_scope.cancel()

    (kafka, kraft), versions, (kafka_ranges, kraft_ranges) = run_trio(main)
    api_ranges = [(API_NAMES.get(k, str(k)), kafka_ranges.get(k), kraft_ranges.get(k))
                  for k in sorted(set(kafka_ranges) | set(kraft_ranges))
                  if kafka_ranges.get(k) != kraft_ranges.get(k)]
    return Comparison(compare(kafka, kraft, known), api_ranges, versions, len(kafka.steps))


def report(c: Comparison, known: list[KnownDifference]) -> str:
    def short(v):
        text = repr(v)
        return text if len(text) <= 80 else text[:77] + "..."

    lines = ["# Differential run: Apache Kafka vs kraft", "",
             f"{c.steps} steps; {len(c.differences)} differences, {len(c.unexplained)} not in "
             f"docs/DIFFERENCES.md.", ""]
    if c.unexplained:
        lines += ["## Unexplained differences", "", "| step | path | Kafka | kraft |", "|---|---|---|---|"]
        lines += [f"| {s} | `{p}` | `{short(a)}` | `{short(b)}` |" for s, p, a, b, _ in c.unexplained]
        lines.append("")
    explained = [d for d in c.differences if d[4] is not None]
    if explained:
        lines += ["## Known differences (docs/DIFFERENCES.md)", "", "| step | path | Kafka | kraft | reason |",
                  "|---|---|---|---|---|"]
        lines += [f"| {s} | `{p}` | `{short(a)}` | `{short(b)}` | {k.reason[:100]} |" for s, p, a, b, k in explained]
        lines.append("")
    unused = c.unused(known)
    if unused:
        lines += ["## Documented differences not seen in this run", ""]
        lines += [f"- `{k.step}` `{k.path}`" for k in unused]
        lines.append("")
    lines += ["## Advertised API version ranges that differ (ApiVersions, data, not a failure)", "",
              "| API | Apache Kafka | kraft |", "|---|---|---|"]
    lines += [f"| {api} | {fmt_range(a)} | {fmt_range(b)} |" for api, a, b in c.api_ranges]
    lines += ["", "Versions used (the highest both serve): " +
              ", ".join(f"{api} v{v}" for api, v in sorted(c.versions.items())), ""]
    return "\n".join(lines)


def fmt_range(r) -> str:
    return "-" if r is None else f"{r[0]}–{r[1]}"


class Clusters:
    """Apache Kafka and kraft clusters side by side, stopped on exit."""

    def __init__(self, base: Path, kafka_nodes: int, kraft_nodes: int):
        self.base, self.kafka_nodes, self.kraft_nodes = Path(base), kafka_nodes, kraft_nodes
        self._stack = ExitStack()
        self.startup_s: dict[str, float] = {}

    def __enter__(self) -> "Clusters":
        from cluster_helpers import start_cluster

        from kraft.apache_kafka import ApacheKafkaCluster
        from kraft.local_cluster import LocalCluster

        try:
            t0 = time.monotonic()
            self.kafka = self._stack.enter_context(
                ApacheKafkaCluster(self.base / "kafka", nodes=self.kafka_nodes, overrides=OVERRIDES))
            self.startup_s["kafka"] = time.monotonic() - t0
            t0 = time.monotonic()
            self.kraft = self._stack.enter_context(
                LocalCluster(self.base / "kraft", controllers=self.kraft_nodes, brokers=0, overrides=OVERRIDES))
            start_cluster(self.kraft)
            self.startup_s["kraft"] = time.monotonic() - t0
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()


def main(argv=None) -> int:
    faulthandler.register(signal.SIGUSR1)  # `kill -USR1` prints where a stuck run is
    # SIGTERM (e.g. from `timeout`) unwinds like Ctrl-C, so the clusters are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kafka-nodes", type=int, default=1, choices=(1, 3))
    ap.add_argument("--kraft-nodes", type=int, default=1, choices=(1, 3))
    ap.add_argument("--kafka", help="bootstrap of a running Apache Kafka (no cluster started)")
    ap.add_argument("--kraft", help="bootstrap of a running kraft (no cluster started)")
    ap.add_argument("--report", help="write the Markdown report here")
    ap.add_argument("--prefix", default="diff", help="of every topic and group name (running clusters)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each step as it is sent")
    args = ap.parse_args(argv)
    known = known_differences()
    rf = min(args.kafka_nodes, args.kraft_nodes)
    if args.kafka and args.kraft:
        comparison = run(args.kafka, args.kraft, replication=rf, known=known, verbose=args.verbose,
                         prefix=args.prefix)
    else:
        with tempfile.TemporaryDirectory(prefix="kraft-differential-") as tmp, \
                Clusters(Path(tmp), args.kafka_nodes, args.kraft_nodes) as clusters:
            comparison = run(clusters.kafka.bootstrap_servers, clusters.kraft.bootstrap_servers,
                             replication=rf, known=known, verbose=args.verbose)
    text = report(comparison, known)
    if args.report:
        Path(args.report).write_text(text)
    print(text)
    return 1 if comparison.unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
