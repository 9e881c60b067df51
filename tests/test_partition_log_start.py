"""A follower's log where DeleteRecords left the leader's log start inside a batch, on a
real ``Log``: the data-plane simulator found both cases (its DeleteRecords events).

The leader's log start may fall inside a batch (DeleteRecords takes any offset up to the
high watermark), and its leader-epoch cache is cut at that start, so epoch end offsets it
answers with need not be batch boundaries."""

import uuid

from broker.partition import Partition
from broker.partition_state_types import EpochEndOffset, FetchPosition
from kraft.log import Log, LogConfig
from kraft.records import build_batch

LEADER, FOLLOWER = 1, 2


def follower(tmp_path) -> Partition:
    p = Partition("t", 0, uuid.UUID(int=1), Log.open(tmp_path, LogConfig()), broker_id=FOLLOWER)
    p.apply_registration(FOLLOWER, LEADER, 0, 0, (LEADER, FOLLOWER), (LEADER, FOLLOWER), now_ms=0)
    return p


def batch(base_offset: int, count: int) -> bytes:
    return build_batch([(None, b"v%d" % (base_offset + i)) for i in range(count)],
                       base_offset=base_offset, partition_leader_epoch=0, timestamp=1)


def test_an_empty_follower_takes_the_leader_batch_that_holds_its_log_start(tmp_path):
    """Fetching below the leader's log start 7 answers OFFSET_OUT_OF_RANGE; the follower
    starts over at 7, and the leader's first batch is 6..8: as Kafka's follower, the log
    starts at the batch's base and then takes the leader's start from the answer."""
    p = follower(tmp_path)
    p.on_offset_out_of_range(7, 9)
    assert (p.log.log_start_offset, p.log.log_end_offset) == (7, 7)
    position = p.state.fetch_position()
    assert position.fetch_offset == 7
    p.apply_fetched(position, batch(6, 3), high_watermark=9, diverging=None, log_start_offset=7)
    assert (p.log.log_start_offset, p.log.log_end_offset) == (7, 9)
    assert (p.state.log_start_offset, p.state.log_end_offset, p.state.high_watermark) == (7, 9, 9)
    p.log.close()


def test_a_truncation_point_inside_a_batch_leaves_the_state_at_the_log_end(tmp_path):
    """The leader answers a divergence at offset 4 (its epoch cache starts there); the
    follower's batch 3..5 goes whole, so its log ends at 3, and its next fetch asks for 3,
    not 4 (which would never match a batch boundary of its own log)."""
    p = follower(tmp_path)
    position = p.state.fetch_position()
    p.apply_fetched(position, batch(0, 3) + batch(3, 3), high_watermark=0, diverging=None, log_start_offset=0)
    assert p.log.log_end_offset == 6
    position = p.state.fetch_position()
    p.apply_fetched(position, b"", high_watermark=6, diverging=EpochEndOffset(0, 4), log_start_offset=4)
    assert p.log.log_end_offset == 3
    assert p.state.log_end_offset == 3 and p.state.fetch_position().fetch_offset == 3
    # The answer's log start (4, past the new end) is not taken from a diverging answer.
    assert p.log.log_start_offset == 0 and p.state.log_start_offset == 0
    p.log.close()


def test_a_truncation_below_the_log_start_starts_the_log_over_there(tmp_path):
    """A follower whose log starts at 6 (its leader's DeleteRecords) is told to truncate to
    3 (a leader whose log never had the deleted epoch's end): the log starts over at 3, as
    Kafka's truncateFullyAndStartAt, and so must the state, or its high watermark stays at
    the old start, above its own log end (the data-plane simulator's seed 30460)."""
    p = follower(tmp_path)
    position = p.state.fetch_position()
    p.apply_fetched(position, batch(0, 3) + batch(3, 3) + batch(6, 3), high_watermark=9, diverging=None,
                    log_start_offset=6)
    assert (p.log.log_start_offset, p.state.log_start_offset, p.state.high_watermark) == (6, 6, 9)
    p.truncate_to(3)
    assert (p.log.log_start_offset, p.log.log_end_offset) == (3, 3)
    assert (p.state.log_start_offset, p.state.log_end_offset, p.state.high_watermark) == (3, 3, 3)
    assert p.state.fetch_position().fetch_offset == 3
    p.log.close()
