"""Round trips of every message at every version in the schema table, and the decoder's
behaviour on truncated, byte-by-byte and over-long input."""

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraft.protocol import codec
from kraft.protocol.errors import MalformedMessage
from kraft.protocol.schema import INFINITE
from kraft.protocol.tables import TABLE

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


def scalar(type_):
    if type_ in INT_RANGES:
        lo, hi = INT_RANGES[type_]
        return st.integers(lo, hi)
    if type_ == "bool":
        return st.booleans()
    if type_ == "float64":
        return st.floats(allow_nan=False)
    if type_ == "string":
        return st.text(max_size=8)
    if type_ in ("bytes", "records"):
        return st.binary(max_size=12)
    if type_ == "uuid":
        return st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1))
    raise AssertionError(type_)


def field_strategy(f, version, flexible):
    if f.is_struct:
        elem = struct_strategy(f.fields, version, flexible)
    else:
        elem = scalar(f.element_type)
    value = st.lists(elem, max_size=3) if f.is_array else elem
    if version in f.nullable:
        value = st.none() | value
    return value


def present(f, version, flexible):
    if f.tag is not None:
        return flexible and version in f.tagged_versions
    return version in f.versions


def struct_strategy(fields, version, flexible):
    return st.fixed_dictionaries(
        {f.key: field_strategy(f, version, flexible) for f in fields if present(f, version, flexible)}
    )


def expected(fields, value, version, flexible):
    """What decoding must return: the input plus defaults for fields the version lacks."""
    out = {}
    for f in fields:
        if f.key not in value:
            out[f.key] = codec.field_default(f)
            continue
        v = value[f.key]
        if f.is_struct and v is not None:
            v = [expected(f.fields, x, version, flexible) for x in v] if f.is_array else expected(f.fields, v, version, flexible)
        out[f.key] = v
    return out


CASES = []
for (name, kind), spec in sorted(TABLE.messages.items()):
    hi = spec.versions.hi if spec.versions.hi != INFINITE else spec.versions.lo
    for version in range(spec.versions.lo, hi + 1):
        CASES.append((name, kind, version))


@pytest.mark.parametrize("name,kind,version", CASES, ids=[f"{n}-{k}-v{v}" for n, k, v in CASES])
def test_round_trip_every_message_and_version(name, kind, version):
    spec = TABLE.get(name, kind)
    flexible = version in spec.flexible

    @settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(struct_strategy(spec.fields, version, flexible))
    def check(value):
        data = codec.encode(name, kind, version, value)
        want = expected(spec.fields, value, version, flexible)
        assert codec.decode(name, kind, version, data) == want
        # Byte by byte: every strict prefix is reported as malformed, never a crash.
        for cut in range(len(data)):
            with pytest.raises(MalformedMessage):
                codec.decode(name, kind, version, data[:cut])
        # Trailing data: an error for a whole-buffer decode, ignored by decode_prefix.
        with pytest.raises(MalformedMessage):
            codec.decode(name, kind, version, data + b"\x00")
        decoded, pos = codec.decode_prefix(name, kind, version, data + b"\x01\x02")
        assert (decoded, pos) == (want, len(data))

    check()


def test_known_bytes_of_a_flexible_message():
    # Heartbeat v4 request: compact strings (length+1 as uvarint) and an empty tag section.
    data = codec.encode("Heartbeat", "request", 4,
                        {"group_id": "g", "generation_id": 7, "member_id": "m", "group_instance_id": None})
    assert data == b"\x02g" + b"\x00\x00\x00\x07" + b"\x02m" + b"\x00" + b"\x00"
    # The same at v0: int16-length strings, no instance id, no tag section.
    data = codec.encode("Heartbeat", "request", 0, {"group_id": "g", "generation_id": 7, "member_id": "m"})
    assert data == b"\x00\x01g\x00\x00\x00\x07\x00\x01m"


def test_tagged_fields_are_written_only_when_not_default_and_unknown_tags_are_skipped():
    base = {"leader_id": 1, "leader_epoch": 2, "isr": [1], "partition_epoch": 0}
    # FetchResponse v12+: DivergingEpoch is tagged; a default one is not written.
    part = {"partition_index": 0, "records": None}
    plain = codec.encode("Fetch", "response", 12, {"responses": [{"topic": "t", "partitions": [part]}]})
    tagged = codec.encode("Fetch", "response", 12, {"responses": [{"topic": "t", "partitions": [
        dict(part, diverging_epoch={"epoch": 3, "end_offset": 42})]}]})
    assert len(tagged) > len(plain)
    got = codec.decode("Fetch", "response", 12, tagged)
    assert got["responses"][0]["partitions"][0]["diverging_epoch"] == {"epoch": 3, "end_offset": 42}
    # An unknown tag (99) in the top-level tag section is skipped.
    hb = codec.encode("Heartbeat", "response", 4, {"error_code": 0})
    with_unknown = hb[:-1] + b"\x01" + b"\x63" + b"\x02" + b"\xab\xcd"
    assert codec.decode("Heartbeat", "response", 4, with_unknown) == codec.decode("Heartbeat", "response", 4, hb)
    del base


@pytest.mark.parametrize("payload", [
    b"\x00\x00\x00\x00" + b"\x7f\xff\xff\xff",        # array count far beyond the data
    b"\x00\x00\x00\x00" + b"\xff\xff\xff\xfe",        # negative array count
])
def test_impossible_lengths_are_malformed(payload):
    with pytest.raises(MalformedMessage):
        codec.decode("Metadata", "request", 4, payload[4:])


def test_varint_longer_than_five_bytes_is_malformed():
    with pytest.raises(MalformedMessage):
        codec.decode("Heartbeat", "request", 4, b"\xff\xff\xff\xff\xff\xff\x01")


def test_invalid_utf8_is_malformed():
    with pytest.raises(MalformedMessage):
        codec.decode("Heartbeat", "request", 0, b"\x00\x02\xff\xfe\x00\x00\x00\x01\x00\x00")


def test_non_nullable_field_rejects_none_on_encode():
    with pytest.raises(ValueError, match="not nullable"):
        codec.encode("Heartbeat", "request", 0, {"group_id": None})
