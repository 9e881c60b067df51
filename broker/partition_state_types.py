"""Events' results and the leader's per-follower state for ``broker.partition_state``.

Frozen, slotted dataclasses: what the sans-IO partition state hands the trio shell.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from kraft.protocol.error_codes import ErrorCode

UNKNOWN_OFFSET = -1
VALID_ACKS = (-1, 0, 1)


class Role(Enum):
    OFFLINE = "offline"
    LEADER = "leader"
    FOLLOWER = "follower"


class EpochedBatch(Protocol):
    """What the epoch cache needs from an appended batch (a ``BatchHeader`` fits)."""

    base_offset: int
    partition_leader_epoch: int


# ------------------------------------------------------------------ results


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class ProduceCompletion:
    """An acks=all waiter is done: answer its produce request with ``error``."""

    waiter_id: int
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class WaiterRegistration:
    """``completion`` is set when the waiter was complete at once (it is then not kept)."""

    waiter_id: int
    completion: ProduceCompletion | None = None


class IsrChange(Enum):
    SHRINK = "shrink"
    EXPAND = "expand"


@dataclass(frozen=True, slots=True)
class IsrProposal:
    """An AlterPartition request to send: ``new_isr`` based on ``partition_epoch``."""

    kind: IsrChange
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    changed: tuple[int, ...]  # the replicas removed (shrink) or added (expand)
    # Each member's broker epoch as its last fetch gave it (-1: not known, or the leader
    # itself): the controller refuses a member that has registered again since (KIP-903), so
    # a fetch a crashed incarnation sent cannot bring its successor into the ISR.
    broker_epochs: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class LeadershipChange:
    applied: bool  # False: a stale epoch, ignored
    completed: tuple[ProduceCompletion, ...] = ()


@dataclass(frozen=True, slots=True)
class FollowerFetchResult:
    """The leader's answer to a follower fetch.

    With ``error`` NONE and no ``diverging_epoch``, read from the fetch offset and answer
    with ``high_watermark``/``log_start_offset``.  ``completed`` are acks=all waiters to
    answer now; ``isr_proposal`` an AlterPartition request to send.
    """

    error: ErrorCode
    high_watermark: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    diverging_epoch: EpochEndOffset | None = None
    completed: tuple[ProduceCompletion, ...] = ()
    isr_proposal: IsrProposal | None = None


@dataclass(frozen=True, slots=True)
class FetchPosition:
    """What a follower puts in its next fetch for this partition."""

    leader_id: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int


@dataclass(frozen=True, slots=True)
class FetchResponseDecision:
    """What a follower does with a fetch response (its state is already updated).

    ``truncate_to``: truncate the log (and reload producer state) to this offset before
    anything else.  ``truncation_complete`` False means the point is intermediate (the
    follower did not know the leader's epoch): fetch again to find the exact point.
    ``log_start_offset``: advance the local log start to this offset.
    """

    ignored: bool = False
    truncate_to: int | None = None
    truncation_complete: bool = True
    high_watermark: int = UNKNOWN_OFFSET
    log_start_offset: int | None = None


@dataclass(frozen=True, slots=True)
class OutOfRangeDecision:
    """A follower's answer to OFFSET_OUT_OF_RANGE: at most one field is set."""

    truncate_to: int | None = None  # the leader's log is shorter (unclean leader election)
    start_at: int | None = None  # our log ends before the leader's log start: restart there


@dataclass(slots=True)
class ReplicaState:
    """The leader's view of one follower."""

    replica_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0
    broker_epoch: int = -1  # the follower's broker epoch in its last fetch (Fetch v15+)

    def is_caught_up(self, leader_log_end_offset: int, now_ms: int, replica_lag_time_max_ms: int) -> bool:
        return (self.log_end_offset == leader_log_end_offset
                or now_ms - self.last_caught_up_time_ms <= replica_lag_time_max_ms)

    def on_fetch(self, fetch_offset: int, log_start_offset: int, now_ms: int,
                 leader_log_end_offset: int, broker_epoch: int = -1) -> None:
        self.broker_epoch = broker_epoch
        if fetch_offset >= leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.last_fetch_leader_log_end_offset = max(leader_log_end_offset,
                                                    self.last_fetch_leader_log_end_offset)
        self.last_fetch_time_ms = now_ms
