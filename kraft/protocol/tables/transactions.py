"""The transaction coordinator's APIs (KIP-98, KIP-664 admin) in the schema table language
(see kraft/protocol/schema.py).  WriteTxnMarkers, which partition leaders answer, lives with
the data plane."""

SCHEMA = """
api AddPartitionsToTxn 24
request 0-5 flex=3+
  Transactions []AddPartitionsToTxnTransaction 4+
    TransactionalId string 4+
    ProducerId int64 4+
    ProducerEpoch int16 4+
    VerifyOnly bool 4+ default=false
    Topics []AddPartitionsToTxnTopic 4+
      Name string 0+
      Partitions []int32 0+
  V3AndBelowTransactionalId string 0-3
  V3AndBelowProducerId int64 0-3
  V3AndBelowProducerEpoch int16 0-3
  V3AndBelowTopics []AddPartitionsToTxnTopic 0-3
    Name string 0+
    Partitions []int32 0+
response 0-5 flex=3+
  ThrottleTimeMs int32 0+
  ErrorCode int16 4+
  ResultsByTransaction []AddPartitionsToTxnResult 4+
    TransactionalId string 4+
    TopicResults []AddPartitionsToTxnTopicResult 4+
      Name string 0+
      ResultsByPartition []AddPartitionsToTxnPartitionResult 0+
        PartitionIndex int32 0+
        PartitionErrorCode int16 0+
  ResultsByTopicV3AndBelow []AddPartitionsToTxnTopicResult 0-3
    Name string 0+
    ResultsByPartition []AddPartitionsToTxnPartitionResult 0+
      PartitionIndex int32 0+
      PartitionErrorCode int16 0+

api AddOffsetsToTxn 25
request 0-4 flex=3+
  TransactionalId string 0+
  ProducerId int64 0+
  ProducerEpoch int16 0+
  GroupId string 0+
response 0-4 flex=3+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+

api EndTxn 26
request 0-5 flex=3+
  TransactionalId string 0+
  ProducerId int64 0+
  ProducerEpoch int16 0+
  Committed bool 0+
response 0-5 flex=3+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  ProducerId int64 5+ default=-1
  ProducerEpoch int16 5+ default=-1

api TxnOffsetCommit 28
request 0-4 flex=3+
  TransactionalId string 0+
  GroupId string 0+
  ProducerId int64 0+
  ProducerEpoch int16 0+
  GenerationId int32 3+ default=-1
  MemberId string 3+ default=""
  GroupInstanceId string 3+ null=3+ default=null
  Topics []TxnOffsetCommitRequestTopic 0+
    Name string 0+
    Partitions []TxnOffsetCommitRequestPartition 0+
      PartitionIndex int32 0+
      CommittedOffset int64 0+
      CommittedLeaderEpoch int32 2+ default=-1
      CommittedMetadata string 0+ null=0+
response 0-4 flex=3+
  ThrottleTimeMs int32 0+
  Topics []TxnOffsetCommitResponseTopic 0+
    Name string 0+
    Partitions []TxnOffsetCommitResponsePartition 0+
      PartitionIndex int32 0+
      ErrorCode int16 0+

api DescribeProducers 61
request 0 flex=0+
  Topics []TopicRequest 0+
    Name string 0+
    PartitionIndexes []int32 0+
response 0 flex=0+
  ThrottleTimeMs int32 0+
  Topics []TopicResponse 0+
    Name string 0+
    Partitions []PartitionResponse 0+
      PartitionIndex int32 0+
      ErrorCode int16 0+
      ErrorMessage string 0+ null=0+ default=null
      ActiveProducers []ProducerState 0+
        ProducerId int64 0+
        ProducerEpoch int32 0+
        LastSequence int32 0+ default=-1
        LastTimestamp int64 0+ default=-1
        CoordinatorEpoch int32 0+
        CurrentTxnStartOffset int64 0+ default=-1

api DescribeTransactions 65
request 0 flex=0+
  TransactionalIds []string 0+
response 0 flex=0+
  ThrottleTimeMs int32 0+
  TransactionStates []TransactionState 0+
    ErrorCode int16 0+
    TransactionalId string 0+
    TransactionState string 0+
    TransactionTimeoutMs int32 0+
    TransactionStartTimeMs int64 0+
    ProducerId int64 0+
    ProducerEpoch int16 0+
    Topics []TopicData 0+
      Topic string 0+
      Partitions []int32 0+

api ListTransactions 66
request 0-1 flex=0+
  StateFilters []string 0+
  ProducerIdFilters []int64 0+
  DurationFilter int64 1+ default=-1
response 0-1 flex=0+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  UnknownStateFilters []string 0+
  TransactionStates []TransactionState 0+
    TransactionalId string 0+
    ProducerId int64 0+
    TransactionState string 0+
"""
