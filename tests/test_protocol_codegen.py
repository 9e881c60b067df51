"""The generated codec (``kraft.protocol.codegen``) against the reference closures
(``kraft.protocol.interpreted``) on every message and version: the same bytes for the same
value, the same dict and position for the same bytes, MalformedMessage for the same broken
input (cut short, bytes flipped), the same exception for a value that cannot be encoded."""

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraft.protocol import codegen, interpreted, primitives
from kraft.protocol.errors import MalformedMessage
from kraft.protocol.tables import TABLE
from test_protocol_codec import CASES, struct_strategy

# Values tried per message version; CODEGEN_EXAMPLES=60 (7 minutes) for a deeper look.
EXAMPLES = int(os.environ.get("CODEGEN_EXAMPLES", "4"))


def both(name, kind, version):
    spec = TABLE.get(name, kind)
    flexible = version in spec.flexible
    generated = (codegen.reader(spec.fields, version, flexible), codegen.writer(spec.fields, version, flexible))
    reference = (interpreted._struct_reader(spec.fields, version, flexible),
                 interpreted._struct_writer(spec.fields, version, flexible))
    return spec, flexible, generated, reference


def outcome(fn):
    """What ``fn`` did, comparable: its result's repr (a flipped bit may make a float NaN,
    which equals nothing), or the kind of exception it raised."""
    try:
        return "ok", repr(fn())
    except MalformedMessage:
        return "malformed", None
    except Exception as exc:  # noqa: BLE001 - the type is what must agree
        return type(exc).__name__, None


def ref_decode(read, data, pos=0):
    r = primitives.Reader(data, pos)
    return read(r), r.pos


@pytest.mark.parametrize("name,kind,version", CASES, ids=[f"{n}-{k}-v{v}" for n, k, v in CASES])
def test_generated_codec_agrees_with_the_reference(name, kind, version):
    spec, flexible, (gen_read, gen_write), (ref_read, ref_write) = both(name, kind, version)

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(struct_strategy(spec.fields, version, flexible), st.data())
    def check(value, data):
        ours, theirs = bytearray(), bytearray()
        gen_write(ours, value)
        ref_write(theirs, value)
        assert ours == theirs
        blob = bytes(theirs)
        assert gen_read(blob, 0, len(blob)) == ref_decode(ref_read, blob)
        # Inside a larger buffer, at an offset, with a bound before its end.
        padded = b"\xff\xfe" + blob + b"\x01"
        assert gen_read(memoryview(padded), 2, 2 + len(blob)) == \
            (ref_read(primitives.Reader(padded, 2, 2 + len(blob))), 2 + len(blob))
        for cut in range(len(blob)):
            assert outcome(lambda: gen_read(blob, 0, cut)) == \
                outcome(lambda: ref_decode(ref_read, blob[:cut]))
        for _ in range(4):  # a flipped byte: the same dict, or refused by both
            if not blob:
                break
            broken = bytearray(blob)
            broken[data.draw(st.integers(0, len(blob) - 1))] ^= 1 << data.draw(st.integers(0, 7))
            broken = bytes(broken)
            assert outcome(lambda: gen_read(broken, 0, len(broken))) == \
                outcome(lambda: ref_decode(ref_read, broken))
        # A value with a field dropped or nulled: the same bytes, or the same refusal.
        if value:
            key = data.draw(st.sampled_from(sorted(value)))
            for changed in ({k: v for k, v in value.items() if k != key}, dict(value, **{key: None})):
                assert outcome(lambda: bytes(_written(gen_write, changed))) == \
                    outcome(lambda: bytes(_written(ref_write, changed)))

    check()


def _written(write, value):
    out = bytearray()
    write(out, value)
    return out


def test_spliced_records_are_left_as_holes_by_the_generated_writer():
    spec = TABLE.get("Fetch", "response")
    write = codegen.writer(spec.fields, 12, True)
    out = primitives.SplicingBuffer()
    hole = primitives.SplicedRecords(1000)
    write(out, {"responses": [{"topic": "t", "partitions": [{"partition_index": 0, "records": hole}]}]})
    assert [records for _, records in out.holes] == [hole]
