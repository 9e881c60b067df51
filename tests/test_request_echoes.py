"""Where a request may carry null and the response's field of the same name may not.

A handler that echoes such a value back makes an answer that cannot be encoded (a node once
died of exactly that: a null topic name in Metadata v10).  Every such pair in the APIs the
broker serves is listed here with what the broker does about it; a new API or version that
adds one fails this test until someone has looked at it."""

from __future__ import annotations

from broker.api import BROKER_APIS
from broker.group.service import GROUP_API_VERSIONS
from kraft.protocol import codec

# (api, path of the response field) -> what the broker answers instead of echoing null.
REVIEWED = {
    ("Metadata", ".topics"): "null asks for every topic: the answer lists them",
    ("Metadata", ".topics[].name"): "v10-11 cannot name a topic by id: INVALID_REQUEST with name ''",
    ("OffsetFetch", ".topics"): "null asks for every committed offset of the group",
    ("OffsetFetch", ".groups[].topics"): "null asks for every committed offset of the group",
    ("DescribeLogDirs", ".results[].topics"): "null asks for every partition the broker hosts",
    ("ListPartitionReassignments", ".topics"): "null asks for every reassignment under way: the answer lists them",
    ("ConsumerGroupHeartbeat", ".assignment.topic_partitions"):
        "null owned partitions mean unchanged; the answer's assignment is built from the member's partitions",
}


def _fields(fields, version, path, out, nullable_wanted):
    for f in fields:
        if version not in f.versions and not (f.tag is not None and version in f.tagged_versions):
            continue
        p = path + "." + f.key
        holds_null = f.is_array or f.is_struct or f.element_type in ("string", "bytes", "records")
        if holds_null and (version in f.nullable) == nullable_wanted:
            out[f.key] = out.get(f.key, []) + [p]
        if f.is_struct:
            _fields(f.fields, version, p + ("[]" if f.is_array else ""), out, nullable_wanted)


def null_echo_hazards() -> set[tuple[str, str]]:
    apis = {**BROKER_APIS, **GROUP_API_VERSIONS, "FindCoordinator": (0, 6)}
    found = set()
    for api, (lo, hi) in apis.items():
        for version in range(lo, hi + 1):
            may_be_null, never_null = {}, {}
            _fields(codec.spec_for(api, "request").fields, version, "", may_be_null, True)
            _fields(codec.spec_for(api, "response").fields, version, "", never_null, False)
            for key in may_be_null.keys() & never_null.keys():
                found.update((api, path) for path in never_null[key])
    return found


def test_every_null_a_request_may_carry_into_a_non_nullable_answer_is_reviewed():
    assert null_echo_hazards() == set(REVIEWED)
