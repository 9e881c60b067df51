"""The ``__consumer_offsets`` records of KIP-848 consumer groups, in Kafka's formats.

Keys (non-flexible: an int16 key version, then int16-length strings) and their values (an
int16 value version 0, then the flexible encoding):

=== ============================================ ===============================================
key record                                       value
=== ============================================ ===============================================
3   ConsumerGroupMetadata (group)                the group epoch
5   ConsumerGroupMemberMetadata (group, member)  instance and rack ids, client id and host, the
                                                 subscription (names, regex), rebalance timeout,
                                                 server assignor; tagged field 0: a classic
                                                 member's session timeout and JoinGroup protocols
6   ConsumerGroupTargetAssignmentMetadata (group) the assignment epoch
7   ConsumerGroupTargetAssignmentMember          the member's target partitions
    (group, member)
8   ConsumerGroupCurrentMemberAssignment         member epoch, previous epoch, state, assigned
    (group, member)                              partitions and those pending revocation
=== ============================================ ===============================================

A null value deletes its key.  Kafka's key 4 (subscribed topics' metadata) is not written:
a coordinator that loads a group recomputes it from the metadata image.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace

from broker.group.record_codec import RecordFormatError, _Reader, _Writer

GROUP_EPOCH, MEMBER_METADATA, TARGET_EPOCH, TARGET_MEMBER, CURRENT_ASSIGNMENT = 3, 5, 6, 7, 8
MEMBER_KEYS = frozenset({MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT})
KEY_VERSIONS = frozenset({GROUP_EPOCH, MEMBER_METADATA, TARGET_EPOCH, TARGET_MEMBER, CURRENT_ASSIGNMENT})
# Kafka's MemberState bytes
STATE_BYTES = {"stable": 0, "unrevoked_partitions": 1, "unreleased_partitions": 2}
STATES = {v: k for k, v in STATE_BYTES.items()}

Partitions = frozenset[tuple[uuid.UUID, int]]


@dataclass(frozen=True, slots=True)
class ConsumerKey:
    kind: int  # the key version: GROUP_EPOCH ... CURRENT_ASSIGNMENT
    group: str
    member: str | None = None


@dataclass(frozen=True, slots=True)
class ClassicMetadata:
    """What a member that joined with JoinGroup (the classic protocol) brought."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]  # (name, metadata), in the member's preference order


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    topic_names: tuple[str, ...]
    topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic: ClassicMetadata | None = None


@dataclass(frozen=True, slots=True)
class CurrentAssignment:
    epoch: int
    previous_epoch: int
    state: str
    assigned: Partitions
    revoking: Partitions


def encode_key(key: ConsumerKey) -> bytes:
    w = _Writer()
    w.fixed("h", key.kind)
    w.string(key.group)
    if key.kind in MEMBER_KEYS:
        w.string(key.member)
    return bytes(w.out)


def decode_key(data: bytes) -> ConsumerKey | None:
    """A consumer group record's key, or None for other key versions."""
    r = _Reader(data)
    kind = r.fixed("h")
    if kind not in KEY_VERSIONS:
        return None
    group = r.string()
    member = r.string() if kind in MEMBER_KEYS else None
    r.end()
    return ConsumerKey(kind, group, member)


def record(key: ConsumerKey, value) -> tuple[bytes, bytes | None]:
    """The (key, value) record; ``value=None`` is the tombstone."""
    return encode_key(key), None if value is None else encode_value(key.kind, value)


def by_topic(partitions: Partitions) -> list[tuple[uuid.UUID, list[int]]]:
    """``(topic id, its partition indexes)`` in order: how the records and the APIs (each
    TopicPartitions entry) list a set of partitions."""
    grouped: dict[uuid.UUID, list[int]] = {}
    for topic_id, index in partitions:
        grouped.setdefault(topic_id, []).append(index)
    return [(topic_id, sorted(grouped[topic_id])) for topic_id in sorted(grouped)]


def _partitions(w: _Writer, partitions: Partitions) -> None:
    topics = by_topic(partitions)
    w.array_len(len(topics))
    for topic_id, indexes in topics:
        w.out += topic_id.bytes
        w.array_len(len(indexes))
        for index in indexes:
            w.fixed("i", index)
        w.tags()


def _read_partitions(r: _Reader) -> Partitions:
    out = set()
    for _ in range(r.array_len()):
        topic_id = uuid.UUID(bytes=r._take(16))
        out.update((topic_id, r.fixed("i")) for _ in range(r.array_len()))
        r.tags()
    return frozenset(out)


