"""The groups a coordinator serves and the ``__consumer_offsets`` partitions they live in:
the one table every part of the core (membership, offsets, admin) reads and changes."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from broker.group.records import partition_for
from broker.group.state import Group
from kraft.protocol.error_codes import ErrorCode


class GroupTable:
    """Groups by id, and which partitions are owned (loaded) or loading.

    Args:
        num_partitions: ``offsets.topic.num.partitions``.
        is_leader: ``partition -> bool``, consulted on every request (a broker that lost
            leadership answers NOT_COORDINATOR before its resign notification arrives).
    """

    def __init__(self, num_partitions: int, is_leader: Callable[[int], bool]):
        self.num_partitions = num_partitions
        self.is_leader = is_leader
        self.groups: dict[str, Group] = {}
        self.owned: set[int] = set()
        self.loading: dict[int, int] = {}  # partition -> load token

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def coordinator_error(self, group_id: str) -> int:
        """NONE, COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR for requests about ``group_id``."""
        partition = self.partition_of(group_id)
        if partition in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self.owned or not self.is_leader(partition):
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    def new_group(self, group_id: str, now_ms: int) -> Group:
        """An Empty group in the partition that owns ``group_id`` (not yet in the table)."""
        return Group(group_id, self.partition_of(group_id), state_timestamp_ms=now_ms)

    def ids_in(self, partition: int) -> list[str]:
        return [g for g, grp in self.groups.items() if grp.partition == partition]

    def served(self) -> Iterator[Group]:
        """The groups of owned partitions, in table order (a snapshot: callers may delete)."""
        return iter([group for group in self.groups.values() if group.partition in self.owned])
