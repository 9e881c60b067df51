"""Consumer group coordination and committed offsets (schema table language: see kraft/protocol/schema.py)."""

SCHEMA = """
api FindCoordinator 10
request 0-6 flex=3+
  Key string 0-3
  KeyType int8 1+ default=0
  CoordinatorKeys []string 4+
response 0-6 flex=3+
  ThrottleTimeMs int32 1+
  ErrorCode int16 0-3
  ErrorMessage string 1-3 null=1-3
  NodeId int32 0-3
  Host string 0-3
  Port int32 0-3
  Coordinators []Coordinator 4+
    Key string 4+
    NodeId int32 4+
    Host string 4+
    Port int32 4+
    ErrorCode int16 4+
    ErrorMessage string 4+ null=4+

api JoinGroup 11
request 0-9 flex=6+
  GroupId string 0+
  SessionTimeoutMs int32 0+
  RebalanceTimeoutMs int32 1+ default=-1
  MemberId string 0+
  GroupInstanceId string 5+ null=5+ default=null
  ProtocolType string 0+
  Protocols []JoinGroupRequestProtocol 0+
    Name string 0+
    Metadata bytes 0+
  Reason string 8+ null=8+ default=null
response 0-9 flex=6+
  ThrottleTimeMs int32 2+
  ErrorCode int16 0+
  GenerationId int32 0+ default=-1
  ProtocolType string 7+ null=7+ default=null
  ProtocolName string 0+ null=7+
  Leader string 0+
  SkipAssignment bool 9+ default=false
  MemberId string 0+
  Members []JoinGroupResponseMember 0+
    MemberId string 0+
    GroupInstanceId string 5+ null=5+ default=null
    Metadata bytes 0+

api Heartbeat 12
request 0-4 flex=4+
  GroupId string 0+
  GenerationId int32 0+
  MemberId string 0+
  GroupInstanceId string 3+ null=3+ default=null
response 0-4 flex=4+
  ThrottleTimeMs int32 1+
  ErrorCode int16 0+

api LeaveGroup 13
request 0-5 flex=4+
  GroupId string 0+
  MemberId string 0-2
  Members []MemberIdentity 3+
    MemberId string 3+
    GroupInstanceId string 3+ null=3+ default=null
    Reason string 5+ null=5+ default=null
response 0-5 flex=4+
  ThrottleTimeMs int32 1+
  ErrorCode int16 0+
  Members []MemberResponse 3+
    MemberId string 3+
    GroupInstanceId string 3+ null=3+
    ErrorCode int16 3+

api SyncGroup 14
request 0-5 flex=4+
  GroupId string 0+
  GenerationId int32 0+
  MemberId string 0+
  GroupInstanceId string 3+ null=3+ default=null
  ProtocolType string 5+ null=5+ default=null
  ProtocolName string 5+ null=5+ default=null
  Assignments []SyncGroupRequestAssignment 0+
    MemberId string 0+
    Assignment bytes 0+
response 0-5 flex=4+
  ThrottleTimeMs int32 1+
  ErrorCode int16 0+
  ProtocolType string 5+ null=5+ default=null
  ProtocolName string 5+ null=5+ default=null
  Assignment bytes 0+

api DescribeGroups 15
request 0-5 flex=5+
  Groups []string 0+
  IncludeAuthorizedOperations bool 3+
response 0-5 flex=5+
  ThrottleTimeMs int32 1+
  Groups []DescribedGroup 0+
    ErrorCode int16 0+
    GroupId string 0+
    GroupState string 0+
    ProtocolType string 0+
    ProtocolData string 0+
    Members []DescribedGroupMember 0+
      MemberId string 0+
      GroupInstanceId string 4+ null=4+ default=null
      ClientId string 0+
      ClientHost string 0+
      MemberMetadata bytes 0+
      MemberAssignment bytes 0+
    AuthorizedOperations int32 3+ default=-2147483648

api ListGroups 16
request 0-5 flex=3+
  StatesFilter []string 4+
  TypesFilter []string 5+
response 0-5 flex=3+
  ThrottleTimeMs int32 1+
  ErrorCode int16 0+
  Groups []ListedGroup 0+
    GroupId string 0+
    ProtocolType string 0+
    GroupState string 4+
    GroupType string 5+

api DeleteGroups 42
request 0-2 flex=2+
  GroupsNames []string 0+
response 0-2 flex=2+
  ThrottleTimeMs int32 0+
  Results []DeletableGroupResult 0+
    GroupId string 0+
    ErrorCode int16 0+

api OffsetCommit 8
request 0-9 flex=8+
  GroupId string 0+
  GenerationIdOrMemberEpoch int32 1+ default=-1
  MemberId string 1+
  GroupInstanceId string 7+ null=7+ default=null
  RetentionTimeMs int64 2-4 default=-1
  Topics []OffsetCommitRequestTopic 0+
    Name string 0+
    Partitions []OffsetCommitRequestPartition 0+
      PartitionIndex int32 0+
      CommittedOffset int64 0+
      CommittedLeaderEpoch int32 6+ default=-1
      CommitTimestamp int64 1 default=-1
      CommittedMetadata string 0+ null=0+
response 0-9 flex=8+
  ThrottleTimeMs int32 3+
  Topics []OffsetCommitResponseTopic 0+
    Name string 0+
    Partitions []OffsetCommitResponsePartition 0+
      PartitionIndex int32 0+
      ErrorCode int16 0+

api OffsetFetch 9
request 0-9 flex=6+
  GroupId string 0-7
  Topics []OffsetFetchRequestTopic 0-7 null=2-7
    Name string 0-7
    PartitionIndexes []int32 0-7
  Groups []OffsetFetchRequestGroup 8+
    GroupId string 8+
    MemberId string 9+ null=9+ default=null
    MemberEpoch int32 9+ default=-1
    Topics []OffsetFetchRequestTopics 8+ null=8+
      Name string 8+
      PartitionIndexes []int32 8+
  RequireStable bool 7+ default=false
response 0-9 flex=6+
  ThrottleTimeMs int32 3+
  Topics []OffsetFetchResponseTopic 0-7
    Name string 0-7
    Partitions []OffsetFetchResponsePartition 0-7
      PartitionIndex int32 0-7
      CommittedOffset int64 0-7
      CommittedLeaderEpoch int32 5-7 default=-1
      Metadata string 0-7 null=0-7
      ErrorCode int16 0-7
  ErrorCode int16 2-7 default=0
  Groups []OffsetFetchResponseGroup 8+
    GroupId string 8+
    Topics []OffsetFetchResponseTopics 8+
      Name string 8+
      Partitions []OffsetFetchResponsePartitions 8+
        PartitionIndex int32 8+
        CommittedOffset int64 8+
        CommittedLeaderEpoch int32 8+ default=-1
        Metadata string 8+ null=8+
        ErrorCode int16 8+
    ErrorCode int16 8+ default=0

api OffsetDelete 47
request 0 flex=none
  GroupId string 0+
  Topics []OffsetDeleteRequestTopic 0+
    Name string 0+
    Partitions []OffsetDeleteRequestPartition 0+
      PartitionIndex int32 0+
response 0 flex=none
  ErrorCode int16 0+
  ThrottleTimeMs int32 0+
  Topics []OffsetDeleteResponseTopic 0+
    Name string 0+
    Partitions []OffsetDeleteResponsePartition 0+
      PartitionIndex int32 0+
      ErrorCode int16 0+

api ConsumerGroupHeartbeat 68
request 0-1 flex=0+
  GroupId string 0+
  MemberId string 0+
  MemberEpoch int32 0+
  InstanceId string 0+ null=0+ default=null
  RackId string 0+ null=0+ default=null
  RebalanceTimeoutMs int32 0+ default=-1
  SubscribedTopicNames []string 0+ null=0+ default=null
  SubscribedTopicRegex string 1+ null=1+ default=null
  ServerAssignor string 0+ null=0+ default=null
  TopicPartitions []TopicPartitions 0+ null=0+ default=null
    TopicId uuid 0+
    Partitions []int32 0+
response 0-1 flex=0+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  ErrorMessage string 0+ null=0+ default=null
  MemberId string 0+ null=0+ default=null
  MemberEpoch int32 0+
  HeartbeatIntervalMs int32 0+
  Assignment Assignment 0+ null=0+ default=null
    TopicPartitions []TopicPartitions 0+
      TopicId uuid 0+
      Partitions []int32 0+

api ConsumerGroupDescribe 69
request 0-0 flex=0+
  GroupIds []string 0+
  IncludeAuthorizedOperations bool 0+
response 0-0 flex=0+
  ThrottleTimeMs int32 0+
  Groups []DescribedGroup 0+
    ErrorCode int16 0+
    ErrorMessage string 0+ null=0+ default=null
    GroupId string 0+
    GroupState string 0+
    GroupEpoch int32 0+
    AssignmentEpoch int32 0+
    AssignorName string 0+
    Members []Member 0+
      MemberId string 0+
      InstanceId string 0+ null=0+ default=null
      RackId string 0+ null=0+ default=null
      MemberEpoch int32 0+
      ClientId string 0+
      ClientHost string 0+
      SubscribedTopicNames []string 0+
      SubscribedTopicRegex string 0+ null=0+ default=null
      Assignment Assignment 0+
        TopicPartitions []TopicPartitions 0+
          TopicId uuid 0+
          TopicName string 0+
          Partitions []int32 0+
      TargetAssignment Assignment 0+
        TopicPartitions []TopicPartitions 0+
          TopicId uuid 0+
          TopicName string 0+
          Partitions []int32 0+
    AuthorizedOperations int32 0+ default=-2147483648
"""
