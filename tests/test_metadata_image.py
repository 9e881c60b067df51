"""metadata/image.py and delta.py: replaying records, immutability, snapshot round trips."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metadata import serde
from metadata.delta import MetadataDelta, ReplayError, apply_records, image_from_records
from metadata.image import EMPTY_IMAGE
from metadata.serde import make

T1 = uuid.UUID(int=11)
T2 = uuid.UUID(int=22)


def broker(bid, epoch=10, fenced=False, rack=None):
    return make("RegisterBrokerRecord", broker_id=bid, broker_epoch=epoch, incarnation_id=uuid.UUID(int=bid),
                rack=rack, fenced=fenced)


def base_image():
    return apply_records(EMPTY_IMAGE, [
        make("FeatureLevelRecord", name="metadata.version", feature_level=14),
        broker(1), broker(2), broker(3),
        make("TopicRecord", name="foo", topic_id=T1),
        make("PartitionRecord", partition_id=0, topic_id=T1, replicas=[1, 2, 3], isr=[1, 2, 3],
             leader=1, leader_epoch=0, partition_epoch=0),
        make("ConfigRecord", resource_type=2, resource_name="foo", name="retention.ms", value="100"),
    ], 6)


def test_partition_change_semantics():
    img = base_image()
    assert img.offset == 6
    # -2 leader and null isr/replicas leave those alone; the partition epoch still moves
    img2 = apply_records(img, [make("PartitionChangeRecord", partition_id=0, topic_id=T1, isr=[1, 2])], 7)
    p = img2.partition(T1, 0)
    assert (p.leader, p.leader_epoch, p.partition_epoch, p.isr, p.replicas) == (1, 0, 1, (1, 2), (1, 2, 3))
    # an explicit leader bumps the leader epoch, even when it is the same broker
    img3 = apply_records(img2, [make("PartitionChangeRecord", partition_id=0, topic_id=T1, leader=1)])
    assert (img3.partition(T1, 0).leader_epoch, img3.partition(T1, 0).partition_epoch) == (1, 2)
    img4 = apply_records(img3, [make("PartitionChangeRecord", partition_id=0, topic_id=T1, leader=-1,
                                     leader_recovery_state=1)])
    p = img4.partition(T1, 0)
    assert (p.leader, p.leader_epoch, p.leader_recovery_state) == (-1, 2, 1)
    # the old images did not change
    assert img.partition(T1, 0).isr == (1, 2, 3) and img2.partition(T1, 0).leader_epoch == 0


def test_broker_state_records():
    img = base_image()
    img = apply_records(img, [make("FenceBrokerRecord", id=2, epoch=10)])
    assert img.broker(2).fenced and not img.broker(1).fenced
    img = apply_records(img, [make("UnfenceBrokerRecord", id=2, epoch=10)])
    assert not img.broker(2).fenced
    img = apply_records(img, [make("BrokerRegistrationChangeRecord", broker_id=3, broker_epoch=10,
                                   fenced=1, in_controlled_shutdown=1)])
    assert img.broker(3).fenced and img.broker(3).in_controlled_shutdown
    img = apply_records(img, [make("BrokerRegistrationChangeRecord", broker_id=3, broker_epoch=10, fenced=-1)])
    assert not img.broker(3).fenced and img.broker(3).in_controlled_shutdown
    assert [b.id for b in img.active_brokers()] == [1, 2]
    img = apply_records(img, [make("UnregisterBrokerRecord", broker_id=1, broker_epoch=10)])
    assert img.broker(1) is None
    with pytest.raises(ReplayError):
        apply_records(img, [make("FenceBrokerRecord", id=2, epoch=99)])  # wrong epoch
    with pytest.raises(ReplayError):
        apply_records(img, [make("UnfenceBrokerRecord", id=1, epoch=10)])  # unregistered


def test_topic_removal_takes_configs_and_frees_the_name():
    img = base_image()
    img = apply_records(img, [make("RemoveTopicRecord", topic_id=T1)])
    assert img.topic("foo") is None and img.topic_by_id(T1) is None
    assert img.config(2, "foo") == {}
    img = apply_records(img, [
        make("TopicRecord", name="foo", topic_id=T2),
        make("PartitionRecord", partition_id=0, topic_id=T2, replicas=[2], isr=[2], leader=2),
    ])
    assert img.topic("foo").id == T2
    with pytest.raises(ReplayError):
        apply_records(img, [make("PartitionChangeRecord", partition_id=0, topic_id=T1, leader=2)])
    with pytest.raises(ReplayError):
        apply_records(img, [make("TopicRecord", name="foo", topic_id=T1)])  # name taken


def test_configs_features_producer_ids():
    img = base_image()
    img = apply_records(img, [
        make("ConfigRecord", resource_type=2, resource_name="foo", name="retention.ms", value=None),
        make("ConfigRecord", resource_type=4, resource_name="", name="min.insync.replicas", value="2"),
        make("FeatureLevelRecord", name="x.version", feature_level=3),
        make("ProducerIdsRecord", broker_id=1, broker_epoch=10, next_producer_id=2000),
        make("NoOpRecord"),
    ])
    assert (2, "foo") not in img.configs
    assert img.config(4, "") == {"min.insync.replicas": "2"}
    assert img.features == {"metadata.version": 14, "x.version": 3}
    assert img.next_producer_id == 2000
    img = apply_records(img, [make("FeatureLevelRecord", name="x.version", feature_level=0)])
    assert "x.version" not in img.features
    with pytest.raises(ReplayError):
        apply_records(img, [make("ProducerIdsRecord", broker_id=1, broker_epoch=10, next_producer_id=1000)])


def test_images_are_immutable():
    img = base_image()
    with pytest.raises(TypeError):
        img.brokers[9] = None
    with pytest.raises(TypeError):
        img.topic("foo").partitions[1] = None
    with pytest.raises(AttributeError):
        img.offset = 3
    with pytest.raises(AttributeError):
        img.partition(T1, 0).leader = 2
    delta = MetadataDelta(img)
    delta.replay(make("RemoveTopicRecord", topic_id=T1))
    assert img.topic("foo") is not None  # a delta never touches its base


def test_untouched_parts_are_shared():
    img = base_image()
    img2 = apply_records(img, [make("FenceBrokerRecord", id=1, epoch=10)])
    assert img2.topics_by_id is img.topics_by_id and img2.configs is img.configs


# ---------------------------------------------------------------------------------------
# Snapshot round trip


@st.composite
def images(draw):
    records = []
    for name, level in draw(st.dictionaries(st.sampled_from(["metadata.version", "kraft.version", "group.version"]),
                                            st.integers(1, 20), max_size=3)).items():
        records.append(make("FeatureLevelRecord", name=name, feature_level=level))
    broker_ids = draw(st.lists(st.integers(0, 20), unique=True, max_size=6))
    for bid in broker_ids:
        records.append(make(
            "RegisterBrokerRecord", broker_id=bid, broker_epoch=draw(st.integers(0, 10**6)),
            incarnation_id=draw(st.uuids()), rack=draw(st.none() | st.sampled_from(["a", "b"])),
            fenced=draw(st.booleans()), in_controlled_shutdown=draw(st.booleans()),
            end_points=[{"name": "PLAINTEXT", "host": "h", "port": draw(st.integers(1, 65535)),
                         "security_protocol": 0}],
            features=[{"name": "metadata.version", "min_supported_version": 1, "max_supported_version": 20}],
        ))
    for cid in draw(st.lists(st.integers(3000, 3005), unique=True, max_size=2)):
        records.append(make("RegisterControllerRecord", controller_id=cid, incarnation_id=draw(st.uuids()),
                            end_points=[{"name": "CONTROLLER", "host": "c", "port": 9093, "security_protocol": 0}]))
    names = draw(st.lists(st.from_regex(r"[a-z][a-z0-9._-]{0,8}", fullmatch=True), unique=True, max_size=4))
    replicas_st = st.lists(st.sampled_from(broker_ids or [0]), min_size=1, max_size=3, unique=True)
    changes = []
    for name in names:
        topic_id = draw(st.uuids().filter(lambda u: u.int != 0))
        records.append(make("TopicRecord", name=name, topic_id=topic_id))
        for index in range(draw(st.integers(1, 4))):
            replicas = draw(replicas_st)
            records.append(make("PartitionRecord", partition_id=index, topic_id=topic_id, replicas=replicas,
                                isr=replicas[:draw(st.integers(1, len(replicas)))], leader=replicas[0],
                                leader_epoch=draw(st.integers(0, 50)), partition_epoch=draw(st.integers(0, 50))))
            if draw(st.booleans()):
                changes.append(make("PartitionChangeRecord", partition_id=index, topic_id=topic_id,
                                    isr=draw(st.none() | st.just(replicas[:1])),
                                    leader=draw(st.sampled_from([-2, -1, replicas[-1]])),
                                    leader_recovery_state=draw(st.sampled_from([-1, 0, 1]))))
        for key in draw(st.lists(st.sampled_from(["retention.ms", "cleanup.policy", "segment.bytes"]), unique=True)):
            records.append(make("ConfigRecord", resource_type=2, resource_name=name, name=key,
                                value=draw(st.text(max_size=5))))
    if names and draw(st.booleans()):
        victim = draw(st.sampled_from(names))
        changes.append(make("RemoveTopicRecord", topic_id=[r for r in records if r.name == "TopicRecord"
                                                          and r.data["name"] == victim][0].data["topic_id"]))
    records.append(make("ProducerIdsRecord", broker_id=1, broker_epoch=1,
                        next_producer_id=draw(st.integers(0, 2**40))))
    image = apply_records(EMPTY_IMAGE, records + changes, draw(st.integers(-1, 10**9)))
    return image


@settings(max_examples=150, deadline=None)
@given(images())
def test_snapshot_round_trip(image):
    snapshot = image.records()
    values = serde.encode_all(snapshot)
    back = image_from_records(serde.decode_all(values), image.offset)
    assert back == image
    # and a snapshot of the rebuilt image is the same snapshot
    assert serde.encode_all(back.records()) == values


def test_empty_image_round_trips():
    assert image_from_records(EMPTY_IMAGE.records(), -1) == EMPTY_IMAGE
    assert EMPTY_IMAGE.is_empty() and not base_image().is_empty()


def test_snapshot_starts_with_metadata_version():
    recs = base_image().records()
    assert recs[0].name == "FeatureLevelRecord" and recs[0].data["name"] == "metadata.version"
