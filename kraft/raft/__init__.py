"""KIP-595 pull-based Raft for the controller quorum: a sans-IO core and its simulator.

``RaftNode`` is the pure state machine (etcd RawNode style); ``kraft.raft.sim`` drives
clusters of them from one seed.  The trio shell (``driver``) and the wire mapping are
separate modules built on this API.
"""

from kraft.raft.config import RaftConfig
from kraft.raft.memlog import RaftLog
from kraft.raft.messages import (
    NO_LEADER, Batch, BeginQuorumEpochRequest, BeginQuorumEpochResponse,
    EndQuorumEpochRequest, EndQuorumEpochResponse, Envelope, Errors, FetchRequest,
    FetchResponse, FetchSnapshotRequest, FetchSnapshotResponse, HardState, LeaderAndEpoch,
    OffsetAndEpoch, Snapshot, VoteRequest, VoteResponse,
)
from kraft.raft.node import (
    NotLeaderError, RaftError, RaftInvariantError, RaftNode, Ready, Role,
)

__all__ = [
    "NO_LEADER", "Batch", "BeginQuorumEpochRequest", "BeginQuorumEpochResponse",
    "EndQuorumEpochRequest", "EndQuorumEpochResponse", "Envelope", "Errors", "FetchRequest",
    "FetchResponse", "FetchSnapshotRequest", "FetchSnapshotResponse", "HardState",
    "LeaderAndEpoch", "NotLeaderError", "OffsetAndEpoch", "RaftConfig", "RaftError",
    "RaftInvariantError", "RaftLog", "RaftNode", "Ready", "Role", "Snapshot", "VoteRequest",
    "VoteResponse",
]
