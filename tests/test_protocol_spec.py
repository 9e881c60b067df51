"""Holds kraft's schema table and error-code table against Apache Kafka's specification.

The specification (JSON message schemas, Apache-2.0) lives beside the project in
``../shared/kafka-spec``; the project keeps only its own table.  Every message the table
defines must match the specification field by field for the versions it claims, so a wrong
type, version range, nullability, tag or default fails the build.
"""

import json
import re

import pytest

from kraft.protocol.error_codes import ErrorCode
from kraft.protocol.schema import NO_VERSIONS, Versions
from kraft.protocol.tables import TABLE

SUBDIR = {"metadata": "metadata"}


def load_spec(spec_dir, name, kind):
    sub = SUBDIR.get(kind, "message")
    filename = name + ("Request" if kind == "request" else "Response" if kind == "response" else "")
    text = (spec_dir / sub / f"{filename}.json").read_text()
    return json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.M))


def spec_versions(text):
    return NO_VERSIONS if text is None else Versions.parse(text)


def normalize_default(value):
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def compare_fields(ours, theirs, common, where):
    ours = [f for f in ours if not f.extension]  # kraft's own tagged additions
    assert [f.name for f in ours] == [f["name"] for f in theirs], f"{where}: field names/order"
    for mine, spec in zip(ours, theirs):
        at = f"{where}.{mine.name}"
        assert mine.type == spec["type"].replace(" ", ""), f"{at}: type"
        assert mine.versions == spec_versions(spec.get("versions")), f"{at}: versions"
        assert mine.nullable == spec_versions(spec.get("nullableVersions")), f"{at}: nullable"
        assert mine.tag == (int(spec["tag"]) if "tag" in spec else None), f"{at}: tag"
        if "tag" in spec:
            tagged = spec_versions(spec.get("taggedVersions", spec.get("versions")))
            assert mine.tagged_versions == tagged, f"{at}: taggedVersions"
        flex = spec.get("flexibleVersions")
        assert mine.flexible == (None if flex is None else Versions.parse(flex)), f"{at}: flexible"
        assert normalize_default(mine.default) == normalize_default(spec.get("default")), f"{at}: default"
        sub = spec.get("fields")
        if sub is None:
            sub = common.get(mine.element_type)
        assert bool(mine.fields) == bool(sub), f"{at}: struct fields"
        if sub:
            compare_fields(mine.fields, sub, common, at)


MESSAGES = sorted(TABLE.messages)


@pytest.mark.parametrize("name,kind", MESSAGES, ids=[f"{n}-{k}" for n, k in MESSAGES])
def test_schema_matches_specification(spec_dir, name, kind):
    ours = TABLE.get(name, kind)
    spec = load_spec(spec_dir, name, kind)
    assert spec["type"] == kind
    assert ours.versions == Versions.parse(spec["validVersions"])
    assert ours.flexible == spec_versions(spec.get("flexibleVersions"))
    if kind in ("request", "response", "metadata"):
        assert ours.api_key == spec["apiKey"]
    common = {c["name"]: c["fields"] for c in spec.get("commonStructs", [])}
    compare_fields(ours.fields, spec["fields"], common, name)


def test_table_covers_the_apis_kraft_serves():
    required = {
        "ApiVersions", "Metadata", "Produce", "Fetch", "ListOffsets", "CreateTopics",
        "DeleteTopics", "CreatePartitions", "DescribeConfigs", "AlterConfigs",
        "IncrementalAlterConfigs", "FindCoordinator", "JoinGroup", "SyncGroup", "Heartbeat",
        "LeaveGroup", "OffsetCommit", "OffsetFetch", "ListGroups", "DescribeGroups",
        "DeleteGroups", "InitProducerId", "OffsetForLeaderEpoch", "DescribeCluster", "Vote",
        "BeginQuorumEpoch", "EndQuorumEpoch", "FetchSnapshot", "DescribeQuorum",
        "BrokerRegistration", "BrokerHeartbeat", "AlterPartition", "Envelope",
    }
    assert required <= set(TABLE.apis)
    for api in required:
        assert (api, "request") in TABLE.messages and (api, "response") in TABLE.messages


def test_error_codes_match_specification(spec_dir):
    rows = [line.split("\t") for line in (spec_dir / "error-codes.tsv").read_text().splitlines() if line.strip()]
    spec = {int(code): name for code, name, *_ in rows}
    ours = {int(e): e.name for e in ErrorCode if e != 0}
    assert ours == spec


def test_snake_case_keys_are_unique_per_struct():
    def walk(fields, where):
        keys = [f.key for f in fields]
        assert len(keys) == len(set(keys)), where
        for f in fields:
            walk(f.fields, f"{where}.{f.name}")

    for (name, kind), spec in TABLE.messages.items():
        walk(spec.fields, f"{name}-{kind}")
