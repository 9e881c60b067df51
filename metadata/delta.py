"""MetadataDelta: records replayed over an image, producing the next image.

The delta keeps only what changed (brokers, topics, configs, ... by key); ``apply`` builds a
new image that shares every untouched part with the old one.  Replaying a record that
contradicts the image (a change to a topic that does not exist, say) raises ReplayError:
the log and the image disagree, which is a bug, never a client's mistake.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from types import MappingProxyType

from metadata.image import (
    BrokerRegistration,
    ConfigResourceType,
    ControllerRegistration,
    EMPTY_IMAGE,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
    frozen_map,
)
from kraft.security.authorizer import AclBinding
from kraft.security.scram import ScramCredential
from metadata.serde import MetadataRecord

_DELETED = object()


class ReplayError(ValueError):
    """A record that cannot apply to the image it is replayed over."""


class _TopicChange:
    __slots__ = ("name", "id", "partitions")

    def __init__(self, name: str, topic_id: uuid.UUID, partitions: dict):
        self.name = name
        self.id = topic_id
        self.partitions = partitions


class MetadataDelta:
    """Replays records over ``image``; ``apply()`` gives the resulting image."""

    def __init__(self, image: MetadataImage):
        self.image = image
        self._features: dict[str, object] = {}
        self._brokers: dict[int, object] = {}
        self._controllers: dict[int, object] = {}
        self._topics: dict[uuid.UUID, object] = {}  # id -> _TopicChange | _DELETED
        self._configs: dict[tuple[int, str], object] = {}  # key -> dict | _DELETED
        self._next_producer_id: int | None = None
        self._scram: dict[tuple[str, int], object] = {}  # (user, mechanism) -> credential | _DELETED
        self._acls: dict[uuid.UUID, object] = {}  # id -> AclBinding | _DELETED
        self._quotas: dict[tuple, dict] = {}  # entity -> its quotas after the replayed records
        self.changed_partitions: set[tuple[uuid.UUID, int]] = set()

    # -- reading through the delta

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        b = self._brokers.get(broker_id, None)
        if b is None:
            return self.image.brokers.get(broker_id)
        return None if b is _DELETED else b

    def partition(self, topic_id: uuid.UUID, index: int) -> PartitionRegistration | None:
        """The partition as the records replayed so far leave it, without building an image."""
        t = self._topics.get(topic_id)
        if t is _DELETED:
            return None
        if t is None:
            topic = self.image.topics_by_id.get(topic_id)
            return None if topic is None else topic.partitions.get(index)
        return t.partitions.get(index)

    def _topic(self, topic_id: uuid.UUID) -> _TopicChange | None:
        t = self._topics.get(topic_id)
        if t is _DELETED:
            return None
        if t is None:
            old = self.image.topics_by_id.get(topic_id)
            if old is None:
                return None
            t = self._topics[topic_id] = _TopicChange(old.name, old.id, old.partitions.copy())
        return t

    def _config(self, key: tuple[int, str]) -> dict:
        c = self._configs.get(key)
        if c is _DELETED:
            c = self._configs[key] = {}
        elif c is None:
            c = self._configs[key] = self.image.configs.get(key, {}).copy()
        return c

    # -- replay

    def replay(self, record: MetadataRecord) -> None:
        handler = _HANDLERS.get(record.name)
        if handler is None:
            raise ReplayError(f"no handler for metadata record {record.name}")
        handler(self, record.data)

    def _register_broker(self, d):
        self._brokers[d["broker_id"]] = BrokerRegistration.from_record(d)

    def _unregister_broker(self, d):
        b = self._require_broker(d["broker_id"], d["broker_epoch"])
        self._brokers[b.id] = _DELETED

    def _require_broker(self, broker_id: int, epoch: int) -> BrokerRegistration:
        b = self.broker(broker_id)
        if b is None:
            raise ReplayError(f"broker {broker_id} is not registered")
        if b.epoch != epoch:
            raise ReplayError(f"broker {broker_id} has epoch {b.epoch}, record says {epoch}")
        return b

    def _fence_broker(self, d):
        b = self._require_broker(d["id"], d["epoch"])
        self._brokers[b.id] = replace(b, fenced=True)

    def _unfence_broker(self, d):
        b = self._require_broker(d["id"], d["epoch"])
        self._brokers[b.id] = replace(b, fenced=False)

    def _broker_change(self, d):
        b = self._require_broker(d["broker_id"], d["broker_epoch"])
        fenced = {1: True, -1: False, 0: b.fenced}.get(d["fenced"])
        if fenced is None:
            raise ReplayError(f"bad fencing change {d['fenced']}")
        shutdown = {1: True, 0: b.in_controlled_shutdown}.get(d["in_controlled_shutdown"])
        if shutdown is None:
            raise ReplayError(f"bad controlled shutdown change {d['in_controlled_shutdown']}")
        self._brokers[b.id] = replace(b, fenced=fenced, in_controlled_shutdown=shutdown)

    def _register_controller(self, d):
        self._controllers[d["controller_id"]] = ControllerRegistration.from_record(d)

    def _topic_record(self, d):
        if self._topic(d["topic_id"]) is not None:
            raise ReplayError(f"topic id {d['topic_id']} already exists")
        self._topics[d["topic_id"]] = _TopicChange(d["name"], d["topic_id"], {})

    def _partition_record(self, d):
        t = self._topic(d["topic_id"])
        if t is None:
            raise ReplayError(f"PartitionRecord for unknown topic id {d['topic_id']}")
        t.partitions[d["partition_id"]] = PartitionRegistration.from_record(d)
        self.changed_partitions.add((t.id, d["partition_id"]))

    def _partition_change(self, d):
        t = self._topic(d["topic_id"])
        old = None if t is None else t.partitions.get(d["partition_id"])
        if old is None:
            raise ReplayError(f"PartitionChangeRecord for unknown partition {d['topic_id']}-{d['partition_id']}")
        t.partitions[d["partition_id"]] = old.merge(d)
        self.changed_partitions.add((t.id, d["partition_id"]))

    def _remove_topic(self, d):
        t = self._topic(d["topic_id"])
        if t is None:
            raise ReplayError(f"RemoveTopicRecord for unknown topic id {d['topic_id']}")
        self._topics[t.id] = _DELETED
        # a topic's configuration goes with it (Kafka does the same)
        self._configs[(ConfigResourceType.TOPIC, t.name)] = _DELETED

    def _config_record(self, d):
        key = (d["resource_type"], d["resource_name"])
        c = self._config(key)
        if d["value"] is None:
            c.pop(d["name"], None)
        else:
            c[d["name"]] = d["value"]

    def _feature_level(self, d):
        # level 0 removes the feature
        self._features[d["name"]] = d["feature_level"] if d["feature_level"] else _DELETED

    def _producer_ids(self, d):
        current = self.next_producer_id
        if d["next_producer_id"] < current:
            raise ReplayError(f"next producer id goes back from {current} to {d['next_producer_id']}")
        self._next_producer_id = d["next_producer_id"]

    @property
    def next_producer_id(self) -> int:
        if self._next_producer_id is None:
            return self.image.next_producer_id
        return self._next_producer_id

    def _scram_credential(self, d):
        self._scram[(d["name"], d["mechanism"])] = ScramCredential(
            d["salt"], d["stored_key"], d["server_key"], d["iterations"])

    def _remove_scram_credential(self, d):
        key = (d["name"], d["mechanism"])
        if self._scram.get(key, self.image.scram_credentials.get(key)) in (None, _DELETED):
            raise ReplayError(f"RemoveUserScramCredentialRecord for a credential that does not exist: {key}")
        self._scram[key] = _DELETED

    def _acl(self, d):
        self._acls[d["id"]] = AclBinding.of(d["resource_type"], d["resource_name"], d["pattern_type"],
                                            d["principal"], d["host"], d["operation"], d["permission_type"])

    def _remove_acl(self, d):
        if self._acls.get(d["id"], self.image.acls.get(d["id"])) in (None, _DELETED):
            raise ReplayError(f"RemoveAccessControlEntryRecord for an ACL that does not exist: {d['id']}")
        self._acls[d["id"]] = _DELETED
    def _client_quota(self, d):
        entity = quota_entity(d["entity"])
        values = self._quotas.get(entity)
        if values is None:
            values = self._quotas[entity] = self.image.client_quotas.get(entity, {}).copy()
        if d["remove"]:
            values.pop(d["key"], None)  # as Kafka: removing an absent key is no error
        else:
            values[d["key"]] = d["value"]

    def _ignore(self, d):
        pass

    # -- the next image

    def apply(self, offset: int | None = None) -> MetadataImage:
        """The image after every replayed record; ``offset`` is the last record's offset."""
        img = self.image
        fields: dict = {"offset": img.offset if offset is None else offset}
        if self._features:
            fields["features"] = _merged(img.features, self._features)
        if self._brokers:
            fields["brokers"] = _merged(img.brokers, self._brokers)
        if self._controllers:
            fields["controllers"] = _merged(img.controllers, self._controllers)
        if self._topics:
            # .copy(), not dict(): see frozen_map; the copies are this image's own, so they
            # are wrapped, not copied again.
            by_id = img.topics_by_id.copy()
            by_name = img.topics_by_name.copy()
            for topic_id, change in self._topics.items():
                old = by_id.pop(topic_id, None)
                if old is not None:
                    del by_name[old.name]
            for topic_id, change in self._topics.items():
                if change is _DELETED:
                    continue
                if change.name in by_name:
                    raise ReplayError(f"two topics named {change.name!r}")
                topic = TopicImage(change.name, topic_id, frozen_map(change.partitions))
                by_id[topic_id] = topic
                by_name[change.name] = topic
            fields["topics_by_id"] = MappingProxyType(by_id)
            fields["topics_by_name"] = MappingProxyType(by_name)
        if self._configs:
            configs = img.configs.copy()
            for key, c in self._configs.items():
                if c is _DELETED or not c:
                    configs.pop(key, None)
                else:
                    configs[key] = frozen_map(c)
            fields["configs"] = MappingProxyType(configs)
        if self._next_producer_id is not None:
            fields["next_producer_id"] = self._next_producer_id
        if self._scram:
            fields["scram_credentials"] = _merged(img.scram_credentials, self._scram)
        if self._acls:
            fields["acls"] = _merged(img.acls, self._acls)
        if self._quotas:
            fields["client_quotas"] = _merged(img.client_quotas, {
                entity: frozen_map(values) if values else _DELETED for entity, values in self._quotas.items()})
        return replace(img, **fields)


