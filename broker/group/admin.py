"""ListGroups, DescribeGroups and DeleteGroups: the admin part of the coordinator core
(sans-IO), functions of the coordinator's :class:`broker.group.table.GroupTable`."""

from __future__ import annotations

from broker.group.consumer_group import tombstones as consumer_tombstones
from broker.group.output import Output, Write
from broker.group.records import group_record, offset_record
from broker.group.state import Group, GroupState
from broker.group.table import GroupTable
from kraft.protocol.error_codes import ErrorCode

S = GroupState


def group_type(group: Group) -> str:
    """ListGroups' GroupType: "consumer" for KIP-848's groups, "classic" for the others."""
    return "classic" if group.modern is None else "consumer"


def state_name(group: Group) -> str:
    return group.state.value if group.modern is None else group.modern.state_name()


def list_groups(table: GroupTable, version: int, body: dict) -> dict:
    if table.loading:
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), "groups": []}
    states = {s.lower() for s in body.get("states_filter") or []}
    types = {t.lower() for t in body.get("types_filter") or []}
    groups = []
    for group in table.groups.values():
        if group.partition not in table.owned or group.is_(S.DEAD):
            continue
        if states and state_name(group).lower() not in states:
            continue
        if types and group_type(group) not in types:
            continue
        groups.append({"group_id": group.group_id, "protocol_type": group.protocol_type or "",
                       "group_state": state_name(group), "group_type": group_type(group)})
    return {"throttle_time_ms": 0, "error_code": 0, "groups": groups}


def describe_groups(table: GroupTable, version: int, body: dict) -> dict:
    described = []
    for gid in body["groups"]:
        entry = {"error_code": 0, "group_id": gid, "group_state": S.DEAD.value, "protocol_type": "",
                 "protocol_data": "", "members": [], "authorized_operations": -2147483648}
        code = ErrorCode.INVALID_GROUP_ID if not gid else table.coordinator_error(gid)
        group = table.groups.get(gid)
        if code:
            entry.update(error_code=int(code), group_state="")
        elif group is not None and group.modern is None:  # (a KIP-848 group reads as Dead here, as in Kafka)
            stable = group.is_(S.STABLE)
            entry.update(group_state=group.state.value, protocol_type=group.protocol_type or "",
                         protocol_data=(group.protocol_name or "") if stable else "")
            entry["members"] = [
                {"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                 "client_id": m.client_id, "client_host": m.client_host,
                 "member_metadata": m.metadata_for(group.protocol_name) if stable else b"",
                 "member_assignment": m.assignment}
                for m in group.members.values()]
        described.append(entry)
    return {"throttle_time_ms": 0, "groups": described}


def delete_group(table: GroupTable, group: Group, now_ms: int, out: Output, tombstones: tuple = ()) -> None:
    """Delete ``group`` with its offsets: tombstones (``tombstones`` first) and it leaves the table."""
    records = list(tombstones)
    if group.modern is not None:
        records += consumer_tombstones(group)
    records += [offset_record(group.group_id, t, p, None) for (t, p) in sorted(group.offsets)]
    records.append(group_record(group.group_id, None))
    group.offsets.clear()
    group.transition(S.DEAD, now_ms)
    del table.groups[group.group_id]
    out.writes.append(Write(group.partition, group.group_id, tuple(records)))


def delete_groups(table: GroupTable, version: int, body: dict, now_ms: int) -> Output:
    out = Output()
    results = []
    for gid in body["groups_names"]:
        code = ErrorCode.INVALID_GROUP_ID if not gid else table.coordinator_error(gid)
        group = table.groups.get(gid)
        if not code:
            if group is None or group.is_(S.DEAD):
                code = ErrorCode.GROUP_ID_NOT_FOUND
            elif not group.is_(S.EMPTY) or (group.modern is not None and group.modern.members):
                code = ErrorCode.NON_EMPTY_GROUP
            else:
                delete_group(table, group, now_ms, out)
        results.append({"group_id": gid, "error_code": int(code)})
    out.response = {"throttle_time_ms": 0, "results": results}
    return out
