"""metadata/serde.py: metadata-log record values in Kafka's MetadataRecordSerde format."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kraft.protocol import codec
from kraft.protocol import primitives as p
from kraft.protocol.tables import TABLE
from metadata import serde

ALL_RECORDS = sorted(
    (name, v)
    for (name, kind), spec in TABLE.messages.items() if kind == "metadata"
    for v in range(spec.versions.lo, spec.versions.hi + 1)
)


def test_every_metadata_record_of_the_table_has_a_type():
    assert serde.RECORD_TYPES["RegisterBrokerRecord"] == 0
    assert serde.RECORD_TYPES["TopicRecord"] == 2
    assert serde.RECORD_TYPES["PartitionChangeRecord"] == 5
    assert serde.RECORD_TYPES["NoOpRecord"] == 20
    assert serde.RECORD_NAMES[9] == "RemoveTopicRecord"
    assert len(serde.RECORD_TYPES) == len(serde.RECORD_NAMES) == len({n for n, _ in ALL_RECORDS})


@pytest.mark.parametrize("name,version", ALL_RECORDS)
def test_default_record_round_trips_and_matches_the_codec(name, version):
    record = serde.make(name, version, **codec.default_message(name, "metadata"))
    value = serde.encode(record)
    head = bytearray()
    p.write_uvarint(head, 1)
    p.write_uvarint(head, serde.RECORD_TYPES[name])
    p.write_uvarint(head, version)
    assert value.startswith(bytes(head))
    assert value[len(head):] == codec.encode(name, "metadata", version, record.data)
    assert serde.decode(value) == record


def test_topic_record_bytes_are_kafkas():
    topic_id = uuid.UUID("01234567-89ab-cdef-0123-456789abcdef")
    value = serde.encode(serde.make("TopicRecord", name="foo", topic_id=topic_id))
    # frame 1, type 2, version 0, compact string "foo", uuid, no tagged fields
    assert value == b"\x01\x02\x00" + b"\x04foo" + topic_id.bytes + b"\x00"


def test_partition_change_tagged_fields_round_trip():
    topic_id = uuid.uuid4()
    rec = serde.make("PartitionChangeRecord", partition_id=4, topic_id=topic_id, isr=[1, 2], leader=2)
    back = serde.decode(serde.encode(rec))
    assert back.data["isr"] == [1, 2] and back.data["leader"] == 2
    assert back.data["replicas"] is None  # absent tag: unchanged
    bare = serde.decode(serde.encode(serde.make("PartitionChangeRecord", partition_id=4, topic_id=topic_id)))
    assert bare.data["leader"] == -2 and bare.data["isr"] is None


def _value(frame, rtype, version, body=b""):
    out = bytearray()
    for n in (frame, rtype, version):
        p.write_uvarint(out, n)
    return bytes(out) + body


def test_unknown_type_is_a_typed_error():
    with pytest.raises(serde.UnknownRecordType) as e:
        serde.decode(_value(1, 9999, 0))
    assert e.value.record_type == 9999
    with pytest.raises(serde.UnknownRecordType):
        serde.make("NoSuchRecord")


def test_unknown_version_is_a_typed_error():
    with pytest.raises(serde.UnsupportedRecordVersion) as e:
        serde.decode(_value(1, serde.RECORD_TYPES["TopicRecord"], 7))
    assert (e.value.name, e.value.version) == ("TopicRecord", 7)
    with pytest.raises(serde.UnsupportedRecordVersion):
        serde.make("TopicRecord", 3, name="x")


@pytest.mark.parametrize("value", [
    None,
    b"",
    _value(2, 2, 0),  # frame version
    _value(1, 2, 0, b"\x04fo"),  # truncated body
    serde.encode(serde.make("NoOpRecord")) + b"\x00",  # trailing byte
])
def test_bad_values_raise_serde_errors(value):
    with pytest.raises(serde.MetadataSerdeError):
        serde.decode(value)


def test_make_rejects_unknown_fields_and_encode_rejects_bad_values():
    with pytest.raises(ValueError):
        serde.make("TopicRecord", nmae="typo")
    with pytest.raises(serde.MetadataSerdeError):
        serde.encode(serde.make("TopicRecord", name=None))


@given(
    partition=st.integers(0, 2**31 - 1),
    isr=st.none() | st.lists(st.integers(0, 2**31 - 1), max_size=5),
    replicas=st.none() | st.lists(st.integers(0, 2**31 - 1), max_size=5),
    leader=st.integers(-2, 2**31 - 1),
    recovery=st.sampled_from([-1, 0, 1]),
    topic_id=st.uuids(),
)
def test_partition_change_round_trip_property(partition, isr, replicas, leader, recovery, topic_id):
    rec = serde.make("PartitionChangeRecord", partition_id=partition, topic_id=topic_id, isr=isr,
                     replicas=replicas, leader=leader, leader_recovery_state=recovery)
    value = serde.encode(rec)
    assert serde.decode(value) == rec
    assert serde.decode_all(serde.encode_all([rec, rec])) == [rec, rec]
