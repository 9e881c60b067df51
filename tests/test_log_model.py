"""A random walk of appends, truncations, rolls, deletions, clean reopens and crashes
(some tearing the tail), checked step by step against a list of batches in memory."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from test_log_helpers import make_batch

from kraft.log import Log, LogConfig, UnexpectedAppendOffsetError
from kraft.records.header import parse_header

CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=64, segment_index_bytes=48,
                   file_delete_delay_ms=0)


@dataclass
class Batch:
    base: int
    last: int
    max_ts: int
    data: bytes


class LogModel(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="kraft-log-model-"))
        self.log = Log.open(self.dir, CONFIG, clock=lambda: 0)
        self.batches: list[Batch] = []
        self.floor = 0  # the first segment's base offset: the log end when it holds nothing
        self.lso = 0
        self.seq = 0

    def teardown(self):
        self.log.abandon()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- the model -------------------------------------------------------------------------
    @property
    def leo(self) -> int:
        return self.batches[-1].last + 1 if self.batches else self.floor

    def _record(self, data: bytes) -> None:
        h = parse_header(data)
        self.batches.append(Batch(h.base_offset, h.last_offset, h.max_timestamp, data))

    def _batch(self, base: int, count: int, ts: int, size: int) -> bytes:
        self.seq += 1
        return make_batch(base, count, timestamp=ts, ts_step=1, value_size=size, fill=self.seq)

    # -- rules ------------------------------------------------------------------------------
    @rule(count=st.integers(1, 4), ts=st.integers(0, 50), size=st.integers(0, 60))
    def append_as_leader(self, count, ts, size):
        buf = bytearray(self._batch(0, count, ts, size))
        info = self.log.append(buf, assign_offsets=True)
        assert info.first_offset == self.leo
        self._record(bytes(buf))

    @rule(gap=st.integers(0, 3), count=st.integers(1, 3), ts=st.integers(0, 50),
          size=st.integers(0, 60), two=st.booleans())
    def append_as_follower(self, gap, count, ts, size, two):
        first = self._batch(self.leo + gap, count, ts, size)
        data = first
        if two:
            data += self._batch(parse_header(first).next_offset, 1, ts + 1, size)
        self.log.append(data, assign_offsets=False)
        self._record(first)
        if two:
            self._record(data[len(first):])

    @precondition(lambda self: self.batches)
    @rule(back=st.integers(1, 3))
    def rejected_follower_append(self, back):
        try:
            self.log.append(self._batch(max(self.leo - back, 0), 1, 0, 5), assign_offsets=False)
        except UnexpectedAppendOffsetError:
            return
        raise AssertionError("an append below the log end was accepted")

    @rule(data=st.data())
    def truncate_to(self, data):
        offset = data.draw(st.integers(0, self.leo + 1))
        self.log.truncate_to(offset)
        if offset >= self.leo:
            return
        self.floor = min(self.floor, offset)
        self.batches = [b for b in self.batches if b.last < offset]
        self.lso = min(self.lso, self.leo)

    @rule(offset=st.integers(0, 300))
    def truncate_fully_and_start_at(self, offset):
        self.log.truncate_fully_and_start_at(offset)
        self.batches, self.floor, self.lso = [], offset, offset

    @rule()
    def roll(self):
        self.log.roll()

    @rule()
    def flush(self):
        self.log.flush()
        assert self.log.recovery_point == self.leo

    @rule(data=st.data())
    def delete_records_before(self, data):
        offset = data.draw(st.integers(self.lso, self.leo))
        assert self.log.delete_records_before(offset) == offset
        self.lso = offset
        self.floor = self.log.segments[0].base_offset  # whole segments below went
        self.batches = [b for b in self.batches if b.base >= self.floor]

    @rule()
    def reopen_after_clean_close(self):
        rp, lso = self.log.recovery_point, self.log.log_start_offset
        self.log.close()
        self.log = Log.open(self.dir, CONFIG, clock=lambda: 0, recovery_point=rp,
                            log_start_offset=lso, had_clean_shutdown=True)
        assert self.log.load_result.recovered == []

    @rule(damage=st.sampled_from(["none", "garbage", "zeros", "tear"]), data=st.data())
    def crash_and_recover(self, damage, data):
        rp = self.log.recovery_point
        self.log.abandon()
        last = self.dir / f"{self.log.active_segment.base_offset:020d}.log"
        if damage == "garbage":
            with open(last, "ab") as f:
                f.write(data.draw(st.binary(min_size=1, max_size=80)))
        elif damage == "zeros":
            os.truncate(last, last.stat().st_size + data.draw(st.integers(1, 200)))
        elif damage == "tear" and self.batches and self.batches[-1].base >= rp:
            # Only data past the recovery point can be torn; the last batch must be in
            # the last segment's file for the cut to hit it.
            size = len(self.batches[-1].data)
            if last.stat().st_size >= size:
                os.truncate(last, last.stat().st_size - data.draw(st.integers(1, size - 1)))
                self.batches.pop()
        self.log = Log.open(self.dir, CONFIG, clock=lambda: 0, recovery_point=rp,
                            log_start_offset=self.lso)
        if self.lso > self.leo:  # the start offset was inside the torn batch
            self.batches, self.floor = [], self.lso

    # -- invariants --------------------------------------------------------------------------
    @invariant()
    def offsets_agree(self):
        assert self.log.log_end_offset == self.leo
        assert self.log.log_start_offset == self.lso
        assert self.log.recovery_point <= self.log.log_end_offset

    @invariant()
    def contents_agree(self):
        visible = [b for b in self.batches if b.last >= self.lso]
        got = [(h.base_offset, data) for h, data in self.log.iter_batches(with_data=True)]
        assert got == [(b.base, b.data) for b in visible]
        previous_last = self.lso - 1
        for b in visible:  # reads through the indexes and the segments' remembered tails
            # (an offset in a follower's gap before the batch reads the batch too)
            for offset in {max(b.base, self.lso), b.last, max(previous_last + 1, self.lso)}:
                r = self.log.read(offset, 1)
                assert r.records == b.data
            previous_last = b.last
        if visible:
            r = self.log.read(self.lso, 1 << 20)
            assert r.records == b"".join(b.data for b in visible)[: r.size]

    @invariant()
    def timestamps_agree(self):
        visible = [b for b in self.batches if b.last >= self.lso]
        for ts in (0, 20, 35, 55):
            want = next((b for b in visible if b.max_ts >= ts), None)
            got = self.log.offset_for_timestamp(ts)
            if want is None:
                assert got is None
            else:
                assert got is not None and got.offset == max(want.base, self.lso)


TestLogModel = LogModel.TestCase
# KRAFT_LOG_MODEL_EXAMPLES=2000 for a longer search.
TestLogModel.settings = settings(max_examples=int(os.environ.get("KRAFT_LOG_MODEL_EXAMPLES", "60")),
                                 stateful_step_count=30, deadline=None,
                                 suppress_health_check=[HealthCheck.too_slow])
