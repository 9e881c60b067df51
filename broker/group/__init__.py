"""The consumer-group coordinator (Kafka's classic group protocol).

Sans-IO core: ``coordinator`` (ownership of ``__consumer_offsets`` partitions, loading,
dispatch, ticks) composed of ``membership`` (JoinGroup, SyncGroup, Heartbeat, LeaveGroup),
``offsets`` (OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete, offsets retention)
and ``admin`` (ListGroups, DescribeGroups, DeleteGroups), all working on a ``table.GroupTable``
of ``state.Group``s and returning ``output.Output``s; ``records`` are the
``__consumer_offsets`` record codecs, ``config`` the group settings.  The trio shell that
persists the core's writes and parks its answers is ``service``."""
