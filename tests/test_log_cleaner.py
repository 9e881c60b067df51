"""Log compaction (kraft.log.cleaner): last value per key, offsets, tombstones and delete
horizons, compaction lag, dirty ratio and checkpoint, producer state, transactions,
crash-safe segment swaps, and a property test against a model."""

from __future__ import annotations

import os
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_log_helpers import clean_until_crash

from kraft.log import Log, LogConfig
from kraft.log.cleaner import CLEANER_OFFSET_CHECKPOINT, LogCleaner, SimulatedCrash
from kraft.records import RecordBatch, build_batch, make_end_txn_batch
from kraft.records.header import DELETE_HORIZON_FLAG

T0 = 1_700_000_000_000
DAY = 24 * 3600 * 1000
CONFIG = LogConfig(segment_bytes=500, index_interval_bytes=64, cleanup_policy="compact",
                   file_delete_delay_ms=0, delete_retention_ms=1000, retention_ms=-1,
                   min_cleanable_dirty_ratio=0.5)


def open_log(path, config=CONFIG, **kwargs) -> Log:
    return Log.open(path, config, clock=lambda: T0, **kwargs)


def produce(log: Log, items, ts: int = T0, **options) -> list[int]:
    """Append one batch of ``(key, value)`` items; returns their offsets."""
    info = log.append(build_batch(items, timestamp=ts, **options), assign_offsets=True, now_ms=ts)
    return list(range(info.first_offset, info.last_offset + 1))


def fill(log: Log, n: int, keys: int, ts: int = T0, start: int = 0) -> dict[int, tuple]:
    """``n`` single-record batches cycling through ``keys`` keys; returns offset -> record."""
    written = {}
    for i in range(start, start + n):
        item = (b"k%d" % (i % keys), b"v%d" % i)
        (offset,) = produce(log, [item], ts + i)
        written[offset] = item
    return written


