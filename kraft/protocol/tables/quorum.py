"""KRaft quorum and controller APIs between nodes (schema table language: see kraft/protocol/schema.py).

Vote carries one kraft extension: ``PreVote`` (tag 100) marks a KIP-996 pre-vote, which the
Vote schema kraft was written from (v0-1) predates.
"""

SCHEMA = """
api Vote 52
request 0-1 flex=0+
  ClusterId string 0+ null=0+ default=null
  VoterId int32 1+ default=-1
  Topics []TopicData 0+
    TopicName string 0+
    Partitions []PartitionData 0+
      PartitionIndex int32 0+
      CandidateEpoch int32 0+
      CandidateId int32 0+
      CandidateDirectoryId uuid 1+
      VoterDirectoryId uuid 1+
      LastOffsetEpoch int32 0+
      LastOffset int64 0+
      PreVote bool 0+ tag=100 default=false ext=kraft
response 0-1 flex=0+
  ErrorCode int16 0+
  Topics []TopicData 0+
    TopicName string 0+
    Partitions []PartitionData 0+
      PartitionIndex int32 0+
      ErrorCode int16 0+
      LeaderId int32 0+
      LeaderEpoch int32 0+
      VoteGranted bool 0+
      PreVote bool 0+ tag=100 default=false ext=kraft
  NodeEndpoints []NodeEndpoint 1+ tag=0
    NodeId int32 1+
    Host string 1+
    Port uint16 1+

api BeginQuorumEpoch 53
request 0-1 flex=1+
  ClusterId string 0+ null=0+ default=null
  VoterId int32 1+ default=-1
  Topics []TopicData 0+
    TopicName string 0+
    Partitions []PartitionData 0+
      PartitionIndex int32 0+
      VoterDirectoryId uuid 1+
      LeaderId int32 0+
      LeaderEpoch int32 0+
  LeaderEndpoints []LeaderEndpoint 1+
    Name string 1+
    Host string 1+
    Port uint16 1+
response 0-1 flex=1+
  ErrorCode int16 0+
  Topics []TopicData 0+
    TopicName string 0+
    Partitions []PartitionData 0+
      PartitionIndex int32 0+
      ErrorCode int16 0+
      LeaderId int32 0+
      LeaderEpoch int32 0+
  NodeEndpoints []NodeEndpoint 1+ tag=0
    NodeId int32 1+
    Host string 1+
    Port uint16 1+

api EndQuorumEpoch 54
request 0-1 flex=1+
  ClusterId string 0+ null=0+ default=null
  Topics []TopicData 0+
    TopicName string 0+
    Partitions []PartitionData 0+
      PartitionIndex int32 0+
      LeaderId int32 0+
      LeaderEpoch int32 0+
      PreferredSuccessors []int32 0
      PreferredCandidates []ReplicaInfo 1+
        CandidateId int32 1+
        CandidateDirectoryId uuid 1+
  LeaderEndpoints []LeaderEndpoint 1+
    Name string 1+
    Host string 1+
    Port uint16 1+
response 0-1 flex=1+
  ErrorCode int16 0+
  Topics []TopicData 0+
    TopicName string 0+
    Partitions []PartitionData 0+
      PartitionIndex int32 0+
      ErrorCode int16 0+
      LeaderId int32 0+
      LeaderEpoch int32 0+
  NodeEndpoints []NodeEndpoint 1+ tag=0
    NodeId int32 1+
    Host string 1+
    Port uint16 1+

api DescribeQuorum 55
request 0-2 flex=0+
  Topics []TopicData 0+
    TopicName string 0+
    Partitions []PartitionData 0+
      PartitionIndex int32 0+
response 0-2 flex=0+
  ErrorCode int16 0+
  ErrorMessage string 2+ null=2+
  Topics []TopicData 0+
    TopicName string 0+
    Partitions []PartitionData 0+
      PartitionIndex int32 0+
      ErrorCode int16 0+
      ErrorMessage string 2+ null=2+
      LeaderId int32 0+
      LeaderEpoch int32 0+
      HighWatermark int64 0+
      CurrentVoters []ReplicaState 0+
        ReplicaId int32 0+
        ReplicaDirectoryId uuid 2+
        LogEndOffset int64 0+
        LastFetchTimestamp int64 1+ default=-1
        LastCaughtUpTimestamp int64 1+ default=-1
      Observers []ReplicaState 0+
        ReplicaId int32 0+
        ReplicaDirectoryId uuid 2+
        LogEndOffset int64 0+
        LastFetchTimestamp int64 1+ default=-1
        LastCaughtUpTimestamp int64 1+ default=-1
  Nodes []Node 2+
    NodeId int32 2+
    Listeners []Listener 2+
      Name string 2+
      Host string 2+
      Port uint16 2+

api FetchSnapshot 59
request 0-1 flex=0+
  ClusterId string 0+ null=0+ tag=0 default=null
  ReplicaId int32 0+ default=-1
  MaxBytes int32 0+ default=0x7fffffff
  Topics []TopicSnapshot 0+
    Name string 0+
    Partitions []PartitionSnapshot 0+
      Partition int32 0+
      CurrentLeaderEpoch int32 0+
      SnapshotId SnapshotId 0+
        EndOffset int64 0+
        Epoch int32 0+
      Position int64 0+
      ReplicaDirectoryId uuid 1+ tag=0
response 0-1 flex=0+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  Topics []TopicSnapshot 0+
    Name string 0+
    Partitions []PartitionSnapshot 0+
      Index int32 0+
      ErrorCode int16 0+
      SnapshotId SnapshotId 0+
        EndOffset int64 0+
        Epoch int32 0+
      CurrentLeader LeaderIdAndEpoch 0+ tag=0
        LeaderId int32 0+
        LeaderEpoch int32 0+
      Size int64 0+
      Position int64 0+
      UnalignedRecords records 0+
  NodeEndpoints []NodeEndpoint 1+ tag=0
    NodeId int32 1+
    Host string 1+
    Port uint16 1+

api AlterPartition 56
request 0-3 flex=0+
  BrokerId int32 0+
  BrokerEpoch int64 0+ default=-1
  Topics []TopicData 0+
    TopicName string 0-1
    TopicId uuid 2+
    Partitions []PartitionData 0+
      PartitionIndex int32 0+
      LeaderEpoch int32 0+
      NewIsr []int32 0-2
      NewIsrWithEpochs []BrokerState 3+
        BrokerId int32 3+
        BrokerEpoch int64 3+ default=-1
      LeaderRecoveryState int8 1+ default=0
      PartitionEpoch int32 0+
response 0-3 flex=0+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  Topics []TopicData 0+
    TopicName string 0-1
    TopicId uuid 2+
    Partitions []PartitionData 0+
      PartitionIndex int32 0+
      ErrorCode int16 0+
      LeaderId int32 0+
      LeaderEpoch int32 0+
      Isr []int32 0+
      LeaderRecoveryState int8 1+ default=0
      PartitionEpoch int32 0+

api Envelope 58
request 0 flex=0+
  RequestData bytes 0+
  RequestPrincipal bytes 0+ null=0+
  ClientHostAddress bytes 0+
response 0 flex=0+
  ResponseData bytes 0+ null=0+ default=null
  ErrorCode int16 0+

api BrokerRegistration 62
request 0-4 flex=0+
  BrokerId int32 0+
  ClusterId string 0+
  IncarnationId uuid 0+
  Listeners []Listener 0+
    Name string 0+
    Host string 0+
    Port uint16 0+
    SecurityProtocol int16 0+
  Features []Feature 0+
    Name string 0+
    MinSupportedVersion int16 0+
    MaxSupportedVersion int16 0+
  Rack string 0+ null=0+
  IsMigratingZkBroker bool 1+ default=false
  LogDirs []uuid 2+
  PreviousBrokerEpoch int64 3+ default=-1
response 0-4 flex=0+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  BrokerEpoch int64 0+ default=-1

api BrokerHeartbeat 63
request 0-1 flex=0+
  BrokerId int32 0+
  BrokerEpoch int64 0+ default=-1
  CurrentMetadataOffset int64 0+
  WantFence bool 0+
  WantShutDown bool 0+
  OfflineLogDirs []uuid 1+ tag=0
response 0-1 flex=0+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  IsCaughtUp bool 0+ default=false
  IsFenced bool 0+ default=true
  ShouldShutDown bool 0+

api UnregisterBroker 64
request 0 flex=0+
  BrokerId int32 0+
response 0 flex=0+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  ErrorMessage string 0+ null=0+

api AddRaftVoter 80
request 0 flex=0+
  ClusterId string 0+ null=0+
  TimeoutMs int32 0+
  VoterId int32 0+
  VoterDirectoryId uuid 0+
  Listeners []Listener 0+
    Name string 0+
    Host string 0+
    Port uint16 0+
response 0 flex=0+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  ErrorMessage string 0+ null=0+

api RemoveRaftVoter 81
request 0 flex=0+
  ClusterId string 0+ null=0+
  VoterId int32 0+
  VoterDirectoryId uuid 0+
response 0 flex=0+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  ErrorMessage string 0+ null=0+

api AllocateProducerIds 67
request 0 flex=0+
  BrokerId int32 0+
  BrokerEpoch int64 0+ default=-1
response 0 flex=0+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  ProducerIdStart int64 0+
  ProducerIdLen int32 0+

api ControllerRegistration 70
request 0 flex=0+
  ControllerId int32 0+
  IncarnationId uuid 0+
  ZkMigrationReady bool 0+
  Listeners []Listener 0+
    Name string 0+
    Host string 0+
    Port uint16 0+
    SecurityProtocol int16 0+
  Features []Feature 0+
    Name string 0+
    MinSupportedVersion int16 0+
    MaxSupportedVersion int16 0+
response 0 flex=0+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  ErrorMessage string 0+ null=0+
"""
