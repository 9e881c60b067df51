"""JoinGroup, SyncGroup, Heartbeat and LeaveGroup: the membership part of the coordinator
core (sans-IO), over the coordinator's :class:`broker.group.table.GroupTable`.

Rebalance rules (Kafka's classic protocol): a join of a new member, a leave, an expired
session or a changed subscription (or any rejoin of the leader) moves a Stable or
CompletingRebalance group to PreparingRebalance.  The join phase ends when every member has
rejoined, when the rebalance timeout (the largest of the members') passes — members that did
not rejoin are dropped — or, for a group that was Empty, after ``group.initial.rebalance.delay.ms``,
extended by another delay while new members keep arriving, never past the rebalance timeout.
Then the generation advances, the protocol is chosen by vote, and the leader gets every
member's metadata; the leader's SyncGroup carries the assignments, which are persisted before
anyone is answered.
"""

from __future__ import annotations

import uuid
from random import Random

from broker.group.config import GroupConfig
from broker.group.output import Output, Write
from broker.group.records import GroupValue, MemberValue, group_record
from broker.group.state import Group, GroupState, Member
from broker.group.table import GroupTable
from kraft.protocol.error_codes import ErrorCode

# Kafka error codes the project's error table (taken from the spec's table) lacks.
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_SESSION_TIMEOUT = 26

S = GroupState

# ------------------------------------------------------------------ responses


def join_error(version: int, code: int, member_id: str = "") -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "generation_id": -1,
            "protocol_type": None, "protocol_name": None if version >= 7 else "",
            "leader": "", "skip_assignment": False, "member_id": member_id, "members": []}


def join_ok(version: int, group: Group, member: Member, *, with_members: bool,
            skip_assignment: bool = False) -> dict:
    members = []
    if with_members:
        members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                    "metadata": m.metadata_for(group.protocol_name)} for m in group.members.values()]
    return {"throttle_time_ms": 0, "error_code": 0, "generation_id": group.generation,
            "protocol_type": group.protocol_type,
            "protocol_name": group.protocol_name if group.protocol_name is not None or version >= 7 else "",
            "leader": group.leader_id or "", "skip_assignment": skip_assignment,
            "member_id": member.member_id, "members": members}


def sync_response(version: int, code: int, group: Group | None = None, assignment: bytes = b"") -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code),
            "protocol_type": group.protocol_type if group and code == 0 else None,
            "protocol_name": group.protocol_name if group and code == 0 else None,
            "assignment": assignment}


def leaving_members(version: int, body: dict) -> list[dict]:
    """The members a LeaveGroup names (v0-2: the one member id)."""
    if version < 3:
        return [{"member_id": body["member_id"], "group_instance_id": None}]
    return body["members"]


def leave_response(version: int, top: int, leaving: list[dict], codes: list[int]) -> dict:
    """LeaveGroup's answer: ``top`` for the request, or per member (v0-2: the one member's)."""
    if version < 3:
        top = top or (codes[0] if codes else 0)
    return {"throttle_time_ms": 0, "error_code": int(top), "members": [
        {"member_id": m["member_id"], "group_instance_id": m.get("group_instance_id"),
         "error_code": int(c)} for m, c in zip(leaving, codes)] if not top or version < 3 else []}


def finish_join(member: Member, out: Output, response: dict) -> None:
    if member.join_ticket is not None:
        out.completions.append((member.join_ticket, response))
        member.join_ticket = None


def finish_sync(member: Member, out: Output, response: dict) -> None:
    if member.sync_ticket is not None:
        out.completions.append((member.sync_ticket, response))
        member.sync_ticket = None


def answer_parked(group: Group, code: int, out: Output) -> None:
    """Every parked JoinGroup and SyncGroup of ``group`` gets ``code``."""
    for m in group.members.values():
        finish_join(m, out, join_error(m.join_version, code, m.member_id))
        finish_sync(m, out, sync_response(m.sync_version, code, group))


