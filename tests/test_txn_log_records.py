"""``__transaction_state`` records (broker/txn/log_records.py): Kafka's TransactionLog key and
value in versions 0 and 1, and the partition of a transactional id (Java's String.hashCode)."""

import pytest

from broker.txn.log_records import (TxnLogValue, TxnState, decode_key, decode_value, encode_key, encode_value,
                                    partition_for, replay)

S = TxnState


def test_value_round_trips_in_both_versions():
    v = TxnLogValue(42, 3, 60_000, S.ONGOING, frozenset({("a", 0), ("a", 2), ("b", 1)}), 123, 100,
                    previous_producer_id=41)
    assert decode_value(encode_value(v, 1)) == v
    v0 = decode_value(encode_value(v, 0))
    assert v0 == TxnLogValue(42, 3, 60_000, S.ONGOING, v.partitions, 123, 100)
    assert decode_key(encode_key("abc")) == "abc"


def test_value_version_0_layout_is_kafkas():
    v = TxnLogValue(1, 2, 3, S.PREPARE_ABORT, frozenset({("t", 5)}), 6, 7)
    assert encode_value(v) == bytes.fromhex(
        "0000" "0000000000000001" "0002" "00000003" "03"
        "00000001" "0001" "74" "00000001" "00000005"
        "0000000000000006" "0000000000000007")
    assert encode_key("t") == bytes.fromhex("0000" "0001" "74")


# The values were printed by Java 17 (String.hashCode, and Utils.abs(h) % 50 for partition_for).
@pytest.mark.parametrize("text, hashcode", [
    ("", 0), ("a", 97), ("hello", 99162322), ("my-transactional-id", -959806496),
    ("polygenelubricants", -2147483648), ("Aa", 2112), ("BB", 2112), ("héllo", 103094734),
    ("𝄞", 1772394),  # a surrogate pair: hashed as two UTF-16 code units, as Java does
])
def test_java_string_hashcode(text, hashcode):
    from broker.group.records import java_string_hashcode

    assert java_string_hashcode(text) == hashcode


def test_partition_for_is_utils_abs_of_hashcode_mod_n():
    assert partition_for("polygenelubricants", 50) == 0  # Integer.MIN_VALUE: Utils.abs gives 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("my-transactional-id", 50) == 46


def test_replay_keeps_the_last_value_and_drops_tombstones():
    a = TxnLogValue(1, 0, 1000, S.EMPTY)
    b = TxnLogValue(1, 1, 1000, S.ONGOING, frozenset({("t", 0)}))
    records = [(encode_key("a"), encode_value(a)), (encode_key("b"), encode_value(a)),
               (encode_key("a"), encode_value(b)), (encode_key("b"), None), (None, b"junk"),
               (b"\x00\x05\x00\x01x", b"unknown key version")]
    assert replay(records) == {"a": b}
