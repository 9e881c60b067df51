"""TxnOffsetCommit on the group coordinator core: offsets held pending per producer until the
transaction's marker commits (or drops) them, UNSTABLE_OFFSET_COMMIT for require_stable
fetches meanwhile, and the replay of transactional batches and markers from
``__consumer_offsets`` (broker/group/records.replay)."""

from __future__ import annotations

from test_group_helpers import Harness, wire

from broker.group.records import OffsetValue, TxnMarker, TxnRecord, offset_record, replay

UNSTABLE_OFFSET_COMMIT = 88


def txn_commit(h, group, pid, offsets: dict, version=3):
    topics = {}
    for (t, p), o in offsets.items():
        topics.setdefault(t, []).append({"partition_index": p, "committed_offset": o, "committed_metadata": ""})
    body = wire("TxnOffsetCommit", version, transactional_id="tx", group_id=group, producer_id=pid, producer_epoch=0,
                topics=[{"name": t, "partitions": ps} for t, ps in topics.items()])
    out = h.core.handle("TxnOffsetCommit", version, body, 0)
    return out


def fetched(h, group, require_stable=False):
    body = wire("OffsetFetch", 8, groups=[{"group_id": group, "topics": [{"name": "t", "partition_indexes": [0, 1]}]}],
                require_stable=require_stable)
    parts = h.core.handle("OffsetFetch", 8, body, 0).response["groups"][0]["topics"][0]["partitions"]
    return {p["partition_index"]: (p["committed_offset"], p["error_code"]) for p in parts}


def test_transactional_offsets_wait_for_the_commit_marker():
    h = Harness()
    out = txn_commit(h, "g", 7, {("t", 0): 10, ("t", 1): 20})
    assert [p["error_code"] for t in out.response["topics"] for p in t["partitions"]] == [0, 0]
    (write,) = out.writes
    assert write.producer == (7, 0)  # written as the producer's transactional batch
    h.core.apply_write(write)
    assert fetched(h, "g") == {0: (-1, 0), 1: (-1, 0)}
    assert fetched(h, "g", require_stable=True) == {0: (-1, UNSTABLE_OFFSET_COMMIT), 1: (-1, UNSTABLE_OFFSET_COMMIT)}
    h.core.complete_txn(0, 7, committed=True)
    assert fetched(h, "g", require_stable=True) == {0: (10, 0), 1: (20, 0)}


def test_aborted_transactional_offsets_are_dropped_and_other_producers_unaffected():
    h = Harness()
    h.commit("g", {("t", 0): (5, "")})
    for pid, offset in ((7, 10), (8, 30)):
        h.core.apply_write(txn_commit(h, "g", pid, {("t", 0): offset}).writes[0])
    h.core.complete_txn(0, 7, committed=False)
    assert fetched(h, "g")[0] == (5, 0)
    assert fetched(h, "g", require_stable=True)[0] == (-1, UNSTABLE_OFFSET_COMMIT)  # 8's is still open
    h.core.complete_txn(0, 8, committed=True)
    assert fetched(h, "g")[0] == (30, 0)


def test_replay_applies_transactional_offsets_at_their_commit_marker():
    def rec(offset):
        return offset_record("g", "t", 0, OffsetValue(offset, "", 1))

    loaded = replay([
        rec(1),
        TxnRecord(7, *rec(50)),  # committed below, after the plain commit of 2
        TxnRecord(8, *rec(60)),  # aborted
        rec(2),
        TxnMarker(7, committed=True),
        TxnMarker(8, committed=False),
        TxnRecord(9, *rec(70)),  # no marker yet: still pending after the load
    ])
    assert loaded.offsets["g"][("t", 0)].offset == 50
    assert {pid: {tp: v.offset for tp, v in o.items()} for pid, o in loaded.pending_txn_offsets["g"].items()} == {
        9: {("t", 0): 70}}


def test_a_commit_without_a_producer_is_refused():
    h = Harness()
    out = txn_commit(h, "g", -1, {("t", 0): 10})
    assert [p["error_code"] for t in out.response["topics"] for p in t["partitions"]] == [49]  # INVALID_PRODUCER_ID_MAPPING
    assert out.writes == []


def test_a_marker_arriving_while_the_partition_loads_is_applied_after_the_load():
    from broker.group.records import LoadedPartition

    h = Harness()
    token = h.core.begin_loading(0)
    # the log read ended before the marker: the load finds the offsets still pending
    value = OffsetValue(40, "", 1)
    loaded = LoadedPartition(pending_txn_offsets={"g": {7: {("t", 0): value}}})
    h.core.complete_txn(0, 7, committed=True)
    assert h.core.load(0, token, loaded, 0)
    assert fetched(h, "g", require_stable=True)[0] == (40, 0)
