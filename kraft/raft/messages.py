"""Messages, log batches and persisted state of the Raft core.

Every message is a frozen, slotted dataclass whose fields mirror the Kafka wire message of
the same name (KIP-595 Vote/BeginQuorumEpoch/EndQuorumEpoch/Fetch, KIP-630 FetchSnapshot,
KIP-996 pre-vote), reduced to the single ``__cluster_metadata-0`` partition, so that a
shell can map them one to one.  Messages travel inside an :class:`Envelope` that carries
what the Kafka request/response header and the connection carry: source, destination and
the correlation id a response shares with its request.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field


class Errors(enum.IntEnum):
    """The Kafka error codes the quorum protocol uses (same names and numbers)."""

    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    INVALID_REQUEST = 42
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    INCONSISTENT_VOTER_SET = 94
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127


NO_LEADER = -1

# Kinds of control batch (``Batch.control``); 0 is a batch of state-machine records.
LEADER_CHANGE = 1  # True: the LeaderChange batch a new leader writes first
VOTERS = 2  # a VotersRecord: the voter set from here on (KIP-853)


@dataclass(frozen=True, slots=True, order=True)
class OffsetAndEpoch:
    """A log position: ``offset`` is an end offset (exclusive), ``epoch`` its epoch.

    Also the snapshot id of KIP-630 (end offset, epoch) and the diverging epoch of a
    FetchResponse (epoch, end offset).  Ordered by (offset, epoch).
    """

    offset: int
    epoch: int

    def __post_init__(self) -> None:
        if self.offset < 0 or self.epoch < 0:
            raise ValueError(f"negative offset or epoch: {self}")


@dataclass(frozen=True, slots=True)
class LeaderAndEpoch:
    leader_id: int  # NO_LEADER when unknown
    epoch: int


@dataclass(frozen=True, slots=True)
class Batch:
    """Records ``base_offset .. base_offset + len(records) - 1``, all of one epoch."""

    base_offset: int
    epoch: int
    records: tuple[bytes, ...]
    control: int = 0  # 0, LEADER_CHANGE (True) or VOTERS

    def __post_init__(self) -> None:
        if not self.records:
            raise ValueError("a batch holds at least one record")
        if self.base_offset < 0 or self.epoch < 0:
            raise ValueError("negative base offset or epoch")

    @property
    def end_offset(self) -> int:
        return self.base_offset + len(self.records)

    @property
    def last_offset(self) -> int:
        return self.base_offset + len(self.records) - 1


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A state-machine snapshot of every committed record below ``snapshot_id.offset``."""

    snapshot_id: OffsetAndEpoch
    data: bytes

    @property
    def end_offset(self) -> int:
        return self.snapshot_id.offset


@dataclass(frozen=True, slots=True)
class HardState:
    """What must be durable before a vote or an acknowledgement leaves (KIP-595 quorum-state)."""

    epoch: int
    voted_id: int = NO_LEADER
    leader_id: int = NO_LEADER


# ---------------------------------------------------------------- Vote (KIP-595, KIP-996)


@dataclass(frozen=True, slots=True)
class VoteRequest:
    candidate_epoch: int
    candidate_id: int
    last_offset_epoch: int
    last_offset: int  # the candidate's log end offset
    pre_vote: bool = False
    # KIP-853: the receiver's directory as the candidate's voter set names it (None: unknown);
    # a replica with another directory lost the disk that voter voted from, and abstains.
    voter_directory_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error_code: Errors
    leader_id: int
    leader_epoch: int
    vote_granted: bool
    pre_vote: bool = False


# ---------------------------------------------------------------- BeginQuorumEpoch


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error_code: Errors
    leader_id: int
    leader_epoch: int


# ---------------------------------------------------------------- EndQuorumEpoch


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error_code: Errors
    leader_id: int
    leader_epoch: int


# ---------------------------------------------------------------- Fetch


@dataclass(frozen=True, slots=True)
class FetchRequest:
    replica_id: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    observer: bool = False
    directory_id: uuid.UUID | None = None  # the fetcher's metadata directory (KIP-853)
    # How long the leader may park it (Kafka's followers send 500); 0 or less: the leader's
    # own ``fetch_max_wait_ms``.
    max_wait_ms: int = 0


@dataclass(frozen=True, slots=True)
class FetchResponse:
    error_code: Errors
    current_leader: LeaderAndEpoch
    high_watermark: int = -1
    log_start_offset: int = 0
    records: tuple[Batch, ...] = ()
    diverging_epoch: OffsetAndEpoch | None = None  # (end offset, epoch) to truncate to
    snapshot_id: OffsetAndEpoch | None = None  # fetch the snapshot first


# ---------------------------------------------------------------- FetchSnapshot (KIP-630)


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    replica_id: int
    current_leader_epoch: int
    snapshot_id: OffsetAndEpoch
    position: int


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    error_code: Errors
    current_leader: LeaderAndEpoch
    snapshot_id: OffsetAndEpoch | None = None
    size: int = 0
    position: int = 0
    unaligned_records: bytes = b""  # the chunk, named as in Kafka's schema


REQUESTS = (VoteRequest, BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest,
            FetchSnapshotRequest)
RESPONSES = (VoteResponse, BeginQuorumEpochResponse, EndQuorumEpochResponse, FetchResponse,
             FetchSnapshotResponse)
Message = (VoteRequest | VoteResponse | BeginQuorumEpochRequest | BeginQuorumEpochResponse
           | EndQuorumEpochRequest | EndQuorumEpochResponse | FetchRequest | FetchResponse
           | FetchSnapshotRequest | FetchSnapshotResponse)


@dataclass(frozen=True, slots=True)
class Envelope:
    """A message with its addressing; a response repeats its request's correlation id."""

    src: int
    dst: int
    correlation_id: int
    message: Message = field(compare=True)

    def __post_init__(self) -> None:
        if not isinstance(self.message, REQUESTS + RESPONSES):
            raise TypeError(f"not a raft message: {self.message!r}")

    @property
    def is_request(self) -> bool:
        return isinstance(self.message, REQUESTS)
