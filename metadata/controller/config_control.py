"""Configuration control: IncrementalAlterConfigs and the legacy AlterConfigs on topics,
brokers and KIP-848 groups.

Operations (Kafka's AlterConfigOp): SET a value, DELETE a key (back to its default),
APPEND to / SUBTRACT from a list-typed value.  Each changed key becomes a ConfigRecord
(a null value deletes).  Resources succeed or fail one by one.  The legacy AlterConfigs names
a resource's whole dynamic config: it is the SETs it names plus a DELETE of every other key,
worked out here against the controller's own image (a broker's copy may lag behind a change
just made, whose key would then survive the replace).
"""

from __future__ import annotations

from kraft.protocol.error_codes import ErrorCode
from kraft.server_config import KEYS
from metadata.controller import configs as cfgs
from metadata.controller.common import ApiError, ControllerContext, Txn, named_twice
from metadata.image import ConfigResourceType, MetadataImage
from metadata.serde import make

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def incremental_alter_configs(ctx: ControllerContext, txn: Txn, version: int, req: dict,
                              now_ms: int) -> dict:
    keys = [(r["resource_type"], r["resource_name"]) for r in req["resources"]]
    twice = named_twice(keys)
    image = txn.image  # a resource named twice is refused: none reads another's change
    out = []
    for r in req["resources"]:
        key = (r["resource_type"], r["resource_name"])
        result = {"error_code": 0, "error_message": None, "resource_type": key[0], "resource_name": key[1]}
        out.append(result)
        try:
            if key in twice:
                raise ApiError(ErrorCode.INVALID_REQUEST, "the resource is named twice in the request")
            records = _alter(ctx, image, key, r["configs"])
        except ApiError as e:
            result.update(error_code=int(e.code), error_message=e.message)
            continue
        if not req["validate_only"]:
            txn.add(*records)
    return {"throttle_time_ms": 0, "responses": out}


def alter_configs(ctx: ControllerContext, txn: Txn, version: int, req: dict, now_ms: int) -> dict:
    resources = []
    for r in req["resources"]:
        given = [{"name": c["name"], "config_operation": SET, "value": c["value"]} for c in r["configs"]]
        named = {c["name"] for c in r["configs"]}
        current = txn.image.config(r["resource_type"], r["resource_name"])
        dropped = [{"name": k, "config_operation": DELETE, "value": None} for k in sorted(current) if k not in named]
        resources.append({**r, "configs": given + dropped})
    return incremental_alter_configs(ctx, txn, version, {**req, "resources": resources}, now_ms)


def _table_for(image: MetadataImage, resource_type: int, name: str) -> dict:
    if resource_type == ConfigResourceType.TOPIC:
        if image.topic(name) is None:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic named {name!r}")
        return cfgs.TOPIC_CONFIGS
    if resource_type == ConfigResourceType.BROKER:
        if name != "":
            try:
                if int(name) < 0:
                    raise ValueError
            except ValueError:
                raise ApiError(ErrorCode.INVALID_REQUEST, f"bad broker resource name {name!r}") from None
        return cfgs.BROKER_CONFIGS
    if resource_type == ConfigResourceType.GROUP:
        # Kafka: a group need not exist to be configured (its members get the settings on
        # joining); there is no default group resource.
        if not name:
            raise ApiError(ErrorCode.INVALID_REQUEST, "a group config resource needs a group name")
        return cfgs.GROUP_CONFIGS
    raise ApiError(ErrorCode.INVALID_REQUEST, f"unsupported resource type {resource_type}")


def _alter(ctx: ControllerContext, image: MetadataImage, key: tuple[int, str], changes: list[dict]):
    table = _table_for(image, *key)
    group = key[0] == ConfigResourceType.GROUP
    broker = key[0] == ConfigResourceType.BROKER
    current = dict(image.config(*key))
    new = dict(current)
    seen = set()
    for c in changes:
        name, op, value = c["name"], c["config_operation"], c["value"]
        if name in seen:
            raise ApiError(ErrorCode.INVALID_REQUEST, f"configuration {name} is altered twice")
        seen.add(name)
        spec = table.get(name)
        if spec is None and broker and name in KEYS:
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Cannot update these configs dynamically: {name}")
        if spec is None:
            raise ApiError(ErrorCode.INVALID_CONFIG, cfgs.unknown_group_config(name) if group
                           else f"unknown configuration {name!r}")
        try:
            if op == SET:
                cfgs.validate(table, name, value)
                new[name] = value
            elif op == DELETE:
                new.pop(name, None)
            elif op in (APPEND, SUBTRACT):
                if spec.type != "list":
                    raise cfgs.ConfigError(f"configuration {name} is not a list: cannot "
                                           f"{'append to' if op == APPEND else 'subtract from'} it")
                items = cfgs.validate(table, name, value)
                old = spec.parse(new.get(name, ""))
                if op == APPEND:
                    merged = old + [x for x in items if x not in old]
                else:
                    merged = [x for x in old if x not in items]
                text = ",".join(merged)
                cfgs.validate(table, name, text)
                new[name] = text
            else:
                raise ApiError(ErrorCode.INVALID_REQUEST, f"unknown config operation {op}")
        except cfgs.ConfigError as e:
            # Kafka answers a broker config it cannot apply with INVALID_REQUEST (KAFKA-13609:
            # kept for compatibility), a topic's or a group's with INVALID_CONFIG
            raise ApiError(ErrorCode.INVALID_REQUEST if broker else ErrorCode.INVALID_CONFIG, str(e)) from None
    if group:
        try:
            cfgs.check_group_configs(new, ctx.config.group_consumer)
        except cfgs.ConfigError as e:
            raise ApiError(ErrorCode.INVALID_CONFIG, str(e)) from None
    records = []
    for name in sorted(set(current) | set(new)):
        if current.get(name) != new.get(name):
            records.append(make("ConfigRecord", resource_type=key[0], resource_name=key[1],
                                name=name, value=new.get(name)))
    return records
