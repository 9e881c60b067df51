"""Committed offsets, the offsets part of the coordinator core (sans-IO): OffsetCommit,
TxnOffsetCommit, OffsetFetch, OffsetDelete, the offsets a durable write makes visible, and
offsets retention, over the coordinator's :class:`broker.group.table.GroupTable`.

OffsetCommit fencing follows Kafka's classic rules: a commit from a group member must carry
the group's generation; a "simple" commit (generation -1, no member) is accepted only while
the group has no members, and creates the group if needed.  Offsets expire after
``offsets.retention.minutes`` (KIP-211): for a group that is Empty, counted from when it
became Empty; for a group that never had members, from each offset's commit time; for a
Stable consumer group, only offsets of topics it no longer subscribes to.  An Empty group
left without offsets is then deleted.
"""

from __future__ import annotations

from broker.group.admin import delete_group
from broker.group.config import GroupConfig
from broker.group.consumer_group import commit_error, fetch_error
from broker.group.membership import member_error
from broker.group.output import Output, Write
from broker.group.records import OffsetValue, offset_record
from broker.group.state import CONSUMER_PROTOCOL_TYPE, Group, GroupState
from broker.group.table import GroupTable
from kraft.protocol.error_codes import ErrorCode

INT64_MAX = 2**63 - 1

S = GroupState


def _commit_answer(body: dict, code_of) -> dict:
    """An (Txn)OffsetCommit response: ``code_of(topic, partition)`` for each partition asked."""
    return {"throttle_time_ms": 0, "topics": [
        {"name": t["name"], "partitions": [
            {"partition_index": p["partition_index"], "error_code": int(code_of(t, p))}
            for p in t["partitions"]]} for t in body["topics"]]}


