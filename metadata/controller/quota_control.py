"""Client quotas (KIP-546): AlterClientQuotas and DescribeClientQuotas on the controller.

An alteration writes one ClientQuotaRecord per key set or removed.  Entities succeed or fail
one by one, with Kafka's checks (its ClientQuotaControlManager), each failure being
INVALID_REQUEST: an empty entity, an entity type named twice or unknown, an empty name, an
ip entity combined with another type, a key that is not a quota of the entity, a value that
is not positive, a fractional value for an integral key, a key or an entity twice in one
request.  Removing a key that is not set writes nothing.  Describe filters the image's
entities as Kafka's ClientQuotasImage does (exact name, default, any name; strict or not).
"""

from __future__ import annotations

from collections import Counter

from kraft.protocol.error_codes import ErrorCode
from kraft.quotas.entities import CLIENT_ID, CLIENT_KEYS, ENTITY_TYPES, IP, IP_KEYS, USER, sort_key
from metadata.controller.common import ControllerContext, Txn
from metadata.delta import quota_entity
from metadata.serde import make

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


class _Invalid(Exception):
    def __init__(self, message: str, code: ErrorCode = ErrorCode.INVALID_REQUEST):
        super().__init__(message)
        self.code = code


def alter_client_quotas(ctx: ControllerContext, txn: Txn, version: int, req: dict, now_ms: int) -> dict:
    seen = Counter(quota_entity(e["entity"]) for e in req["entries"])
    results = []
    for entry in req["entries"]:
        key = quota_entity(entry["entity"])
        try:
            if seen[key] > 1:
                raise _Invalid("Ignoring duplicate entity")
            records = _alteration(txn.image.client_quotas.get(key, {}), entry)
        except _Invalid as exc:
            results.append(_result(entry, exc.code, str(exc)))
            continue
        if not req["validate_only"]:
            txn.add(*records)
        results.append(_result(entry, ErrorCode.NONE, None))
    return {"throttle_time_ms": 0, "entries": results}


def _result(entry: dict, code: ErrorCode, message: str | None) -> dict:
    return {"error_code": int(code), "error_message": message,
            "entity": [{"entity_type": e["entity_type"], "entity_name": e["entity_name"]} for e in entry["entity"]]}


def _alteration(current, entry: dict) -> list:
    types = [e["entity_type"] for e in entry["entity"]]
    if not types:
        raise _Invalid("Invalid empty client quota entity")
    for e in entry["entity"]:
        if types.count(e["entity_type"]) > 1:
            raise _Invalid(f"Invalid client quota entity, duplicate entity entry {e['entity_type']}")
        if e["entity_type"] not in ENTITY_TYPES:
            raise _Invalid(f"Unhandled client quota entity type: {e['entity_type']}")
        if e["entity_name"] == "":
            raise _Invalid(f"Empty {e['entity_type']} not supported")
    if IP in types and len(types) > 1:
        raise _Invalid("Invalid quota entity combination, IP entity should not be combined with User or ClientId")
    valid = IP_KEYS if IP in types else CLIENT_KEYS
    ops = [op["key"] for op in entry["ops"]]
    records = []
    entity = [{"entity_type": t, "entity_name": n} for t, n in quota_entity(entry["entity"])]
    for op in entry["ops"]:
        key, value = op["key"], op["value"]
        if ops.count(key) > 1:
            raise _Invalid(f"Duplicate quota key {key} not updating quota for this entity")
        if op["remove"]:
            if key in current:
                records.append(make("ClientQuotaRecord", entity=entity, key=key, value=0.0, remove=True))
            continue
        if key not in valid:
            raise _Invalid(f"Invalid configuration key {key}")
        if not value > 0.0:
            raise _Invalid(f"Quota {key} must be greater than 0")
        if valid[key]:
            if value > 2**63 - 1:
                raise _Invalid(f"Proposed value for {key} is too large for a LONG.")
            if abs(value % 1.0) > 1e-6:
                raise _Invalid(f"{key} cannot be a fractional value.")
        records.append(make("ClientQuotaRecord", entity=entity, key=key, value=float(value), remove=False))
    return records


def describe_client_quotas(ctx: ControllerContext, txn: Txn, version: int, req: dict, now_ms: int) -> dict:
    try:
        exact, specified = _filter(req["components"])
    except _Invalid as exc:
        return {"throttle_time_ms": 0, "error_code": int(exc.code), "error_message": str(exc), "entries": None}
    entries = []
    for entity, values in sorted(txn.image.client_quotas.items(), key=lambda item: sort_key(item[0])):
        names = dict(entity)
        if req["strict"] and len(names) != len(exact) + len(specified):
            continue
        if any(t not in names or names[t] != n for t, n in exact.items()):
            continue
        if any(t not in names for t in specified):
            continue
        entries.append({"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                        "values": [{"key": k, "value": v} for k, v in sorted(values.items())]})
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "entries": entries}


def _filter(components: list[dict]) -> tuple[dict, set]:
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for c in components:
        t = c["entity_type"]
        if not t:
            raise _Invalid("Invalid empty entity type.")
        if t in exact or t in specified:
            raise _Invalid(f"Entity type {t} cannot appear more than once in the filter.")
        if t not in ENTITY_TYPES:
            raise _Invalid(f"Unsupported entity type {t}", ErrorCode.UNSUPPORTED_VERSION)
        if c["match_type"] == MATCH_EXACT:
            if c["match"] is None:
                raise _Invalid("Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[t] = c["match"]
        elif c["match_type"] in (MATCH_DEFAULT, MATCH_SPECIFIED):
            if c["match"] is not None:
                raise _Invalid("Request specified a match string with a match type that takes none.")
            if c["match_type"] == MATCH_DEFAULT:
                exact[t] = None
            else:
                specified.add(t)
        else:
            raise _Invalid(f"Unknown match type {c['match_type']}")
    if (IP in exact or IP in specified) and ({USER, CLIENT_ID} & (set(exact) | specified)):
        raise _Invalid("Invalid entity filter component combination. IP filter component should not be "
                       "used with user or clientId filter component.")
    return exact, specified
