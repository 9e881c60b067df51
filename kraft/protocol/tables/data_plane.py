"""Produce, Fetch, ListOffsets, Metadata and the other APIs of the client data path (schema table language: see kraft/protocol/schema.py)."""

SCHEMA = """
api Produce 0
request 0-11 flex=9+
  TransactionalId string 3+ null=3+ default=null
  Acks int16 0+
  TimeoutMs int32 0+
  TopicData []TopicProduceData 0+
    Name string 0+
    PartitionData []PartitionProduceData 0+
      Index int32 0+
      Records records 0+ null=0+
response 0-11 flex=9+
  Responses []TopicProduceResponse 0+
    Name string 0+
    PartitionResponses []PartitionProduceResponse 0+
      Index int32 0+
      ErrorCode int16 0+
      BaseOffset int64 0+
      LogAppendTimeMs int64 2+ default=-1
      LogStartOffset int64 5+ default=-1
      RecordErrors []BatchIndexAndErrorMessage 8+
        BatchIndex int32 8+
        BatchIndexErrorMessage string 8+ null=8+ default=null
      ErrorMessage string 8+ null=8+ default=null
      CurrentLeader LeaderIdAndEpoch 10+ tag=0
        LeaderId int32 10+ default=-1
        LeaderEpoch int32 10+ default=-1
  ThrottleTimeMs int32 1+ default=0
  NodeEndpoints []NodeEndpoint 10+ tag=0
    NodeId int32 10+
    Host string 10+
    Port int32 10+
    Rack string 10+ null=10+ default=null

api Fetch 1
request 0-17 flex=12+
  ClusterId string 12+ null=12+ tag=0 default=null
  ReplicaId int32 0-14 default=-1
  ReplicaState ReplicaState 15+ tag=1
    ReplicaId int32 15+ default=-1
    ReplicaEpoch int64 15+ default=-1
  MaxWaitMs int32 0+
  MinBytes int32 0+
  MaxBytes int32 3+ default=0x7fffffff
  IsolationLevel int8 4+ default=0
  SessionId int32 7+ default=0
  SessionEpoch int32 7+ default=-1
  Topics []FetchTopic 0+
    Topic string 0-12
    TopicId uuid 13+
    Partitions []FetchPartition 0+
      Partition int32 0+
      CurrentLeaderEpoch int32 9+ default=-1
      FetchOffset int64 0+
      LastFetchedEpoch int32 12+ default=-1
      LogStartOffset int64 5+ default=-1
      PartitionMaxBytes int32 0+
      ReplicaDirectoryId uuid 17+ tag=0
  ForgottenTopicsData []ForgottenTopic 7+
    Topic string 7-12
    TopicId uuid 13+
    Partitions []int32 7+
  RackId string 11+ default=""
response 0-17 flex=12+
  ThrottleTimeMs int32 1+
  ErrorCode int16 7+
  SessionId int32 7+ default=0
  Responses []FetchableTopicResponse 0+
    Topic string 0-12
    TopicId uuid 13+
    Partitions []PartitionData 0+
      PartitionIndex int32 0+
      ErrorCode int16 0+
      HighWatermark int64 0+
      LastStableOffset int64 4+ default=-1
      LogStartOffset int64 5+ default=-1
      DivergingEpoch EpochEndOffset 12+ tag=0
        Epoch int32 12+ default=-1
        EndOffset int64 12+ default=-1
      CurrentLeader LeaderIdAndEpoch 12+ tag=1
        LeaderId int32 12+ default=-1
        LeaderEpoch int32 12+ default=-1
      SnapshotId SnapshotId 12+ tag=2
        EndOffset int64 0+ default=-1
        Epoch int32 0+ default=-1
      AbortedTransactions []AbortedTransaction 4+ null=4+
        ProducerId int64 4+
        FirstOffset int64 4+
      PreferredReadReplica int32 11+ default=-1
      Records records 0+ null=0+
  NodeEndpoints []NodeEndpoint 16+ tag=0
    NodeId int32 16+
    Host string 16+
    Port int32 16+
    Rack string 16+ null=16+ default=null

api ListOffsets 2
request 0-10 flex=6+
  ReplicaId int32 0+
  IsolationLevel int8 2+
  Topics []ListOffsetsTopic 0+
    Name string 0+
    Partitions []ListOffsetsPartition 0+
      PartitionIndex int32 0+
      CurrentLeaderEpoch int32 4+ default=-1
      Timestamp int64 0+
      MaxNumOffsets int32 0 default=1
  TimeoutMs int32 10+
response 0-10 flex=6+
  ThrottleTimeMs int32 2+
  Topics []ListOffsetsTopicResponse 0+
    Name string 0+
    Partitions []ListOffsetsPartitionResponse 0+
      PartitionIndex int32 0+
      ErrorCode int16 0+
      OldStyleOffsets []int64 0
      Timestamp int64 1+ default=-1
      Offset int64 1+ default=-1
      LeaderEpoch int32 4+ default=-1

api Metadata 3
request 0-12 flex=9+
  Topics []MetadataRequestTopic 0+ null=1+
    TopicId uuid 10+
    Name string 0+ null=10+
  AllowAutoTopicCreation bool 4+ default=true
  IncludeClusterAuthorizedOperations bool 8-10
  IncludeTopicAuthorizedOperations bool 8+
response 0-12 flex=9+
  ThrottleTimeMs int32 3+
  Brokers []MetadataResponseBroker 0+
    NodeId int32 0+
    Host string 0+
    Port int32 0+
    Rack string 1+ null=1+ default=null
  ClusterId string 2+ null=2+ default=null
  ControllerId int32 1+ default=-1
  Topics []MetadataResponseTopic 0+
    ErrorCode int16 0+
    Name string 0+ null=12+
    TopicId uuid 10+
    IsInternal bool 1+ default=false
    Partitions []MetadataResponsePartition 0+
      ErrorCode int16 0+
      PartitionIndex int32 0+
      LeaderId int32 0+
      LeaderEpoch int32 7+ default=-1
      ReplicaNodes []int32 0+
      IsrNodes []int32 0+
      OfflineReplicas []int32 5+
    TopicAuthorizedOperations int32 8+ default=-2147483648
  ClusterAuthorizedOperations int32 8-10 default=-2147483648

api OffsetForLeaderEpoch 23
request 0-4 flex=4+
  ReplicaId int32 3+ default=-2
  Topics []OffsetForLeaderTopic 0+
    Topic string 0+
    Partitions []OffsetForLeaderPartition 0+
      Partition int32 0+
      CurrentLeaderEpoch int32 2+ default=-1
      LeaderEpoch int32 0+
response 0-4 flex=4+
  ThrottleTimeMs int32 2+
  Topics []OffsetForLeaderTopicResult 0+
    Topic string 0+
    Partitions []EpochEndOffset 0+
      ErrorCode int16 0+
      Partition int32 0+
      LeaderEpoch int32 1+ default=-1
      EndOffset int64 0+ default=-1

api InitProducerId 22
request 0-5 flex=2+
  TransactionalId string 0+ null=0+
  TransactionTimeoutMs int32 0+
  ProducerId int64 3+ default=-1
  ProducerEpoch int16 3+ default=-1
response 0-5 flex=2+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  ProducerId int64 0+ default=-1
  ProducerEpoch int16 0+

api DeleteRecords 21
request 0-2 flex=2+
  Topics []DeleteRecordsTopic 0+
    Name string 0+
    Partitions []DeleteRecordsPartition 0+
      PartitionIndex int32 0+
      Offset int64 0+
  TimeoutMs int32 0+
response 0-2 flex=2+
  ThrottleTimeMs int32 0+
  Topics []DeleteRecordsTopicResult 0+
    Name string 0+
    Partitions []DeleteRecordsPartitionResult 0+
      PartitionIndex int32 0+
      LowWatermark int64 0+
      ErrorCode int16 0+
"""
