"""Classic members inside a KIP-848 consumer group, and the online migration between the two
kinds of group (sans-IO), as Kafka 4's coordinator does with ``group.consumer.migration.policy``.

Theory of operation
-------------------
A rolling upgrade restarts a group's consumers one by one with ``group.protocol=consumer``,
so for a while a group has members of both protocols; a rolling downgrade the other way.

* **Upgrade.** The first ConsumerGroupHeartbeat (epoch 0) into a classic group that has
  members, uses the consumer embedded protocol and fits ``group.consumer.max.size``, turns it
  into a consumer group: each classic member becomes a member at the group's generation,
  owning the partitions of its last SyncGroup assignment (its target too), and keeps its
  session timeout and JoinGroup protocols.  Parked JoinGroup and SyncGroup requests are
  answered REBALANCE_IN_PROGRESS.  The joining member then bumps the group epoch as any join
  does.
* **Classic members of a consumer group** go through the same target assignment and
  reconciliation as the others; the classic requests are translated:

  - JoinGroup creates or updates the member from its ConsumerProtocolSubscription (topics,
    rack, and the partitions it still owns, which is how its revocations are seen) and is
    answered at once: the member epoch as the generation, the member's first protocol, no
    leader and no member list (nobody assigns on the client side);
  - SyncGroup hands the member its current partitions, encoded as a ConsumerProtocolAssignment
    of the version it subscribed with;
  - Heartbeat answers REBALANCE_IN_PROGRESS while the member must rejoin: the group epoch is
    ahead of it, it must revoke partitions, or partitions it waited for are free;
  - LeaveGroup removes it (or a member of the consumer protocol, as Kafka 4.1 does for the
    admin's removeMembersFromConsumerGroup); OffsetCommit must carry its member epoch as the generation
    (ILLEGAL_GENERATION otherwise).

  Its session is its JoinGroup's session timeout; a member told to rejoin that does not
  within its rebalance timeout, or that joined and does not sync within it, is removed.
* **Downgrade.** When the last member using the consumer protocol leaves (or is fenced) and
  classic members remain, within ``group.max.size``, the group becomes a classic group at its
  group epoch: the classic members with their target assignments, the first one the leader,
  Stable, then at once PreparingRebalance, so every member rejoins a classic rebalance.

A classic static member that replaces (same ``group.instance.id``) the last member using the
consumer protocol downgrades the group too, but without a rebalance: the group is Stable at
once, the new member holding its predecessor's target assignment, as Kafka's does.

Each conversion writes the tombstones of the old kind's records and the new kind's records
in the same output, before any answer is released.
"""

from __future__ import annotations

import logging
import struct
import uuid
from collections.abc import Mapping

from broker.group import consumer_records as cr
from broker.group.consumer_group import (STABLE, UNRELEASED, UNREVOKED, ConsumerGroup, ConsumerMember,
                                         ConsumerProtocol, HeartbeatError, tombstones)
from broker.group.membership import (INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT, Membership, answer_parked,
                                     group_write, join_error, leave_response, leaving_members)
from broker.group.output import Output, Write
from broker.group.state import (CONSUMER_PROTOCOL_TYPE, Group, GroupState, MalformedProtocol, Member,
                                decode_subscription, protocol_version)
from kraft.protocol import codec
from kraft.protocol.error_codes import ErrorCode

log = logging.getLogger(__name__)

S = GroupState


def encode_assignment(partitions, names: Mapping[uuid.UUID, str], version: int) -> bytes:
    """``partitions`` ((topic id, index) pairs) as a ConsumerProtocolAssignment."""
    topics = [{"topic": names[t], "partitions": ps} for t, ps in cr.by_topic(partitions) if t in names]
    return struct.pack(">h", version) + codec.encode("ConsumerProtocolAssignment", "data", version,
                                                     {"assigned_partitions": topics, "user_data": None})