def _merged(base, changes: dict):
    out = base.copy()
    for key, value in changes.items():
        if value is _DELETED:
            out.pop(key, None)
        else:
            out[key] = value
    return MappingProxyType(out)


_HANDLERS = {
    "RegisterBrokerRecord": MetadataDelta._register_broker,
    "UnregisterBrokerRecord": MetadataDelta._unregister_broker,
    "FenceBrokerRecord": MetadataDelta._fence_broker,
    "UnfenceBrokerRecord": MetadataDelta._unfence_broker,
    "BrokerRegistrationChangeRecord": MetadataDelta._broker_change,
    "RegisterControllerRecord": MetadataDelta._register_controller,
    "TopicRecord": MetadataDelta._topic_record,
    "PartitionRecord": MetadataDelta._partition_record,
    "PartitionChangeRecord": MetadataDelta._partition_change,
    "RemoveTopicRecord": MetadataDelta._remove_topic,
    "ConfigRecord": MetadataDelta._config_record,
    "FeatureLevelRecord": MetadataDelta._feature_level,
    "ProducerIdsRecord": MetadataDelta._producer_ids,
    "NoOpRecord": MetadataDelta._ignore,
    "UserScramCredentialRecord": MetadataDelta._scram_credential,
    "RemoveUserScramCredentialRecord": MetadataDelta._remove_scram_credential,
    "AccessControlEntryRecord": MetadataDelta._acl,
    "RemoveAccessControlEntryRecord": MetadataDelta._remove_acl,
    "ClientQuotaRecord": MetadataDelta._client_quota,
    # Valid metadata that kraft does not model yet (delegation tokens, metadata
    # transactions): replayed as no-ops, absent from snapshots.
    **{name: MetadataDelta._ignore for name in (
        "DelegationTokenRecord",
        "RemoveDelegationTokenRecord", "BeginTransactionRecord", "EndTransactionRecord",
        "AbortTransactionRecord",
    )},
}


def quota_entity(entity_data) -> tuple[tuple[str, str | None], ...]:
    """The image's key for a quota entity given as a record's (or a request's) EntityData."""
    return tuple(sorted(((e["entity_type"], e["entity_name"]) for e in entity_data),
                        key=lambda pair: pair[0]))


def apply_records(image: MetadataImage, records, offset: int | None = None) -> MetadataImage:
    """``image`` with ``records`` replayed (a shortcut for a one-off delta)."""
    delta = MetadataDelta(image)
    for record in records:
        delta.replay(record)
    return delta.apply(offset)


def image_from_records(records, offset: int) -> MetadataImage:
    """An image built from snapshot ``records`` (or any records) replayed from empty."""
    return apply_records(EMPTY_IMAGE, records, offset)
