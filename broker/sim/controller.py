"""The controller's side of one partition, as a small deterministic model.

The real ``QuorumController`` is a Raft state machine with its own simulator
(``kraft/raft/sim.py``, ``tests/test_metadata_simulation.py``); here only its decisions
about one partition matter, so the model keeps them and commits each at once.  The rules
are those of ``metadata/controller/elections.py`` and ``partitions.py`` (Kafka's):

* A broker that goes away (fenced: its session expired, or it registered again as a new
  incarnation after a crash, KIP-903) leaves the ISR, except that the ISR never becomes
  empty: the last member stays and the partition has no leader (-1).
* The leader stays while it is an eligible ISR member; otherwise the first replica, in
  replica order, that is an eligible ISR member leads, else nobody.  A leader change bumps
  the leader epoch; every change bumps the partition epoch.
* AlterPartition is accepted only from the current leader, at the current leader and
  partition epochs, and only adds eligible brokers at their current registration (Kafka's
  INELIGIBLE_REPLICA; the broker epoch a member's fetch carried, KIP-903).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kraft.protocol.error_codes import ErrorCode

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class Registration:
    """The partition as the metadata log holds it."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int


class ControllerModel:
    def __init__(self, replicas: tuple[int, ...]) -> None:
        self.eligible = set(replicas)
        self.reg = Registration(replicas, tuple(sorted(replicas)), replicas[0], 0, 0)

    def _change(self, isr: tuple[int, ...], leader: int | None = None) -> bool:
        reg = self.reg
        if leader is None:
            leader = reg.leader if reg.leader in isr and reg.leader in self.eligible else next(
                (r for r in reg.replicas if r in isr and r in self.eligible), NO_LEADER)
        if isr == reg.isr and leader == reg.leader:
            return False
        self.reg = replace(reg, isr=isr, leader=leader,
                           leader_epoch=reg.leader_epoch + (leader != reg.leader),
                           partition_epoch=reg.partition_epoch + 1)
        return True

    def fence(self, broker: int) -> bool:
        """``broker`` went away; True when the registration changed."""
        self.eligible.discard(broker)
        isr = tuple(b for b in self.reg.isr if b != broker) or self.reg.isr
        return self._change(isr)

    def unfence(self, broker: int) -> bool:
        """``broker`` registered (again) and is eligible: it may lead a leaderless partition."""
        self.eligible.add(broker)
        return self._change(self.reg.isr)

    def move_leadership(self, to: int) -> bool:
        """A preferred-leader election or reassignment moving leadership to ``to``."""
        if to == self.reg.leader or to not in self.reg.isr or to not in self.eligible:
            return False
        return self._change(self.reg.isr, leader=to)

    def alter_partition(self, broker: int, leader_epoch: int, partition_epoch: int,
                        new_isr: tuple[int, ...], broker_epochs: dict[int, int] | None = None,
                        registered: dict[int, int] | None = None) -> ErrorCode:
        """``broker_epochs``: each member's broker epoch as the leader heard it (-1 unknown);
        one that differs from the member's current registration (``registered``) is a
        replica that registered again since: INELIGIBLE_REPLICA (KIP-903)."""
        reg = self.reg
        if broker != reg.leader or leader_epoch != reg.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if partition_epoch != reg.partition_epoch:
            return ErrorCode.INVALID_UPDATE_VERSION
        if any(b not in self.eligible for b in set(new_isr) - set(reg.isr)):
            return ErrorCode.INELIGIBLE_REPLICA
        epochs, current = broker_epochs or {}, registered or {}
        if any(epochs.get(b, -1) not in (-1, current.get(b, -1)) for b in new_isr):
            return ErrorCode.INELIGIBLE_REPLICA
        if not new_isr or broker not in new_isr or not set(new_isr) <= set(reg.replicas):
            return ErrorCode.INVALID_REQUEST
        self._change(tuple(sorted(new_isr)))
        return ErrorCode.NONE
