"""Records of the cluster metadata log (the type id follows the name) (schema table language: see kraft/protocol/schema.py)."""

SCHEMA = """
metadata AbortTransactionRecord 25 0 flex=0+
  Reason string 0+ null=0+ tag=0 default=null

metadata AccessControlEntryRecord 18 0 flex=0+
  Id uuid 0+
  ResourceType int8 0+
  ResourceName string 0+
  PatternType int8 0+
  Principal string 0+
  Host string 0+
  Operation int8 0+
  PermissionType int8 0+

metadata BeginTransactionRecord 23 0 flex=0+
  Name string 0+ null=0+ tag=0 default=null

metadata BrokerRegistrationChangeRecord 17 0-2 flex=0+
  BrokerId int32 0+
  BrokerEpoch int64 0+
  Fenced int8 0+ tag=0
  InControlledShutdown int8 1+ tag=1
  LogDirs []uuid 2+ tag=2

metadata ClientQuotaRecord 14 0 flex=0+
  Entity []EntityData 0+
    EntityType string 0+
    EntityName string 0+ null=0+
  Key string 0+
  Value float64 0+
  Remove bool 0+

metadata ConfigRecord 4 0 flex=0+
  ResourceType int8 0+
  ResourceName string 0+
  Name string 0+
  Value string 0+ null=0+

metadata DelegationTokenRecord 10 0 flex=0+
  Owner string 0+
  Requester string 0+
  Renewers []string 0+
  IssueTimestamp int64 0+
  MaxTimestamp int64 0+
  ExpirationTimestamp int64 0+
  TokenId string 0+

metadata EndTransactionRecord 24 0 flex=0+

metadata FeatureLevelRecord 12 0 flex=0+
  Name string 0+
  FeatureLevel int16 0+

metadata FenceBrokerRecord 7 0 flex=0+
  Id int32 0+
  Epoch int64 0+

metadata NoOpRecord 20 0 flex=0+

metadata PartitionChangeRecord 5 0-2 flex=0+
  PartitionId int32 0+ default=-1
  TopicId uuid 0+
  Isr []int32 0+ null=0+ tag=0 default=null
  Leader int32 0+ tag=1 default=-2
  Replicas []int32 0+ null=0+ tag=2 default=null
  RemovingReplicas []int32 0+ null=0+ tag=3 default=null
  AddingReplicas []int32 0+ null=0+ tag=4 default=null
  LeaderRecoveryState int8 0+ tag=5 default=-1
  Directories []uuid 1+ null=1+ tag=8 default=null
  EligibleLeaderReplicas []int32 2+ null=2+ tag=6 default=null
  LastKnownElr []int32 2+ null=2+ tag=7 default=null

metadata PartitionRecord 3 0-2 flex=0+
  PartitionId int32 0+ default=-1
  TopicId uuid 0+
  Replicas []int32 0+
  Isr []int32 0+
  RemovingReplicas []int32 0+
  AddingReplicas []int32 0+
  Leader int32 0+ default=-1
  LeaderRecoveryState int8 0+ tag=0 default=0
  LeaderEpoch int32 0+ default=-1
  PartitionEpoch int32 0+ default=-1
  Directories []uuid 1+
  EligibleLeaderReplicas []int32 2+ null=2+ tag=1 default=null
  LastKnownElr []int32 2+ null=2+ tag=2 default=null

metadata ProducerIdsRecord 15 0 flex=0+
  BrokerId int32 0+
  BrokerEpoch int64 0+ default=-1
  NextProducerId int64 0+

metadata RegisterBrokerRecord 0 0-3 flex=0+
  BrokerId int32 0+
  IsMigratingZkBroker bool 2+ default=false
  IncarnationId uuid 0+
  BrokerEpoch int64 0+
  EndPoints []BrokerEndpoint 0+
    Name string 0+
    Host string 0+
    Port uint16 0+
    SecurityProtocol int16 0+
  Features []BrokerFeature 0+
    Name string 0+
    MinSupportedVersion int16 0+
    MaxSupportedVersion int16 0+
  Rack string 0+ null=0+
  Fenced bool 0+ default=true
  InControlledShutdown bool 1+ default=false
  LogDirs []uuid 3+ tag=0

metadata RegisterControllerRecord 27 0 flex=0+
  ControllerId int32 0+
  IncarnationId uuid 0+
  ZkMigrationReady bool 0+
  EndPoints []ControllerEndpoint 0+
    Name string 0+
    Host string 0+
    Port uint16 0+
    SecurityProtocol int16 0+
  Features []ControllerFeature 0+
    Name string 0+
    MinSupportedVersion int16 0+
    MaxSupportedVersion int16 0+

metadata RemoveAccessControlEntryRecord 19 0 flex=0+
  Id uuid 0+

metadata RemoveDelegationTokenRecord 26 0 flex=0+
  TokenId string 0+

metadata RemoveTopicRecord 9 0 flex=0+
  TopicId uuid 0+

metadata RemoveUserScramCredentialRecord 22 0 flex=0+
  Name string 0+
  Mechanism int8 0+

metadata TopicRecord 2 0 flex=0+
  Name string 0+
  TopicId uuid 0+

metadata UnfenceBrokerRecord 8 0 flex=0+
  Id int32 0+
  Epoch int64 0+

metadata UnregisterBrokerRecord 1 0 flex=0+
  BrokerId int32 0+
  BrokerEpoch int64 0+

metadata UserScramCredentialRecord 11 0 flex=0+
  Name string 0+
  Mechanism int8 0+
  Salt bytes 0+
  StoredKey bytes 0+
  ServerKey bytes 0+
  Iterations int32 0+
"""
