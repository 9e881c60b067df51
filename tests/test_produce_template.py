"""Produce requests decoded, and their answers encoded, from a connection's templates
(``kraft.protocol.produce_template``): whatever bytes come, a template either declines them
or gives exactly what the schema-driven codec gives."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.protocol import codec, rpc
from kraft.protocol.produce_template import ProduceTemplates

_PRODUCE = codec.versions_of("Produce")
VERSIONS = list(range(max(_PRODUCE.lo, 3), _PRODUCE.hi + 1))  # v2 and older: message sets, not batches
CONNECTION = ("User:alice", "10.0.0.7", "conn-1")  # principal, client host, connection id


def produce_frame(version: int, correlation_id: int, *, topic: str = "events", index: int = 0,
                  records: bytes = b"r" * 80, acks: int = 1, timeout_ms: int = 30_000,
                  transactional_id: str | None = None, client_id: str | None = "rdkafka") -> bytes:
    """A Produce request's payload (the frame without its size)."""
    body = {"transactional_id": transactional_id, "acks": acks, "timeout_ms": timeout_ms,
            "topic_data": [{"name": topic, "partition_data": [{"index": index, "records": records}]}]}
    return rpc.encode_request("Produce", version, correlation_id, body, client_id=client_id)[4:]


def taught(payload: bytes) -> ProduceTemplates:
    templates = ProduceTemplates()
    templates.learn(rpc.decode_request(payload, None, *CONNECTION))
    return templates


@pytest.mark.parametrize("version", VERSIONS)
def test_a_request_like_the_first_decodes_from_the_template_as_the_codec_decodes_it(version):
    templates = taught(produce_frame(version, 1))
    for correlation_id, index, records in ((2, 0, b"x"), (3, 5, b"y" * 300), (2**31 - 1, 2**31 - 1, b"z" * 70_000)):
        payload = produce_frame(version, correlation_id, index=index, records=records)
        request = templates.decode(payload, *CONNECTION)
        assert request is not None, "a request like the first one was not taken from the template"
        assert request == rpc.decode_request(payload, None, *CONNECTION)
    assert templates.uses == 3


@pytest.mark.parametrize("version", [3, 7, 9, 11])
@pytest.mark.parametrize("change", [
    {"topic": "other"}, {"acks": -1}, {"acks": 0}, {"timeout_ms": 5}, {"client_id": "another"},
    {"client_id": None}, {"transactional_id": "txn"}])
def test_a_request_unlike_the_first_is_left_to_the_codec(version, change):
    templates = taught(produce_frame(version, 1))
    assert templates.decode(produce_frame(version, 2, **change), *CONNECTION) is None


@pytest.mark.parametrize("version", [3, 9])
def test_other_versions_apis_and_trailing_bytes_are_left_to_the_codec(version):
    templates = taught(produce_frame(version, 1))
    other_version = produce_frame(version - 1, 2)
    assert templates.decode(other_version, *CONNECTION) is None
    assert templates.decode(produce_frame(version, 2) + b"\0", *CONNECTION) is None
    metadata = rpc.encode_request("Metadata", 9, 2, {"topics": None, "allow_auto_topic_creation": False},
                                  client_id="rdkafka")[4:]
    assert templates.decode(metadata, *CONNECTION) is None


def test_a_request_for_two_partitions_makes_no_template_and_tagged_fields_are_left_to_the_codec():
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": b"a"}, {"index": 1, "records": b"b"}]}]}
    two = rpc.encode_request("Produce", 9, 1, body)[4:]
    templates = taught(two)
    assert templates.requests == []
    # An unknown tagged field on the request (tag 7, 2 bytes) in place of its empty tags: the
    # codec skips it; the template (built from what the codec read) does not take such bytes.
    tagged = produce_frame(9, 1)[:-1] + b"\x01\x07\x02hi"
    templates = taught(tagged)
    assert templates.decode(tagged, *CONNECTION) is None
    assert templates.decode(produce_frame(9, 2), *CONNECTION) == rpc.decode_request(produce_frame(9, 2), None,
                                                                                     *CONNECTION)


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(VERSIONS), records=st.binary(min_size=0, max_size=300),
       index=st.integers(0, 2**31 - 1), flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)),
                                                       max_size=3),
       cut=st.integers(0, 3))
