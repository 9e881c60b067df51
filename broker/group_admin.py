"""Committed offsets and the group admin APIs of the coordinator core (sans-IO).

OffsetCommit fencing follows Kafka's classic rules: a commit from a group member must carry
the group's generation; a "simple" commit (generation -1, no member) is accepted only while
the group has no members, and creates the group if needed.  Offsets expire after
``offsets.retention.minutes`` (KIP-211): for a group that is Empty, counted from when it
became Empty; for a group that never had members, from each offset's commit time; for a
Stable consumer group, only offsets of topics it no longer subscribes to.  An Empty group
left without offsets is then deleted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.group_records import OffsetValue, group_record, offset_record
from broker.group_state import CONSUMER_PROTOCOL_TYPE, Group, GroupState
from kraft.protocol.error_codes import ErrorCode

INT64_MAX = 2**63 - 1


def int_setting(config, name: str, default: int) -> int:
    """An int setting by Kafka's name from a ServerConfig or a plain mapping (missing or
    None: ``default``), for the coordinators' configs."""
    try:
        value = config[name]
    except (KeyError, TypeError):
        return default
    return default if value is None else int(value)

if TYPE_CHECKING:  # the mixin is only ever used as part of GroupCoordinator
    from broker.group_coordinator import GroupCoordinator

S = GroupState
GROUP_TYPE = "classic"


@dataclass(frozen=True, slots=True)
class GroupConfig:
    num_partitions: int = 50
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_size: int = 2**31 - 1
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096

    @classmethod
    def from_config(cls, config) -> GroupConfig:
        """From Kafka's config names in a ServerConfig or a plain mapping (missing: defaults)."""
        def get(name, default):
            return int_setting(config, name, default)

        d = cls()
        return cls(
            num_partitions=get("offsets.topic.num.partitions", d.num_partitions),
            initial_rebalance_delay_ms=get("group.initial.rebalance.delay.ms", d.initial_rebalance_delay_ms),
            min_session_timeout_ms=get("group.min.session.timeout.ms", d.min_session_timeout_ms),
            max_session_timeout_ms=get("group.max.session.timeout.ms", d.max_session_timeout_ms),
            max_size=get("group.max.size", d.max_size),
            offsets_retention_ms=get("offsets.retention.minutes", d.offsets_retention_ms // 60000) * 60000,
            offsets_retention_check_interval_ms=get("offsets.retention.check.interval.ms",
                                                    d.offsets_retention_check_interval_ms),
            offset_metadata_max_bytes=get("offset.metadata.max.bytes", d.offset_metadata_max_bytes),
        )


@dataclass(frozen=True, slots=True)
class Write:
    """Records to append to ``__consumer_offsets`` partition ``partition``, in one batch.

    ``offsets`` (commits only) become visible via ``GroupCoordinator.apply_write`` once the
    append is committed.  ``producer`` (TxnOffsetCommit): the (producer id, epoch) whose
    transactional batch this is; its offsets stay pending until the transaction's marker.
    """

    partition: int
    group_id: str
    records: tuple[tuple[bytes, bytes | None], ...]
    offsets: tuple[tuple[tuple[str, int], OffsetValue], ...] | None = None
    producer: tuple[int, int] | None = None


@dataclass
class Output:
    response: dict | None = None
    ticket: int | None = None
    completions: list[tuple[int, dict]] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)


def _commit_answer(body: dict, code_of) -> dict:
    """An (Txn)OffsetCommit response: ``code_of(topic, partition)`` for each partition asked."""
    return {"throttle_time_ms": 0, "topics": [
        {"name": t["name"], "partitions": [
            {"partition_index": p["partition_index"], "error_code": int(code_of(t, p))}
            for p in t["partitions"]]} for t in body["topics"]]}