def decode_assignment(data: bytes) -> list[tuple[str, int]]:
    if not data:
        return []
    try:
        body = codec.decode("ConsumerProtocolAssignment", "data", protocol_version(data), memoryview(data)[2:],
                            allow_trailing=True)
    except Exception as exc:  # noqa: BLE001
        raise MalformedProtocol(str(exc)) from None
    return [(t["topic"], p) for t in body["assigned_partitions"] for p in t["partitions"]]


class ClassicMembers:
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup for consumer groups, and the upgrade and
    downgrade between classic and consumer groups (see the module's notes)."""

    def __init__(self, consumer: ConsumerProtocol, membership: Membership):
        self.consumer = consumer
        self.membership = membership
        self.config = consumer.config
        consumer.migration = self

    # ------------------------------------------------------------------ helpers

    def _ids(self) -> dict[str, uuid.UUID]:
        return {name: topic.id for name, topic in self.consumer.topics().items()}

    def _names(self) -> dict[uuid.UUID, str]:
        return {topic.id: name for name, topic in self.consumer.topics().items()}

    def _partitions(self, pairs) -> frozenset:
        """(topic name, index) pairs as (topic id, index), topics unknown here left out."""
        ids = self._ids()
        return frozenset((ids[name], index) for name, index in pairs if name in ids)

    @staticmethod
    def _member(cg: ConsumerGroup, member_id: str, instance_id: str | None) -> tuple[ConsumerMember | None, int]:
        """The classic member a SyncGroup, Heartbeat or OffsetCommit names, or an error code."""
        if instance_id is not None:
            member = cg.static_member(instance_id)
            if member is None:
                return None, ErrorCode.UNKNOWN_MEMBER_ID
            if member.member_id != member_id:
                return None, ErrorCode.FENCED_INSTANCE_ID
        else:
            member = cg.members.get(member_id)
        if member is None or member.classic is None:
            return None, ErrorCode.UNKNOWN_MEMBER_ID
        return member, ErrorCode.NONE

    def _must_rejoin(self, cg: ConsumerGroup, member: ConsumerMember) -> bool:
        if member.epoch < cg.group_epoch or member.state == UNREVOKED:
            return True
        if member.state == UNRELEASED:  # rejoin once what it waits for is free
            wanted = cg.target.get(member.member_id, frozenset()) - member.assigned
            return not any(cg.owners.get(p, member.member_id) != member.member_id for p in wanted)
        return False

    @staticmethod
    def _told_to_rejoin(member: ConsumerMember, now_ms: int) -> None:
        if member.join_deadline_ms is None:
            member.join_deadline_ms = now_ms + member.rebalance_timeout_ms

    # ------------------------------------------------------------------ JoinGroup

    def join(self, group: Group, version: int, body: dict, now_ms: int, *, client_id: str = "",
             client_host: str = "") -> Output:
        cg, consumer, cfg = group.modern, self.consumer, self.config
        member_id, instance_id = body["member_id"] or "", body.get("group_instance_id")
        protocols = tuple((p["name"], bytes(p["metadata"])) for p in body["protocols"])
        session_ms = body["session_timeout_ms"]
        rebalance_ms = body.get("rebalance_timeout_ms", -1)
        if rebalance_ms is None or rebalance_ms < 0:
            rebalance_ms = session_ms

        def fail(code, mid=member_id):
            return Output(join_error(version, code, mid))

        if not cfg.min_session_timeout_ms <= session_ms <= cfg.max_session_timeout_ms:
            return fail(INVALID_SESSION_TIMEOUT)
        unknown = not member_id
        if unknown:
            member_id = consumer.new_member_id()
        if len(cg.members) >= cfg.consumer_max_size and member_id not in cg.members \
                and cg.static_member(instance_id) is None:
            return fail(ErrorCode.GROUP_MAX_SIZE_REACHED)
        if not self._supports(cg, body["protocol_type"], protocols):
            return fail(INCONSISTENT_GROUP_PROTOCOL)
        if unknown and instance_id is None and version >= 4:
            return fail(ErrorCode.MEMBER_ID_REQUIRED, member_id)  # KIP-394, as a classic group does
        try:
            subscription = decode_subscription(protocols[0][1])
        except MalformedProtocol:
            return fail(INCONSISTENT_GROUP_PROTOCOL)
        out = Output()
        existing = cg.static_member(instance_id)
        if instance_id is not None and not unknown:
            if existing is None:
                return fail(ErrorCode.UNKNOWN_MEMBER_ID)
            if existing.member_id != member_id:
                return fail(ErrorCode.FENCED_INSTANCE_ID)
        replaced = None
        if existing is not None and existing.member_id != member_id:  # a static member restarted
            member = consumer.replace_static(cg, existing, member_id)
            replaced = existing
        else:
            member = cg.members.get(member_id) or ConsumerMember(member_id, instance_id)
        changed = member.member_id not in cg.members
        names = tuple(sorted(set(subscription["topics"])))
        # (a predecessor's server assignor stays, as Kafka's: a classic JoinGroup names none)
        changed |= names != member.topic_names or member.topic_regex is not None
        member.topic_names, member.topic_regex = names, None
        if subscription.get("rack_id") is not None:
            member.rack_id = subscription["rack_id"]
        member.instance_id = instance_id
        member.rebalance_timeout_ms = rebalance_ms
        member.client_id, member.client_host = client_id, client_host
        member.classic = cr.ClassicMetadata(session_ms, protocols)
        member.last_heartbeat_ms = now_ms
        cg.members[member.member_id] = member
        topics = consumer.subscribed_metadata(cg)
        bumped = changed or topics != cg.topics
        if bumped:
            cg.topics = topics
            consumer.bump(group, cg, now_ms)
        owned = self._partitions((t["topic"], p) for t in subscription.get("owned_partitions") or ()
                                 for p in t["partitions"])
        consumer.reconcile(cg, member, owned, now_ms)
        member.join_deadline_ms, member.sync_deadline_ms = None, now_ms + rebalance_ms
        if replaced is not None and replaced.classic is None and self._all_classic_can_downgrade(cg):
            # it replaced the last member using the consumer protocol: a classic group again
            self.downgrade(group, None, now_ms, out, rebalance=False)
            generation, protocol = group.generation, group.protocol_name
        else:
            consumer.persist(group, out, None if bumped else (member.member_id,))
            generation, protocol = member.epoch, protocols[0][0]
        # answered at once, with no leader: nobody assigns on the client side
        out.response = {"throttle_time_ms": 0, "error_code": 0, "generation_id": generation,
                        "protocol_type": CONSUMER_PROTOCOL_TYPE, "protocol_name": protocol,
                        "leader": "", "skip_assignment": False, "member_id": member.member_id, "members": []}
        return out

    @staticmethod
    def _supports(cg: ConsumerGroup, protocol_type: str, protocols) -> bool:
        """Kafka's ConsumerGroup.supportsClassicProtocols: the consumer protocol type, and a
        protocol every classic member supports."""
        if protocol_type != CONSUMER_PROTOCOL_TYPE:
            return False
        supported = [{n for n, _ in m.classic.protocols} for m in cg.members.values() if m.classic is not None]
        return any(all(name in names for names in supported) for name, _ in protocols)

    # ------------------------------------------------------------------ SyncGroup / Heartbeat / LeaveGroup

    def sync(self, group: Group, version: int, body: dict, now_ms: int) -> Output:
        cg = group.modern

        def answer(code, assignment=b""):
            return Output({"throttle_time_ms": 0, "error_code": int(code),
                           "protocol_type": body.get("protocol_type") if not code else None,
                           "protocol_name": body.get("protocol_name") if not code else None,
                           "assignment": assignment})

        member, code = self._member(cg, body["member_id"], body.get("group_instance_id"))
        if code:
            return answer(code)
        if body["generation_id"] != member.epoch:
            return answer(ErrorCode.ILLEGAL_GENERATION)
        first = member.classic.protocols[0]
        if body.get("protocol_type") not in (None, CONSUMER_PROTOCOL_TYPE) or \
                body.get("protocol_name") not in (None, first[0]):
            return answer(INCONSISTENT_GROUP_PROTOCOL)
        if cg.group_epoch > member.epoch and member.state != UNREVOKED:
            self._told_to_rejoin(member, now_ms)
            return answer(ErrorCode.REBALANCE_IN_PROGRESS)
        member.sync_deadline_ms, member.last_heartbeat_ms = None, now_ms
        return answer(0, encode_assignment(member.assigned, self._names(), protocol_version(first[1])))

    def heartbeat(self, group: Group, version: int, body: dict, now_ms: int) -> dict:
        cg = group.modern
        member, code = self._member(cg, body["member_id"], body.get("group_instance_id"))
        if not code and body["generation_id"] != member.epoch:
            code = ErrorCode.ILLEGAL_GENERATION
        if not code:
            member.last_heartbeat_ms = now_ms
            if self._must_rejoin(cg, member):
                self._told_to_rejoin(member, now_ms)
                code = ErrorCode.REBALANCE_IN_PROGRESS
        return {"throttle_time_ms": 0, "error_code": int(code)}

    def leave(self, group: Group, version: int, body: dict, now_ms: int) -> Output:
        out = Output()
        leaving = leaving_members(version, body)
        codes = []
        for item in leaving:
            cg = group.modern
            member_id, instance_id = item["member_id"] or "", item.get("group_instance_id")
            if cg is None:  # an earlier member's removal downgraded the group: the classic way
                classic = self.membership.leave_group(3, {"group_id": group.group_id, "members": [item]}, now_ms)
                out.writes.extend(classic.writes)
                out.completions.extend(classic.completions)
                answered = classic.response["members"] or [classic.response]
                codes.append(answered[0]["error_code"])
                continue
            if instance_id is not None:
                member = cg.static_member(instance_id)
                code = ErrorCode.UNKNOWN_MEMBER_ID if member is None else (
                    ErrorCode.FENCED_INSTANCE_ID if member_id and member_id != member.member_id else 0)
            else:
                member = cg.members.get(member_id)
                code = 0 if member is not None else ErrorCode.UNKNOWN_MEMBER_ID
            if not code:  # (a member of either protocol: Kafka 4.1's admin removes members so)
                self.consumer.remove(group, member, now_ms, out)
            codes.append(code)
        out.response = leave_response(version, 0, leaving, codes)
        return out

    # ------------------------------------------------------------------ upgrade

    def can_upgrade(self, group: Group) -> bool:
        return (self.config.upgrade_enabled and group.protocol_type == CONSUMER_PROTOCOL_TYPE
                and len(group.members) <= self.config.consumer_max_size)

    def upgrade(self, group: Group, now_ms: int, out: Output) -> None:
        """The classic ``group`` (with members) becomes a consumer group, each member keeping
        the partitions of its last assignment (the caller writes the classic group's
        tombstone).  Raises HeartbeatError if a member's embedded protocol does not parse (the
        group stays classic)."""
        cg = ConsumerGroup(group_epoch=group.generation, assignment_epoch=group.generation,
                           assignor=self.config.consumer_assignors[0])
        converted = []
        try:
            for m in group.members.values():
                subscription = decode_subscription(m.metadata_for(group.protocol_name or m.protocols[0][0]))
                assigned = self._partitions(decode_assignment(m.assignment))
                converted.append((ConsumerMember(
                    m.member_id, m.group_instance_id, subscription.get("rack_id"), m.client_id, m.client_host,
                    m.rebalance_timeout_ms, tuple(sorted(set(subscription["topics"]))), epoch=group.generation,
                    previous_epoch=group.generation, state=STABLE, last_heartbeat_ms=now_ms,
                    classic=cr.ClassicMetadata(m.session_timeout_ms, tuple(m.protocols))), assigned))
        except MalformedProtocol:
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Cannot upgrade the classic group {group.group_id} "
                                 "to consumer group because the embedded consumer protocol is malformed.") from None
        answer_parked(group, ErrorCode.REBALANCE_IN_PROGRESS, out)
        for member, assigned in converted:
            owned = frozenset(p for p in assigned if p not in cg.owners)  # (a partition claimed twice: once)
            self.consumer.set_partitions(cg, member, owned, frozenset())
            cg.members[member.member_id] = member
            cg.target[member.member_id] = owned
        cg.topics = self.consumer.subscribed_metadata(cg)
        group.members, group.static_members, group.pending_members = {}, {}, {}
        group.leader_id, group.protocol_name, group.subscribed_topics = None, None, None
        group.join_deadline_ms, group.in_initial_delay = None, False
        group.state = S.EMPTY  # (the classic fields of a consumer group are an Empty group's)
        group.modern, group.protocol_type = cg, CONSUMER_PROTOCOL_TYPE
        log.info("Converted the classic group %s to a consumer group (%d members)", group.group_id,
                 len(cg.members))

    # ------------------------------------------------------------------ downgrade

    def can_downgrade(self, cg: ConsumerGroup, leaving: ConsumerMember) -> bool:
        """Whether ``leaving`` is the last member using the consumer protocol, with classic
        members left that a classic group can hold."""
        return leaving.classic is None and self._all_classic_can_downgrade(cg, leaving.member_id)

    def _all_classic_can_downgrade(self, cg: ConsumerGroup, leaving_id: str | None = None) -> bool:
        """Whether the members but ``leaving_id`` all use the classic protocol, share a
        protocol, and fit a classic group (the policy allowing)."""
        others = [m for m in cg.members.values() if m.member_id != leaving_id]
        if not others or any(m.classic is None for m in others):
            return False
        common = set.intersection(*({n for n, _ in m.classic.protocols} for m in others))
        return bool(common) and self.config.downgrade_enabled and len(others) <= self.config.max_size

    def downgrade(self, group: Group, leaving: ConsumerMember | None, now_ms: int, out: Output, *,
                  rebalance: bool = True) -> None:
        """``group`` becomes a classic group of its other (classic) members, which rebalance
        (unless a static member's replacement brought it about: then it stays Stable, the new
        member with its predecessor's assignment, as Kafka does)."""
        cg = group.modern
        names = self._names()
        records = tombstones(group)
        group.modern = None
        group.protocol_type, group.generation = CONSUMER_PROTOCOL_TYPE, cg.group_epoch
        group.members, group.static_members, group.pending_members, group.leader_id = {}, {}, {}, None
        for m in cg.members.values():
            if leaving is not None and m.member_id == leaving.member_id:
                continue
            member = Member(m.member_id, m.instance_id, m.client_id, m.client_host, m.classic.session_timeout_ms,
                            m.rebalance_timeout_ms, CONSUMER_PROTOCOL_TYPE, list(m.classic.protocols),
                            last_heartbeat_ms=now_ms)
            group.add(member)
        group.protocol_name = group.select_protocol()
        for member in group.members.values():
            version = protocol_version(member.metadata_for(group.protocol_name))
            member.assignment = encode_assignment(cg.target.get(member.member_id, frozenset()), names, version)
        group.subscribed_topics = group.compute_subscribed_topics()
        group.state, group.state_timestamp_ms = S.STABLE, now_ms
        log.info("Converted the consumer group %s to a classic group (%d members)", group.group_id,
                 len(group.members))
        out.writes.append(Write(group.partition, group.group_id, records))
        group_write(group, out)
        if rebalance:
            self.membership.prepare_rebalance(group, now_ms, out)