def member_error(group: Group | None, member_id: str, instance: str | None, generation: int) -> int:
    """The checks of a request from a group member (SyncGroup, Heartbeat, a member's
    OffsetCommit), in Kafka's order."""
    if group is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if group.is_(S.DEAD):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if group.static_member_fenced(member_id, instance):
        return ErrorCode.FENCED_INSTANCE_ID
    if member_id not in group.members:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if generation != group.generation:
        return ErrorCode.ILLEGAL_GENERATION
    return ErrorCode.NONE


def group_write(group: Group, out: Output) -> None:
    """Persist the group's metadata (members, generation, assignment) — or its tombstone."""
    if group.is_(S.DEAD):
        value = None
    else:
        members = tuple(
            MemberValue(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                        m.rebalance_timeout_ms, m.session_timeout_ms,
                        m.metadata_for(group.protocol_name), m.assignment)
            for m in group.members.values())
        value = GroupValue(group.protocol_type or "", group.generation, group.protocol_name,
                           group.leader_id, group.state_timestamp_ms, members)
    out.writes.append(Write(group.partition, group.group_id, (group_record(group.group_id, value),)))


class Membership:
    """The classic membership protocol over the groups of ``table``.

    Args:
        table: the coordinator's groups.
        config: the session timeout bounds, ``group.max.size`` and the initial rebalance delay.
        rng: source of member ids.
    """

    def __init__(self, table: GroupTable, config: GroupConfig, rng: Random):
        self.table = table
        self.config = config
        self.rng = rng
        self._next_ticket = 1

    def _ticket(self) -> int:
        """A parked request's ticket: its answer arrives later as a completion."""
        ticket = self._next_ticket
        self._next_ticket += 1
        return ticket

    def _new_member_id(self, prefix: str) -> str:
        return f"{prefix}-{uuid.UUID(int=self.rng.getrandbits(128), version=4)}"

    # ------------------------------------------------------------------ JoinGroup

    def join_group(self, version: int, body: dict, now_ms: int, *, client_id: str = "",
                   client_host: str = "") -> Output:
        gid, member_id = body["group_id"], body["member_id"] or ""
        instance = body.get("group_instance_id")
        protocols = [(p["name"], bytes(p["metadata"])) for p in body["protocols"]]
        session_ms = body["session_timeout_ms"]
        rebalance_ms = body.get("rebalance_timeout_ms", -1)
        if rebalance_ms is None or rebalance_ms < 0:
            rebalance_ms = session_ms
        cfg = self.config

        def fail(code, mid=member_id):
            return Output(join_error(version, code, mid))

        if not gid:
            return fail(ErrorCode.INVALID_GROUP_ID)
        if code := self.table.coordinator_error(gid):
            return fail(code)
        if not cfg.min_session_timeout_ms <= session_ms <= cfg.max_session_timeout_ms:
            return fail(INVALID_SESSION_TIMEOUT)
        group = self.table.groups.get(gid)
        if group is None:
            if member_id:
                return fail(ErrorCode.UNKNOWN_MEMBER_ID)
            group = self.table.new_group(gid, now_ms)
        if group.is_(S.DEAD):
            return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if group.modern is not None:  # (the coordinator hands consumer groups to broker.group.classic_members)
            return fail(INCONSISTENT_GROUP_PROTOCOL)
        if not group.supports(body["protocol_type"], protocols):
            return fail(INCONSISTENT_GROUP_PROTOCOL)
        self.table.groups.setdefault(gid, group)
        member = Member(member_id, instance, client_id, client_host, session_ms, rebalance_ms,
                        body["protocol_type"], protocols, join_version=version, last_heartbeat_ms=now_ms)

        if not member_id:
            if instance is not None and instance in group.static_members:
                return self._replace_static_member(group, member, now_ms)
            if len(group.members) + len(group.pending_members) >= cfg.max_size:
                return fail(ErrorCode.GROUP_MAX_SIZE_REACHED)
            member.member_id = self._new_member_id(instance if instance is not None else client_id)
            if version >= 4 and instance is None:
                # KIP-394: hand out the id first; the member is real once it rejoins with it
                group.pending_members[member.member_id] = now_ms + session_ms
                return fail(ErrorCode.MEMBER_ID_REQUIRED, member.member_id)
            return self._add_member_and_rebalance(group, member, now_ms)
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            return self._add_member_and_rebalance(group, member, now_ms)
        if group.static_member_fenced(member_id, instance):
            return fail(ErrorCode.FENCED_INSTANCE_ID)
        existing = group.members.get(member_id)
        if existing is None or group.is_(S.EMPTY):
            return fail(ErrorCode.UNKNOWN_MEMBER_ID)
        return self._join_existing(group, existing, member, version, now_ms)

    def _add_member_and_rebalance(self, group: Group, member: Member, now_ms: int) -> Output:
        out = Output(ticket=self._ticket())
        member.join_ticket = out.ticket
        member.is_new = True
        group.add(member)
        if group.is_(S.PREPARING_REBALANCE) and group.in_initial_delay:
            group.initial_delay_new_member = True
        self.prepare_rebalance(group, now_ms, out)
        self._try_complete_join(group, now_ms, out)
        return out

    def _update_member(self, member: Member, new: Member, ticket: int | None, out: Output) -> None:
        if member.join_ticket is not None and ticket is not None:
            # the client gave up on its earlier join and sent another
            finish_join(member, out, join_error(member.join_version, ErrorCode.REBALANCE_IN_PROGRESS,
                                                             member.member_id))
        member.protocols = new.protocols
        member.session_timeout_ms = new.session_timeout_ms
        member.rebalance_timeout_ms = new.rebalance_timeout_ms
        member.client_id, member.client_host = new.client_id, new.client_host
        member.join_version = new.join_version
        member.last_heartbeat_ms = new.last_heartbeat_ms
        if ticket is not None:
            member.join_ticket = ticket

    def _join_existing(self, group: Group, member: Member, new: Member, version: int, now_ms: int) -> Output:
        member.last_heartbeat_ms = now_ms
        unchanged = member.same_protocols(new.protocols)
        if group.is_(S.COMPLETING_REBALANCE) and unchanged:
            # a retried join: answer with the generation it already has
            return Output(join_ok(version, group, member, with_members=member.member_id == group.leader_id))
        if group.is_(S.STABLE) and unchanged and member.member_id != group.leader_id:
            return Output(join_ok(version, group, member, with_members=False))
        out = Output(ticket=self._ticket())
        self._update_member(member, new, out.ticket, out)
        self.prepare_rebalance(group, now_ms, out)
        self._try_complete_join(group, now_ms, out)
        return out

    def _replace_static_member(self, group: Group, new: Member, now_ms: int) -> Output:
        """KIP-345: a known ``group.instance.id`` joined without a member id (a restart)."""
        out = Output()
        old_id = group.static_members[new.group_instance_id]
        old = group.members[old_id]
        version = new.join_version
        fenced = ErrorCode.FENCED_INSTANCE_ID
        finish_join(old, out, join_error(old.join_version, fenced, old_id))
        finish_sync(old, out, sync_response(old.sync_version, fenced))
        new.member_id = self._new_member_id(new.group_instance_id)
        new.assignment = old.assignment
        unchanged = old.same_protocols(new.protocols)
        group.members = {(new.member_id if k == old_id else k): (new if k == old_id else v)
                         for k, v in group.members.items()}
        group.static_members[new.group_instance_id] = new.member_id
        if group.leader_id == old_id:
            group.leader_id = new.member_id
        if group.is_(S.STABLE) and unchanged:
            group_write(group, out)
            is_leader = new.member_id == group.leader_id
            out.response = join_ok(version, group, new, with_members=is_leader and version >= 9,
                                         skip_assignment=is_leader and version >= 9)
            return out
        out.ticket = self._ticket()
        new.join_ticket = out.ticket
        self.prepare_rebalance(group, now_ms, out)
        self._try_complete_join(group, now_ms, out)
        return out

    # ------------------------------------------------------------------ rebalancing

    def prepare_rebalance(self, group: Group, now_ms: int, out: Output) -> None:
        if not group.is_(S.EMPTY, S.STABLE, S.COMPLETING_REBALANCE):
            return
        if group.is_(S.COMPLETING_REBALANCE):
            for m in group.members.values():
                m.assignment = b""
                finish_sync(m, out, sync_response(m.sync_version, ErrorCode.REBALANCE_IN_PROGRESS))
        rebalance_ms = group.rebalance_timeout_ms()
        if group.is_(S.EMPTY):
            delay = min(self.config.initial_rebalance_delay_ms, rebalance_ms)
            group.in_initial_delay = True
            group.initial_delay_new_member = False
            group.initial_delay_remaining_ms = max(rebalance_ms - delay, 0)
            group.join_deadline_ms = now_ms + delay
        else:
            group.in_initial_delay = False
            group.join_deadline_ms = now_ms + rebalance_ms
        group.transition(S.PREPARING_REBALANCE, now_ms)

    def _try_complete_join(self, group: Group, now_ms: int, out: Output) -> None:
        if not group.is_(S.PREPARING_REBALANCE) or group.join_deadline_ms is None:
            return
        if group.in_initial_delay:
            if now_ms < group.join_deadline_ms:
                return
            if group.initial_delay_new_member and group.initial_delay_remaining_ms > 0:
                # members keep arriving: wait another delay, within the rebalance timeout
                delay = min(self.config.initial_rebalance_delay_ms, group.initial_delay_remaining_ms)
                group.initial_delay_remaining_ms -= delay
                group.initial_delay_new_member = False
                group.join_deadline_ms = now_ms + delay
                return
        elif not (group.all_joined() or now_ms >= group.join_deadline_ms):
            return
        self._complete_join(group, now_ms, out)

    def _complete_join(self, group: Group, now_ms: int, out: Output) -> None:
        for m in [m for m in group.members.values() if m.join_ticket is None]:
            finish_sync(m, out, sync_response(m.sync_version, ErrorCode.UNKNOWN_MEMBER_ID))
            group.remove(m.member_id)
        group.join_deadline_ms = None
        group.in_initial_delay = False
        group.generation += 1
        if not group.members:
            group.protocol_name = None
            group.subscribed_topics = None
            group.leader_id = None
            group.transition(S.EMPTY, now_ms)
            group_write(group, out)
            return
        group.protocol_name = group.select_protocol()
        group.subscribed_topics = group.compute_subscribed_topics()
        group.transition(S.COMPLETING_REBALANCE, now_ms)
        for m in group.members.values():
            m.is_new = False
            m.last_heartbeat_ms = now_ms
            response = join_ok(m.join_version, group, m, with_members=m.member_id == group.leader_id)
            finish_join(m, out, response)

    def _remove_member(self, group: Group, member: Member, now_ms: int, out: Output) -> None:
        unknown = ErrorCode.UNKNOWN_MEMBER_ID
        finish_join(member, out, join_error(member.join_version, unknown, member.member_id))
        finish_sync(member, out, sync_response(member.sync_version, unknown))
        group.remove(member.member_id)
        if group.is_(S.STABLE, S.COMPLETING_REBALANCE):
            self.prepare_rebalance(group, now_ms, out)
        self._try_complete_join(group, now_ms, out)

    def expire(self, group: Group, now_ms: int, out: Output) -> None:
        """Drop the pending members and the members whose time is up; end a join phase
        whose time is up."""
        for member_id, deadline in list(group.pending_members.items()):
            if now_ms >= deadline:
                del group.pending_members[member_id]
        for member in list(group.members.values()):
            if member.member_id in group.members and member.expired(now_ms):
                self._remove_member(group, member, now_ms, out)
        self._try_complete_join(group, now_ms, out)

    def write_failed(self, write: Write, now_ms: int) -> Output:
        """``write`` did not commit.  A lost assignment sends the group back to rebalance."""
        out = Output()
        group = self.table.groups.get(write.group_id)
        if write.offsets is None and group is not None and group.is_(S.STABLE, S.COMPLETING_REBALANCE):
            for m in group.members.values():
                m.assignment = b""
            self.prepare_rebalance(group, now_ms, out)
        return out

    # ------------------------------------------------------------------ SyncGroup / Heartbeat

    def sync_group(self, version: int, body: dict, now_ms: int) -> Output:
        gid, member_id = body["group_id"], body["member_id"]
        if not gid:
            return Output(sync_response(version, ErrorCode.INVALID_GROUP_ID))
        if code := self.table.coordinator_error(gid):
            return Output(sync_response(version, code))
        group = self.table.groups.get(gid)
        code = member_error(group, member_id, body.get("group_instance_id"), body["generation_id"])
        if code:
            return Output(sync_response(version, code))
        if version >= 5 and ((body.get("protocol_type") not in (None, group.protocol_type))
                             or (body.get("protocol_name") not in (None, group.protocol_name))):
            return Output(sync_response(version, INCONSISTENT_GROUP_PROTOCOL))
        member = group.members[member_id]
        member.last_heartbeat_ms = now_ms
        if group.is_(S.EMPTY):
            return Output(sync_response(version, ErrorCode.UNKNOWN_MEMBER_ID))
        if group.is_(S.PREPARING_REBALANCE):
            return Output(sync_response(version, ErrorCode.REBALANCE_IN_PROGRESS))
        if group.is_(S.STABLE):
            return Output(sync_response(version, 0, group, member.assignment))
        out = Output(ticket=self._ticket())
        finish_sync(member, out, sync_response(member.sync_version, ErrorCode.REBALANCE_IN_PROGRESS))
        member.sync_ticket, member.sync_version = out.ticket, version
        if member_id == group.leader_id:
            given = {a["member_id"]: bytes(a["assignment"]) for a in body["assignments"]}
            for m in group.members.values():
                m.assignment = given.get(m.member_id, b"")
            group.transition(S.STABLE, now_ms)
            group_write(group, out)
            for m in group.members.values():
                finish_sync(m, out, sync_response(m.sync_version, 0, group, m.assignment))
        return out

    def heartbeat(self, version: int, body: dict, now_ms: int) -> dict:
        gid = body["group_id"]

        def answer(code):
            return {"throttle_time_ms": 0, "error_code": int(code)}

        if not gid:
            return answer(ErrorCode.INVALID_GROUP_ID)
        if code := self.table.coordinator_error(gid):
            return answer(code)
        group = self.table.groups.get(gid)
        code = member_error(group, body["member_id"], body.get("group_instance_id"), body["generation_id"])
        if code:
            return answer(code)
        group.members[body["member_id"]].last_heartbeat_ms = now_ms
        if group.is_(S.EMPTY):
            return answer(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_(S.PREPARING_REBALANCE):
            return answer(ErrorCode.REBALANCE_IN_PROGRESS)
        return answer(ErrorCode.NONE)

    # ------------------------------------------------------------------ LeaveGroup

    def leave_group(self, version: int, body: dict, now_ms: int) -> Output:
        gid = body["group_id"]
        leaving = leaving_members(version, body)
        out = Output()

        def answer(top: int, codes: list[int]) -> Output:
            out.response = leave_response(version, top, leaving, codes)
            return out

        if not gid:
            return answer(ErrorCode.INVALID_GROUP_ID, [])
        if code := self.table.coordinator_error(gid):
            return answer(code, [])
        group = self.table.groups.get(gid)
        if group is None:
            return answer(0, [ErrorCode.UNKNOWN_MEMBER_ID] * len(leaving))
        if group.is_(S.DEAD):
            return answer(ErrorCode.COORDINATOR_NOT_AVAILABLE, [])
        codes = []
        for item in leaving:
            member_id, instance = item["member_id"] or "", item.get("group_instance_id")
            if instance is not None:
                known = group.static_members.get(instance)
                if known is None:
                    codes.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                if member_id and member_id != known:
                    codes.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
                member_id = known
            if member_id in group.pending_members:
                del group.pending_members[member_id]
                self._try_complete_join(group, now_ms, out)
                codes.append(ErrorCode.NONE)
            elif member_id in group.members:
                self._remove_member(group, group.members[member_id], now_ms, out)
                codes.append(ErrorCode.NONE)
            else:
                codes.append(ErrorCode.UNKNOWN_MEMBER_ID)
        return answer(0, codes)
