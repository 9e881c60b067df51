"""Protocol headers and standalone data structures (control records, snapshots, consumer protocol) (schema table language: see kraft/protocol/schema.py)."""

SCHEMA = """
header RequestHeader 0-2 flex=2+
  RequestApiKey int16 0+
  RequestApiVersion int16 0+
  CorrelationId int32 0+
  ClientId string 1+ null=1+ flex=none

header ResponseHeader 0-1 flex=1+
  CorrelationId int32 0+

data LeaderChangeMessage 0-1 flex=0+
  Version int16 0+
  LeaderId int32 0+
  Voters []Voter 0+
    VoterId int32 0+
    VoterDirectoryId uuid 1+
  GrantingVoters []Voter 0+
    VoterId int32 0+
    VoterDirectoryId uuid 1+

data SnapshotHeaderRecord 0 flex=0+
  Version int16 0+
  LastContainedLogTimestamp int64 0+

data SnapshotFooterRecord 0 flex=0+
  Version int16 0+

data VotersRecord 0 flex=0+
  Version int16 0+
  Voters []Voter 0+
    VoterId int32 0+
    VoterDirectoryId uuid 0+
    Endpoints []Endpoint 0+
      Name string 0+
      Host string 0+
      Port uint16 0+
    KRaftVersionFeature KRaftVersionFeature 0+
      MinSupportedVersion int16 0+
      MaxSupportedVersion int16 0+

data KRaftVersionRecord 0 flex=0+
  Version int16 0+
  KRaftVersion int16 0+

data ConsumerProtocolSubscription 0-3 flex=none
  Topics []string 0+
  UserData bytes 0+ null=0+ default=null
  OwnedPartitions []TopicPartition 1+
    Topic string 1+
    Partitions []int32 1+
  GenerationId int32 2+ default=-1
  RackId string 3+ null=3+ default=null

data ConsumerProtocolAssignment 0-3 flex=none
  AssignedPartitions []TopicPartition 0+
    Topic string 0+
    Partitions []int32 0+
  UserData bytes 0+ null=0+ default=null
"""