def test_any_bytes_are_declined_or_decoded_as_the_codec_decodes_them(version, records, index, flips, cut):
    """Bytes near a matching request (bits flipped anywhere, a tail cut off) either do not
    match the template or decode to what the codec makes of them."""
    templates = taught(produce_frame(version, 1, records=b"first"))
    payload = bytearray(produce_frame(version, 9, index=index, records=records))
    for at, mask in flips:
        payload[at % len(payload)] ^= mask
    payload = bytes(payload[:len(payload) - cut])
    request = templates.decode(payload, *CONNECTION)
    if request is not None:
        assert request == rpc.decode_request(payload, None, *CONNECTION)


def answer_body(*, index=0, error_code=0, base_offset=0, log_append_time_ms=-1, log_start_offset=0,
                topic="events", **extra) -> dict:
    result = {"index": index, "error_code": error_code, "base_offset": base_offset,
              "log_append_time_ms": log_append_time_ms, "log_start_offset": log_start_offset, **extra}
    return {"responses": [{"name": topic, "partition_responses": [result]}]}


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(VERSIONS), correlation_id=st.integers(-2**31, 2**31 - 1),
       index=st.integers(0, 2**31 - 1), error_code=st.sampled_from([0, 6, 10, 19, 87]),
       base_offset=st.integers(-1, 2**63 - 1), log_append_time_ms=st.integers(-1, 2**63 - 1),
       log_start_offset=st.integers(-1, 2**63 - 1), topic=st.sampled_from(["events", "kraft-\x7f", "t"]))
def test_answers_from_a_template_are_the_codecs_bytes(version, correlation_id, index, error_code, base_offset,
                                                       log_append_time_ms, log_start_offset, topic):
    templates = ProduceTemplates()
    templates.encode(version, 1, answer_body(topic=topic, error_code=error_code))  # the template
    body = answer_body(index=index, error_code=error_code, base_offset=base_offset, topic=topic,
                       log_append_time_ms=log_append_time_ms, log_start_offset=log_start_offset)
    encoded = templates.encode(version, correlation_id, body)
    assert encoded == rpc.encode_response("Produce", version, correlation_id, body)


@pytest.mark.parametrize("extra", [{"error_message": "no"}, {"record_errors": [
    {"batch_index": 0, "batch_index_error_message": "bad"}]}])
def test_answers_with_messages_or_record_errors_are_left_to_the_codec(extra):
    templates = ProduceTemplates()
    assert templates.encode(9, 1, answer_body()) is not None
    assert templates.encode(9, 2, answer_body(**extra)) is None
    assert templates.encode(9, 3, {"responses": [], "throttle_time_ms": 0}) is None


def test_a_connection_spraying_topics_stops_building_templates():
    templates = ProduceTemplates()
    for n in range(200):
        payload = produce_frame(9, n, topic=f"topic-{n}")
        assert templates.decode(payload, *CONNECTION) is None
        templates.learn(rpc.decode_request(payload, None, *CONNECTION))
    assert templates.builds < 20 and len(templates.requests) <= 4


def test_an_answer_a_template_cannot_hold_is_left_to_the_codec():
    templates = ProduceTemplates()
    assert templates.encode(9, 1, answer_body()) is not None
    assert templates.encode(9, 2, answer_body(base_offset=2**63)) is None  # the codec then says why


@pytest.mark.parametrize("version", [3, 9])
def test_a_transactional_producers_requests_have_their_own_template(version):
    templates = taught(produce_frame(version, 1, transactional_id="txn-1", acks=-1))
    payload = produce_frame(version, 2, transactional_id="txn-1", acks=-1, index=3)
    assert templates.decode(payload, *CONNECTION) == rpc.decode_request(payload, None, *CONNECTION)
    assert templates.decode(produce_frame(version, 3, transactional_id="txn-2", acks=-1), *CONNECTION) is None


def test_a_template_does_not_keep_the_records_it_was_taught_with():
    big = b"r" * 1_000_000
    templates = taught(produce_frame(9, 1, records=big))
    (template,) = templates.requests
    assert all("r" * 1000 not in repr(kept) for kept in (template.body, template.topic, template.partition))
    assert b"r" * 1000 not in template.prefix
    payload = produce_frame(9, 2, records=b"x")
    assert templates.decode(payload, *CONNECTION) == rpc.decode_request(payload, None, *CONNECTION)
