"""``__consumer_offsets`` records: Java's String.hashCode partitioning, the key/value
encodings (golden bytes and round trips), replay, and rebuilding a coordinator from its log."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_group_helpers import Harness

from broker.group.config import GroupConfig
from broker.group.coordinator import GroupCoordinator
from broker.group.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    RecordFormatError,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    group_record,
    java_string_hashcode,
    offset_record,
    partition_for,
    replay,
)
from broker.group.state import GroupState

# Values of java.lang.String#hashCode (from the JDK's definition s[0]*31^(n-1) + ... + s[n-1]).
HASH_VECTORS = [
    ("", 0),
    ("a", 97),
    ("abc", 96354),
    ("java", 3254818),
    ("hello", 99162322),
    ("Aa", 2112),
    ("BB", 2112),
    ("polygenelubricants", -2147483648),  # the famous Integer.MIN_VALUE
    ("\u00e9", 233),
    ("\U0001F600", 55357 * 31 + 56832),  # a surrogate pair counts as two UTF-16 units
]


@pytest.mark.parametrize("text, expected", HASH_VECTORS)
def test_java_string_hashcode(text, expected):
    assert java_string_hashcode(text) == expected


def test_java_hashcode_wraps_to_signed_32_bits():
    # "hello world".hashCode() == 1794106052; a longer string overflows to a negative
    assert java_string_hashcode("hello world") == 1794106052
    assert java_string_hashcode("Hello, World!") == 1498789909
    assert java_string_hashcode("test-consumer-group") < 2**31


def test_partition_for_uses_kafkas_abs():
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("", 10) == 0
    negative = next(s for s in (f"group-{i}" for i in range(1000)) if java_string_hashcode(s) < 0)
    assert partition_for(negative, 50) == abs(java_string_hashcode(negative)) % 50


def test_golden_bytes():
    assert encode_offset_key("g", "t", 3) == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    assert encode_group_key("grp") == b"\x00\x02\x00\x03grp"
    v3 = encode_offset_value(OffsetValue(10, "m", 1000, 5))
    assert v3 == struct.pack(">hqih1sq", 3, 10, 5, 1, b"m", 1000)
    v1 = encode_offset_value(OffsetValue(10, "", 1000, 5, expire_timestamp=2000))
    assert v1 == struct.pack(">hqhqq", 1, 10, 0, 1000, 2000)
    group = encode_group_value(GroupValue("consumer", 2, "range", "m1", 99, (
        MemberValue("m1", None, "c", "h", 30, 10, b"S", b"A"),)))
    assert group == (struct.pack(">h", 3) + b"\x00\x08consumer" + struct.pack(">i", 2) + b"\x00\x05range"
                     + b"\x00\x02m1" + struct.pack(">q", 99) + struct.pack(">i", 1)
                     + b"\x00\x02m1" + b"\xff\xff" + b"\x00\x01c" + b"\x00\x01h" + struct.pack(">ii", 30, 10)
                     + b"\x00\x00\x00\x01S" + b"\x00\x00\x00\x01A")


names = st.text(max_size=12)
offset_values = st.builds(OffsetValue, st.integers(-1, 2**63 - 1), names, st.integers(-1, 2**50),
                          st.integers(-1, 2**31 - 1), st.just(-1))
member_values = st.builds(MemberValue, names, st.none() | names, names, names, st.integers(0, 2**31 - 1),
                          st.integers(0, 2**31 - 1), st.binary(max_size=20), st.binary(max_size=20))
group_values = st.builds(GroupValue, names, st.integers(0, 2**31 - 1), st.none() | names, st.none() | names,
                         st.integers(-1, 2**50), st.lists(member_values, max_size=3).map(tuple))


@given(names, names, st.integers(0, 2**31 - 1))
def test_offset_key_round_trip(group, topic, partition):
    assert decode_key(encode_offset_key(group, topic, partition)) == OffsetKey(group, topic, partition)
    assert decode_key(encode_offset_key(group, topic, partition, version=0)) == OffsetKey(group, topic, partition)
    assert decode_key(encode_group_key(group)) == GroupKey(group)


@given(offset_values, st.sampled_from([3, 4]))
def test_offset_value_round_trip(value, version):
    assert decode_offset_value(encode_offset_value(value, version)) == value


@given(offset_values, st.integers(0, 2**50))
def test_offset_value_v1_keeps_the_expiry(value, expire):
    from dataclasses import replace
    value = replace(value, leader_epoch=-1, expire_timestamp=expire)
    assert decode_offset_value(encode_offset_value(value)) == value


@given(group_values, st.sampled_from([3, 4]))
def test_group_value_round_trip(value, version):
    assert decode_group_value(encode_group_value(value, version)) == value


def test_older_group_value_versions_drop_newer_fields():
    value = GroupValue("consumer", 1, "range", "m", 5, (MemberValue("m", "i", "c", "h", 30, 10, b"s", b"a"),))
    v0 = decode_group_value(encode_group_value(value, 0))
    assert v0.current_state_timestamp == -1 and v0.members[0].group_instance_id is None
    assert v0.members[0].rebalance_timeout == 10  # v0 has no rebalance timeout: the session timeout
    assert decode_group_value(encode_group_value(value, 2)).members[0].rebalance_timeout == 30


def test_malformed_records_are_rejected():
    with pytest.raises(RecordFormatError):
        decode_offset_value(encode_offset_value(OffsetValue(1))[:-1])
    with pytest.raises(RecordFormatError):
        decode_group_value(encode_group_value(GroupValue("c", 1, None, None)) + b"\x00")
    with pytest.raises(RecordFormatError):
        decode_offset_value(struct.pack(">h", 9))
    assert decode_key(struct.pack(">h", 3) + b"whatever") is None  # a newer record type: skipped


ops = st.lists(st.tuples(st.sampled_from(["g1", "g2", "g3"]), st.sampled_from(["t", "u"]), st.integers(0, 2),
                         st.none() | offset_values, st.booleans()), max_size=40)


@given(ops, st.lists(st.tuples(st.sampled_from(["g1", "g2"]), st.none() | group_values), max_size=6))
def test_replay_last_value_wins_and_tombstones_delete(offset_ops, group_ops):
    records, model_offsets, model_groups = [], {}, {}
    for group, topic, partition, value, _ in offset_ops:
        records.append(offset_record(group, topic, partition, value))
        if value is None:
            model_offsets.pop((group, topic, partition), None)
        else:
            model_offsets[(group, topic, partition)] = value
    for group, value in group_ops:
        records.append(group_record(group, value))
        if value is None:
            model_groups.pop(group, None)
        else:
            model_groups[group] = value
    records.append((None, b"ignored"))
    loaded = replay(records)
    assert loaded.groups == model_groups
    flat = {(g, t, p): v for g, offs in loaded.offsets.items() for (t, p), v in offs.items()}
    assert flat == model_offsets
    assert all(loaded.offsets.values())  # no empty leftovers


def test_a_coordinator_rebuilt_from_its_writes_has_the_same_groups():
    h = Harness()
    (a, b), gen = h.stable_group("g", n=2)
    h.commit("g", {("t", 0): (11, "x")}, member_id=a, generation=gen)
    h.commit("simple", {("t", 1): (22, "")})
    h.commit("gone", {("t", 0): (1, "")})
    h.call("DeleteGroups", 2, groups_names=["gone"])
    records = [r for w in h.writes for r in w.records]
    fresh = GroupCoordinator(GroupConfig(num_partitions=1, initial_rebalance_delay_ms=0, min_session_timeout_ms=10))
    assert fresh.load(0, fresh.begin_loading(0), replay(records), 1000)
    assert set(fresh.table.groups) == {"g", "simple"}
    g = fresh.table.groups["g"]
    assert g.state is GroupState.STABLE and g.generation == gen and set(g.members) == {a, b}
    assert g.members[a].assignment == f"assign-{a}".encode()
    assert g.offsets[("t", 0)].offset == 11
    assert fresh.table.groups["simple"].offsets[("t", 1)].offset == 22
    # the loaded members carry on: heartbeats work, and silent ones expire
    hb = fresh.handle("Heartbeat", 3, {"group_id": "g", "generation_id": gen, "member_id": a,
                                      "group_instance_id": None}, 2000)
    assert hb.response["error_code"] == 0


def test_stale_load_is_ignored():
    core = GroupCoordinator(GroupConfig(num_partitions=1))
    first = core.begin_loading(0)
    second = core.begin_loading(0)
    assert not core.load(0, first, replay([]), 0)
    assert core.load(0, second, replay([]), 0)