def read_all(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record of the log, from every batch, CRCs checked."""
    out = []
    for _, data in log.iter_batches(with_data=True):
        batch = RecordBatch.decode(data)
        out.extend((o, r.key, r.value) for o, _, r in batch.iter_resolved())
    return out


def headers(log: Log):
    return [h for h, _ in log.iter_batches()]


def last_per_key(records) -> dict:
    last = {}
    for offset, key, value in records:
        last[key] = (offset, value)
    return last


def segment_bytes(seg) -> bytes:
    return seg.log_path.read_bytes()


# -- configuration ---------------------------------------------------------------------------

def test_compaction_settings_are_real_config_fields():
    c = LogConfig.from_properties({"cleanup.policy": "delete, compact", "delete.retention.ms": "5",
                                   "min.compaction.lag.ms": 7, "max.compaction.lag.ms": "9",
                                   "min.cleanable.dirty.ratio": "0.25"})
    assert (c.cleanup_policy, c.compact, c.delete) == ("compact,delete", True, True)
    assert (c.delete_retention_ms, c.min_compaction_lag_ms, c.max_compaction_lag_ms) == (5, 7, 9)
    assert c.min_cleanable_dirty_ratio == 0.25
    assert LogConfig.from_properties(c.to_properties()) == c
    d = LogConfig()
    assert (d.cleanup_policy, d.compact, d.delete, d.delete_retention_ms) == (
        "delete", False, True, 86_400_000)
    assert (d.min_compaction_lag_ms, d.min_cleanable_dirty_ratio) == (0, 0.5)
    assert LogConfig(cleanup_policy=["compact"]).cleanup_policy == "compact"
    none = LogConfig.from_properties({"cleanup.policy": ""})
    assert (none.compact, none.delete) == (False, False)


@pytest.mark.parametrize("props, message", [
    ({"cleanup.policy": "compact,shred"}, "cleanup.policy"),
    ({"min.cleanable.dirty.ratio": "1.5"}, "min.cleanable.dirty.ratio"),
    ({"min.cleanable.dirty.ratio": "half"}, "min.cleanable.dirty.ratio"),
    ({"delete.retention.ms": "-1"}, "delete.retention.ms"),
    ({"min.compaction.lag.ms": "x"}, "min.compaction.lag.ms"),
])
def test_bad_compaction_settings_name_the_key(props, message):
    from kraft.log import LogConfigError
    with pytest.raises(LogConfigError, match=message):
        LogConfig.from_properties(props)


# -- the basics ------------------------------------------------------------------------------

def test_keeps_the_last_value_per_key_with_offsets_and_order(tmp_path):
    log = open_log(tmp_path / "t-0")
    written = fill(log, 80, keys=7)
    before = read_all(log)
    active_base = log.active_segment.base_offset
    active = segment_bytes(log.active_segment)
    result = LogCleaner().clean(log, T0 + DAY)
    assert result is not None and result.records_removed > 0
    after = read_all(log)
    offsets = [o for o, _, _ in after]
    assert offsets == sorted(set(offsets))
    for offset, key, value in after:  # every survivor is the record written there
        assert written[offset] == (key, value)
    cleanable = [(o, k, v) for o, k, v in before if o < active_base]
    expected = {k: (o, v) for k, (o, v) in last_per_key(cleanable).items()}
    survivors_below = [(o, k, v) for o, k, v in after if o < active_base]
    assert last_per_key(survivors_below) == expected
    assert len(survivors_below) == len(expected)  # nothing superseded remains
    assert last_per_key(after) == last_per_key(before)
    assert [r for r in after if r[0] >= active_base] == [r for r in before if r[0] >= active_base]
    assert log.active_segment.base_offset == active_base
    assert segment_bytes(log.active_segment) == active  # untouched
    assert log.log_end_offset == 80 and log.log_start_offset == 0


def test_active_segment_is_never_cleaned(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig(**{**_kw(CONFIG), "segment_bytes": 100_000}))
    fill(log, 30, keys=2)
    assert len(log.segments) == 1
    assert LogCleaner().clean(log, T0 + DAY, force=True) is None
    assert len(read_all(log)) == 30
    # a newer value in the active segment does not remove an older one in a cleaned segment
    log.roll(T0)
    produce(log, [(b"k0", b"newest")])
    LogCleaner().clean(log, T0 + DAY, force=True)
    keys = [(k, v) for _, k, v in read_all(log)]
    assert keys == [(b"k0", b"v28"), (b"k1", b"v29"), (b"k0", b"newest")]


def _kw(config: LogConfig) -> dict:
    return {name: getattr(config, name) for name in config.__dataclass_fields__}


def test_batches_keep_their_header_fields(tmp_path):
    log = open_log(tmp_path / "t-0")
    produce(log, [(b"a", b"1"), (b"b", b"2"), (b"a", b"3"), (b"c", b"4")], compression=1,
            producer_id=7, producer_epoch=2, base_sequence=10)
    produce(log, [(b"b", b"5")], ts=T0 + 5)
    log.append(build_batch([(b"z", b"z")], timestamp=T0 + 6), assign_offsets=True, leader_epoch=3)
    log.roll(T0)
    (original, _, _) = headers(log)
    LogCleaner().clean(log, T0 + DAY, force=True)
    rewritten, _, third = headers(log)
    assert [(o, k, v) for o, k, v in read_all(log)] == [
        (2, b"a", b"3"), (3, b"c", b"4"), (4, b"b", b"5"), (5, b"z", b"z")]
    for field in ("base_offset", "last_offset_delta", "producer_id", "producer_epoch",
                  "base_sequence", "partition_leader_epoch", "attributes"):
        assert getattr(rewritten, field) == getattr(original, field), field
    assert rewritten.records_count == 2 and third.partition_leader_epoch == 3


def test_unchanged_batches_are_copied_byte_for_byte(tmp_path):
    log = open_log(tmp_path / "t-0")
    produce(log, [(b"a", b"1"), (b"b", b"2")], compression=2)
    produce(log, [(b"c", b"3")])
    log.roll(T0)
    data = b"".join(d for _, d in log.iter_batches(with_data=True))
    LogCleaner().clean(log, T0 + DAY, force=True)
    assert b"".join(d for _, d in log.iter_batches(with_data=True)) == data


def test_small_segments_are_grouped_within_segment_bytes(tmp_path):
    log = open_log(tmp_path / "t-0")
    fill(log, 120, keys=3)
    cleaner = LogCleaner()
    cleaner.clean(log, T0 + DAY)
    many = len(log.segments)
    cleaner.clean(log, T0 + DAY, force=True)  # the emptied segments are now small
    assert len(log.segments) < many and len(log.segments) <= 3
    assert all(seg.size <= CONFIG.segment_bytes for seg in log.segments)
    assert last_per_key(read_all(log)) == {b"k0": (117, b"v117"), b"k1": (118, b"v118"),
                                           b"k2": (119, b"v119")}


def test_keyless_records_are_kept(tmp_path):
    log = open_log(tmp_path / "t-0")
    produce(log, [(None, b"x"), (b"a", b"1"), (None, b"y"), (b"a", b"2")])
    log.roll(T0)
    LogCleaner().clean(log, T0 + DAY, force=True)
    assert read_all(log) == [(0, None, b"x"), (2, None, b"y"), (3, b"a", b"2")]


def test_delete_policy_logs_are_not_cleaned(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=500, cleanup_policy="delete"))
    fill(log, 50, keys=2)
    assert LogCleaner().clean(log, T0 + DAY, force=True) is None
    assert len(read_all(log)) == 50


# -- tombstones ------------------------------------------------------------------------------

def test_tombstones_go_only_after_delete_retention(tmp_path):
    log = open_log(tmp_path / "t-0")
    produce(log, [(b"a", b"1"), (b"b", b"1")])
    produce(log, [(b"a", None)])
    log.roll(T0)
    cleaner = LogCleaner()
    first = T0 + 10
    cleaner.clean(log, first, force=True)
    assert read_all(log) == [(1, b"b", b"1"), (2, b"a", None)]  # value gone, tombstone kept
    tomb = headers(log)[1]
    assert tomb.attributes & DELETE_HORIZON_FLAG and tomb.base_timestamp == first + 1000
    batch = RecordBatch.decode(next(d for h, d in log.iter_batches(with_data=True)
                                    if h.base_offset == 2))
    assert [ts for _, ts, _ in batch.iter_resolved()] == [T0]  # record timestamps kept
    cleaner.clean(log, first + 999, force=True)
    assert read_all(log) == [(1, b"b", b"1"), (2, b"a", None)]
    assert cleaner.needs_cleaning(log, first + 999) is False
    assert cleaner.needs_cleaning(log, first + 1000) is True  # the horizon alone triggers
    result = cleaner.clean(log, first + 1000)
    assert result.tombstones_removed == 1
    assert read_all(log) == [(1, b"b", b"1")]
    assert not any(h.attributes & DELETE_HORIZON_FLAG for h in headers(log))


def test_a_tombstone_superseded_by_a_value_goes_at_once(tmp_path):
    log = open_log(tmp_path / "t-0")
    produce(log, [(b"a", None)])
    produce(log, [(b"a", b"back")])
    log.roll(T0)
    LogCleaner().clean(log, T0, force=True)
    assert read_all(log) == [(1, b"a", b"back")]


def test_tombstone_in_the_active_segment_is_not_processed(tmp_path):
    log = open_log(tmp_path / "t-0")
    produce(log, [(b"a", b"1")])
    log.roll(T0)
    produce(log, [(b"a", None)])
    LogCleaner().clean(log, T0 + DAY, force=True)
    assert read_all(log) == [(0, b"a", b"1"), (1, b"a", None)]
    assert not any(h.attributes & DELETE_HORIZON_FLAG for h in headers(log))


# -- what is cleanable -------------------------------------------------------------------------

def test_min_compaction_lag_is_respected(tmp_path):
    config = LogConfig(**{**_kw(CONFIG), "min_compaction_lag_ms": 100})
    log = open_log(tmp_path / "t-0", config)
    produce(log, [(b"a", b"old")], ts=T0)
    produce(log, [(b"a", b"mid")], ts=T0 + 50)
    produce(log, [(b"a", b"new")], ts=T0 + 150)
    log.roll(T0 + 150)
    cleaner = LogCleaner()
    info = cleaner.cleanable(log, T0 + 160)
    assert (info.first_dirty_offset, info.clean_end_offset) == (0, 2)  # "new" is too young
    cleaner.clean(log, T0 + 160, force=True)
    assert read_all(log) == [(1, b"a", b"mid"), (2, b"a", b"new")]
    assert cleaner.checkpointed_offset(log) == 2
    cleaner.clean(log, T0 + 250, force=True)
    assert read_all(log) == [(2, b"a", b"new")]
    assert cleaner.checkpointed_offset(log) == 3


def test_upper_bound_offset_is_respected(tmp_path):
    log = open_log(tmp_path / "t-0")
    fill(log, 10, keys=1)
    log.roll(T0)
    LogCleaner().clean(log, T0 + DAY, upper_bound_offset=5, force=True)
    assert [o for o, _, _ in read_all(log)] == [4, 5, 6, 7, 8, 9]


def test_dirty_ratio_and_checkpoint(tmp_path):
    log = open_log(tmp_path / "t-0")
    fill(log, 40, keys=40)  # all distinct keys: cleaning removes nothing
    cleaner = LogCleaner()
    info = cleaner.cleanable(log, T0)
    assert info.first_dirty_offset == 0 and info.dirty_ratio == 1.0
    result = cleaner.clean(log, T0)
    assert result.records_removed == 0 and result.end_offset == info.clean_end_offset
    text = (tmp_path / CLEANER_OFFSET_CHECKPOINT).read_text()
    assert text == f"0\n1\nt 0 {result.end_offset}\n"
    assert not cleaner.needs_cleaning(log, T0)
    # a small amount of new data stays below the 0.5 ratio...
    fill(log, 4, keys=40, start=40)
    log.roll(T0)
    info = cleaner.cleanable(log, T0)
    assert 0 < info.dirty_ratio < 0.5 and not cleaner.needs_cleaning(log, T0)
    assert cleaner.clean(log, T0) is None
    # ...a lot crosses it; a fresh cleaner reads the checkpoint file
    fill(log, 60, keys=40, start=44)
    log.roll(T0)
    fresh = LogCleaner()
    assert fresh.first_dirty_offset(log) == result.end_offset
    assert fresh.needs_cleaning(log, T0)
    assert fresh.clean(log, T0).records_removed > 0
    assert len({k for _, k, _ in read_all(log)}) == len(read_all(log)) == 40


def test_checkpoint_follows_truncation_and_deletion(tmp_path):
    log = open_log(tmp_path / "t-0")
    fill(log, 30, keys=3)
    cleaner = LogCleaner()
    end = cleaner.clean(log, T0).end_offset
    log.truncate_to(10)
    cleaner.truncated(log, 10)
    assert cleaner.checkpointed_offset(log) == 10 <= end
    cleaner.forget(log)
    assert cleaner.checkpointed_offset(log) is None
    assert cleaner.first_dirty_offset(log) == log.log_start_offset


def test_max_compaction_lag_forces_cleaning(tmp_path):
    config = LogConfig(**{**_kw(CONFIG), "min_cleanable_dirty_ratio": 1.0,
                          "max_compaction_lag_ms": 1000})
    log = open_log(tmp_path / "t-0", config)
    fill(log, 20, keys=20)
    fill(log, 1, keys=1, start=100)
    log.roll(T0)
    cleaner = LogCleaner()
    cleaner.clean(log, T0, force=True)
    fill(log, 5, keys=20, ts=T0 + 10)
    log.roll(T0)
    assert not cleaner.needs_cleaning(log, T0 + 500)
    assert cleaner.needs_cleaning(log, T0 + 2000)


# -- producers and transactions -----------------------------------------------------------

def test_last_batch_of_a_producer_stays_as_an_empty_batch(tmp_path):
    log = open_log(tmp_path / "t-0")
    produce(log, [(b"a", b"1")], producer_id=5, producer_epoch=0, base_sequence=0)
    produce(log, [(b"a", b"2"), (b"b", b"2")], producer_id=5, producer_epoch=0, base_sequence=1)
    produce(log, [(b"a", b"3"), (b"b", b"3")])  # supersedes all of producer 5's data
    log.roll(T0)
    LogCleaner().clean(log, T0 + DAY, force=True)
    hs = headers(log)
    assert [(h.base_offset, h.records_count, h.producer_id) for h in hs] == [(1, 0, 5), (3, 2, -1)]
    empty = hs[0]
    assert (empty.last_offset, empty.base_sequence, empty.last_sequence) == (2, 1, 2)
    assert read_all(log) == [(3, b"a", b"3"), (4, b"b", b"3")]
    LogCleaner().clean(log, T0 + DAY, force=True)  # stays on later passes
    assert [(h.base_offset, h.records_count) for h in headers(log)] == [(1, 0), (3, 2)]


def test_aborted_transactions_are_removed_and_do_not_shadow(tmp_path):
    log = open_log(tmp_path / "t-0")
    produce(log, [(b"a", b"committed")])
    produce(log, [(b"a", b"aborted"), (b"b", b"aborted")], producer_id=9, producer_epoch=1,
            base_sequence=0, transactional=True)
    marker = make_end_txn_batch(False, producer_id=9, producer_epoch=1, coordinator_epoch=0,
                                timestamp=T0)
    log.append(marker.encode(), assign_offsets=True, now_ms=T0)
    produce(log, [(b"c", b"open")], producer_id=11, producer_epoch=0, base_sequence=0,
            transactional=True)
    log.roll(T0)
    LogCleaner().clean(log, T0 + DAY, force=True)
    assert [r for r in read_all(log) if r[1] != b"\x00\x00\x00\x00"] == [
        (0, b"a", b"committed"), (4, b"c", b"open")]
    assert [h.is_control for h in headers(log)] == [False, False, True, False]


# -- prepare in a worker, commit on the owner ------------------------------------------------

def _cleaned_files(path):
    return [n for n in os.listdir(path) if n.endswith((".cleaned", ".swap"))]


def test_prepare_then_commit_while_the_log_grows(tmp_path):
    log = open_log(tmp_path / "t-0")
    fill(log, 60, keys=5)
    cleaner = LogCleaner()
    plan = cleaner.prepare(log, T0 + DAY)
    assert plan is not None and _cleaned_files(tmp_path / "t-0")
    before = read_all(log)
    fill(log, 30, keys=5, start=60)  # appends and rolls meanwhile
    log.roll(T0)
    grown = read_all(log)
    result = cleaner.commit(plan)
    assert result is not None and result.segments_out > 0
    after = read_all(log)
    newer = [r for r in after if r[0] >= 60]
    assert newer == [r for r in grown if r[0] >= 60] and len(newer) == 30
    assert last_per_key([r for r in after if r[0] < 60]) == last_per_key(before)
    assert not _cleaned_files(tmp_path / "t-0")


@pytest.mark.parametrize("change", ["retention", "truncation", "truncate_into_segment"])
def test_commit_discards_a_plan_the_log_moved_past(tmp_path, change):
    log = open_log(tmp_path / "t-0")
    fill(log, 60, keys=5)
    cleaner = LogCleaner()
    plan = cleaner.prepare(log, T0 + DAY)
    if change == "retention":
        log.delete_records_before(log.segments[1].base_offset)
    elif change == "truncation":
        log.truncate_to(log.segments[2].base_offset)
    else:
        log.truncate_to(log.segments[-2].base_offset + 1)
    before = read_all(log)
    assert cleaner.commit(plan) is None
    assert read_all(log) == before
    assert not _cleaned_files(tmp_path / "t-0")
    assert cleaner.checkpointed_offset(log) is None
    assert cleaner.clean(log, T0 + DAY) is not None  # a new pass works on what is there


# -- durability: reopen, crash during the swap -----------------------------------------------

def test_reopen_after_cleaning_reads_the_same(tmp_path):
    log = open_log(tmp_path / "t-0")
    fill(log, 90, keys=6)
    produce(log, [(b"k1", None)])
    fill(log, 10, keys=6, start=200)
    LogCleaner().clean(log, T0 + DAY)
    records = read_all(log)
    reads = [log.read(o, 10_000).records for o in range(log.log_end_offset)]
    hs = headers(log)
    for ts in range(T0, T0 + 215, 7):  # the rebuilt time indexes find surviving batches
        expected = next((h.base_offset for h in hs if h.max_timestamp >= ts), None)
        found = log.offset_for_timestamp(ts)
        assert (found and found.offset) == expected
    log.close()
    for clean_shutdown in (True, False):
        log = open_log(tmp_path / "t-0", had_clean_shutdown=clean_shutdown)
        assert read_all(log) == records
        assert [log.read(o, 10_000).records for o in range(log.log_end_offset)] == reads
        log.close()


CRASH_CONFIG = LogConfig(**{**_kw(CONFIG), "segment_bytes": 1200})


def _build_for_crash(path) -> Log:
    """Cleaned once (so the next pass groups the shrunken segments), then more data."""
    log = open_log(path, CRASH_CONFIG)
    fill(log, 40, keys=4)
    produce(log, [(b"k2", None)])
    log.roll(T0)
    LogCleaner().clean(log, T0 + 1, force=True)
    fill(log, 20, keys=5, start=100)
    log.roll(T0)
    return log


def test_crash_at_every_step_of_the_swap_recovers(tmp_path):
    base = tmp_path / "base" / "t-0"
    log = _build_for_crash(base)
    log.close()
    steps = []
    ref = tmp_path / "ref" / "t-0"
    shutil.copytree(base, ref)
    log = open_log(ref, CRASH_CONFIG, had_clean_shutdown=True)
    before = read_all(log)
    old_segments = len(log.segments)
    LogCleaner().clean(log, T0 + DAY, step=steps.append)
    cleaned = read_all(log)
    assert len(log.segments) < old_segments  # the pass merged segments
    assert len(steps) > 6 and cleaned != before
    log.close()

    for k in range(len(steps)):
        work = tmp_path / f"crash{k}" / "t-0"
        shutil.copytree(base, work)
        log = open_log(work, CRASH_CONFIG, had_clean_shutdown=True)
        clean_until_crash(log, T0 + DAY, crash_after=k)
        log = open_log(work, CRASH_CONFIG)  # unclean: recovery point 0
        got = read_all(log)
        assert got in (before, cleaned) or _same_outcome(got, before, cleaned), (k, steps[k])
        assert last_per_key(got) == last_per_key(before)
        assert log.log_end_offset == 61
        leftovers = [n for n in os.listdir(work) if n.endswith((".cleaned", ".swap", ".deleted"))]
        assert not leftovers, (k, leftovers)
        # a later pass gets to the same place
        LogCleaner().clean(log, T0 + DAY, force=True)
        assert read_all(log) == cleaned
        log.close()


def _same_outcome(got, before, cleaned) -> bool:
    """Mixed old and new segments: every survivor was written there, and each key's last
    record is the same."""
    written = {o: (k, v) for o, k, v in before}
    return (all(written[o] == (k, v) for o, k, v in got) and set(cleaned) <= set(got)
            and last_per_key(got) == last_per_key(cleaned))


def test_crash_midway_through_renaming_a_segment_away(tmp_path):
    """The crash hit between renaming an old segment's .log and its indexes to .deleted:
    recovery must not pair the swapped-in log with the old segment's stale index."""
    work = tmp_path / "t-0"
    log = open_log(work, CRASH_CONFIG)
    for i in range(6):  # segment 0: one key, superseded later; batches the size of the
        produce(log, [(b"xx", b"%d" % i)])  # next ones', so stale index entries look valid
    log.roll(T0)
    for i in range(8):  # segment 6: distinct keys, so the cleaned group is all of them
        produce(log, [(b"y%d" % i, b"%d" % i)])
    log.roll(T0)
    produce(log, [(b"xx", b"9")])
    log.roll(T0)
    before = read_all(log)

    def stop(label):
        if label.startswith("swap") and label.endswith(".log.swap"):
            raise SimulatedCrash(label)

    with pytest.raises(SimulatedCrash):
        LogCleaner().clean(log, T0 + DAY, force=True, step=stop)
    log.abandon()
    base = f"{0:020d}"
    os.replace(work / f"{base}.log", work / f"{base}.log.deleted")  # its indexes stay
    assert (work / f"{base}.index").stat().st_size > 8
    log = open_log(work, CRASH_CONFIG, recovery_point=10**9)  # trusts indexes if it can
    records = read_all(log)
    assert last_per_key(records) == last_per_key(before)
    assert [k for _, k, _ in records] == [b"y%d" % i for i in range(8)] + [b"xx"]
    for offset, _, _ in records:  # every offset reads back through the index
        got = RecordBatch.decode(log.read(offset, 100_000).records)
        assert got.base_offset == offset


def test_cleaned_segment_keeps_the_originals_modification_time(tmp_path):
    log = open_log(tmp_path / "t-0")
    fill(log, 20, keys=2)
    old = [seg.log_path for seg in log.segments[:-1]]
    for i, path in enumerate(old):
        os.utime(path, ns=(10**18 + i, 10**18 + i))
    LogCleaner().clean(log, T0 + DAY, force=True)
    assert os.stat(log.segments[0].log_path).st_mtime_ns == 10**18


def test_leftover_cleaned_files_are_discarded(tmp_path):
    log = _build_for_crash(tmp_path / "t-0")
    before = read_all(log)

    def stop(label):
        raise SimulatedCrash(label)

    # crash before the first rename: only .cleaned files exist
    from kraft.log import log as log_module
    original = log_module.Log.replace_segments

    def crash_before(self, *args, **kwargs):
        raise SimulatedCrash("before the swap")

    log_module.Log.replace_segments = crash_before  # stop just before the swap
    try:
        with pytest.raises(SimulatedCrash):
            LogCleaner().clean(log, T0 + DAY, step=stop)
    finally:
        log_module.Log.replace_segments = original
    log.abandon()
    assert any(n.endswith(".cleaned") for n in os.listdir(tmp_path / "t-0"))
    log = open_log(tmp_path / "t-0")
    assert read_all(log) == before
    assert not any(n.endswith(".cleaned") for n in os.listdir(tmp_path / "t-0"))


def test_failed_clean_leaves_the_log_unchanged(tmp_path):
    log = open_log(tmp_path / "t-0")
    fill(log, 30, keys=3)
    before = read_all(log)
    seg = log.segments[1]
    pos, h = next(iter(seg.iter_headers()))
    raw = bytearray(seg.read_bytes(pos, h.size))
    raw[-1] ^= 0xFF  # corrupt a record: the CRC no longer matches
    os.pwrite(seg.fd, bytes(raw), pos)
    with pytest.raises(ValueError):
        LogCleaner().clean(log, T0 + DAY, force=True)
    assert not any(n.endswith((".cleaned", ".swap")) for n in os.listdir(tmp_path / "t-0"))
    assert len(headers(log)) == len(before)


# -- compact,delete ---------------------------------------------------------------------------

def test_compact_delete_applies_retention_too(tmp_path):
    config = LogConfig(**{**_kw(CONFIG), "cleanup_policy": "compact,delete",
                          "retention_ms": 10_000})
    log = open_log(tmp_path / "t-0", config)
    fill(log, 40, keys=4, ts=T0)
    fill(log, 40, keys=4, ts=T0 + 50_000, start=40)
    log.roll(T0 + 50_100)
    cleaner = LogCleaner()
    assert log.apply_retention(T0 + 50_100) > 0  # the old segments go by time...
    assert log.log_start_offset > 0
    assert cleaner.clean(log, T0 + 50_100).records_removed > 0  # ...the rest is compacted
    records = read_all(log)
    assert all(o >= 40 for o, _, _ in records)
    assert last_per_key(records) == {b"k%d" % (i % 4): (i, b"v%d" % i) for i in range(76, 80)}


def test_compact_only_ignores_time_retention(tmp_path):
    config = LogConfig(**{**_kw(CONFIG), "retention_ms": 10_000})
    log = open_log(tmp_path / "t-0", config)
    fill(log, 40, keys=4, ts=T0)
    log.roll(T0)
    assert log.apply_retention(T0 + DAY) == 0
    assert len(read_all(log)) == 40


# -- the property test ------------------------------------------------------------------------

_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("produce"), st.lists(
            st.tuples(st.sampled_from([b"a", b"b", b"c", b"d", None]),
                      st.one_of(st.none(), st.binary(min_size=1, max_size=12))),
            min_size=1, max_size=4), st.integers(0, 3)),
        st.tuples(st.just("roll"), st.none(), st.none()),
        st.tuples(st.just("clean"), st.integers(0, 1500), st.booleans()),
    ),
    min_size=1, max_size=40,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
