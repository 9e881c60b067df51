"""Feature flags (KIP-584) at the controller and at format: UpdateFeatures' rules (every
update checked before any is written, each level supported by the controller and every
registered broker, downgrades only when asked for and never for metadata.version) and the
levels ``kraftctl format`` starts a cluster with."""

import pytest

from kraft.protocol.error_codes import ErrorCode as E
from metadata.features import (FeatureError, SUPPORTED, api_versions_fields, bootstrap_levels, bootstrap_records,
                               registration_features)
from metadata.image import MetadataImage
from test_metadata_helpers import Harness

UPGRADE, SAFE, UNSAFE = 1, 2, 3


def _update(h, *updates, version=1, validate_only=False):
    body = {"timeout_ms": 60000, "validate_only": validate_only, "feature_updates": [
        {"feature": name, "max_version_level": level, "upgrade_type": kind, "allow_downgrade": kind != UPGRADE}
        for name, level, kind in updates]}
    return h.send("UpdateFeatures", body, version=version)


@pytest.fixture
def h():
    h = Harness()
    h.ctl.bootstrap = tuple(bootstrap_records(bootstrap_levels("3.7")))
    h.register(1, features=registration_features())
    h.register(2, features=registration_features())
    return h


def test_upgrade_and_downgrade_rules(h):
    assert h.ctl.image.features == {"metadata.version": 19, "group.version": 1}
    resp = _update(h, ("metadata.version", 21, UPGRADE))
    assert resp["error_code"] == 0 and resp["results"] == [{"feature": "metadata.version", "error_code": 0,
                                                            "error_message": None}]
    assert h.ctl.image.features["metadata.version"] == 21
    resp = _update(h, ("metadata.version", 20, UPGRADE))
    assert resp["error_code"] == E.INVALID_UPDATE_VERSION
    assert "without setting the upgrade type" in resp["error_message"]
    before = h.log_end
    assert _update(h, ("group.version", 1, SAFE))["error_code"] == 0  # the level it has: nothing to write
    assert h.log_end == before
    resp = _update(h, ("metadata.version", 21, UPGRADE), version=2)
    assert resp["error_code"] == 0 and not resp["results"]  # v2 has no per-feature results


def test_a_cluster_formatted_without_features_can_finalize_them():
    h = Harness()
    h.register(1, features=registration_features())
    assert _update(h, ("metadata.version", 21, UPGRADE), ("group.version", 1, UPGRADE))["error_code"] == 0
    assert h.ctl.image.features == {"metadata.version": 21, "group.version": 1}


@pytest.mark.parametrize("updates,why", [
    ([("metadata.version", 18, SAFE)], "might delete metadata information"),
    ([("metadata.version", 18, UNSAFE)], "Unsafe metadata downgrade is not supported"),
    ([("metadata.version", 22, UPGRADE)], "only supports versions 7-21"),
    ([("transaction.version", 2, UPGRADE)], "only supports versions 0-0"),
    ([("kraft.version", 0, SAFE)], "the controller quorum's own"),
    ([("no.such.version", 1, UPGRADE)], "does not support the given feature"),
    ([("group.version", -1, SAFE)], "cannot be less than 0"),
    ([("group.version", 0, SAFE)], "only supports versions 1-1"),
    ([("metadata.version", 22, SAFE)], "only supports versions 7-21"),
    ([("group.version", 1, 7)], "upgrade type"),
    # all or nothing: the valid first update is not written either
    ([("metadata.version", 21, UPGRADE), ("group.version", 2, UPGRADE)], "only supports versions 1-1"),
])
def test_refused_updates_write_nothing(h, updates, why):
    before = (h.log_end, dict(h.ctl.image.features))
    resp = _update(h, *updates)
    assert resp["error_code"] == E.INVALID_UPDATE_VERSION and why in resp["error_message"], resp
    assert (h.log_end, dict(h.ctl.image.features)) == before


def test_a_broker_that_does_not_list_a_feature_supports_only_level_0():
    h = Harness()
    h.register(1, features=registration_features())
    h.register(3, features=[{"name": "metadata.version", "min_supported_version": 7, "max_supported_version": 21}])
    resp = _update(h, ("group.version", 1, UPGRADE))
    assert resp["error_code"] == E.INVALID_UPDATE_VERSION and "Broker 3 does not support this feature" in \
        resp["error_message"]
    resp = _update(h, ("metadata.version", 21, UPGRADE))
    assert resp["error_code"] == 0


def test_validate_only_writes_nothing(h):
    before = h.log_end
    assert _update(h, ("metadata.version", 21, UPGRADE), validate_only=True)["error_code"] == 0
    assert h.log_end == before and h.ctl.image.features["metadata.version"] == 19


def test_format_levels():
    assert bootstrap_levels() == {"metadata.version": 21, "group.version": 1}
    assert bootstrap_levels("3.7-IV2", ["transaction.version=0", "kraft.version=1"]) == {
        "metadata.version": 17, "group.version": 1, "transaction.version": 0}
    assert [(r.data["name"], r.data["feature_level"]) for r in bootstrap_records(bootstrap_levels("3.8"))] == [
        ("metadata.version", 20), ("group.version", 1)]
    for bad in (("4.0", ()), ("3.2", ()), (None, ["group.version=0"]), (None, ["bogus=1"]),
                (None, ["group.version"]), (None, ["metadata.version=6"])):
        with pytest.raises(FeatureError):
            bootstrap_levels(*bad)


def test_api_versions_leaves_ranges_from_0_out_below_version_4():
    image = MetadataImage(offset=41, features={"metadata.version": 21, "group.version": 1})
    v3, v4 = api_versions_fields(image, 3), api_versions_fields(image, 4)
    assert [f["name"] for f in v3["supported_features"]] == ["group.version", "metadata.version"]
    assert {f["name"] for f in v4["supported_features"]} == set(SUPPORTED)
    assert v3["finalized_features_epoch"] == 41
    assert {f["name"]: f["max_version_level"] for f in v3["finalized_features"]} == {
        "metadata.version": 21, "group.version": 1, "kraft.version": 1}
    assert api_versions_fields(image, 2) == {}
