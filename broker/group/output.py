"""What the group coordinator core answers each request or tick with: an :class:`Output`
(the response or a ticket for a parked one, completions of parked ones, and the
``__consumer_offsets`` :class:`Write`s that must be durable before any of them is released)."""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.group.records import OffsetValue


@dataclass(frozen=True, slots=True)
class Write:
    """Records to append to ``__consumer_offsets`` partition ``partition``, in one batch.

    ``offsets`` (commits only) become visible via ``GroupCoordinator.apply_write`` once the
    append is committed.  ``producer`` (TxnOffsetCommit): the (producer id, epoch) whose
    transactional batch this is; its offsets stay pending until the transaction's marker.
    """

    partition: int
    group_id: str
    records: tuple[tuple[bytes, bytes | None], ...]
    offsets: tuple[tuple[tuple[str, int], OffsetValue], ...] | None = None
    producer: tuple[int, int] | None = None


@dataclass
class Output:
    response: dict | None = None
    ticket: int | None = None
    completions: list[tuple[int, dict]] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)
