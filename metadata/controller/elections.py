"""Leader and ISR changes: the PartitionChangeRecords a change of broker state implies.

Rules (Kafka's):
- A broker that goes away (fenced, in controlled shutdown, unregistered, re-registered
  as a new incarnation) leaves every ISR, except that an ISR never becomes empty: the
  last member stays, and the partition is left without a leader.
- The leader stays if it is still an eligible ISR member.  Otherwise the first replica
  (in replica order, so the preferred leader wins) that is an eligible ISR member leads.
- With no eligible ISR member the partition has no leader (-1), unless unclean leader
  election is enabled for the topic: then any eligible replica leads, the ISR becomes
  just that replica and the leader recovery state RECOVERING.
- Naming a leader in the record bumps the leader epoch (on replay); every change bumps
  the partition epoch.

Eligible means registered, unfenced and not in controlled shutdown.
"""

from __future__ import annotations

import uuid
from typing import Iterable, Iterator

from metadata.controller.configs import parse_bool
from metadata.image import (
    NO_LEADER,
    ConfigResourceType,
    LeaderRecoveryState,
    MetadataImage,
    PartitionRegistration,
)
from metadata.serde import MetadataRecord, make


def unclean_enabled(image: MetadataImage, topic_name: str, default: bool) -> bool:
    """``unclean.leader.election.enable`` for the topic: topic config, cluster default, static."""
    key = "unclean.leader.election.enable"
    value = image.config(ConfigResourceType.TOPIC, topic_name).get(key)
    if value is None:
        value = image.config(ConfigResourceType.BROKER, "").get(key)
    return parse_bool(value, default)


def change_partition(
    image: MetadataImage,
    topic_id: uuid.UUID,
    index: int,
    part: PartitionRegistration,
    *,
    leaving: frozenset[int] = frozenset(),
    target_isr: Iterable[int] | None = None,
    unclean: bool = False,
    recovery_state: int | None = None,
) -> MetadataRecord | None:
    """The PartitionChangeRecord for ``part`` after ``leaving`` brokers go, or None if none."""

    def eligible(b: int) -> bool:
        if b in leaving:
            return False
        reg = image.brokers.get(b)
        return reg is not None and reg.is_active

    isr = list(part.isr if target_isr is None else target_isr)
    kept = [b for b in isr if b not in leaving]
    new_isr = kept if kept else isr
    new_recovery = part.leader_recovery_state if recovery_state is None else recovery_state

    if part.leader in new_isr and eligible(part.leader):
        new_leader = part.leader
    else:
        candidates = [b for b in part.replicas if b in new_isr and eligible(b)]
        candidates += [b for b in new_isr if b not in candidates and eligible(b)]
        if candidates:
            new_leader = candidates[0]
        else:
            new_leader = NO_LEADER
            if unclean:
                live = [b for b in part.replicas if eligible(b)]
                if live:
                    new_leader = live[0]
                    new_isr = [new_leader]
                    new_recovery = LeaderRecoveryState.RECOVERING

    fields: dict = {}
    if tuple(new_isr) != part.isr:
        fields["isr"] = list(new_isr)
    if new_leader != part.leader:
        fields["leader"] = new_leader
    if new_recovery != part.leader_recovery_state:
        fields["leader_recovery_state"] = new_recovery
    if not fields:
        return None
    return make("PartitionChangeRecord", partition_id=index, topic_id=topic_id, **fields)


def broker_leaving(image: MetadataImage, broker_id: int, unclean_default: bool) -> list[MetadataRecord]:
    """Changes for every partition ``broker_id`` leads or is in the ISR of, as it goes away:
    those it leads first."""
    return leaving_changes(image, broker_id, unclean_default, iter(leaving_partitions(image, broker_id)))


def leaving_partitions(image: MetadataImage, broker_id: int) -> list[tuple[uuid.UUID, int]]:
    """(topic id, index) of every partition ``broker_id`` leads, then of every other one whose
    ISR it is in.  Leaders first: those partitions are unavailable until the change is
    written, the others only wait for their ISR to shrink (issue 19: a broker killed at
    100,000 partitions is in 100,000 ISRs but leads a third of them)."""
    led, followed = [], []
    for topic in _topics(image):
        for index, part in sorted(topic.partitions.items()):
            if part.leader == broker_id:
                led.append((topic.id, index))
            elif broker_id in part.isr:
                followed.append((topic.id, index))
    return led + followed


