"""Version negotiation, topic and config administration, cluster description (schema table language: see kraft/protocol/schema.py)."""

SCHEMA = """
api ApiVersions 18
request 0-4 flex=3+
  ClientSoftwareName string 3+
  ClientSoftwareVersion string 3+
response 0-4 flex=3+
  ErrorCode int16 0+
  ApiKeys []ApiVersion 0+
    ApiKey int16 0+
    MinVersion int16 0+
    MaxVersion int16 0+
  ThrottleTimeMs int32 1+
  SupportedFeatures []SupportedFeatureKey 3+ tag=0
    Name string 3+
    MinVersion int16 3+
    MaxVersion int16 3+
  FinalizedFeaturesEpoch int64 3+ tag=1 default=-1
  FinalizedFeatures []FinalizedFeatureKey 3+ tag=2
    Name string 3+
    MaxVersionLevel int16 3+
    MinVersionLevel int16 3+
  ZkMigrationReady bool 3+ tag=3 default=false

api CreateTopics 19
request 0-7 flex=5+
  Topics []CreatableTopic 0+
    Name string 0+
    NumPartitions int32 0+
    ReplicationFactor int16 0+
    Assignments []CreatableReplicaAssignment 0+
      PartitionIndex int32 0+
      BrokerIds []int32 0+
    Configs []CreatableTopicConfig 0+
      Name string 0+
      Value string 0+ null=0+
  timeoutMs int32 0+ default=60000
  validateOnly bool 1+ default=false
response 0-7 flex=5+
  ThrottleTimeMs int32 2+
  Topics []CreatableTopicResult 0+
    Name string 0+
    TopicId uuid 7+
    ErrorCode int16 0+
    ErrorMessage string 1+ null=0+
    TopicConfigErrorCode int16 5+ tag=0
    NumPartitions int32 5+ default=-1
    ReplicationFactor int16 5+ default=-1
    Configs []CreatableTopicConfigs 5+ null=5+
      Name string 5+
      Value string 5+ null=5+
      ReadOnly bool 5+
      ConfigSource int8 5+ default=-1
      IsSensitive bool 5+

api DeleteTopics 20
request 0-6 flex=4+
  Topics []DeleteTopicState 6+
    Name string 6+ null=6+ default=null
    TopicId uuid 6+
  TopicNames []string 0-5
  TimeoutMs int32 0+
response 0-6 flex=4+
  ThrottleTimeMs int32 1+
  Responses []DeletableTopicResult 0+
    Name string 0+ null=6+
    TopicId uuid 6+
    ErrorCode int16 0+
    ErrorMessage string 5+ null=5+ default=null

api CreatePartitions 37
request 0-3 flex=2+
  Topics []CreatePartitionsTopic 0+
    Name string 0+
    Count int32 0+
    Assignments []CreatePartitionsAssignment 0+ null=0+
      BrokerIds []int32 0+
  TimeoutMs int32 0+
  ValidateOnly bool 0+
response 0-3 flex=2+
  ThrottleTimeMs int32 0+
  Results []CreatePartitionsTopicResult 0+
    Name string 0+
    ErrorCode int16 0+
    ErrorMessage string 0+ null=0+ default=null

api DescribeConfigs 32
request 0-4 flex=4+
  Resources []DescribeConfigsResource 0+
    ResourceType int8 0+
    ResourceName string 0+
    ConfigurationKeys []string 0+ null=0+
  IncludeSynonyms bool 1+ default=false
  IncludeDocumentation bool 3+ default=false
response 0-4 flex=4+
  ThrottleTimeMs int32 0+
  Results []DescribeConfigsResult 0+
    ErrorCode int16 0+
    ErrorMessage string 0+ null=0+
    ResourceType int8 0+
    ResourceName string 0+
    Configs []DescribeConfigsResourceResult 0+
      Name string 0+
      Value string 0+ null=0+
      ReadOnly bool 0+
      IsDefault bool 0
      ConfigSource int8 1+ default=-1
      IsSensitive bool 0+
      Synonyms []DescribeConfigsSynonym 1+
        Name string 1+
        Value string 1+ null=0+
        Source int8 1+
      ConfigType int8 3+ default=0
      Documentation string 3+ null=0+

api AlterConfigs 33
request 0-2 flex=2+
  Resources []AlterConfigsResource 0+
    ResourceType int8 0+
    ResourceName string 0+
    Configs []AlterableConfig 0+
      Name string 0+
      Value string 0+ null=0+
  ValidateOnly bool 0+
response 0-2 flex=2+
  ThrottleTimeMs int32 0+
  Responses []AlterConfigsResourceResponse 0+
    ErrorCode int16 0+
    ErrorMessage string 0+ null=0+
    ResourceType int8 0+
    ResourceName string 0+

api IncrementalAlterConfigs 44
request 0-1 flex=1+
  Resources []AlterConfigsResource 0+
    ResourceType int8 0+
    ResourceName string 0+
    Configs []AlterableConfig 0+
      Name string 0+
      ConfigOperation int8 0+
      Value string 0+ null=0+
  ValidateOnly bool 0+
response 0-1 flex=1+
  ThrottleTimeMs int32 0+
  Responses []AlterConfigsResourceResponse 0+
    ErrorCode int16 0+
    ErrorMessage string 0+ null=0+
    ResourceType int8 0+
    ResourceName string 0+

api DescribeCluster 60
request 0-1 flex=0+
  IncludeClusterAuthorizedOperations bool 0+
  EndpointType int8 1+ default=1
response 0-1 flex=0+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  ErrorMessage string 0+ null=0+ default=null
  EndpointType int8 1+ default=1
  ClusterId string 0+
  ControllerId int32 0+ default=-1
  Brokers []DescribeClusterBroker 0+
    BrokerId int32 0+
    Host string 0+
    Port int32 0+
    Rack string 0+ null=0+ default=null
  ClusterAuthorizedOperations int32 0+ default=-2147483648

api ElectLeaders 43
request 0-2 flex=2+
  ElectionType int8 1+
  TopicPartitions []TopicPartitions 0+ null=0+
    Topic string 0+
    Partitions []int32 0+
  TimeoutMs int32 0+ default=60000
response 0-2 flex=2+
  ThrottleTimeMs int32 0+
  ErrorCode int16 1+
  ReplicaElectionResults []ReplicaElectionResult 0+
    Topic string 0+
    PartitionResult []PartitionResult 0+
      PartitionId int32 0+
      ErrorCode int16 0+
      ErrorMessage string 0+ null=0+

api AlterPartitionReassignments 45
request 0 flex=0+
  TimeoutMs int32 0+ default=60000
  Topics []ReassignableTopic 0+
    Name string 0+
    Partitions []ReassignablePartition 0+
      PartitionIndex int32 0+
      Replicas []int32 0+ null=0+ default=null
response 0 flex=0+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  ErrorMessage string 0+ null=0+
  Responses []ReassignableTopicResponse 0+
    Name string 0+
    Partitions []ReassignablePartitionResponse 0+
      PartitionIndex int32 0+
      ErrorCode int16 0+
      ErrorMessage string 0+ null=0+

api ListPartitionReassignments 46
request 0 flex=0+
  TimeoutMs int32 0+ default=60000
  Topics []ListPartitionReassignmentsTopics 0+ null=0+ default=null
    Name string 0+
    PartitionIndexes []int32 0+
response 0 flex=0+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  ErrorMessage string 0+ null=0+
  Topics []OngoingTopicReassignment 0+
    Name string 0+
    Partitions []OngoingPartitionReassignment 0+
      PartitionIndex int32 0+
      Replicas []int32 0+
      AddingReplicas []int32 0+
      RemovingReplicas []int32 0+

api DescribeLogDirs 35
request 0-4 flex=2+
  Topics []DescribableLogDirTopic 0+ null=0+
    Topic string 0+
    Partitions []int32 0+
response 0-4 flex=2+
  ThrottleTimeMs int32 0+
  ErrorCode int16 3+
  Results []DescribeLogDirsResult 0+
    ErrorCode int16 0+
    LogDir string 0+
    Topics []DescribeLogDirsTopic 0+
      Name string 0+
      Partitions []DescribeLogDirsPartition 0+
        PartitionIndex int32 0+
        PartitionSize int64 0+
        OffsetLag int64 0+
        IsFutureKey bool 0+
    TotalBytes int64 4+ default=-1
    UsableBytes int64 4+ default=-1

api SaslHandshake 17
request 0-1 flex=none
  Mechanism string 0+
response 0-1 flex=none
  ErrorCode int16 0+
  Mechanisms []string 0+
api SaslAuthenticate 36
request 0-2 flex=2+
  AuthBytes bytes 0+
response 0-2 flex=2+
  ErrorCode int16 0+
  ErrorMessage string 0+ null=0+
  AuthBytes bytes 0+
  SessionLifetimeMs int64 1+ default=0

api DescribeUserScramCredentials 50
request 0 flex=0+
  Users []UserName 0+ null=0+
    Name string 0+
response 0 flex=0+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  ErrorMessage string 0+ null=0+
  Results []DescribeUserScramCredentialsResult 0+
    User string 0+
    ErrorCode int16 0+
    ErrorMessage string 0+ null=0+
    CredentialInfos []CredentialInfo 0+
      Mechanism int8 0+
      Iterations int32 0+

api AlterUserScramCredentials 51
request 0 flex=0+
  Deletions []ScramCredentialDeletion 0+
    Name string 0+
    Mechanism int8 0+
  Upsertions []ScramCredentialUpsertion 0+
    Name string 0+
    Mechanism int8 0+
    Iterations int32 0+
    Salt bytes 0+
    SaltedPassword bytes 0+
response 0 flex=0+
  ThrottleTimeMs int32 0+
  Results []AlterUserScramCredentialsResult 0+
    User string 0+
    ErrorCode int16 0+
    ErrorMessage string 0+ null=0+

api DescribeAcls 29
request 0-3 flex=2+
  ResourceTypeFilter int8 0+
  ResourceNameFilter string 0+ null=0+
  PatternTypeFilter int8 1+ default=3
  PrincipalFilter string 0+ null=0+
  HostFilter string 0+ null=0+
  Operation int8 0+
  PermissionType int8 0+
response 0-3 flex=2+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  ErrorMessage string 0+ null=0+
  Resources []DescribeAclsResource 0+
    ResourceType int8 0+
    ResourceName string 0+
    PatternType int8 1+ default=3
    Acls []AclDescription 0+
      Principal string 0+
      Host string 0+
      Operation int8 0+
      PermissionType int8 0+

api CreateAcls 30
request 0-3 flex=2+
  Creations []AclCreation 0+
    ResourceType int8 0+
    ResourceName string 0+
    ResourcePatternType int8 1+ default=3
    Principal string 0+
    Host string 0+
    Operation int8 0+
    PermissionType int8 0+
response 0-3 flex=2+
  ThrottleTimeMs int32 0+
  Results []AclCreationResult 0+
    ErrorCode int16 0+
    ErrorMessage string 0+ null=0+

api DeleteAcls 31
request 0-3 flex=2+
  Filters []DeleteAclsFilter 0+
    ResourceTypeFilter int8 0+
    ResourceNameFilter string 0+ null=0+
    PatternTypeFilter int8 1+ default=3
    PrincipalFilter string 0+ null=0+
    HostFilter string 0+ null=0+
    Operation int8 0+
    PermissionType int8 0+
response 0-3 flex=2+
  ThrottleTimeMs int32 0+
  FilterResults []DeleteAclsFilterResult 0+
    ErrorCode int16 0+
    ErrorMessage string 0+ null=0+
    MatchingAcls []DeleteAclsMatchingAcl 0+
      ErrorCode int16 0+
      ErrorMessage string 0+ null=0+
      ResourceType int8 0+
      ResourceName string 0+
      PatternType int8 1+ default=3
      Principal string 0+
      Host string 0+
      Operation int8 0+
      PermissionType int8 0+

api DescribeClientQuotas 48
request 0-1 flex=1+
  Components []ComponentData 0+
    EntityType string 0+
    MatchType int8 0+
    Match string 0+ null=0+
  Strict bool 0+
response 0-1 flex=1+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  ErrorMessage string 0+ null=0+
  Entries []EntryData 0+ null=0+
    Entity []EntityData 0+
      EntityType string 0+
      EntityName string 0+ null=0+
    Values []ValueData 0+
      Key string 0+
      Value float64 0+

api AlterClientQuotas 49
request 0-1 flex=1+
  Entries []EntryData 0+
    Entity []EntityData 0+
      EntityType string 0+
      EntityName string 0+ null=0+
    Ops []OpData 0+
      Key string 0+
      Value float64 0+
      Remove bool 0+
  ValidateOnly bool 0+
response 0-1 flex=1+
  ThrottleTimeMs int32 0+
  Entries []EntryData 0+
    ErrorCode int16 0+
    ErrorMessage string 0+ null=0+
    Entity []EntityData 0+
      EntityType string 0+
      EntityName string 0+ null=0+

api UpdateFeatures 57
request 0-2 flex=0+
  timeoutMs int32 0+ default=60000
  FeatureUpdates []FeatureUpdateKey 0+
    Feature string 0+
    MaxVersionLevel int16 0+
    AllowDowngrade bool 0-0
    UpgradeType int8 1+ default=1
  ValidateOnly bool 1+ default=false
response 0-2 flex=0+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  ErrorMessage string 0+ null=0+
  Results []UpdatableFeatureResult 0-1
    Feature string 0+
    ErrorCode int16 0+
    ErrorMessage string 0+ null=0+

api DescribeTopicPartitions 75
request 0-0 flex=0+
  Topics []TopicRequest 0+
    Name string 0+
  ResponsePartitionLimit int32 0+ default=2000
  Cursor Cursor 0+ null=0+ default=null
    TopicName string 0+
    PartitionIndex int32 0+
response 0-0 flex=0+
  ThrottleTimeMs int32 0+
  Topics []DescribeTopicPartitionsResponseTopic 0+
    ErrorCode int16 0+
    Name string 0+ null=0+
    TopicId uuid 0+
    IsInternal bool 0+ default=false
    Partitions []DescribeTopicPartitionsResponsePartition 0+
      ErrorCode int16 0+
      PartitionIndex int32 0+
      LeaderId int32 0+
      LeaderEpoch int32 0+ default=-1
      ReplicaNodes []int32 0+
      IsrNodes []int32 0+
      EligibleLeaderReplicas []int32 0+ null=0+ default=null
      LastKnownElr []int32 0+ null=0+ default=null
      OfflineReplicas []int32 0+
    TopicAuthorizedOperations int32 0+ default=-2147483648
  NextCursor Cursor 0+ null=0+ default=null
    TopicName string 0+
    PartitionIndex int32 0+
"""