def test_cleaning_matches_a_model(tmp_path_factory, ops):
    path = tmp_path_factory.mktemp("prop") / "t-0"
    config = LogConfig(**{**_kw(CONFIG), "segment_bytes": 300})
    log = open_log(path, config)
    cleaner = LogCleaner()
    now = T0
    written: dict[int, tuple] = {}  # every record ever written: offset -> (key, value)
    pid_seq = 0
    for op, a, b in ops:
        if op == "produce":
            now += 10
            options = {}
            if b == 3:  # an idempotent producer's batch
                options = {"producer_id": 1, "producer_epoch": 0, "base_sequence": pid_seq}
                pid_seq += len(a)
            offsets = produce(log, a, now, **options)
            written.update(zip(offsets, a))
        elif op == "roll":
            log.roll(now)
        else:
            now += a
            active_base = log.active_segment.base_offset
            in_active = [r for r in read_all(log) if r[0] >= active_base]
            result = cleaner.clean(log, now, force=b)
            assert [r for r in read_all(log) if r[0] >= active_base] == in_active
            if result is not None:  # nothing superseded below the cleaned end remains
                end = result.end_offset
                for offset, key, _ in read_all(log):
                    if key is not None and offset < end:
                        assert not [o for o in range(offset + 1, end)
                                    if o in written and written[o][0] == key]
        _check_model(log, written)
    records = read_all(log)
    log.close()
    log = open_log(path)
    assert read_all(log) == records
    log.close()


def _check_model(log: Log, written: dict[int, tuple]) -> None:
    records = read_all(log)
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(set(offsets))
    for offset, key, value in records:  # survivors are exactly what was written there
        assert written[offset] == (key, value)
    model_last = {}
    for offset in sorted(written):
        key, value = written[offset]
        if key is not None:
            model_last[key] = (offset, value)
    log_last = last_per_key([r for r in records if r[1] is not None])
    for key, (offset, value) in model_last.items():
        if value is None:  # a tombstone may be gone, or still be the last record
            assert log_last.get(key, (offset, None)) == (offset, None)
        else:
            assert log_last[key] == (offset, value)
    keyless = sorted(o for o, (k, _) in written.items() if k is None)
    assert [o for o, k, _ in records if k is None] == keyless
    for h in headers(log):  # batch bounds are the written ones
        assert h.last_offset in written
