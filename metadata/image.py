"""The cluster metadata image: an immutable picture of the metadata log at one offset.

Every part is frozen: dataclasses with tuples, and read-only mappings (``MappingProxyType``
over a dict nobody else holds).  An image never changes; ``MetadataDelta`` (delta.py)
replays records over one and builds the next, sharing every part it did not touch.

``image.records()`` writes the image out as the records of a snapshot; replaying them into
an empty image gives an equal image (``metadata.delta.image_from_records``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Iterator, Mapping

from kraft.security.authorizer import AclBinding, AclIndex, index_of
from kraft.quotas.entities import sort_key
from kraft.security.scram import ScramCredential
from metadata.serde import MetadataRecord, make

ZERO_UUID = uuid.UUID(int=0)
NO_LEADER = -1
NO_LEADER_CHANGE = -2  # PartitionChangeRecord.leader: unchanged


class LeaderRecoveryState:
    RECOVERED = 0
    RECOVERING = 1
    NO_CHANGE = -1  # PartitionChangeRecord only


class ConfigResourceType:
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    GROUP = 32  # KIP-848 consumer groups' own settings (Kafka 3.9+)


def frozen_map(d=None) -> Mapping:
    """A read-only copy of ``d``.  A dict or a read-only map is copied with ``.copy()``:
    ``dict()`` of a ``MappingProxyType`` takes the generic path, hashing every key again,
    and a ``uuid.UUID`` hashes in Python (5 ms for 10,000 topic ids, 0.06 ms copied)."""
    if d is None:
        return MappingProxyType({})
    return MappingProxyType(d.copy() if isinstance(d, (dict, MappingProxyType)) else dict(d))


EMPTY_MAP: Mapping = frozen_map()


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str
    host: str
    port: int
    security_protocol: int


@dataclass(frozen=True, slots=True)
class FeatureRange:
    name: str
    min_supported: int
    max_supported: int


def _endpoints(items) -> tuple[Endpoint, ...]:
    return tuple(Endpoint(e["name"], e["host"], e["port"], e["security_protocol"]) for e in items)


def _features(items) -> tuple[FeatureRange, ...]:
    return tuple(
        FeatureRange(f["name"], f["min_supported_version"], f["max_supported_version"]) for f in items
    )


def _endpoint_dicts(endpoints):
    return [
        {"name": e.name, "host": e.host, "port": e.port, "security_protocol": e.security_protocol}
        for e in endpoints
    ]


def _feature_dicts(features):
    return [
        {"name": f.name, "min_supported_version": f.min_supported, "max_supported_version": f.max_supported}
        for f in features
    ]


# ---------------------------------------------------------------------------------------
# Cluster


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    id: int
    epoch: int  # the offset of the RegisterBrokerRecord
    incarnation_id: uuid.UUID
    listeners: tuple[Endpoint, ...] = ()
    features: tuple[FeatureRange, ...] = ()
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    is_migrating_zk_broker: bool = False

    @property
    def is_active(self) -> bool:
        """Eligible for leadership, ISR membership and new replicas."""
        return not self.fenced and not self.in_controlled_shutdown

    @classmethod
    def from_record(cls, d: dict) -> "BrokerRegistration":
        return cls(
            id=d["broker_id"], epoch=d["broker_epoch"], incarnation_id=d["incarnation_id"],
            listeners=_endpoints(d["end_points"]), features=_features(d["features"]),
            rack=d["rack"], fenced=bool(d["fenced"]),
            in_controlled_shutdown=bool(d["in_controlled_shutdown"]),
            is_migrating_zk_broker=bool(d["is_migrating_zk_broker"]),
        )

    def to_record(self) -> MetadataRecord:
        return make(
            "RegisterBrokerRecord", broker_id=self.id, broker_epoch=self.epoch,
            incarnation_id=self.incarnation_id, end_points=_endpoint_dicts(self.listeners),
            features=_feature_dicts(self.features), rack=self.rack, fenced=self.fenced,
            in_controlled_shutdown=self.in_controlled_shutdown,
            is_migrating_zk_broker=self.is_migrating_zk_broker,
            _version=2 if self.is_migrating_zk_broker else None,
        )


@dataclass(frozen=True, slots=True)
class ControllerRegistration:
    id: int
    incarnation_id: uuid.UUID
    zk_migration_ready: bool = False
    listeners: tuple[Endpoint, ...] = ()
    features: tuple[FeatureRange, ...] = ()

    @classmethod
    def from_record(cls, d: dict) -> "ControllerRegistration":
        return cls(d["controller_id"], d["incarnation_id"], bool(d["zk_migration_ready"]),
                   _endpoints(d["end_points"]), _features(d["features"]))

    def to_record(self) -> MetadataRecord:
        return make(
            "RegisterControllerRecord", controller_id=self.id, incarnation_id=self.incarnation_id,
            zk_migration_ready=self.zk_migration_ready, end_points=_endpoint_dicts(self.listeners),
            features=_feature_dicts(self.features),
        )


# ---------------------------------------------------------------------------------------
# Topics


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int = NO_LEADER
    leader_epoch: int = 0
    partition_epoch: int = 0
    leader_recovery_state: int = LeaderRecoveryState.RECOVERED
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()

    @classmethod
    def from_record(cls, d: dict) -> "PartitionRegistration":
        return cls(
            replicas=tuple(d["replicas"]), isr=tuple(d["isr"]), leader=d["leader"],
            leader_epoch=d["leader_epoch"], partition_epoch=d["partition_epoch"],
            leader_recovery_state=d["leader_recovery_state"],
            removing_replicas=tuple(d["removing_replicas"]), adding_replicas=tuple(d["adding_replicas"]),
        )

    def to_record(self, topic_id: uuid.UUID, partition_id: int) -> MetadataRecord:
        return make(
            "PartitionRecord", partition_id=partition_id, topic_id=topic_id,
            replicas=list(self.replicas), isr=list(self.isr),
            removing_replicas=list(self.removing_replicas), adding_replicas=list(self.adding_replicas),
            leader=self.leader, leader_recovery_state=self.leader_recovery_state,
            leader_epoch=self.leader_epoch, partition_epoch=self.partition_epoch,
        )

    def merge(self, change: dict) -> "PartitionRegistration":
        """Apply a PartitionChangeRecord body, as Kafka does.

        An explicit leader (anything but -2) bumps the leader epoch, even if it names the
        current leader; every change bumps the partition epoch.
        """
        fields: dict = {"partition_epoch": self.partition_epoch + 1}
        if change["isr"] is not None:
            fields["isr"] = tuple(change["isr"])
        if change["replicas"] is not None:
            fields["replicas"] = tuple(change["replicas"])
        if change["removing_replicas"] is not None:
            fields["removing_replicas"] = tuple(change["removing_replicas"])
        if change["adding_replicas"] is not None:
            fields["adding_replicas"] = tuple(change["adding_replicas"])
        if change["leader"] != NO_LEADER_CHANGE:
            fields["leader"] = change["leader"]
            fields["leader_epoch"] = self.leader_epoch + 1
        if change["leader_recovery_state"] != LeaderRecoveryState.NO_CHANGE:
            fields["leader_recovery_state"] = change["leader_recovery_state"]
        return replace(self, **fields)

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    id: uuid.UUID
    partitions: Mapping[int, PartitionRegistration] = field(default_factory=lambda: EMPTY_MAP)

    def records(self) -> Iterator[MetadataRecord]:
        yield make("TopicRecord", name=self.name, topic_id=self.id)
        for index in sorted(self.partitions):
            yield self.partitions[index].to_record(self.id, index)


# ---------------------------------------------------------------------------------------
# The image


@dataclass(frozen=True, slots=True)
class MetadataImage:
    """The metadata log applied up to ``offset`` (-1: nothing applied)."""

    offset: int = -1
    features: Mapping[str, int] = field(default_factory=lambda: EMPTY_MAP)
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=lambda: EMPTY_MAP)
    controllers: Mapping[int, ControllerRegistration] = field(default_factory=lambda: EMPTY_MAP)
    topics_by_id: Mapping[uuid.UUID, TopicImage] = field(default_factory=lambda: EMPTY_MAP)
    topics_by_name: Mapping[str, TopicImage] = field(default_factory=lambda: EMPTY_MAP)
    configs: Mapping[tuple[int, str], Mapping[str, str]] = field(default_factory=lambda: EMPTY_MAP)
    next_producer_id: int = 0
    # SCRAM credentials: (user, Kafka's mechanism type) -> credential (never a password)
    scram_credentials: Mapping[tuple[str, int], ScramCredential] = field(default_factory=lambda: EMPTY_MAP)
    # ACLs (kraft.security.authorizer): the AccessControlEntryRecord's id -> the ACL
    acls: Mapping[uuid.UUID, AclBinding] = field(default_factory=lambda: EMPTY_MAP)
    # Client quotas (ClientQuotaRecord): entity -> {quota key: value}.  An entity is a sorted
    # tuple of (entity type, name) pairs, a name of None being the <default> entity:
    # (("client-id", "app"),), (("client-id", None), ("user", "alice")), ...
    client_quotas: Mapping[tuple[tuple[str, str | None], ...], Mapping[str, float]] = field(
        default_factory=lambda: EMPTY_MAP)

    # -- queries

    @property
    def acl_index(self) -> AclIndex:
        """The ACLs arranged for authorization, built once per ACL change (images that
        share their ``acls`` share it)."""
        return _acl_index(self.acls)

    def topic(self, name: str) -> TopicImage | None:
        return self.topics_by_name.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicImage | None:
        return self.topics_by_id.get(topic_id)

    def partition(self, topic_id: uuid.UUID, index: int) -> PartitionRegistration | None:
        topic = self.topics_by_id.get(topic_id)
        return None if topic is None else topic.partitions.get(index)

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        return self.brokers.get(broker_id)

    def config(self, resource_type: int, name: str) -> Mapping[str, str]:
        return self.configs.get((resource_type, name), EMPTY_MAP)

    def active_brokers(self) -> list[BrokerRegistration]:
        """Unfenced brokers not in controlled shutdown, by id."""
        return [b for _, b in sorted(self.brokers.items()) if b.is_active]

    @property
    def metadata_version(self) -> int:
        return self.features.get("metadata.version", 0)

    def is_empty(self) -> bool:
        return self == MetadataImage(offset=self.offset)

    # -- snapshots

    def records(self) -> list[MetadataRecord]:
        """The image as snapshot records: replaying them into an empty image rebuilds it."""
        out: list[MetadataRecord] = []
        # metadata.version first: it decides how everything after it is read
        for name in sorted(self.features, key=lambda n: (n != "metadata.version", n)):
            out.append(make("FeatureLevelRecord", name=name, feature_level=self.features[name]))
        for broker_id in sorted(self.brokers):
            out.append(self.brokers[broker_id].to_record())
        for controller_id in sorted(self.controllers):
            out.append(self.controllers[controller_id].to_record())
        for name in sorted(self.topics_by_name):
            out.extend(self.topics_by_name[name].records())
        for (resource_type, resource_name) in sorted(self.configs):
            for key, value in sorted(self.configs[(resource_type, resource_name)].items()):
                out.append(make("ConfigRecord", resource_type=resource_type,
                                resource_name=resource_name, name=key, value=value))
        for (user, mechanism), c in sorted(self.scram_credentials.items()):
            out.append(make("UserScramCredentialRecord", name=user, mechanism=mechanism, salt=c.salt,
                            stored_key=c.stored_key, server_key=c.server_key, iterations=c.iterations))
        for acl_id, a in sorted(self.acls.items()):
            out.append(make("AccessControlEntryRecord", id=acl_id, resource_type=a.resource_type,
                            resource_name=a.resource_name, pattern_type=a.pattern_type, principal=a.principal,
                            host=a.host, operation=a.operation, permission_type=a.permission))
        for entity, values in sorted(self.client_quotas.items(), key=lambda e: sort_key(e[0])):
            for key, value in sorted(values.items()):
                out.append(make("ClientQuotaRecord", key=key, value=value, remove=False, entity=[
                    {"entity_type": t, "entity_name": n} for t, n in entity]))
        if self.next_producer_id:
            out.append(make("ProducerIdsRecord", broker_id=-1, broker_epoch=-1,
                            next_producer_id=self.next_producer_id))
        return out


EMPTY_IMAGE = MetadataImage()

_ACL_INDEXES: dict[int, tuple[Mapping, AclIndex]] = {}  # id(acls mapping) -> (it, its index)


def _acl_index(acls: Mapping) -> AclIndex:
    cached = _ACL_INDEXES.get(id(acls))
    if cached is not None and cached[0] is acls:
        return cached[1]
    if len(_ACL_INDEXES) > 16:  # images keep few ACL mappings alive: the newest ones
        _ACL_INDEXES.clear()
    index = index_of(acls)
    _ACL_INDEXES[id(acls)] = (acls, index)
    return index
