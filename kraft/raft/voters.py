"""The voter set as a function of the log (KIP-853).

A quorum starts from the static ``controller.quorum.voters``.  From then on the voter set is
whatever the newest VotersRecord in the log says, committed or not: a replica uses the
newest configuration it holds, as the Raft dissertation (§4.1) requires for single-server
changes to be safe.  Truncating the log away from an uncommitted VotersRecord therefore puts
the previous set back, which is why the history keeps every change with its offset rather
than only the latest set.

A voter is a replica key: its id and, once known, the directory id of its metadata log
(KIP-853).  A replica whose directory differs from the one its voter set names is not that
voter: it lost the disk the voter's votes and log were on, and takes part only after an
operator removes the old key and adds the new one.  A change's ``record`` is the
VotersRecord's bytes as the shell encoded them (ids, directory ids, endpoints), kept so a
snapshot can carry the set in force at its end offset.
"""

from __future__ import annotations

import uuid
from bisect import bisect_right
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class VoterSet:
    ids: frozenset[int]
    record: bytes | None = None  # the VotersRecord it came from; None for the static set
    directories: tuple[tuple[int, uuid.UUID], ...] = ()  # the voters whose directory is known

    @staticmethod
    def of(voters: dict[int, uuid.UUID | None], record: bytes | None) -> "VoterSet":
        return VoterSet(frozenset(voters), record,
                        tuple(sorted((i, d) for i, d in voters.items() if d is not None)))

    @property
    def majority(self) -> int:
        return len(self.ids) // 2 + 1

    def directory(self, voter_id: int) -> uuid.UUID | None:
        return next((d for i, d in self.directories if i == voter_id), None)

    def is_key(self, voter_id: int, directory_id: uuid.UUID | None) -> bool:
        """``voter_id`` with ``directory_id`` is one of these voters (an unknown directory on
        either side matches: a static voter, or a replica that does not say)."""
        if voter_id not in self.ids:
            return False
        known = self.directory(voter_id)
        return known is None or directory_id is None or known == directory_id


class VoterHistory:
    """Voter sets by the offset of the record that introduced them."""

    def __init__(self, base: VoterSet) -> None:
        self._base = base  # in force below every entry (the static set, or a snapshot's)
        self._offsets: list[int] = []
        self._sets: list[VoterSet] = []

    @property
    def latest(self) -> VoterSet:
        return self._sets[-1] if self._sets else self._base

    @property
    def latest_offset(self) -> int:
        """Offset of the record that introduced the latest set (-1 for the base set)."""
        return self._offsets[-1] if self._offsets else -1

    def at(self, end_offset: int) -> VoterSet:
        """The set in force once every record below ``end_offset`` is applied."""
        index = bisect_right(self._offsets, end_offset - 1)
        return self._sets[index - 1] if index else self._base

    def since(self, end_offset: int) -> list[VoterSet]:
        """Every set in force at some point from ``end_offset`` on: the one there, then each
        introduced at or above it."""
        index = bisect_right(self._offsets, end_offset - 1)
        return [self.at(end_offset), *self._sets[index:]]

    def add(self, offset: int, voters: VoterSet) -> None:
        if self._offsets and offset <= self._offsets[-1]:
            raise ValueError(f"voter set at {offset} after one at {self._offsets[-1]}")
        self._offsets.append(offset)
        self._sets.append(voters)

    def truncate(self, end_offset: int) -> None:
        """Forget the sets introduced at or above ``end_offset`` (the log was truncated)."""
        while self._offsets and self._offsets[-1] >= end_offset:
            self._offsets.pop()
            self._sets.pop()

    def trim_prefix(self, end_offset: int) -> None:
        """The log below ``end_offset`` became a snapshot: fold older entries into the base."""
        index = bisect_right(self._offsets, end_offset - 1)
        if index:
            self._base = self._sets[index - 1]
            del self._offsets[:index], self._sets[:index]

    def reset(self, base: VoterSet) -> None:
        """A snapshot replaced the whole log."""
        self._base = base
        self._offsets.clear()
        self._sets.clear()


class VoterChangeError(Exception):
    """An AddRaftVoter / RemoveRaftVoter the leader refuses; ``error`` is its Kafka code."""

    def __init__(self, error, message: str) -> None:
        super().__init__(message)
        self.error = error