class GroupAdminMixin:
    """OffsetCommit, OffsetFetch, OffsetDelete, ListGroups, DescribeGroups, DeleteGroups."""

    # ------------------------------------------------------------------ writes

    def apply_write(self: GroupCoordinator, write: Write) -> None:
        """``write`` is durable: its offsets become visible."""
        group = self.groups.get(write.group_id)
        if write.offsets and group is not None and not group.is_(S.DEAD):
            if write.producer is not None:
                group.pending_txn_offsets.setdefault(write.producer[0], {}).update(write.offsets)
            else:
                group.offsets.update(write.offsets)

    def complete_txn(self: GroupCoordinator, partition: int, producer_id: int, committed: bool) -> None:
        """The marker of ``producer_id``'s transaction is committed on ``partition``: its
        pending TxnOffsetCommit offsets become the groups' offsets, or are dropped."""
        for group in self.groups.values():
            if group.partition != partition:
                continue
            pending = group.pending_txn_offsets.pop(producer_id, None)
            if pending and committed and not group.is_(S.DEAD):
                group.offsets.update(pending)

    def write_failed(self: GroupCoordinator, write: Write, now_ms: int) -> Output:
        """``write`` did not commit.  A lost assignment sends the group back to rebalance."""
        out = Output()
        group = self.groups.get(write.group_id)
        if write.offsets is None and group is not None and group.is_(S.STABLE, S.COMPLETING_REBALANCE):
            for m in group.members.values():
                m.assignment = b""
            self._prepare_rebalance(group, now_ms, out)
        return out

    # ------------------------------------------------------------------ OffsetCommit

    def _commit_error(self: GroupCoordinator, group: Group, generation: int, member_id: str,
                      instance: str | None) -> int:
        if group.is_(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and group.is_(S.EMPTY):
            return ErrorCode.NONE  # a simple commit: the group does not use the coordinator
        if group.static_member_fenced(member_id, instance):
            return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_(S.COMPLETING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def _commit_output(self: GroupCoordinator, gid: str, body: dict, value_of) -> tuple[Output, list, list]:
        """The answer to an OffsetCommit or TxnOffsetCommit that passed its checks, and the
        (partition, offset) pairs and records of the offsets it writes (``value_of(p)``
        makes each partition's value; metadata over the limit is refused per partition)."""
        limit = self.config.offset_metadata_max_bytes
        offsets, records = [], []
        for t in body["topics"]:
            for p in t["partitions"]:
                if len((p.get("committed_metadata") or "").encode()) > limit:
                    continue
                value = value_of(p)
                tp = (t["name"], p["partition_index"])
                offsets.append((tp, value))
                records.append(offset_record(gid, tp[0], tp[1], value))
        out = Output(_commit_answer(body, lambda t, p: ErrorCode.OFFSET_METADATA_TOO_LARGE
                                    if len((p.get("committed_metadata") or "").encode()) > limit else 0))
        return out, offsets, records

    def offset_commit(self: GroupCoordinator, version: int, body: dict, now_ms: int) -> Output:
        gid = body["group_id"]
        generation = body.get("generation_id_or_member_epoch", -1)
        member_id = body.get("member_id") or ""

        def answer(code_of) -> dict:
            return _commit_answer(body, code_of)

        code = ErrorCode.INVALID_GROUP_ID if not gid else self.coordinator_error(gid)
        group = self.groups.get(gid)
        if not code:
            if group is None:
                if generation >= 0:
                    code = ErrorCode.ILLEGAL_GENERATION
                else:
                    group = self.groups[gid] = Group(gid, self.partition_of(gid), state_timestamp_ms=now_ms)
            else:
                code = self._commit_error(group, generation, member_id, body.get("group_instance_id"))
        if code:
            return Output(answer(lambda t, p: code))
        if member_id in group.members:
            group.members[member_id].last_heartbeat_ms = now_ms
        retention_ms = body.get("retention_time_ms", -1) if 2 <= version <= 4 else -1
        # An int64 on the wire and in the record: a retention reaching past its end is forever.
        expire = min(now_ms + retention_ms, INT64_MAX) if retention_ms is not None and retention_ms >= 0 else -1
        def value_of(p) -> OffsetValue:
            stamp = p.get("commit_timestamp", -1) if version == 1 else -1
            return OffsetValue(p["committed_offset"], p.get("committed_metadata") or "",
                               stamp if stamp >= 0 else now_ms, p.get("committed_leader_epoch", -1), expire)

        out, offsets, records = self._commit_output(gid, body, value_of)
        if records:
            out.writes.append(Write(group.partition, gid, tuple(records), tuple(offsets)))
        return out

    # ------------------------------------------------------------------ TxnOffsetCommit

    def txn_offset_commit(self: GroupCoordinator, version: int, body: dict, now_ms: int) -> Output:
        """Offsets written as part of a transaction: a transactional batch of the producer,
        visible once the transaction commits (``complete_txn``).  A v3+ request from a group
        member is fenced by generation like OffsetCommit (KIP-447)."""
        gid = body["group_id"]
        code = ErrorCode.INVALID_GROUP_ID if not gid else self.coordinator_error(gid)
        if not code and (body["producer_id"] < 0 or body["producer_epoch"] < 0):
            code = ErrorCode.INVALID_PRODUCER_ID_MAPPING  # no producer a transactional batch could carry
        group = self.groups.get(gid)
        if not code:
            if group is None:
                group = self.groups[gid] = Group(gid, self.partition_of(gid), state_timestamp_ms=now_ms)
            elif group.is_(S.DEAD):
                code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            elif version >= 3 and body.get("member_id") and body.get("generation_id", -1) >= 0:
                code = self._commit_error(group, body["generation_id"], body["member_id"],
                                          body.get("group_instance_id"))
        if code:
            return Output(_commit_answer(body, lambda t, p: code))
        out, offsets, records = self._commit_output(gid, body, lambda p: OffsetValue(
            p["committed_offset"], p.get("committed_metadata") or "", now_ms, p.get("committed_leader_epoch", -1)))
        if records:
            out.writes.append(Write(group.partition, gid, tuple(records), tuple(offsets),
                                    producer=(body["producer_id"], body["producer_epoch"])))
        return out

    # ------------------------------------------------------------------ OffsetFetch

    def _fetch_group(self: GroupCoordinator, gid: str, topics: list | None,
                     require_stable: bool = False) -> tuple[int, list]:
        code = ErrorCode.INVALID_GROUP_ID if not gid else self.coordinator_error(gid)
        if code:
            return code, []
        group = self.groups.get(gid)
        offsets = group.offsets if group is not None and not group.is_(S.DEAD) else {}
        # KIP-447: a partition with a transactional commit awaiting its marker is unstable;
        # a read_committed consumer retries rather than start from the older offset.
        unstable = ({tp for pending in group.pending_txn_offsets.values() for tp in pending}
                    if require_stable and group is not None else set())

        def part(topic, index):
            if (topic, index) in unstable:
                return {"partition_index": index, "committed_offset": -1, "committed_leader_epoch": -1,
                        "metadata": "", "error_code": int(ErrorCode.UNSTABLE_OFFSET_COMMIT)}
            v = offsets.get((topic, index))
            if v is None:
                return {"partition_index": index, "committed_offset": -1, "committed_leader_epoch": -1,
                        "metadata": "", "error_code": 0}
            return {"partition_index": index, "committed_offset": v.offset,
                    "committed_leader_epoch": v.leader_epoch, "metadata": v.metadata, "error_code": 0}

        if topics is None:
            names = sorted({t for t, _ in offsets})
            return 0, [{"name": n, "partitions": [part(n, i) for (t, i) in sorted(offsets) if t == n]}
                       for n in names]
        return 0, [{"name": t["name"], "partitions": [part(t["name"], i) for i in t["partition_indexes"]]}
                   for t in topics]

    def offset_fetch(self: GroupCoordinator, version: int, body: dict) -> dict:
        if version >= 8:
            groups = []
            for g in body["groups"]:
                code, topics = self._fetch_group(g["group_id"], g["topics"], body.get("require_stable", False))
                groups.append({"group_id": g["group_id"], "topics": topics, "error_code": int(code)})
            return {"throttle_time_ms": 0, "groups": groups}
        code, topics = self._fetch_group(body["group_id"], body["topics"], body.get("require_stable", False))
        if code and version < 2:
            # v0-1 have no top-level error: report it on every requested partition
            topics = [{"name": t["name"], "partitions": [
                {"partition_index": i, "committed_offset": -1, "committed_leader_epoch": -1,
                 "metadata": "", "error_code": int(code)} for i in t["partition_indexes"]]}
                for t in body["topics"] or []]
        return {"throttle_time_ms": 0, "topics": topics, "error_code": int(code)}

    # ------------------------------------------------------------------ OffsetDelete

    def offset_delete(self: GroupCoordinator, version: int, body: dict, now_ms: int) -> Output:
        gid = body["group_id"]
        code = ErrorCode.INVALID_GROUP_ID if not gid else self.coordinator_error(gid)
        group = self.groups.get(gid)
        if not code and (group is None or group.is_(S.DEAD)):
            code = ErrorCode.GROUP_ID_NOT_FOUND
        if not code and not group.is_(S.EMPTY) and group.subscribed_topics is None:
            code = ErrorCode.NON_EMPTY_GROUP
        if code:
            return Output({"error_code": int(code), "throttle_time_ms": 0, "topics": []})
        subscribed = frozenset() if group.is_(S.EMPTY) else group.subscribed_topics
        records, topics = [], []
        for t in body["topics"]:
            parts = []
            for p in t["partitions"]:
                index = p["partition_index"]
                if t["name"] in subscribed:
                    parts.append({"partition_index": index, "error_code": int(ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)})
                    continue
                if group.offsets.pop((t["name"], index), None) is not None:
                    records.append(offset_record(gid, t["name"], index, None))
                parts.append({"partition_index": index, "error_code": 0})
            topics.append({"name": t["name"], "partitions": parts})
        out = Output({"error_code": 0, "throttle_time_ms": 0, "topics": topics})
        if records:
            out.writes.append(Write(group.partition, gid, tuple(records)))
        return out

    # ------------------------------------------------------------------ listing

    def list_groups(self: GroupCoordinator, version: int, body: dict) -> dict:
        if self.loading:
            return {"throttle_time_ms": 0, "error_code": int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), "groups": []}
        states = {s.lower() for s in body.get("states_filter") or []}
        types = {t.lower() for t in body.get("types_filter") or []}
        groups = []
        for group in self.groups.values():
            if group.partition not in self.owned or group.is_(S.DEAD):
                continue
            if states and group.state.value.lower() not in states:
                continue
            if types and GROUP_TYPE not in types:
                continue
            groups.append({"group_id": group.group_id, "protocol_type": group.protocol_type or "",
                           "group_state": group.state.value, "group_type": GROUP_TYPE})
        return {"throttle_time_ms": 0, "error_code": 0, "groups": groups}

    def describe_groups(self: GroupCoordinator, version: int, body: dict) -> dict:
        described = []
        for gid in body["groups"]:
            entry = {"error_code": 0, "group_id": gid, "group_state": S.DEAD.value, "protocol_type": "",
                     "protocol_data": "", "members": [], "authorized_operations": -2147483648}
            code = ErrorCode.INVALID_GROUP_ID if not gid else self.coordinator_error(gid)
            group = self.groups.get(gid)
            if code:
                entry.update(error_code=int(code), group_state="")
            elif group is not None:
                stable = group.is_(S.STABLE)
                entry.update(group_state=group.state.value, protocol_type=group.protocol_type or "",
                             protocol_data=(group.protocol_name or "") if stable else "")
                entry["members"] = [
                    {"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                     "client_id": m.client_id, "client_host": m.client_host,
                     "member_metadata": m.metadata_for(group.protocol_name) if stable else b"",
                     "member_assignment": m.assignment if stable else b""}
                    for m in group.members.values()]
            described.append(entry)
        return {"throttle_time_ms": 0, "groups": described}

    # ------------------------------------------------------------------ deletion

    def _delete_group(self: GroupCoordinator, group: Group, now_ms: int, out: Output,
                      tombstones: tuple = ()) -> None:
        records = list(tombstones)
        records += [offset_record(group.group_id, t, p, None) for (t, p) in sorted(group.offsets)]
        records.append(group_record(group.group_id, None))
        group.offsets.clear()
        group.transition(S.DEAD, now_ms)
        del self.groups[group.group_id]
        out.writes.append(Write(group.partition, group.group_id, tuple(records)))

    def delete_groups(self: GroupCoordinator, version: int, body: dict, now_ms: int) -> Output:
        out = Output()
        results = []
        for gid in body["groups_names"]:
            code = ErrorCode.INVALID_GROUP_ID if not gid else self.coordinator_error(gid)
            group = self.groups.get(gid)
            if not code:
                if group is None or group.is_(S.DEAD):
                    code = ErrorCode.GROUP_ID_NOT_FOUND
                elif not group.is_(S.EMPTY):
                    code = ErrorCode.NON_EMPTY_GROUP
                else:
                    self._delete_group(group, now_ms, out)
            results.append({"group_id": gid, "error_code": int(code)})
        out.response = {"throttle_time_ms": 0, "results": results}
        return out

    def expire_offsets(self: GroupCoordinator, now_ms: int, out: Output) -> None:
        retention = self.config.offsets_retention_ms
        for group in list(self.groups.values()):
            if group.partition not in self.owned:
                continue
            if not group.protocol_type:
                base = None  # never had members: each offset by its commit time
            elif group.is_(S.EMPTY):
                base = group.state_timestamp_ms
            elif group.is_(S.STABLE) and group.protocol_type == CONSUMER_PROTOCOL_TYPE \
                    and group.subscribed_topics is not None:
                base = None
            else:
                continue
            expired = []
            for tp, v in group.offsets.items():
                if v.expire_timestamp >= 0:
                    gone = now_ms >= v.expire_timestamp
                elif group.is_(S.STABLE):
                    gone = tp[0] not in group.subscribed_topics and now_ms >= v.commit_timestamp + retention
                else:
                    start = v.commit_timestamp if base is None or base < 0 else base
                    gone = now_ms >= start + retention
                if gone:
                    expired.append(tp)
            for tp in expired:
                del group.offsets[tp]
            tombstones = tuple(offset_record(group.group_id, t, p, None) for t, p in expired)
            idle = group.state_timestamp_ms < 0 or now_ms >= group.state_timestamp_ms + retention
            if group.is_(S.EMPTY) and not group.offsets and not group.pending_members and idle:
                self._delete_group(group, now_ms, out, tombstones)
            elif expired:
                out.writes.append(Write(group.partition, group.group_id, tombstones))
