"""Feature flags (KIP-584): the levels a kraft node supports and the levels the cluster
finalized.

A finalized level is a FeatureLevelRecord in the metadata log: ``kraftctl format`` writes the
bootstrap levels into bootstrap.checkpoint (as ``kafka-storage format`` does) and
UpdateFeatures (``kafka-features upgrade|downgrade|disable``) changes them through the
controller.  ApiVersions v3+ reports both, on broker and controller listeners, which is what
``kafka-features describe`` and the admin clients' describeFeatures print.
"""

from __future__ import annotations

from collections.abc import Mapping

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"

# feature -> (lowest, highest) level this node can run with.
SUPPORTED: dict[str, tuple[int, int]] = {
    # 3.3-IV3 .. 3.9-IV0: the metadata records kraft reads and writes (no KIP-966 eligible
    # leader replicas, which 4.0's levels add; Kafka 4 starts at 3.3-IV3 too)
    METADATA_VERSION: (7, 21),
    # 1: the voter set lives in the log (KIP-853), which kraft's quorum always records
    KRAFT_VERSION: (0, 1),
    # 1: KIP-848's consumer group protocol (ConsumerGroupHeartbeat).  kraft's coordinator
    # always speaks it (a broker turns it off with group.coordinator.rebalance.protocols), so
    # level 0 is not offered: a finalized 0 would claim a protocol off that is still served.
    "group.version": (1, 1),
    # KIP-890 part 2 (level 2) is not implemented: clients keep to KIP-98's transactions
    "transaction.version": (0, 0),
}

# What a new cluster starts with (kraftctl format; --release-version and --feature override).
BOOTSTRAP_LEVELS: dict[str, int] = {METADATA_VERSION: SUPPORTED[METADATA_VERSION][1], "group.version": 1}

# metadata.version's levels by Kafka's names for them (MetadataVersion), within SUPPORTED
METADATA_VERSION_NAMES: dict[str, int] = {
    "3.3-IV3": 7,
    "3.4-IV0": 8, "3.5-IV0": 9, "3.5-IV1": 10, "3.5-IV2": 11, "3.6-IV0": 12, "3.6-IV1": 13, "3.6-IV2": 14,
    "3.7-IV0": 15, "3.7-IV1": 16, "3.7-IV2": 17, "3.7-IV3": 18, "3.7-IV4": 19, "3.8-IV0": 20, "3.9-IV0": 21,
}


class FeatureError(ValueError):
    """A --release-version or --feature that kraft cannot start a cluster with."""


def metadata_version_level(release: str) -> int:
    """The metadata.version level of a release: "3.9-IV0", or "3.9" for its latest level."""
    text = release.strip()
    if text in METADATA_VERSION_NAMES:
        return METADATA_VERSION_NAMES[text]
    levels = [level for name, level in METADATA_VERSION_NAMES.items() if name.split("-")[0] == text]
    if not levels:
        names = sorted(METADATA_VERSION_NAMES, key=METADATA_VERSION_NAMES.get)
        raise FeatureError(f"unknown or unsupported release version {release!r}: kraft runs metadata.version "
                           f"{names[0]} to {names[-1]}")
    return max(levels)


def bootstrap_levels(release_version: str | None = None, features=()) -> dict[str, int]:
    """The levels ``kraftctl format`` writes: BOOTSTRAP_LEVELS, metadata.version from
    ``release_version``, then each ``name=level`` of ``features``."""
    levels = dict(BOOTSTRAP_LEVELS)
    if release_version is not None:
        levels[METADATA_VERSION] = metadata_version_level(release_version)
    for item in features:
        name, sep, text = item.partition("=")
        name = name.strip()
        try:
            level = int(text)
        except ValueError:
            raise FeatureError(f"--feature {item!r}: expected name=level") from None
        if name not in SUPPORTED:
            raise FeatureError(f"--feature {item!r}: unknown feature (kraft's: {', '.join(sorted(SUPPORTED))})")
        lo, hi = SUPPORTED[name]
        if not sep or not lo <= level <= hi:
            raise FeatureError(f"--feature {item!r}: kraft supports {name} levels {lo}-{hi}")
        levels[name] = level
    levels.pop(KRAFT_VERSION, None)  # the quorum's own: always 1
    return levels


def bootstrap_records(levels: Mapping[str, int]) -> list:
    """FeatureLevelRecords for ``levels``, metadata.version first (it says how the records
    after it are read); a level 0 is no record."""
    from metadata.serde import make

    return [make("FeatureLevelRecord", name=name, feature_level=level)
            for name, level in sorted(levels.items(), key=lambda kv: (kv[0] != METADATA_VERSION, kv[0])) if level]

# UpdateFeatures' upgrade types
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


def finalized(image_features: Mapping[str, int]) -> dict[str, int]:
    """The finalized levels the cluster runs at: its FeatureLevelRecords' (a level 0 is no
    finalized level, as in Kafka) and kraft.version, which is the quorum's own."""
    levels = {name: level for name, level in image_features.items() if level}
    levels[KRAFT_VERSION] = SUPPORTED[KRAFT_VERSION][1]
    return levels


def api_versions_fields(image, version: int) -> dict:
    """ApiVersions' feature fields from ``image`` (a MetadataImage) for a response of
    ``version``.  Below version 4 a feature whose lowest supported level is 0 is left out:
    clients older than Kafka 3.9 fail to read a range starting at 0 (KAFKA-17492)."""
    if version < 3:
        return {}
    return {
        "supported_features": [{"name": name, "min_version": lo, "max_version": hi}
                               for name, (lo, hi) in sorted(SUPPORTED.items()) if version >= 4 or lo > 0],
        "finalized_features_epoch": image.offset,
        "finalized_features": [{"name": name, "max_version_level": level, "min_version_level": level}
                               for name, level in sorted(finalized(image.features).items())],
    }


def registration_features() -> list[dict]:
    """BrokerRegistration's features: every feature with the levels this node supports."""
    return [{"name": name, "min_supported_version": lo, "max_supported_version": hi}
            for name, (lo, hi) in sorted(SUPPORTED.items())]
