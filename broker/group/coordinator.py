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
of a partition still loading COORDINATOR_LOAD_IN_PROGRESS.  It owns the :class:`GroupTable`
and hands it to its parts: :class:`Membership` (member ids from an injected ``Random``),
:class:`CommittedOffsets`, and the admin functions of :mod:`broker.group.admin`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from random import Random

from broker.group import admin
from broker.group.classic_members import ClassicMembers
from broker.group.config import GroupConfig
from broker.group.consumer_group import ConsumerProtocol, tombstones
from broker.group.membership import Membership, answer_parked
from broker.group.offsets import CommittedOffsets
from broker.group.output import Output, Write
from broker.group.records import GroupValue, LoadedPartition
from broker.group.state import Group, GroupState, Member
from broker.group.table import GroupTable
from kraft.protocol.error_codes import ErrorCode

S = GroupState


class GroupCoordinator:
    """All groups of the partitions this broker coordinates.

    Args:
        config: a :class:`GroupConfig`.
        rng: source of member ids.
        is_leader: ``partition -> bool``, consulted on every request (a broker that lost
            leadership answers NOT_COORDINATOR before its resign notification arrives).
        topics: ``() -> {name: topic}`` (each with ``.id`` and ``.partitions``), the topics
            KIP-848 consumer groups subscribe to and are assigned.
        group_configs: ``(group id) -> {key: value}``, a group's own configs (ConfigResource
            GROUP in the metadata image): its consumer.session.timeout.ms and
            consumer.heartbeat.interval.ms over the broker's.
    """

    def __init__(self, config: GroupConfig | None = None, *, rng: Random | None = None,
                 is_leader: Callable[[int], bool] | None = None, topics: Callable[[], Mapping] | None = None,
                 group_configs: Callable[[str], Mapping[str, str]] | None = None):
        self.config = config or GroupConfig()
        self.table = GroupTable(self.config.num_partitions, is_leader or (lambda partition: True))
        rng = rng or Random(0)
        self.membership = Membership(self.table, self.config, rng)
        self.consumer = ConsumerProtocol(self.table, self.config, topics or dict,
                                         lambda: str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                                         group_configs=group_configs)
        self.classic_members = ClassicMembers(self.consumer, self.membership)
        self.offsets = CommittedOffsets(self.table, self.config)
        self.markers_while_loading: dict[int, list[tuple[int, bool]]] = {}  # partition -> (producer, committed)
        self._next_token = 1
        self._next_retention_check_ms: int | None = None

    # ------------------------------------------------------------------ ownership

    def begin_loading(self, partition: int) -> int:
        """The partition became ours; returns the token :meth:`load` must present."""
        token = self._next_token
        self._next_token += 1
        self.table.loading[partition] = token
        self.table.owned.discard(partition)
        self.markers_while_loading.pop(partition, None)
        return token

    def load(self, partition: int, token: int, loaded: LoadedPartition, now_ms: int) -> bool:
        """Install the groups replayed from ``partition``; False if the load is stale."""
        table = self.table
        if table.loading.get(partition) != token:
            return False
        del table.loading[partition]
        for gid in table.ids_in(partition):
            del table.groups[gid]
        for gid in loaded.group_ids():
            group = Group(gid, partition, state_timestamp_ms=now_ms)
            value = loaded.groups.get(gid)
            modern = loaded.consumer_groups.get(gid)
            if modern is not None and modern.group_epoch is not None:
                self.consumer.restore(group, modern, now_ms)
            elif value is not None:
                _restore(group, value, now_ms)
            group.offsets = dict(loaded.offsets.get(gid, {}))
            group.pending_txn_offsets = {pid: dict(o) for pid, o in loaded.pending_txn_offsets.get(gid, {}).items()}
            table.groups[gid] = group
        table.owned.add(partition)
        for producer_id, committed in self.markers_while_loading.pop(partition, []):
            self.offsets.complete_txn(partition, producer_id, committed)
        return True

    def unload(self, partition: int) -> Output:
        """We no longer lead ``partition``: drop its groups; parked requests get NOT_COORDINATOR."""
        table = self.table
        table.loading.pop(partition, None)
        self.markers_while_loading.pop(partition, None)
        table.owned.discard(partition)
        out = Output()
        for gid in table.ids_in(partition):
            answer_parked(table.groups.pop(gid), ErrorCode.NOT_COORDINATOR, out)
        return out

    def coordinator_error(self, group_id: str) -> int:
        """NONE, COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR for requests about ``group_id``."""
        return self.table.coordinator_error(group_id)

    # ------------------------------------------------------------------ writes

    def apply_write(self, write: Write) -> None:
        """``write`` is durable: its offsets become visible."""
        self.offsets.apply_write(write)

    def write_failed(self, write: Write, now_ms: int) -> Output:
        """``write`` did not commit.  A lost assignment sends the group back to rebalance."""
        group = self.table.groups.get(write.group_id)
        if group is not None and group.modern is not None:
            self.consumer.write_failed(group)
            return Output()
        return self.membership.write_failed(write, now_ms)

    def complete_txn(self, partition: int, producer_id: int, committed: bool) -> None:
        """The marker of ``producer_id``'s transaction is committed on ``partition``: its
        pending TxnOffsetCommit offsets become the groups' offsets, or are dropped.  A marker
        that arrives while the partition loads is applied once it is loaded: the log read may
        have ended before it (no new transactional commit is taken meanwhile, so applying
        one the read did include again finds nothing pending)."""
        if partition in self.table.loading:
            self.markers_while_loading.setdefault(partition, []).append((producer_id, committed))
            return
        self.offsets.complete_txn(partition, producer_id, committed)

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
        membership, offsets, table = self.membership, self.offsets, self.table
        if api in ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup"):
            group = table.groups.get(body["group_id"])
            if group is not None and group.modern is not None and group.modern.members \
                    and not table.coordinator_error(group.group_id):
                # a classic member of a consumer group (a rolling upgrade or downgrade)
                classic = self.classic_members
                if api == "JoinGroup":
                    return classic.join(group, version, body, now_ms, client_id=client_id, client_host=client_host)
                if api == "SyncGroup":
                    return classic.sync(group, version, body, now_ms)
                if api == "Heartbeat":
                    return Output(classic.heartbeat(group, version, body, now_ms))
                return classic.leave(group, version, body, now_ms)
        if api == "JoinGroup":
            group = table.groups.get(body["group_id"])
            dropped = ()
            if group is not None and group.modern is not None and not group.modern.members \
                    and not table.coordinator_error(group.group_id):
                # an empty KIP-848 group becomes a classic one, keeping its offsets
                dropped = tombstones(group)
                group.modern = None
            out = membership.join_group(version, body, now_ms, client_id=client_id, client_host=client_host)
            if dropped:
                out.writes.insert(0, Write(group.partition, group.group_id, dropped))
            return out
        if api == "SyncGroup":
            return membership.sync_group(version, body, now_ms)
        if api == "Heartbeat":
            return Output(membership.heartbeat(version, body, now_ms))
        if api == "LeaveGroup":
            return membership.leave_group(version, body, now_ms)
        if api == "OffsetCommit":
            return offsets.offset_commit(version, body, now_ms)
        if api == "TxnOffsetCommit":
            return offsets.txn_offset_commit(version, body, now_ms)
        if api == "OffsetFetch":
            return Output(offsets.offset_fetch(version, body))
        if api == "ConsumerGroupHeartbeat":
            return self.consumer.heartbeat(version, body, now_ms, client_id=client_id, client_host=client_host)
        if api == "ConsumerGroupDescribe":
            return Output(self.consumer.describe(version, body))
        if api == "ListGroups":
            return Output(admin.list_groups(table, version, body))
        if api == "DescribeGroups":
            return Output(admin.describe_groups(table, version, body))
        if api == "DeleteGroups":
            return admin.delete_groups(table, version, body, now_ms)
        if api == "OffsetDelete":
            return offsets.offset_delete(version, body, now_ms)
        raise ValueError(f"{api} is not a group API")

    # ------------------------------------------------------------------ time

    def has_deadlines(self) -> bool:
        """Whether a group here has a member session, a pending member or a join phase that
        ``tick`` must expire (else only offsets retention, checked on its own interval)."""
        return any(group.members or group.pending_members or (group.modern is not None and group.modern.members)
                   for group in self.table.served())

    def next_offsets_check_ms(self, now_ms: int) -> int:
        """When ``tick`` next expires offsets (now, before its first call)."""
        return now_ms if self._next_retention_check_ms is None else self._next_retention_check_ms

    def tick(self, now_ms: int) -> Output:
        """Expire sessions, pending members, join phases and (periodically) offsets."""
        out = Output()
        for group in self.table.served():
            if group.modern is not None:
                self.consumer.expire(group, now_ms, out)
            else:
                self.membership.expire(group, now_ms, out)
        if self._next_retention_check_ms is None:
            self._next_retention_check_ms = now_ms + self.config.offsets_retention_check_interval_ms
        elif now_ms >= self._next_retention_check_ms:
            self._next_retention_check_ms = now_ms + self.config.offsets_retention_check_interval_ms
            self.offsets.expire(now_ms, out)
        return out


def _restore(group: Group, value: GroupValue, now_ms: int) -> None:
    """``group`` as its last GroupMetadataValue left it, every member's session starting now."""
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
