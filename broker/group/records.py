"""The records the group coordinator keeps in ``__consumer_offsets``, and which partition of
that topic owns a group.

Theory of operation
-------------------
``__consumer_offsets`` is a compacted log of key/value records.  The key starts with an
int16 *key version* that says what the record is:

* key version 0 or 1 — an offset commit, keyed by (group, topic, partition); its value is
  an ``OffsetCommitValue`` (int16 version, then v0–v4 fields; we write v3, or v1 when the
  commit carries an explicit expiry time as OffsetCommit v2–v4 retention does);
* key version 2 — a group's metadata, keyed by the group id; its value is a
  ``GroupMetadataValue`` (v0–v4; we write v3) with the generation, protocol type and name,
  leader and every member with its subscription and assignment.

A null value (tombstone) deletes the key.  Replaying a partition front to back, last value
per key wins, rebuilds every group the partition owns (:func:`replay`).  KIP-848 consumer
groups' records (key versions 3 and 5-8) are :mod:`broker.group.consumer_records`'; other
key versions are skipped.

The encodings (:mod:`broker.group.record_codec`) are Kafka's non-flexible struct encoding
(int16-length strings, int32-length bytes and arrays); value version 4 is the flexible
encoding (compact lengths and empty tagged field sections), which we read and can write.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from broker.group import consumer_records
from broker.group.record_codec import RecordFormatError, _Reader, _Writer

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3

# ------------------------------------------------------------------ partitioning


def java_string_hashcode(s: str) -> int:
    """``String.hashCode()`` of Java: over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition owning ``group_id``, as Kafka computes it.

    Kafka's ``Utils.abs`` maps Integer.MIN_VALUE to 0 (``Math.abs`` would leave it negative).
    """
    h = java_string_hashcode(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


# ------------------------------------------------------------------ decoded forms


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1
    expire_timestamp: int = -1  # only version 1 carries it


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[MemberValue, ...] = field(default_factory=tuple)


# ------------------------------------------------------------------ keys


def encode_offset_key(group: str, topic: str, partition: int, version: int = OFFSET_KEY_VERSION) -> bytes:
    w = _Writer()
    w.fixed("h", version)
    w.string(group)
    w.string(topic)
    w.fixed("i", partition)
    return bytes(w.out)


def encode_group_key(group: str) -> bytes:
    w = _Writer()
    w.fixed("h", GROUP_KEY_VERSION)
    w.string(group)
    return bytes(w.out)


def decode_key(data: bytes) -> OffsetKey | GroupKey | None:
    """The decoded key, or None for a key version this coordinator does not use."""
    r = _Reader(data)
    version = r.fixed("h")
    if version in (0, 1):
        key = OffsetKey(r.string(), r.string(), r.fixed("i"))
    elif version == 2:
        key = GroupKey(r.string())
    else:
        return None
    r.end()
    return key


# ------------------------------------------------------------------ values


def encode_offset_value(v: OffsetValue, version: int | None = None) -> bytes:
    if version is None:
        version = OFFSET_VALUE_VERSION_WITH_EXPIRY if v.expire_timestamp >= 0 else OFFSET_VALUE_VERSION
    if not 0 <= version <= 4:
        raise ValueError(f"OffsetCommitValue has no version {version}")
    w = _Writer(flexible=version >= 4)
    w.fixed("h", version)
    w.fixed("q", v.offset)
    if version >= 3:
        w.fixed("i", v.leader_epoch)
    w.string(v.metadata)
    w.fixed("q", v.commit_timestamp)
    if version == 1:
        w.fixed("q", v.expire_timestamp)
    w.tags()
    return bytes(w.out)


def decode_offset_value(data: bytes) -> OffsetValue:
    r = _Reader(data)
    version = r.fixed("h")
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown OffsetCommitValue version {version}")
    r.flexible = version >= 4
    offset = r.fixed("q")
    leader_epoch = r.fixed("i") if version >= 3 else -1
    metadata = r.string()
    commit_timestamp = r.fixed("q")
    expire_timestamp = r.fixed("q") if version == 1 else -1
    r.tags()
    r.end()
    return OffsetValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp)


def encode_group_value(v: GroupValue, version: int = GROUP_VALUE_VERSION) -> bytes:
    if not 0 <= version <= 4:
        raise ValueError(f"GroupMetadataValue has no version {version}")
    w = _Writer(flexible=version >= 4)
    w.fixed("h", version)
    w.string(v.protocol_type)
    w.fixed("i", v.generation)
    w.string(v.protocol)
    w.string(v.leader)
    if version >= 2:
        w.fixed("q", v.current_state_timestamp)
    w.array_len(len(v.members))
    for m in v.members:
        w.string(m.member_id)
        if version >= 3:
            w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        if version >= 1:
            w.fixed("i", m.rebalance_timeout)
        w.fixed("i", m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
        w.tags()
    w.tags()
    return bytes(w.out)


def decode_group_value(data: bytes) -> GroupValue:
    r = _Reader(data)
    version = r.fixed("h")
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown GroupMetadataValue version {version}")
    r.flexible = version >= 4
    protocol_type = r.string()
    generation = r.fixed("i")
    protocol = r.string(nullable=True)
    leader = r.string(nullable=True)
    timestamp = r.fixed("q") if version >= 2 else -1
    members = []
    for _ in range(r.array_len()):
        member_id = r.string()
        instance = r.string(nullable=True) if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        session_timeout = rebalance_timeout = 0
        if version >= 1:
            rebalance_timeout = r.fixed("i")
        session_timeout = r.fixed("i")
        if version == 0:
            rebalance_timeout = session_timeout
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.tags()
        members.append(MemberValue(member_id, instance, client_id, client_host, rebalance_timeout,
                                   session_timeout, subscription, assignment))
    r.tags()
    r.end()
    return GroupValue(protocol_type, generation, protocol, leader, timestamp, tuple(members))


# ------------------------------------------------------------------ records and replay


def offset_record(group: str, topic: str, partition: int, value: OffsetValue | None) -> tuple[bytes, bytes | None]:
    """The (key, value) record of a commit; ``value=None`` is the tombstone."""
    return encode_offset_key(group, topic, partition), None if value is None else encode_offset_value(value)


def group_record(group: str, value: GroupValue | None) -> tuple[bytes, bytes | None]:
    return encode_group_key(group), None if value is None else encode_group_value(value)


@dataclass(frozen=True, slots=True)
class TxnRecord:
    """A record of a transactional batch (TxnOffsetCommit) of ``producer_id``."""

    producer_id: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """A COMMIT or ABORT control record of ``producer_id``'s transaction."""

    producer_id: int
    committed: bool


