"""The cluster metadata: log records, immutable images, and the QuorumController.

- ``metadata.serde``: metadata-log record values (Kafka's MetadataRecordSerde framing).
- ``metadata.image`` / ``metadata.delta``: MetadataImage and the MetadataDelta that
  replays records over one; ``image.records()`` is a snapshot.
- ``metadata.snapshot``: SnapshotPolicy, when a snapshot is due.
- ``metadata.controller``: the sans-IO QuorumController of the active controller.

Nothing here does I/O, reads a clock or uses global randomness.
"""
