"""The data of one classic consumer group: its state, members and committed offsets.

States and the transitions the coordinator makes (Kafka's classic group protocol)::

    Empty ──join──▶ PreparingRebalance ──all joined / rebalance timeout──▶ CompletingRebalance
      ▲                 ▲    │ (no member left: back to Empty)                │ leader's SyncGroup
      │                 │    ▼                                                ▼
      └── last member ──┴── join of a new member, leave, expiry, changed ── Stable
          leaves               metadata, leader rejoin
    Empty ──delete / offsets expired──▶ Dead

Nothing here does I/O or reads a clock; the coordinator passes ``now_ms`` in.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field
from typing import Any

from broker.group.records import OffsetValue
from kraft.protocol import codec

CONSUMER_PROTOCOL_TYPE = "consumer"
# A member that joined for the first time and never completed a join is dropped after this
# (Kafka's NewMemberJoinTimeoutMs), even while its join request is parked.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# The states a state may move to (the coordinator asserts every transition against this).
TRANSITIONS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE, GroupState.DEAD}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.COMPLETING_REBALANCE, GroupState.EMPTY, GroupState.DEAD}),
    GroupState.COMPLETING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.DEAD}),
    GroupState.STABLE: frozenset({GroupState.PREPARING_REBALANCE, GroupState.DEAD}),
    GroupState.DEAD: frozenset(),
}


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata) in the member's preference order
    assignment: bytes = b""
    join_ticket: int | None = None  # a parked JoinGroup response
    join_version: int = 0
    sync_ticket: int | None = None  # a parked SyncGroup response
    sync_version: int = 0
    last_heartbeat_ms: int = 0
    is_new: bool = False

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def same_protocols(self, protocols: list[tuple[str, bytes]]) -> bool:
        return list(self.protocols) == list(protocols)

    def expired(self, now_ms: int) -> bool:
        """Kafka's ``shouldKeepAlive`` negated: a member with a parked join or sync stays."""
        if self.join_ticket is not None:
            return self.is_new and now_ms >= self.last_heartbeat_ms + NEW_MEMBER_JOIN_TIMEOUT_MS
        if self.sync_ticket is not None:
            return False
        return now_ms >= self.last_heartbeat_ms + self.session_timeout_ms


@dataclass
class Group:
    group_id: str
    partition: int
    state: GroupState = GroupState.EMPTY
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation: int = 0
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: dict[str, int] = field(default_factory=dict)  # member id -> expiry ms
    offsets: dict[tuple[str, int], OffsetValue] = field(default_factory=dict)
    # TxnOffsetCommit offsets by producer id, until the transaction's marker commits or drops them
    pending_txn_offsets: dict[int, dict[tuple[str, int], OffsetValue]] = field(default_factory=dict)
    state_timestamp_ms: int = -1
    # the rebalance in progress: when its join phase ends, and the initial-delay bookkeeping
    join_deadline_ms: int | None = None
    in_initial_delay: bool = False
    initial_delay_remaining_ms: int = 0
    initial_delay_new_member: bool = False
    subscribed_topics: frozenset[str] | None = None
    # A KIP-848 consumer group's state (broker.group.consumer_group.ConsumerGroup); None for a
    # classic group.  The classic fields above then stay those of an Empty group.
    modern: Any = None

    def transition(self, new: GroupState, now_ms: int) -> None:
        if new not in TRANSITIONS[self.state]:
            raise AssertionError(f"group {self.group_id}: illegal transition {self.state} -> {new}")
        self.state = new
        self.state_timestamp_ms = now_ms

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def static_member_fenced(self, member_id: str, instance_id: str | None) -> bool:
        if instance_id is None:
            return False
        known = self.static_members.get(instance_id)
        return known is not None and known != member_id

    def all_joined(self) -> bool:
        return not self.pending_members and all(m.join_ticket is not None for m in self.members.values())

    def candidate_protocols(self) -> list[str]:
        """Protocol names every member supports, in the first member's preference order."""
        members = list(self.members.values())
        if not members:
            return []
        common = set.intersection(*({n for n, _ in m.protocols} for m in members))
        return [n for n, _ in members[0].protocols if n in common]

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        names = {n for n, _ in protocols}
        return self.protocol_type == protocol_type and bool(names & set(self.candidate_protocols()))

    def select_protocol(self) -> str:
        """Each member votes for its most preferred candidate; most votes wins, ties going to
        the candidate listed first."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise AssertionError(f"group {self.group_id} has no common protocol")
        votes = dict.fromkeys(candidates, 0)
        for m in self.members.values():
            votes[next(n for n, _ in m.protocols if n in votes)] += 1
        return max(candidates, key=lambda n: votes[n])

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """The topics the members subscribe to (consumer protocol only; None when unknown)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            parsed = parse_subscription(m.metadata_for(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return frozenset(topics)


class MalformedProtocol(ValueError):
    """A member's ConsumerProtocolSubscription or ConsumerProtocolAssignment does not parse."""


def protocol_version(data: bytes) -> int:
    """The ConsumerProtocol version embedded data starts with (later ones read as 3, the last
    the schema has)."""
    return min(max(struct.unpack_from(">h", data)[0], 0), 3) if len(data) >= 2 else 0


def decode_subscription(metadata: bytes) -> dict:
    """A ConsumerProtocolSubscription."""
    try:
        return codec.decode("ConsumerProtocolSubscription", "data", protocol_version(metadata),
                            memoryview(metadata)[2:], allow_trailing=True)
    except Exception as exc:  # noqa: BLE001 - any malformed client metadata
        raise MalformedProtocol(str(exc)) from None


def parse_subscription(metadata: bytes) -> set[str] | None:
    """The topics of a ConsumerProtocolSubscription, or None if it does not parse."""
    try:
        return set(decode_subscription(metadata)["topics"])
    except MalformedProtocol:  # malformed client metadata means "unknown"
        return None