def leaving_changes(
    image: MetadataImage, broker_id: int, unclean_default: bool,
    keys: Iterator[tuple[uuid.UUID, int]], limit: int | None = None,
) -> list[MetadataRecord]:
    """The changes ``broker_id`` going away implies for the partitions ``keys`` names, as they
    are in ``image`` now (a partition deleted, or no longer involving it, is passed over).
    With ``limit``, it stops after that many changes, and ``keys`` goes on from there."""
    leaving = frozenset({broker_id})
    unclean_of: dict[uuid.UUID, bool] = {}
    out = []
    for topic_id, index in keys:
        topic = image.topics_by_id.get(topic_id)
        part = topic.partitions.get(index) if topic is not None else None
        if part is None or (broker_id not in part.isr and part.leader != broker_id):
            continue
        unclean = unclean_of.get(topic_id)
        if unclean is None:
            unclean = unclean_of[topic_id] = unclean_enabled(image, topic.name, unclean_default)
        rec = change_partition(image, topic_id, index, part, leaving=leaving, unclean=unclean)
        if rec is not None:
            out.append(rec)
            if limit is not None and len(out) >= limit:
                break
    return out


def elect_leaderless(
    image: MetadataImage, broker_id: int | None, unclean_default: bool
) -> list[MetadataRecord]:
    """Elect leaders for partitions without one that ``broker_id`` (None: any) replicates."""
    out = []
    for topic in _topics(image):
        unclean = None
        for index, part in sorted(topic.partitions.items()):
            if part.has_leader or (broker_id is not None and broker_id not in part.replicas):
                continue
            if unclean is None:
                unclean = unclean_enabled(image, topic.name, unclean_default)
            rec = change_partition(image, topic.id, index, part, unclean=unclean)
            if rec is not None:
                out.append(rec)
    return out


def elect_unclean_leaders(image: MetadataImage, unclean_default: bool) -> list[MetadataRecord]:
    """Leaders for the leaderless partitions of the topics where unclean leader election is
    enabled (Kafka's periodic ``maybeElectUncleanLeaders``): an eligible ISR member if there
    is one, else any live replica.  Brokers coming and going elect at once (above); this
    catches a topic whose ``unclean.leader.election.enable`` became true while its last ISR
    member was gone and another replica already live."""
    out = []
    for topic in _topics(image):
        leaderless = [(i, p) for i, p in sorted(topic.partitions.items()) if not p.has_leader]
        if not leaderless or not unclean_enabled(image, topic.name, unclean_default):
            continue
        for index, part in leaderless:
            rec = change_partition(image, topic.id, index, part, unclean=True)
            if rec is not None and rec.data["leader"] not in (NO_LEADER, -2):  # -2: unchanged
                out.append(rec)
    return out


def partitions_led_by(image: MetadataImage, broker_id: int) -> int:
    return sum(
        1 for topic in image.topics_by_id.values()
        for part in topic.partitions.values() if part.leader == broker_id
    )


def _topics(image: MetadataImage):
    return (image.topics_by_name[name] for name in sorted(image.topics_by_name))


def preferred_election(image: MetadataImage, topic_id: uuid.UUID, index: int,
                       part: PartitionRegistration) -> MetadataRecord | None:
    """Hand leadership to the preferred (first) replica, if it is not leading and can."""
    preferred = part.replicas[0] if part.replicas else NO_LEADER
    if part.leader == preferred or preferred not in part.isr:
        return None
    reg = image.brokers.get(preferred)
    if reg is None or not reg.is_active:
        return None
    return make("PartitionChangeRecord", partition_id=index, topic_id=topic_id, leader=preferred)


def rebalance_leaders(image: MetadataImage, imbalance_percentage: int = 0) -> list[MetadataRecord]:
    """Preferred-leader elections (``auto.leader.rebalance.enable``) for the partitions of
    every broker whose leader imbalance is above ``leader.imbalance.per.broker.percentage``:
    of the partitions it is the preferred replica of, the share another broker leads."""
    preferred_of: dict[int, int] = {}
    not_led: dict[int, list] = {}
    for topic in _topics(image):
        for index, part in sorted(topic.partitions.items()):
            if not part.replicas:
                continue
            preferred = part.replicas[0]
            preferred_of[preferred] = preferred_of.get(preferred, 0) + 1
            if part.leader != preferred:
                not_led.setdefault(preferred, []).append((topic.id, index, part))
    out = []
    for broker_id, parts in sorted(not_led.items()):
        if len(parts) * 100 <= imbalance_percentage * preferred_of[broker_id]:
            continue
        for topic_id, index, part in parts:
            rec = preferred_election(image, topic_id, index, part)
            if rec is not None:
                out.append(rec)
    return out