class CommittedOffsets:
    """The offset APIs and retention over the groups of ``table``.

    Args:
        table: the coordinator's groups.
        config: ``offset.metadata.max.bytes`` and ``offsets.retention.minutes``.
    """

    def __init__(self, table: GroupTable, config: GroupConfig):
        self.table = table
        self.config = config

    # ------------------------------------------------------------------ writes

    def apply_write(self, write: Write) -> None:
        """``write`` is durable: its offsets become visible."""
        group = self.table.groups.get(write.group_id)
        if write.offsets and group is not None and not group.is_(S.DEAD):
            if write.producer is not None:
                group.pending_txn_offsets.setdefault(write.producer[0], {}).update(write.offsets)
            else:
                group.offsets.update(write.offsets)

    def complete_txn(self, partition: int, producer_id: int, committed: bool) -> None:
        """The marker of ``producer_id``'s transaction is committed on ``partition``: its
        pending TxnOffsetCommit offsets become the groups' offsets, or are dropped."""
        for group in self.table.groups.values():
            if group.partition != partition:
                continue
            pending = group.pending_txn_offsets.pop(producer_id, None)
            if pending and committed and not group.is_(S.DEAD):
                group.offsets.update(pending)

    # ------------------------------------------------------------------ OffsetCommit

    @staticmethod
    def _commit_error(group: Group, generation: int, member_id: str, instance: str | None,
                      version: int, transactional: bool) -> int:
        if group.modern is not None:  # a KIP-848 group: fenced by member epoch
            return commit_error(group.modern, member_id, generation, version, transactional)
        if generation < 0 and group.is_(S.EMPTY):
            return ErrorCode.NONE  # a simple commit: the group does not use the coordinator
        if code := member_error(group, member_id, instance, generation):
            return code
        if group.is_(S.COMPLETING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def _commit_output(self, gid: str, body: dict, value_of) -> tuple[Output, list, list]:
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

    def offset_commit(self, version: int, body: dict, now_ms: int) -> Output:
        gid = body["group_id"]
        generation = body.get("generation_id_or_member_epoch", -1)
        member_id = body.get("member_id") or ""

        def answer(code_of) -> dict:
            return _commit_answer(body, code_of)

        code = ErrorCode.INVALID_GROUP_ID if not gid else self.table.coordinator_error(gid)
        group = self.table.groups.get(gid)
        if not code:
            if group is None:
                if generation >= 0:
                    code = ErrorCode.ILLEGAL_GENERATION
                else:
                    group = self.table.groups[gid] = self.table.new_group(gid, now_ms)
            else:
                code = self._commit_error(group, generation, member_id, body.get("group_instance_id"),
                                          version, False)
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

    def txn_offset_commit(self, version: int, body: dict, now_ms: int) -> Output:
        """Offsets written as part of a transaction: a transactional batch of the producer,
        visible once the transaction commits (``complete_txn``).  A v3+ request from a group
        member is fenced by generation like OffsetCommit (KIP-447)."""
        gid = body["group_id"]
        code = ErrorCode.INVALID_GROUP_ID if not gid else self.table.coordinator_error(gid)
        if not code and (body["producer_id"] < 0 or body["producer_epoch"] < 0):
            code = ErrorCode.INVALID_PRODUCER_ID_MAPPING  # no producer a transactional batch could carry
        group = self.table.groups.get(gid)
        if not code:
            if group is None:
                group = self.table.groups[gid] = self.table.new_group(gid, now_ms)
            elif group.is_(S.DEAD):
                code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            elif version >= 3 and body.get("member_id") and body.get("generation_id", -1) >= 0:
                code = self._commit_error(group, body["generation_id"], body["member_id"],
                                          body.get("group_instance_id"), version, True)
        if code:
            return Output(_commit_answer(body, lambda t, p: code))
        out, offsets, records = self._commit_output(gid, body, lambda p: OffsetValue(
            p["committed_offset"], p.get("committed_metadata") or "", now_ms, p.get("committed_leader_epoch", -1)))
        if records:
            out.writes.append(Write(group.partition, gid, tuple(records), tuple(offsets),
                                    producer=(body["producer_id"], body["producer_epoch"])))
        return out

    # ------------------------------------------------------------------ OffsetFetch

    def _fetch_group(self, gid: str, topics: list | None, require_stable: bool = False,
                     member_id: str | None = None, member_epoch: int = -1) -> tuple[int, list]:
        code = ErrorCode.INVALID_GROUP_ID if not gid else self.table.coordinator_error(gid)
        if code:
            return code, []
        group = self.table.groups.get(gid)
        if group is not None and group.modern is not None:  # v9+: a member's fetch carries its epoch
            if code := fetch_error(group.modern, member_id, member_epoch):
                return code, []
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

        if topics is None:  # every committed partition, grouped by topic in one pass over them sorted
            by_topic: dict[str, list] = {}
            for t, i in sorted(offsets):
                by_topic.setdefault(t, []).append(part(t, i))
            return 0, [{"name": n, "partitions": parts} for n, parts in by_topic.items()]
        return 0, [{"name": t["name"], "partitions": [part(t["name"], i) for i in t["partition_indexes"]]}
                   for t in topics]

    def offset_fetch(self, version: int, body: dict) -> dict:
        if version >= 8:
            groups = []
            for g in body["groups"]:
                code, topics = self._fetch_group(g["group_id"], g["topics"], body.get("require_stable", False),
                                                 g.get("member_id"), g.get("member_epoch", -1))
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

    def offset_delete(self, version: int, body: dict, now_ms: int) -> Output:
        gid = body["group_id"]
        code = ErrorCode.INVALID_GROUP_ID if not gid else self.table.coordinator_error(gid)
        group = self.table.groups.get(gid)
        if not code and (group is None or group.is_(S.DEAD)):
            code = ErrorCode.GROUP_ID_NOT_FOUND
        if not code and not group.is_(S.EMPTY) and group.subscribed_topics is None:
            code = ErrorCode.NON_EMPTY_GROUP
        if code:
            return Output({"error_code": int(code), "throttle_time_ms": 0, "topics": []})
        if group.modern is not None:
            subscribed = group.modern.subscribed_topics()
        else:
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

    # ------------------------------------------------------------------ retention

    def expire(self, now_ms: int, out: Output) -> None:
        """Drop the offsets past their retention, and the Empty groups left without any."""
        retention = self.config.offsets_retention_ms
        for group in self.table.served():
            # A consumer group with members (KIP-848's or a Stable classic one) keeps the
            # offsets of the topics it subscribes to; the others expire by commit time.
            subscribed = None
            active = group.modern is not None and bool(group.modern.members)
            if active:
                base, subscribed = None, group.modern.subscribed_topics()
            elif not group.protocol_type:
                base = None  # never had members: each offset by its commit time
            elif group.is_(S.EMPTY):
                base = group.state_timestamp_ms
            elif group.is_(S.STABLE) and group.protocol_type == CONSUMER_PROTOCOL_TYPE \
                    and group.subscribed_topics is not None:
                base, subscribed = None, group.subscribed_topics
            else:
                continue
            expired = []
            for tp, v in group.offsets.items():
                if v.expire_timestamp >= 0:
                    gone = now_ms >= v.expire_timestamp
                elif subscribed is not None:
                    gone = tp[0] not in subscribed and now_ms >= v.commit_timestamp + retention
                else:
                    start = v.commit_timestamp if base is None or base < 0 else base
                    gone = now_ms >= start + retention
                if gone:
                    expired.append(tp)
            for tp in expired:
                del group.offsets[tp]
            tombstones = tuple(offset_record(group.group_id, t, p, None) for t, p in expired)
            idle = group.state_timestamp_ms < 0 or now_ms >= group.state_timestamp_ms + retention
            if group.is_(S.EMPTY) and not active and not group.offsets and not group.pending_members and idle:
                delete_group(self.table, group, now_ms, out, tombstones)
            elif expired:
                out.writes.append(Write(group.partition, group.group_id, tombstones))
