"""The group coordinator core: Kafka's classic group membership protocol, sans-IO.

Theory of operation
-------------------
:class:`GroupCoordinator` takes requests (decoded dicts), ticks and partition ownership
events, each with ``now_ms``, and returns an :class:`Output`:

* ``response`` — the answer now, or None with a ``ticket`` when the answer is parked: a
  JoinGroup waits until every member has rejoined (or the rebalance timeout, or the initial
  delay of a fresh group); a follower's SyncGroup waits for the leader's;
* ``completions`` — ``(ticket, response)`` pairs for parked requests this event finished;
* ``writes`` — records to append to ``__consumer_offsets`` **before** any response or
  completion of the same output is released.  A write that carries ``offsets`` must be
  handed back through :meth:`apply_write` once it is durable (committed offsets become
  visible only then, as in Kafka); if it fails, the caller reports the error in the
  responses instead and calls :meth:`write_failed`.

The coordinator serves the groups of the ``__consumer_offsets`` partitions it has been told
it leads (:meth:`begin_loading` then :meth:`load`); other groups get NOT_COORDINATOR, groups
of a partition still loading COORDINATOR_LOAD_IN_PROGRESS.  Member ids come from an
injected ``Random``.  Membership lives in :mod:`broker.group_membership`, the offset and
admin APIs in :mod:`broker.group_admin`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from random import Random

from broker.group_admin import GroupAdminMixin, GroupConfig, Output, Write
from broker.group_membership import GroupMembershipMixin
from broker.group_records import GroupValue, LoadedPartition, partition_for
from broker.group_state import Group, GroupState, Member
from kraft.protocol.error_codes import ErrorCode

S = GroupState

__all__ = ["GroupConfig", "GroupCoordinator", "Output", "Write", "partition_for"]


class GroupCoordinator(GroupMembershipMixin, GroupAdminMixin):
    """All groups of the partitions this broker coordinates.

    Args:
        config: a :class:`GroupConfig`.
        rng: source of member ids.
        is_leader: ``partition -> bool``, consulted on every request (a broker that lost
            leadership answers NOT_COORDINATOR before its resign notification arrives).
    """

    def __init__(self, config: GroupConfig | None = None, *, rng: Random | None = None,
                 is_leader: Callable[[int], bool] | None = None):
        self.config = config or GroupConfig()
        self.rng = rng or Random(0)
        self.is_leader = is_leader or (lambda partition: True)
        self.groups: dict[str, Group] = {}
        self.owned: set[int] = set()
        self.loading: dict[int, int] = {}  # partition -> load token
        self.markers_while_loading: dict[int, list[tuple[int, bool]]] = {}  # partition -> (producer, committed)
        self._next_ticket = 1
        self._next_token = 1
        self._next_retention_check_ms: int | None = None

    # ------------------------------------------------------------------ ownership

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.config.num_partitions)

    def begin_loading(self, partition: int) -> int:
        """The partition became ours; returns the token :meth:`load` must present."""
        token = self._next_token
        self._next_token += 1
        self.loading[partition] = token
        self.owned.discard(partition)
        self.markers_while_loading.pop(partition, None)
        return token

    def load(self, partition: int, token: int, loaded: LoadedPartition, now_ms: int) -> bool:
        """Install the groups replayed from ``partition``; False if the load is stale."""
        if self.loading.get(partition) != token:
            return False
        del self.loading[partition]
        for gid in [g for g, grp in self.groups.items() if grp.partition == partition]:
            del self.groups[gid]
        for gid in loaded.group_ids():
            group = Group(gid, partition, state_timestamp_ms=now_ms)
            value = loaded.groups.get(gid)
            if value is not None:
                self._restore(group, value, now_ms)
            group.offsets = dict(loaded.offsets.get(gid, {}))
            group.pending_txn_offsets = {pid: dict(o) for pid, o in loaded.pending_txn_offsets.get(gid, {}).items()}
            self.groups[gid] = group
        self.owned.add(partition)
        for producer_id, committed in self.markers_while_loading.pop(partition, []):
            self.complete_txn(partition, producer_id, committed)
        return True

    def _restore(self, group: Group, value: GroupValue, now_ms: int) -> None:
        group.protocol_type = value.protocol_type or None
        group.generation = value.generation
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        if value.current_state_timestamp >= 0:
            group.state_timestamp_ms = value.current_state_timestamp
        for mv in value.members:
            member = Member(mv.member_id, mv.group_instance_id, mv.client_id, mv.client_host,
                            mv.session_timeout, mv.rebalance_timeout, value.protocol_type,
                            [(value.protocol or "", mv.subscription)], mv.assignment,
                            last_heartbeat_ms=now_ms)
            group.members[member.member_id] = member
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
        if group.members:
            group.state = S.STABLE
            if group.leader_id not in group.members:
                group.leader_id = next(iter(group.members))
            group.subscribed_topics = group.compute_subscribed_topics()
        else:
            group.leader_id = None

    def unload(self, partition: int) -> Output:
        """We no longer lead ``partition``: drop its groups; parked requests get NOT_COORDINATOR."""
        self.loading.pop(partition, None)
        self.markers_while_loading.pop(partition, None)
        self.owned.discard(partition)
        out = Output()
        for gid in [g for g, grp in self.groups.items() if grp.partition == partition]:
            group = self.groups.pop(gid)
            for m in group.members.values():
                self._finish_join(m, out, self._join_error(m.join_version, ErrorCode.NOT_COORDINATOR, m.member_id))
                self._finish_sync(m, out, self._sync_response(m.sync_version, ErrorCode.NOT_COORDINATOR, group))
        return out

    def coordinator_error(self, group_id: str) -> int:
        """NONE, COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR for requests about ``group_id``."""
        partition = self.partition_of(group_id)
        if partition in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self.owned or not self.is_leader(partition):
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    # ------------------------------------------------------------------ dispatch

    def handle(self, api: str, version: int, body: dict, now_ms: int, *,
               client_id: str = "", client_host: str = "") -> Output:
        """One request; a parked request that this very event finished comes back answered."""
        out = self._dispatch(api, version, body, now_ms, client_id, client_host)
        if out.ticket is not None:
            for i, (ticket, response) in enumerate(out.completions):
                if ticket == out.ticket:
                    del out.completions[i]
                    out.response, out.ticket = response, None
                    break
        return out

    def _dispatch(self, api, version, body, now_ms, client_id, client_host) -> Output:
        if api == "JoinGroup":
            return self.join_group(version, body, now_ms, client_id=client_id, client_host=client_host)
        if api == "SyncGroup":
            return self.sync_group(version, body, now_ms)
        if api == "Heartbeat":
            return Output(self.heartbeat(version, body, now_ms))
        if api == "LeaveGroup":
            return self.leave_group(version, body, now_ms)
        if api == "OffsetCommit":
            return self.offset_commit(version, body, now_ms)
        if api == "TxnOffsetCommit":
            return self.txn_offset_commit(version, body, now_ms)
        if api == "OffsetFetch":
            return Output(self.offset_fetch(version, body))
        if api == "ListGroups":
            return Output(self.list_groups(version, body))
        if api == "DescribeGroups":
            return Output(self.describe_groups(version, body))
        if api == "DeleteGroups":
            return self.delete_groups(version, body, now_ms)
        if api == "OffsetDelete":
            return self.offset_delete(version, body, now_ms)
        raise ValueError(f"{api} is not a group API")

    def _ticket(self) -> int:
        ticket = self._next_ticket
        self._next_ticket += 1
        return ticket

    def _new_member_id(self, prefix: str) -> str:
        return f"{prefix}-{uuid.UUID(int=self.rng.getrandbits(128), version=4)}"

    # ------------------------------------------------------------------ time

    def has_deadlines(self) -> bool:
        """Whether a group here has a member session, a pending member or a join phase that
        ``tick`` must expire (else only offsets retention, checked on its own interval)."""
        return any(group.members or group.pending_members for group in self.groups.values()
                   if group.partition in self.owned)

    def tick(self, now_ms: int) -> Output:
        """Expire sessions, pending members, join phases and (periodically) offsets."""
        out = Output()
        for group in list(self.groups.values()):
            if group.partition not in self.owned:
                continue
            for member_id, deadline in list(group.pending_members.items()):
                if now_ms >= deadline:
                    del group.pending_members[member_id]
            for member in list(group.members.values()):
                if member.member_id in group.members and member.expired(now_ms):
                    self._remove_member(group, member, now_ms, out)
            self._try_complete_join(group, now_ms, out)
        if self._next_retention_check_ms is None:
            self._next_retention_check_ms = now_ms + self.config.offsets_retention_check_interval_ms
        elif now_ms >= self._next_retention_check_ms:
            self._next_retention_check_ms = now_ms + self.config.offsets_retention_check_interval_ms
            self.expire_offsets(now_ms, out)
        return out
