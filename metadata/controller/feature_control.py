"""UpdateFeatures (KIP-584, ``kafka-features upgrade|downgrade|disable``): change a finalized
feature level with a FeatureLevelRecord.

As Kafka's controller: every update of a request is checked first and either all are written
or none; a level must be supported by this controller (every kraft node runs the same table,
``metadata.features.SUPPORTED``) and by every registered broker, whose registration lists the
levels it supports (a feature it does not list supports level 0 only); a lower level needs a
downgrade upgrade type and a higher one an upgrade.  metadata.version is never lowered: its
levels change the records' formats, and Kafka refuses the same downgrades ("might delete
metadata information") without a way to force them.
"""

from __future__ import annotations

from kraft.protocol.error_codes import ErrorCode
from metadata.controller.common import ControllerContext, Txn
from metadata.features import KRAFT_VERSION, METADATA_VERSION, SAFE_DOWNGRADE, SUPPORTED, UNSAFE_DOWNGRADE, UPGRADE
from metadata.image import MetadataImage
from metadata.serde import make


class _Invalid(Exception):
    pass


def update_features(ctx: ControllerContext, txn: Txn, version: int, req: dict, now_ms: int) -> dict:
    records = []
    try:
        for update in req["feature_updates"]:
            name, level = update["feature"], update["max_version_level"]
            if version == 0:
                kind = SAFE_DOWNGRADE if update["allow_downgrade"] else UPGRADE
            else:
                kind = update["upgrade_type"]
            records.extend(_update(txn.image, name, level, kind))
    except _Invalid as exc:
        message = f"The update failed for all features since the following feature had an error: {exc}"
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.INVALID_UPDATE_VERSION),
                "error_message": message, "results": []}
    if not req.get("validate_only", False):
        txn.add(*records)
    results = [{"feature": u["feature"], "error_code": 0, "error_message": None} for u in req["feature_updates"]]
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "results": results if version <= 1 else []}


def _update(image: MetadataImage, name: str, level: int, kind: int) -> list:
    def invalid(why: str):
        if name == METADATA_VERSION:
            return _Invalid(f"Invalid metadata.version {level}. {why}")
        return _Invalid(f"Invalid update version {level} for feature {name}. {why}")

    if kind not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        raise invalid("The controller does not support the given upgrade type.")
    if level < 0:
        raise invalid("A feature version cannot be less than 0.")
    if name == KRAFT_VERSION:  # kafka-features upgrade --release-version names it at the level it has
        if level != SUPPORTED[KRAFT_VERSION][1]:
            raise invalid("kraft.version is the controller quorum's own: kraft always runs it at level 1.")
        return []
    supported = SUPPORTED.get(name)
    if supported is None:
        if level > 0:
            raise invalid("The controller does not support the given feature.")
    elif not supported[0] <= level <= supported[1]:
        raise invalid(f"The controller only supports versions {supported[0]}-{supported[1]}")
    for broker_id, broker in sorted(image.brokers.items()):
        ranges = {f.name: (f.min_supported, f.max_supported) for f in broker.features}
        lo, hi = ranges.get(name, (0, 0))
        if not lo <= level <= hi:
            raise invalid(f"Broker {broker_id} does not support this feature." if (lo, hi) == (0, 0)
                          else f"Broker {broker_id} only supports versions {lo}-{hi}")
    current = image.features.get(name, 0)
    if level < current and kind == UPGRADE:
        raise invalid("Can't downgrade the version of this feature without setting the upgrade type to "
                      "either safe or unsafe downgrade.")
    if level > current and kind != UPGRADE:
        raise invalid("Can't downgrade to a newer version.")
    if name == METADATA_VERSION:
        if level < current:
            raise invalid("Unsafe metadata downgrade is not supported in this version." if kind == UNSAFE_DOWNGRADE
                          else "Refusing to perform the requested downgrade because it might delete metadata "
                               "information.")
    if level == current:
        return []
    return [make("FeatureLevelRecord", name=name, feature_level=level)]
