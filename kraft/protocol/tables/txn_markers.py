"""WriteTxnMarkers: a transaction coordinator tells partition leaders to write COMMIT or
ABORT markers (schema table language: see kraft/protocol/schema.py)."""

SCHEMA = """
api WriteTxnMarkers 27
request 0-1 flex=1+
  Markers []WritableTxnMarker 0+
    ProducerId int64 0+
    ProducerEpoch int16 0+
    TransactionResult bool 0+
    Topics []WritableTxnMarkerTopic 0+
      Name string 0+
      PartitionIndexes []int32 0+
    CoordinatorEpoch int32 0+
response 0-1 flex=1+
  Markers []WritableTxnMarkerResult 0+
    ProducerId int64 0+
    Topics []WritableTxnMarkerTopicResult 0+
      Name string 0+
      Partitions []WritableTxnMarkerPartitionResult 0+
        PartitionIndex int32 0+
        ErrorCode int16 0+
"""