def _classic_bytes(classic: ClassicMetadata) -> bytes:
    """Kafka's ClassicMemberMetadata struct (flexible): session timeout, then each protocol's
    name and metadata."""
    w = _Writer(flexible=True)
    w.fixed("i", classic.session_timeout_ms)
    w.array_len(len(classic.protocols))
    for name, metadata in classic.protocols:
        w.string(name)
        w.bytes_(metadata)
        w.tags()
    w.tags()
    return bytes(w.out)


def _read_classic(data: bytes) -> ClassicMetadata:
    r = _Reader(data, flexible=True)
    session_ms = r.fixed("i")
    protocols = []
    for _ in range(r.array_len()):
        protocols.append((r.string(), r.bytes_()))
        r.tags()
    r.tags()
    r.end()
    return ClassicMetadata(session_ms, tuple(protocols))


def encode_value(kind: int, value) -> bytes:
    w = _Writer(flexible=True)
    w.fixed("h", 0)
    tagged = {}
    if kind in (GROUP_EPOCH, TARGET_EPOCH):
        w.fixed("i", value)
    elif kind == MEMBER_METADATA:
        w.string(value.instance_id)
        w.string(value.rack_id)
        w.string(value.client_id)
        w.string(value.client_host)
        w.array_len(len(value.topic_names))
        for name in value.topic_names:
            w.string(name)
        w.string(value.topic_regex)
        w.fixed("i", value.rebalance_timeout_ms)
        w.string(value.server_assignor)
        if value.classic is not None:  # a tagged nullable struct: a presence varint (1), then the struct
            tagged[0] = b"\x01" + _classic_bytes(value.classic)
    elif kind == TARGET_MEMBER:
        _partitions(w, value)
    elif kind == CURRENT_ASSIGNMENT:
        w.fixed("i", value.epoch)
        w.fixed("i", value.previous_epoch)
        w.fixed("b", STATE_BYTES[value.state])
        _partitions(w, value.assigned)
        _partitions(w, value.revoking)
    else:
        raise ValueError(f"no consumer group record has key version {kind}")
    w.tags(tagged)
    return bytes(w.out)


def decode_value(kind: int, data: bytes):
    r = _Reader(data, flexible=True)
    version = r.fixed("h")
    if version != 0:
        raise RecordFormatError(f"unknown value version {version} of key version {kind}")
    if kind in (GROUP_EPOCH, TARGET_EPOCH):
        value = r.fixed("i")
    elif kind == MEMBER_METADATA:
        value = MemberMetadata(r.string(nullable=True), r.string(nullable=True), r.string(), r.string(),
                               tuple(r.string() for _ in range(r.array_len())), r.string(nullable=True),
                               r.fixed("i"), r.string(nullable=True))
    elif kind == TARGET_MEMBER:
        value = _read_partitions(r)
    else:
        epoch, previous, state = r.fixed("i"), r.fixed("i"), r.fixed("b")
        if state not in STATES:
            raise RecordFormatError(f"unknown member state {state}")
        value = CurrentAssignment(epoch, previous, STATES[state], _read_partitions(r), _read_partitions(r))
    tagged = r.tags()
    r.end()
    classic = tagged.get(0, b"") if kind == MEMBER_METADATA else b""
    if classic[:1] not in (b"", b"\x00"):  # a presence varint (0: null), then the struct
        value = replace(value, classic=_read_classic(classic[1:]))
    return value


@dataclass
class LoadedConsumerGroup:
    """A consumer group's records as a replay left them (the latest value per key)."""

    group_epoch: int | None = None  # None: the group was deleted (or never written)
    assignment_epoch: int = 0
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    targets: dict[str, Partitions] = field(default_factory=dict)
    current: dict[str, CurrentAssignment] = field(default_factory=dict)
    records: dict[bytes, bytes] = field(default_factory=dict)  # key -> value: what is durable

    def apply(self, key: ConsumerKey, key_bytes: bytes, value_bytes: bytes | None) -> None:
        value = None if value_bytes is None else decode_value(key.kind, value_bytes)
        if value_bytes is None:
            self.records.pop(key_bytes, None)
        else:
            self.records[key_bytes] = value_bytes
        if key.kind == GROUP_EPOCH:
            self.group_epoch = value
        elif key.kind == TARGET_EPOCH:
            self.assignment_epoch = 0 if value is None else value
        else:
            table = {MEMBER_METADATA: self.members, TARGET_MEMBER: self.targets,
                     CURRENT_ASSIGNMENT: self.current}[key.kind]
            if value is None:
                table.pop(key.member, None)
            else:
                table[key.member] = value
