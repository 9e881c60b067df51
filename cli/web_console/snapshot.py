"""What the console shows of a cluster at one moment, asked over the Kafka protocol with
kraftctl's admin client (synchronous: the console runs ``collect`` in a worker thread).

Each section is asked separately and fails separately: a cluster that has lost its quorum
still shows its brokers and topics, with the quorum's error in its place.
"""

from __future__ import annotations

import time
from typing import Any

from cli.admin_client import AdminClient, AdminError, error_name
from cli.configs import describe_quorum, replication_rows
from cli.groups import describe_group, list_groups, member_partitions, offset_rows


def collect(admin: AdminClient, known_brokers: dict[int, dict]) -> dict[str, Any]:
    """A JSON-ready snapshot: ``brokers``, ``quorum``, ``topics``, ``groups`` and, per
    section that failed, ``errors[section]``.

    ``known_brokers`` (node id -> {host, port, rack}) remembers every broker seen: one that
    leaves Metadata (stopped, fenced) stays listed, as not registered.
    """
    now = time.time()
    snap: dict[str, Any] = {"time_ms": int(now * 1000), "time": time.strftime("%H:%M:%S", time.localtime(now)),
                            "errors": {}}
    metadata = None
    try:
        metadata = admin.metadata()
    except AdminError as exc:
        snap["errors"]["metadata"] = str(exc)
    try:
        snap["quorum"] = quorum(admin)
    except AdminError as exc:
        snap["quorum"] = None
        snap["errors"]["quorum"] = str(exc)
    leader = snap["quorum"]["leader_id"] if snap["quorum"] else -1
    snap["cluster_id"] = metadata["cluster_id"] if metadata else None
    snap["brokers"] = brokers(metadata, known_brokers, leader)
    snap["topics"] = topics(metadata) if metadata else []
    try:
        snap["groups"] = groups(admin)
    except AdminError as exc:
        snap["groups"] = []
        snap["errors"]["groups"] = str(exc)
    snap["took_ms"] = round((time.time() - now) * 1000)
    return snap


def quorum(admin: AdminClient) -> dict:
    p = describe_quorum(admin)
    now_ms = int(time.time() * 1000)
    rows = replication_rows(p)
    for r in rows:
        for key in ("last_fetch_timestamp", "last_caught_up_timestamp"):
            r[key.replace("timestamp", "ago_ms")] = now_ms - r[key] if r[key] > 0 else None
    return {"leader_id": p["leader_id"], "leader_epoch": p["leader_epoch"],
            "high_watermark": p["high_watermark"], "replicas": rows}


def brokers(metadata: dict | None, known: dict[int, dict], active_controller: int) -> list[dict]:
    registered = {}
    for b in (metadata or {}).get("brokers", []):
        registered[b["node_id"]] = {"host": b["host"], "port": b["port"], "rack": b.get("rack")}
    known.update(registered)
    return [{"node_id": node_id, **known[node_id], "registered": node_id in registered,
             "active_controller": node_id == active_controller}
            for node_id in sorted(known)]


def topics(metadata: dict) -> list[dict]:
    out = []
    for t in sorted(metadata["topics"], key=lambda t: t["name"]):
        if t["error_code"]:
            out.append({"name": t["name"], "error": error_name(t["error_code"]), "partitions": []})
            continue
        parts = []
        for p in sorted(t["partitions"], key=lambda p: p["partition_index"]):
            parts.append({"partition": p["partition_index"], "leader": p["leader_id"],
                          "leader_epoch": p["leader_epoch"], "replicas": p["replica_nodes"],
                          "isr": p["isr_nodes"], "offline": p.get("offline_replicas") or [],
                          "under_replicated": len(p["isr_nodes"]) < len(p["replica_nodes"])})
        out.append({"name": t["name"], "internal": t.get("is_internal", False), "partitions": parts,
                    "under_replicated": sum(p["under_replicated"] for p in parts),
                    "offline": sum(p["leader"] < 0 for p in parts)})
    return out


def groups(admin: AdminClient) -> list[dict]:
    out = []
    for name in list_groups(admin):
        try:
            address, desc = describe_group(admin, name)
            if desc["error_code"]:
                raise AdminError(error_name(desc["error_code"]))
            rows = offset_rows(admin, name, address, desc)
        except AdminError as exc:
            out.append({"group": name, "error": str(exc), "members": [], "partitions": []})
            continue
        members = [{"member_id": m["member_id"], "client_id": m["client_id"], "host": m["client_host"],
                    "partitions": [f"{t}-{p}" for t, p in member_partitions(m)]} for m in desc["members"]]
        lags = [r["lag"] for r in rows if r["lag"] is not None]
        out.append({"group": name, "state": desc["group_state"], "protocol": desc["protocol_data"],
                    "coordinator": f"{address[0]}:{address[1]}", "members": members, "partitions": rows,
                    "lag": sum(lags) if lags else None})
    return out
