"""ACLs in the metadata log: CreateAcls, DeleteAcls and DescribeAcls, as Kafka's
AclControlManager keeps them.

A new ACL is one AccessControlEntryRecord with an id of its own; an ACL equal to one that
exists succeeds without a record (creating is idempotent).  A deletion filter removes every
ACL it matches, one RemoveAccessControlEntryRecord each, and answers what it removed.  Each
creation and each filter succeeds or fails alone, with Kafka's INVALID_REQUEST for an ACL or
filter that cannot be.  Whether the caller may change ACLs (ALTER on the cluster) and whether
the broker authorizes at all (SECURITY_DISABLED) is the broker's to check before forwarding.
"""

from __future__ import annotations

import uuid
from random import Random

from kraft.protocol.error_codes import ErrorCode
from kraft.security.authorizer import AclBinding, AclError, AclFilter
from metadata.controller.common import ControllerContext, Txn
from metadata.image import MetadataImage
from metadata.serde import make


def create_acls(ctx: ControllerContext, txn: Txn, version: int, req: dict, now_ms: int) -> dict:
    results = []
    for c in req["creations"]:
        acl = AclBinding.of(c["resource_type"], c["resource_name"], c.get("resource_pattern_type", 3),
                            c["principal"], c["host"], c["operation"], c["permission_type"])
        try:
            acl.validate()
        except AclError as exc:
            results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": str(exc)})
            continue
        if acl not in txn.image.acls.values():
            txn.add(make("AccessControlEntryRecord", id=_new_id(ctx.rng, txn.image), resource_type=acl.resource_type,
                         resource_name=acl.resource_name, pattern_type=acl.pattern_type, principal=acl.principal,
                         host=acl.host, operation=acl.operation, permission_type=acl.permission))
        results.append({"error_code": 0, "error_message": None})
    return {"throttle_time_ms": 0, "results": results}


def delete_acls(ctx: ControllerContext, txn: Txn, version: int, req: dict, now_ms: int) -> dict:
    results = []
    removed: set[uuid.UUID] = set()
    for f in req["filters"]:
        flt = filter_of(f)
        try:
            flt.validate()
        except AclError as exc:
            results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": str(exc),
                            "matching_acls": []})
            continue
        matching = []
        for acl_id, acl in sorted(txn.image.acls.items()):
            if flt.matches(acl):
                matching.append({"error_code": 0, "error_message": None, **binding_fields(acl)})
                if acl_id not in removed:
                    removed.add(acl_id)
                    txn.add(make("RemoveAccessControlEntryRecord", id=acl_id))
        results.append({"error_code": 0, "error_message": None, "matching_acls": matching})
    return {"throttle_time_ms": 0, "filter_results": results}


def describe_acls(ctx: ControllerContext, txn: Txn, version: int, req: dict, now_ms: int) -> dict:
    flt = filter_of(req, prefix="_filter")
    try:
        flt.validate()
    except AclError as exc:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST, "error_message": str(exc),
                "resources": []}
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
            "resources": describe_resources(a for a in txn.image.acls.values() if flt.matches(a))}


def filter_of(f: dict, prefix: str = "_filter") -> AclFilter:
    """A DeleteAcls filter or a DescribeAcls request as an AclFilter (both name the resource
    fields ``*_filter`` and the entry's operation and permission plainly)."""
    return AclFilter.of(f["resource_type" + prefix], f["resource_name" + prefix], f.get("pattern_type" + prefix, 3),
                        f["principal" + prefix], f["host" + prefix], f["operation"], f["permission_type"])


def binding_fields(acl: AclBinding) -> dict:
    return {"resource_type": int(acl.resource_type), "resource_name": acl.resource_name,
            "pattern_type": int(acl.pattern_type), "principal": acl.principal, "host": acl.host,
            "operation": int(acl.operation), "permission_type": int(acl.permission)}


def describe_resources(acls) -> list[dict]:
    """DescribeAcls's answer: the ACLs grouped by resource pattern."""
    by_resource: dict[tuple, list[AclBinding]] = {}
    for acl in acls:
        by_resource.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(acl)
    return [{"resource_type": int(rt), "resource_name": name, "pattern_type": int(pt),
             "acls": [{"principal": a.principal, "host": a.host, "operation": int(a.operation),
                       "permission_type": int(a.permission)} for a in sorted(entries, key=_entry_key)]}
            for (rt, name, pt), entries in sorted(by_resource.items())]


def _entry_key(acl: AclBinding):
    return acl.principal, acl.host, int(acl.operation), int(acl.permission)


def _new_id(rng: Random, image: MetadataImage) -> uuid.UUID:
    while True:
        acl_id = uuid.UUID(int=rng.getrandbits(128), version=4)
        if acl_id not in image.acls:
            return acl_id
