"""KIP-848's consumer group protocol, the "consumer" part of the coordinator core (sans-IO):
ConsumerGroupHeartbeat and ConsumerGroupDescribe, with Kafka's member epochs.

Theory of operation
-------------------
A group's **epoch** is bumped whenever a member joins or leaves, a subscription or the
server assignor it asks for changes, or the subscribed topics change (created, deleted,
partitions added, a regex matching a new topic).  Each bump recomputes the **target
assignment** at once with the server-side assignor (:mod:`broker.group.assignors`), so the
assignment epoch follows the group epoch.

Each member then **reconciles** towards its target on its own heartbeats, as Kafka's
``CurrentAssignmentBuilder`` does:

* partitions it must give up are revoked first: it stays at its epoch (UNREVOKED) and is
  sent only the partitions it keeps, until a heartbeat shows it no longer owns the others;
* partitions it must take are handed over only once no other member owns them
  (UNRELEASED until then), so no partition is owned by two members of one epoch;
* once nothing is left to revoke, it moves to the target epoch.

A member that does not heartbeat within ``group.consumer.session.timeout.ms``, or does not
revoke within its rebalance timeout, is removed and its partitions freed.  OffsetCommit from
a member must carry its current epoch (STALE_MEMBER_EPOCH otherwise).

Group state lives on ``Group.modern`` (None for classic groups).  An Empty classic group
becomes a consumer group on a member's first heartbeat, and an empty consumer group a
classic one on a JoinGroup, keeping their committed offsets.  Groups with members change
kind too, as ``group.consumer.migration.policy`` allows (:mod:`broker.group.classic_members`:
classic members inside a consumer group, the online upgrade and downgrade).  Every change is
written to ``__consumer_offsets`` in Kafka's records (:mod:`broker.group.consumer_records`) before its
answer is released, so a coordinator that takes over the partition carries on with the same
members, epochs and assignments (each member's session restarting there).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import re2

from broker.group import consumer_records as cr
from broker.group.assignors import ASSIGNORS, Partition
from broker.group.config import GroupConfig
from broker.group.output import Output, Write
from broker.group.records import group_record
from broker.group.state import CONSUMER_PROTOCOL_TYPE, Group, GroupState
from broker.group.table import GroupTable
from kraft.protocol.error_codes import ErrorCode

STABLE, UNREVOKED, UNRELEASED = "stable", "unrevoked_partitions", "unreleased_partitions"
LEAVE_EPOCH = -1  # a member leaves
STATIC_LEAVE_EPOCH = -2  # a static member leaves for now and will rejoin with its instance id
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
# Set on a ConsumerGroupHeartbeat's body by the ACL check (broker.authorization) when ACLs are
# on: topic name -> whether the caller may DESCRIBE it.  A regex takes in only those topics
# (Kafka 4's KAFKA-18813), resolved in each member's own heartbeats.
DESCRIBABLE = "kraft.describable"
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad pattern is the client's error, answered, not logged


def _answer(member_id: str | None, epoch: int, interval_ms: int, assignment: dict | None = None,
            code: int = 0, message: str | None = None) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": message, "member_id": member_id,
            "member_epoch": epoch, "heartbeat_interval_ms": interval_ms, "assignment": assignment}


class HeartbeatError(Exception):
    def __init__(self, code: int, message: str | None = None):
        super().__init__(message)
        self.code, self.message = code, message


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300000
    topic_names: tuple[str, ...] = ()
    topic_regex: str | None = None
    server_assignor: str | None = None
    epoch: int = 0
    previous_epoch: int = 0
    state: str = STABLE
    assigned: frozenset[Partition] = frozenset()
    revoking: frozenset[Partition] = frozenset()
    last_heartbeat_ms: int = 0
    revoke_deadline_ms: int | None = None
    # A member that uses JoinGroup, SyncGroup and Heartbeat (:mod:`broker.group.classic_members`)
    classic: cr.ClassicMetadata | None = None
    join_deadline_ms: int | None = None  # told to rejoin: removed unless it does by then
    sync_deadline_ms: int | None = None  # joined: removed unless its SyncGroup comes by then

    def session_timeout_ms(self, consumer_session_timeout_ms: int) -> int:
        return consumer_session_timeout_ms if self.classic is None else self.classic.session_timeout_ms


@dataclass
class ConsumerGroup:
    """KIP-848 state of one group (its offsets stay on the :class:`Group`)."""

    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = ""
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, frozenset[Partition]] = field(default_factory=dict)
    owners: dict[Partition, str] = field(default_factory=dict)  # assigned or being revoked, by whom
    topics: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)  # the subscribed ones
    persisted: dict[bytes, bytes] = field(default_factory=dict)  # its records' keys -> values written
    gone: set[str] = field(default_factory=set)  # members removed since the last write
    # (the topics mapping, {(topic names, regex): the topics that subscription takes in})
    resolved_cache: tuple = (None, {})
    # with ACLs on: member id -> (the topics mapping, its regex, the matches it may DESCRIBE, when)
    acl_matches: dict[str, tuple] = field(default_factory=dict)

    def static_member(self, instance_id: str | None) -> ConsumerMember | None:
        if instance_id is None:
            return None
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)

    def state_name(self) -> str:
        """Kafka's ConsumerGroupState: Empty, Assigning, Reconciling or Stable."""
        if not self.members:
            return "Empty"
        if self.group_epoch != self.assignment_epoch:
            return "Assigning"
        if any(m.epoch != self.assignment_epoch or m.state != STABLE for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def subscribed_topics(self) -> frozenset[str]:
        return frozenset(self.topics)


def _partitions(wire: list | None) -> frozenset[Partition] | None:
    if wire is None:
        return None
    return frozenset((t["topic_id"], p) for t in wire for p in t["partitions"])


def wire_partitions(partitions: frozenset[Partition], names: Mapping[uuid.UUID, str] | None = None) -> list:
    """A TopicPartitions list; with ``names``, each entry named too (ConsumerGroupDescribe)."""
    if names is None:
        return [{"topic_id": t, "partitions": ps} for t, ps in cr.by_topic(partitions)]
    return [{"topic_id": t, "topic_name": names.get(t, ""), "partitions": ps} for t, ps in cr.by_topic(partitions)]


class ConsumerProtocol:
    """ConsumerGroupHeartbeat, ConsumerGroupDescribe and member expiry over ``table``.

    Args:
        table: the coordinator's groups.
        config: the ``group.consumer.*`` settings.
        topics: ``() -> {name: topic}``, each topic with ``.id`` and ``.partitions`` (the
            broker's metadata image).
        new_member_id: a member id for a v0 join that brings none.
    """

    def __init__(self, table: GroupTable, config: GroupConfig, topics: Callable[[], Mapping],
                 new_member_id: Callable[[], str], *, group_configs: Callable[[str], Mapping] | None = None):
        self.table = table
        self.config = config
        self.group_configs = group_configs or (lambda group_id: {})
        self.topics = topics
        self.new_member_id = new_member_id
        self._regex_cache: dict[str, re2._Regexp] = {}
        # broker.group.classic_members.ClassicMembers, when the coordinator has one: converts
        # groups with members between the two protocols
        self.migration = None

    # ------------------------------------------------------------------ ConsumerGroupHeartbeat

    def heartbeat(self, version: int, body: dict, now_ms: int, *, client_id: str = "",
                  client_host: str = "") -> Output:
        """The answer, after the writes of the changes it made."""
        out = Output()
        try:
            out.response = self._heartbeat(body, now_ms, client_id, client_host, out)
        except HeartbeatError as e:
            out.response = _answer(None, 0, 0, code=e.code, message=e.message)
        return out

    def _validate(self, body: dict) -> None:
        def refuse(message):
            raise HeartbeatError(ErrorCode.INVALID_REQUEST, message)
        epoch = body["member_epoch"]
        if not body["group_id"]:
            refuse("GroupId can't be empty.")
        if body.get("instance_id") == "":
            refuse("InstanceId can't be empty.")
        if body.get("rack_id") == "":
            refuse("RackId can't be empty.")
        if epoch > 0 or epoch == LEAVE_EPOCH:
            if not body["member_id"]:
                refuse("MemberId can't be empty.")
        elif epoch == 0:
            if body.get("rebalance_timeout_ms", -1) == -1:
                refuse("RebalanceTimeoutMs must be provided in first request.")
            if body.get("topic_partitions") is None or body["topic_partitions"]:
                refuse("TopicPartitions must be empty when (re-)joining.")
            # (an empty list is a subscription: Kafka 4's consumer joins with one while a
            # java.util.regex.Pattern it resolves itself matches nothing yet)
            if body.get("subscribed_topic_names") is None and body.get("subscribed_topic_regex") is None:
                refuse("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif epoch == STATIC_LEAVE_EPOCH:
            if not body["member_id"]:
                refuse("MemberId can't be empty.")
            if body.get("instance_id") is None:
                refuse("InstanceId can't be null.")
        else:
            refuse("MemberEpoch is invalid.")
        assignor = body.get("server_assignor")
        if assignor is not None and assignor not in self.config.consumer_assignors:
            raise HeartbeatError(ErrorCode.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {assignor} is not supported. "
                                 f"Supported assignors: {', '.join(self.config.consumer_assignors)}.")
        regex = body.get("subscribed_topic_regex")
        if regex is not None:
            self._compile(regex)

    def _compile(self, regex: str):
        """The compiled RE2 pattern (Kafka's RE2/J syntax: no backreferences or lookaround)."""
        pattern = self._regex_cache.get(regex)
        if pattern is None:
            try:
                pattern = re2.compile(regex, _RE2_OPTIONS)
            except re2.error as e:
                why = e.args[0].decode(errors="replace") if e.args and isinstance(e.args[0], bytes) else str(e)
                raise HeartbeatError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                                     f"SubscribedTopicRegex {regex} is invalid: {why}") from None
            if len(self._regex_cache) > 1000:
                self._regex_cache.clear()
            self._regex_cache[regex] = pattern
        return pattern

    def _group(self, gid: str, epoch: int, now_ms: int, out: Output) -> tuple[Group, ConsumerGroup]:
        if code := self.table.coordinator_error(gid):
            raise HeartbeatError(code)
        group = self.table.groups.get(gid)
        if group is None or group.is_(GroupState.DEAD):
            if epoch != 0:
                raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {gid} not found.")
            group = self.table.groups[gid] = self.table.new_group(gid, now_ms)
        if group.modern is None:
            if group.members or group.pending_members:
                if epoch != 0 or self.migration is None or not self.migration.can_upgrade(group):
                    raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group.")
                self.migration.upgrade(group, now_ms, out)
            else:
                group.modern = ConsumerGroup(assignor=self.config.consumer_assignors[0])
                group.protocol_type = CONSUMER_PROTOCOL_TYPE
            out.writes.append(Write(group.partition, gid, (group_record(gid, None),)))  # no classic group left
        return group, group.modern

    def _heartbeat(self, body: dict, now_ms: int, client_id: str, client_host: str, out: Output) -> dict:
        self._validate(body)
        gid, member_id, epoch = body["group_id"], body["member_id"], body["member_epoch"]
        instance_id = body.get("instance_id")
        group, cg = self._group(gid, epoch, now_ms, out)
        if epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(group, cg, member_id, instance_id, epoch, now_ms, out)
        owned = _partitions(body.get("topic_partitions"))
        if epoch == 0:
            if len(cg.members) >= self.config.consumer_max_size and member_id not in cg.members \
                    and cg.static_member(instance_id) is None:
                raise HeartbeatError(ErrorCode.GROUP_MAX_SIZE_REACHED, "The consumer group has reached its "
                                     f"maximum capacity of {self.config.consumer_max_size} members.")
            member = self._join(cg, member_id or self.new_member_id(), instance_id)
        else:
            member = self._known_member(cg, member_id, instance_id)
            self._check_epoch(member, epoch, owned)
        before = member.assigned
        changed = member.member_id not in cg.members
        changed |= self._update(member, body)
        member.client_id, member.client_host, member.last_heartbeat_ms = client_id, client_host, now_ms
        cg.members[member.member_id] = member
        if self.config.acls and member.topic_regex is not None:
            changed |= self._match_describable(cg, member, body.get(DESCRIBABLE), now_ms)
        topics = self.subscribed_metadata(cg)
        bumped = changed or topics != cg.topics
        if bumped:
            cg.topics = topics
            self.bump(group, cg, now_ms)
        self.reconcile(cg, member, owned, now_ms)
        self.persist(group, out, None if bumped else (member.member_id,))
        full = epoch == 0 or (body.get("rebalance_timeout_ms", -1) != -1 and owned is not None and (
            body.get("subscribed_topic_names") is not None or body.get("subscribed_topic_regex") is not None))
        assignment = None
        if full or member.assigned != before:
            assignment = {"topic_partitions": wire_partitions(member.assigned)}
        return _answer(member.member_id, member.epoch, self.heartbeat_interval_ms(group.group_id), assignment)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        """consumer.heartbeat.interval.ms of ``group_id``: its own config, else the broker's."""
        return self._group_setting(group_id, "consumer.heartbeat.interval.ms",
                                   self.config.consumer_heartbeat_interval_ms)

    def session_timeout_ms(self, group_id: str) -> int:
        """consumer.session.timeout.ms of ``group_id``: its own config, else the broker's.  Read
        at each expiry check, so a change applies to the group's members at once."""
        return self._group_setting(group_id, "consumer.session.timeout.ms", self.config.consumer_session_timeout_ms)

    def _group_setting(self, group_id: str, key: str, default: int) -> int:
        value = self.group_configs(group_id).get(key)
        try:
            return default if value is None else int(value)
        except ValueError:  # the controller checked it: only a hand-written record gets here
            return default

    def _join(self, cg: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
        """The member for a heartbeat with epoch 0: a new one, a static member taking over its
        instance id's assignment, or a member that lost its state starting over."""
        existing = cg.static_member(instance_id)
        if existing is not None:
            # (a classic member's instance id is taken over at once: a rolling upgrade)
            if existing.classic is None and existing.epoch != STATIC_LEAVE_EPOCH and existing.member_id != member_id:
                raise HeartbeatError(ErrorCode.UNRELEASED_INSTANCE_ID, f"Static member {member_id} with instance "
                                     f"id {instance_id} cannot join the group because the instance id is owned "
                                     f"by {existing.member_id} member.")
            return self.replace_static(cg, existing, member_id)
        old = cg.members.pop(member_id, None)
        if old is not None:  # rejoins having lost its partitions: free them
            self._release(cg, old)
        return ConsumerMember(member_id, instance_id)

    def replace_static(self, cg: ConsumerGroup, existing: ConsumerMember, member_id: str) -> ConsumerMember:
        """A new member (at epoch 0) for ``existing``'s instance id, taking over its partitions
        and target; ``existing`` is gone.  The new member is in the group at once: a
        replacement with the same subscription does not bump the group epoch (as Kafka's)."""
        member = ConsumerMember(member_id, existing.instance_id, rebalance_timeout_ms=existing.rebalance_timeout_ms,
                                topic_names=existing.topic_names, topic_regex=existing.topic_regex,
                                server_assignor=existing.server_assignor, rack_id=existing.rack_id)
        self.set_partitions(cg, member, existing.assigned, existing.revoking)  # owned by it from now on
        cg.target[member_id] = cg.target.pop(existing.member_id, frozenset())
        if existing.member_id != member_id:
            del cg.members[existing.member_id]
            cg.acl_matches.pop(existing.member_id, None)
            cg.gone.add(existing.member_id)
        cg.members[member_id] = member
        return member

    def _known_member(self, cg: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
        if instance_id is not None:
            member = cg.static_member(instance_id)
            if member is None:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
            if member.member_id != member_id:
                raise HeartbeatError(ErrorCode.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                                     f"{instance_id} was fenced by member {member.member_id}.")
            return member
        member = cg.members.get(member_id)
        if member is None:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of the group.")
        return member

    @staticmethod
    def _check_epoch(member: ConsumerMember, epoch: int, owned: frozenset[Partition] | None) -> None:
        """Kafka's rule: an epoch ahead is fenced; one behind only if it is the previous epoch
        and the member owns no more than it is assigned (the bumping answer was lost)."""
        if epoch > member.epoch or (epoch < member.epoch and (
                epoch != member.previous_epoch or owned is None or not owned <= member.assigned)):
            raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH, f"The consumer group member has a "
                                 f"{'greater' if epoch > member.epoch else 'smaller'} member epoch ({epoch}) "
                                 f"than the one known by the group coordinator ({member.epoch}). The member "
                                 f"must abandon all its partitions and rejoin.")

    @staticmethod
    def _update(member: ConsumerMember, body: dict) -> bool:
        """Apply the fields the heartbeat set; whether the subscription or assignor changed."""
        changed = False
        if body.get("instance_id") is not None:
            member.instance_id = body["instance_id"]
        if body.get("rack_id") is not None:
            member.rack_id = body["rack_id"]
        if body.get("rebalance_timeout_ms", -1) != -1:
            member.rebalance_timeout_ms = body["rebalance_timeout_ms"]
        if body.get("subscribed_topic_names") is not None:
            names = tuple(sorted(set(body["subscribed_topic_names"])))
            changed |= names != member.topic_names
            member.topic_names = names
        if body.get("subscribed_topic_regex") is not None:
            regex = body["subscribed_topic_regex"] or None
            changed |= regex != member.topic_regex
            member.topic_regex = regex
        if body.get("server_assignor") is not None:
            changed |= body["server_assignor"] != member.server_assignor
            member.server_assignor = body["server_assignor"]
        return changed

    def _leave(self, group: Group, cg: ConsumerGroup, member_id: str, instance_id: str | None,
               epoch: int, now_ms: int, out: Output) -> dict:
        member = self._known_member(cg, member_id, instance_id)
        if epoch == STATIC_LEAVE_EPOCH:
            # keeps its assignment for a session timeout, for its instance id's next member
            member.epoch, member.last_heartbeat_ms = STATIC_LEAVE_EPOCH, now_ms
            self.persist(group, out, (member.member_id,))
        else:
            self.remove(group, member, now_ms, out)
        return _answer(member_id, epoch, 0)

    # ------------------------------------------------------------------ the target assignment

    def _resolve(self, names: tuple[str, ...], regex: str | None, topics: Mapping) -> frozenset[str]:
        found = {n for n in names if n in topics}
        if regex is not None:
            pattern = self._compile(regex)
            found.update(n for n in topics if n not in INTERNAL_TOPICS and pattern.fullmatch(n))
        return frozenset(found)

    def _match_describable(self, cg: ConsumerGroup, member: ConsumerMember, describable, now_ms: int) -> bool:
        """With ACLs on, ``member``'s regex matches only the topics its own heartbeat may
        DESCRIBE: matched again when the topics or its regex change, and at least every
        ``group.consumer.regex.refresh.interval.ms`` (so ACL changes count too).  Whether what
        it takes in changed (other members may take in the same topics: the group's topics
        alone would not show it)."""
        topics = self.topics()
        known = cg.acl_matches.get(member.member_id)
        if describable is None or (known is not None and known[0] is topics and known[1] == member.topic_regex
                                   and now_ms < known[3] + self.config.consumer_regex_refresh_interval_ms):
            return False
        matches = frozenset(n for n in self._resolve((), member.topic_regex, topics) if describable(n))
        cg.acl_matches[member.member_id] = (topics, member.topic_regex, matches, now_ms)
        return known is None or known[2] != matches

    def _key(self, m: ConsumerMember) -> tuple:
        """The subscription ``m`` shares with others, or (ACLs on, a regex) its own."""
        if self.config.acls and m.topic_regex is not None:
            return m.topic_names, m.topic_regex, m.member_id
        return m.topic_names, m.topic_regex

    def _subscriptions(self, cg: ConsumerGroup) -> dict[tuple, frozenset[str]]:
        """Each distinct subscription of the members (:meth:`_key`) and the topics it takes in:
        resolved once per subscription and kept while the topics stay the same (a regex is
        matched against every topic's name).  With ACLs on, a member's regex takes in what its
        own last heartbeat found it may DESCRIBE (nothing before that heartbeat, e.g. after a
        fail-over), of the topics that still exist."""
        topics = self.topics()
        cached_topics, cached = cg.resolved_cache
        if cached_topics is not topics:
            cached = {}
        resolved = {}
        for m in cg.members.values():
            key = self._key(m)
            if key in resolved:
                continue
            if len(key) == 3:
                known = cg.acl_matches.get(m.member_id)
                matches = known[2] if known is not None and known[1] == m.topic_regex else frozenset()
                resolved[key] = self._resolve(m.topic_names, None, topics) | (matches & topics.keys())
            else:
                resolved[key] = cached[key] if key in cached else self._resolve(*key, topics)
        cg.resolved_cache = (topics, resolved)
        return resolved

    def subscribed_metadata(self, cg: ConsumerGroup) -> dict[str, tuple[uuid.UUID, int]]:
        """The topics the members' subscriptions name or match, with their ids and partition counts."""
        topics = self.topics()
        names = frozenset().union(*self._subscriptions(cg).values())
        return {n: (topics[n].id, len(topics[n].partitions)) for n in sorted(names)}

    def _choose_assignor(self, cg: ConsumerGroup) -> str:
        """The server assignor most members ask for, else the first configured."""
        votes: dict[str, int] = {}
        for m in cg.members.values():
            if m.server_assignor is not None:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        return max(votes, key=lambda a: (votes[a], a)) if votes else self.config.consumer_assignors[0]

    def bump(self, group: Group, cg: ConsumerGroup, now_ms: int) -> None:
        """A new group epoch and its target assignment."""
        cg.group_epoch += 1
        if not cg.members:  # nothing to assign: the assignment epoch stays, as Kafka's does
            cg.target = {}
            group.state_timestamp_ms = now_ms  # offsets retention counts from here, as for an Empty group
            return
        cg.assignor = self._choose_assignor(cg)
        resolved = self._subscriptions(cg)  # (cg.topics was made from them)
        subscriptions = {m.member_id: resolved[self._key(m)] for m in cg.members.values()}
        cg.target = ASSIGNORS[cg.assignor](subscriptions, cg.topics, cg.target,
                                           {m.member_id: m.instance_id for m in cg.members.values()})
        cg.assignment_epoch = cg.group_epoch

    # ------------------------------------------------------------------ reconciliation

    def reconcile(self, cg: ConsumerGroup, member: ConsumerMember, owned: frozenset[Partition] | None,
                  now_ms: int) -> None:
        """One step of Kafka's CurrentAssignmentBuilder for ``member``."""
        def owns_any(partitions):
            return owned is None or bool(owned & partitions)

        if member.state == STABLE and member.epoch == cg.assignment_epoch:
            return
        if member.state == UNREVOKED:
            if owns_any(member.revoking):
                return
            next_epoch = member.epoch + 1
        else:
            next_epoch = member.epoch
        target = cg.target.get(member.member_id, frozenset())
        keep = member.assigned & target
        revoke = member.assigned - keep
        wanted = target - keep
        unreleased = frozenset(p for p in wanted if cg.owners.get(p, member.member_id) != member.member_id)
        if self.config.unsafe_assign_before_revocation:
            unreleased = frozenset()
        wanted -= unreleased
        if revoke and owns_any(revoke):
            state, epoch, assigned, revoking = UNREVOKED, next_epoch, keep, revoke
        else:
            state = UNRELEASED if unreleased else STABLE
            epoch, assigned, revoking = cg.assignment_epoch, keep | wanted, frozenset()
        if state != UNREVOKED:
            member.revoke_deadline_ms = None
        elif member.state != UNREVOKED or revoking != member.revoking:  # a new revocation: its own time
            member.revoke_deadline_ms = now_ms + member.rebalance_timeout_ms
        self.set_partitions(cg, member, assigned, revoking)
        if epoch != member.epoch:
            member.previous_epoch, member.epoch = member.epoch, epoch
        member.state = state

    @staticmethod
    def set_partitions(cg: ConsumerGroup, member: ConsumerMember, assigned: frozenset[Partition],
                       revoking: frozenset[Partition]) -> None:
        for p in (member.assigned | member.revoking) - (assigned | revoking):
            if cg.owners.get(p) == member.member_id:
                del cg.owners[p]
        for p in assigned | revoking:
            cg.owners[p] = member.member_id
        member.assigned, member.revoking = assigned, revoking

    def _release(self, cg: ConsumerGroup, member: ConsumerMember) -> None:
        self.set_partitions(cg, member, frozenset(), frozenset())

    def _drop(self, cg: ConsumerGroup, member: ConsumerMember) -> None:
        self._release(cg, member)
        cg.members.pop(member.member_id, None)
        cg.target.pop(member.member_id, None)
        cg.acl_matches.pop(member.member_id, None)
        cg.gone.add(member.member_id)

    def remove(self, group: Group, member: ConsumerMember, now_ms: int, out: Output) -> None:
        """``member`` left or was fenced: its partitions are free and the group rebalances (or,
        the last member using this protocol gone, it becomes a classic group)."""
        cg = group.modern
        if self.migration is not None and self.migration.can_downgrade(cg, member):
            self.migration.downgrade(group, member, now_ms, out)
            return
        self._drop(cg, member)
        cg.topics = self.subscribed_metadata(cg)
        self.bump(group, cg, now_ms)
        self.persist(group, out, None)

    # ------------------------------------------------------------------ persistence

    def persist(self, group: Group, out: Output, members: tuple[str, ...] | None) -> None:
        """Write what changed: the group's epochs, the records of ``members`` (None: all of
        them; all too after a failed write), tombstones of the members gone."""
        cg, gid = group.modern, group.group_id
        want: dict[cr.ConsumerKey, object] = {cr.ConsumerKey(cr.GROUP_EPOCH, gid): cg.group_epoch,
                                              cr.ConsumerKey(cr.TARGET_EPOCH, gid): cg.assignment_epoch}
        if not cg.persisted:
            members = None
        for m in cg.members.values() if members is None else (cg.members[i] for i in members if i in cg.members):
            want[cr.ConsumerKey(cr.MEMBER_METADATA, gid, m.member_id)] = cr.MemberMetadata(
                m.instance_id, m.rack_id, m.client_id, m.client_host, m.topic_names, m.topic_regex,
                m.rebalance_timeout_ms, m.server_assignor, m.classic)
            want[cr.ConsumerKey(cr.TARGET_MEMBER, gid, m.member_id)] = cg.target.get(m.member_id, frozenset())
            want[cr.ConsumerKey(cr.CURRENT_ASSIGNMENT, gid, m.member_id)] = cr.CurrentAssignment(
                m.epoch, m.previous_epoch, m.state, m.assigned, m.revoking)
        records = []
        for member_id in sorted(cg.gone - cg.members.keys()):
            for kind in (cr.MEMBER_METADATA, cr.TARGET_MEMBER, cr.CURRENT_ASSIGNMENT):
                key = cr.encode_key(cr.ConsumerKey(kind, gid, member_id))
                if cg.persisted.pop(key, None) is not None:
                    records.append((key, None))
        cg.gone.clear()
        for key, value in want.items():
            key_bytes, value_bytes = cr.record(key, value)
            if cg.persisted.get(key_bytes) != value_bytes:
                cg.persisted[key_bytes] = value_bytes
                records.append((key_bytes, value_bytes))
        if records:
            out.writes.append(Write(group.partition, gid, tuple(records)))

    def write_failed(self, group: Group) -> None:
        """A write of ``group`` did not commit: the next one rewrites all its records."""
        group.modern.persisted.clear()

    def restore(self, group: Group, loaded: cr.LoadedConsumerGroup, now_ms: int) -> None:
        """``group`` as its records left it; every member's session starts now."""
        cg = ConsumerGroup(group_epoch=loaded.group_epoch, assignment_epoch=loaded.assignment_epoch)
        for member_id, meta in loaded.members.items():
            m = ConsumerMember(member_id, meta.instance_id, meta.rack_id, meta.client_id, meta.client_host,
                               meta.rebalance_timeout_ms, meta.topic_names, meta.topic_regex,
                               meta.server_assignor, last_heartbeat_ms=now_ms, classic=meta.classic)
            current = loaded.current.get(member_id)
            if current is not None:
                m.epoch, m.previous_epoch, m.state = current.epoch, current.previous_epoch, current.state
                self.set_partitions(cg, m, current.assigned, current.revoking)
                if m.state == UNREVOKED:
                    m.revoke_deadline_ms = now_ms + m.rebalance_timeout_ms
            cg.members[member_id] = m
        cg.target = {m: ps for m, ps in loaded.targets.items() if m in cg.members}
        cg.persisted = dict(loaded.records)
        cg.assignor = self._choose_assignor(cg)
        cg.topics = self.subscribed_metadata(cg)
        group.modern, group.protocol_type = cg, CONSUMER_PROTOCOL_TYPE

    # ------------------------------------------------------------------ time

    def expire(self, group: Group, now_ms: int, out: Output) -> None:
        """Remove the members whose session ended or whose revocation (a classic member's
        rejoin or SyncGroup) took too long."""
        cg = group.modern
        session_ms = self.session_timeout_ms(group.group_id)
        for member in list(cg.members.values()):
            deadlines = (member.last_heartbeat_ms + member.session_timeout_ms(session_ms),
                         member.revoke_deadline_ms, member.join_deadline_ms, member.sync_deadline_ms)
            if any(d is not None and now_ms >= d for d in deadlines):
                self.remove(group, member, now_ms, out)
                if group.modern is not cg:  # it became a classic group
                    return

    # ------------------------------------------------------------------ ConsumerGroupDescribe

    def describe(self, version: int, body: dict) -> dict:
        groups = []
        for gid in body["group_ids"]:
            entry = {"error_code": 0, "error_message": None, "group_id": gid, "group_state": "",
                     "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
                     "authorized_operations": -2147483648}
            code = ErrorCode.INVALID_GROUP_ID if not gid else self.table.coordinator_error(gid)
            group = self.table.groups.get(gid)
            if code:
                entry["error_code"] = int(code)
            elif group is None or group.is_(GroupState.DEAD):
                entry.update(error_code=int(ErrorCode.GROUP_ID_NOT_FOUND), error_message=f"Group {gid} not found.")
            elif group.modern is None:
                entry.update(error_code=int(ErrorCode.GROUP_ID_NOT_FOUND),
                             error_message=f"Group {gid} is not a consumer group.")
            else:
                cg = group.modern
                names = {topic_id: name for name, (topic_id, _) in cg.topics.items()}
                entry.update(group_state=cg.state_name(), group_epoch=cg.group_epoch,
                             assignment_epoch=cg.assignment_epoch, assignor_name=cg.assignor)
                entry["members"] = [{
                    "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                    "member_epoch": m.epoch, "client_id": m.client_id, "client_host": m.client_host,
                    "subscribed_topic_names": list(m.topic_names), "subscribed_topic_regex": m.topic_regex or "",
                    "assignment": {"topic_partitions": wire_partitions(m.assigned, names)},
                    "target_assignment": {"topic_partitions": wire_partitions(
                        cg.target.get(m.member_id, frozenset()), names)},
                } for m in cg.members.values()]
            groups.append(entry)
        return {"throttle_time_ms": 0, "groups": groups}


def tombstones(group: Group) -> tuple:
    """The records deleting every key ``group``'s KIP-848 state wrote (it is deleted or
    becomes a classic group)."""
    cg = group.modern
    records = tuple((key, None) for key in sorted(cg.persisted))
    cg.persisted.clear()
    return records


def commit_error(cg: ConsumerGroup, member_id: str, epoch: int, version: int, transactional: bool) -> int:
    """Kafka's ConsumerGroup.validateOffsetCommit: a simple commit only while no member is
    left; a member's commit carries its current epoch (OffsetCommit v9+)."""
    if epoch < 0 and not cg.members:
        return ErrorCode.NONE
    member = cg.members.get(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if not transactional and version < 9 and member.classic is None:
        return ErrorCode.UNSUPPORTED_VERSION
    if epoch != member.epoch:  # (a classic member's generation is its member epoch)
        return ErrorCode.ILLEGAL_GENERATION if transactional or member.classic else ErrorCode.STALE_MEMBER_EPOCH
    return ErrorCode.NONE


def fetch_error(cg: ConsumerGroup, member_id: str | None, epoch: int) -> int:
    """Kafka's ConsumerGroup.validateOffsetFetch (OffsetFetch v9+ from a member)."""
    if member_id is None and epoch < 0:
        return ErrorCode.NONE
    member = cg.members.get(member_id or "")
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if epoch != member.epoch:
        return ErrorCode.ILLEGAL_GENERATION if member.classic else ErrorCode.STALE_MEMBER_EPOCH
    return ErrorCode.NONE
