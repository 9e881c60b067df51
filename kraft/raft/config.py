"""Configuration of one Raft node (Kafka's ``controller.quorum.*`` settings, in ms)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RaftConfig:
    """Settings of one quorum member.

    ``voters`` is the static voter set (``controller.quorum.voters``); a node whose id is
    not in it is an observer.  ``observer_only`` makes a configured voter run as an
    observer: the shell sets it when the node's metadata directory was lost and recreated,
    because a voter that forgot its votes must not vote again (KIP-853 solves this with
    directory ids; kraft keeps such a node out of elections and out of the commit quorum).

    The ``unsafe_*`` switches exist only for the simulator's mutation tests; each one
    disables a rule safety depends on, and the simulation must catch it.
    """

    node_id: int
    voters: frozenset[int]
    election_timeout_ms: int = 1000  # controller.quorum.election.timeout.ms, randomised in [T, 2T)
    fetch_timeout_ms: int = 2000  # controller.quorum.fetch.timeout.ms
    election_backoff_max_ms: int = 1000  # controller.quorum.election.backoff.max.ms
    request_timeout_ms: int = 2000  # controller.quorum.request.timeout.ms
    fetch_max_wait_ms: int = 500  # how long a leader parks an empty fetch
    fetch_retry_backoff_ms: int = 50  # after a fetch error
    # A follower applies what one fetch brings before its loop runs anything else (decoding
    # and replaying metadata records costs tens of microseconds each): 1 MiB of partition
    # changes held a node for 1-1.8 s.  The controller paces large writes instead (a fence's
    # next batch waits for the last to commit); 256 KiB here slowed creating 100,000
    # partitions.  The leader always sends at least one whole batch.
    fetch_max_bytes: int = 1 << 20
    fetch_snapshot_max_bytes: int = 1 << 20
    tick_ms: int = 50  # what tick() without an argument advances the clock by
    observer_only: bool = False
    directory_id: uuid.UUID | None = None  # this replica's metadata directory (meta.properties)
    unsafe_skip_vote_fsync: bool = False  # vote grants leave before the vote is durable
    unsafe_skip_vote_log_check: bool = False  # grant votes without comparing logs
    unsafe_count_unsynced_leo: bool = False  # the leader counts its unsynced log end offset
    unsafe_concurrent_voter_changes: bool = False  # a voter change before the last one commits

    def __post_init__(self) -> None:
        object.__setattr__(self, "voters", frozenset(self.voters))
        if not self.voters:
            raise ValueError("the voter set is empty")
        for name in ("election_timeout_ms", "fetch_timeout_ms", "request_timeout_ms",
                     "fetch_max_wait_ms", "tick_ms", "fetch_snapshot_max_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters and not self.observer_only

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1