@dataclass
class LoadedPartition:
    """What replaying one ``__consumer_offsets`` partition yields."""

    groups: dict[str, GroupValue] = field(default_factory=dict)
    offsets: dict[str, dict[tuple[str, int], OffsetValue]] = field(default_factory=dict)
    # group -> producer id -> offsets of a transaction without its marker yet
    pending_txn_offsets: dict[str, dict[int, dict[tuple[str, int], OffsetValue]]] = field(default_factory=dict)
    # KIP-848 groups' records (broker.group.consumer_records.LoadedConsumerGroup) by group
    consumer_groups: dict = field(default_factory=dict)

    def group_ids(self) -> set[str]:
        modern = {g for g, loaded in self.consumer_groups.items() if loaded.group_epoch is not None}
        return set(self.groups) | set(self.offsets) | set(self.pending_txn_offsets) | modern


def replay(records: Iterable[tuple[bytes | None, bytes | None] | TxnRecord | TxnMarker]) -> LoadedPartition:
    """Rebuild the latest state from (key, value) records in log order.

    Records without a key or with an unknown key version are skipped; a tombstone deletes.
    KIP-848 groups' records (key versions 3 and up) are gathered per group as they stand.
    Offsets of transactional batches (:class:`TxnRecord`) wait for their producer's
    :class:`TxnMarker`: a commit applies them at the marker's place in the log, an abort
    drops them; those still waiting at the end are returned as pending.
    """
    out = LoadedPartition()
    pending: dict[int, list[tuple[OffsetKey, OffsetValue]]] = {}
    for item in records:
        if isinstance(item, TxnMarker):
            for key, value in pending.pop(item.producer_id, []) if item.committed else []:
                out.offsets.setdefault(key.group, {})[(key.topic, key.partition)] = value
            pending.pop(item.producer_id, None)
            continue
        if isinstance(item, TxnRecord):
            key = decode_key(item.key) if item.key is not None else None
            if isinstance(key, OffsetKey) and item.value is not None:
                pending.setdefault(item.producer_id, []).append((key, decode_offset_value(item.value)))
            continue
        key_bytes, value_bytes = item
        if key_bytes is None:
            continue
        key = decode_key(key_bytes)
        if isinstance(key, GroupKey):
            if value_bytes is None:
                out.groups.pop(key.group, None)
            else:
                out.groups[key.group] = decode_group_value(value_bytes)
        elif isinstance(key, OffsetKey):
            tp = (key.topic, key.partition)
            if value_bytes is None:
                offsets = out.offsets.get(key.group)
                if offsets is not None:
                    offsets.pop(tp, None)
                    if not offsets:
                        del out.offsets[key.group]
            else:
                out.offsets.setdefault(key.group, {})[tp] = decode_offset_value(value_bytes)
        elif (modern := consumer_records.decode_key(key_bytes)) is not None:
            loaded = out.consumer_groups.get(modern.group)
            if loaded is None:
                loaded = out.consumer_groups[modern.group] = consumer_records.LoadedConsumerGroup()
            loaded.apply(modern, key_bytes, value_bytes)
    for pid, entries in pending.items():
        for key, value in entries:
            out.pending_txn_offsets.setdefault(key.group, {}).setdefault(pid, {})[(key.topic, key.partition)] = value
    return out
