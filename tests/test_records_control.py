"""kraft.records.control: control record keys, end-transaction markers, control batches."""

import pytest

from kraft.records import (
    ControlKey,
    ControlType,
    EndTxnMarker,
    InvalidRecordError,
    RecordBatch,
    control_records,
    decode_control_key,
    encode_control_key,
    make_batch,
    make_control_batch,
    make_end_txn_batch,
    parse_header,
)


def test_control_types_have_kafkas_numbers():
    assert {t.name: int(t) for t in ControlType} == {
        "ABORT": 0, "COMMIT": 1, "LEADER_CHANGE": 2, "SNAPSHOT_HEADER": 3, "SNAPSHOT_FOOTER": 4,
        "KRAFT_VERSION": 5, "KRAFT_VOTERS": 6,
    }


def test_control_key_round_trip_and_unknown_types():
    assert encode_control_key(ControlType.COMMIT) == b"\x00\x00\x00\x01"
    key = decode_control_key(encode_control_key(ControlType.KRAFT_VOTERS))
    assert key == ControlKey(0, ControlType.KRAFT_VOTERS) and key.known
    future = decode_control_key(b"\x00\x01\x00\x63" + b"extra")  # newer version, unknown type
    assert (future.version, future.type, future.known) == (1, 99, False)
    for bad in (None, b"\x00\x00\x00", b"\xff\xff\x00\x01"):
        with pytest.raises(InvalidRecordError):
            decode_control_key(bad)


def test_end_txn_marker_value():
    assert EndTxnMarker(7).encode() == b"\x00\x00\x00\x00\x00\x07"
    assert EndTxnMarker.decode(b"\x00\x00\x00\x00\x00\x07") == EndTxnMarker(7)
    assert EndTxnMarker.decode(b"\x00\x01\x00\x00\x00\x07tagged") == EndTxnMarker(7, 1)
    for bad in (None, b"\x00\x00\x00", b"\xff\xff\x00\x00\x00\x01"):
        with pytest.raises(InvalidRecordError):
            EndTxnMarker.decode(bad)


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_batch(commit):
    batch = make_end_txn_batch(commit, producer_id=9, producer_epoch=3, coordinator_epoch=5,
                               timestamp=1234, base_offset=70, partition_leader_epoch=2)
    header = parse_header(batch.encode())
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (9, 3, -1)
    (key, record), = control_records(RecordBatch.decode(batch.encode()))
    assert key.type == (ControlType.COMMIT if commit else ControlType.ABORT)
    assert EndTxnMarker.decode(record.value).coordinator_epoch == 5
    with pytest.raises(ValueError):
        make_end_txn_batch(commit, producer_id=-1, producer_epoch=0, coordinator_epoch=0, timestamp=0)


def test_kraft_control_batch_carries_an_opaque_value():
    batch = make_control_batch(ControlType.LEADER_CHANGE, b"\x00\x00opaque", timestamp=5, base_offset=3)
    decoded = RecordBatch.decode(batch.encode())
    assert decoded.is_control and not decoded.is_transactional and decoded.producer_id == -1
    (key, record), = control_records(decoded)
    assert key.type is ControlType.LEADER_CHANGE and record.value == b"\x00\x00opaque"
    with pytest.raises(InvalidRecordError, match="not a control batch"):
        control_records(make_batch([(None, b"v")]))
