"""metadata/controller/placement.py: rack-aware round-robin replica placement."""

from __future__ import annotations

from collections import Counter
from random import Random

import pytest

from metadata.controller.placement import PlacementError, UsableBroker, place, rack_alternated


def brokers(racks: dict[int, str | None]):
    return [UsableBroker(b, r) for b, r in racks.items()]


SIX_IN_THREE_RACKS = brokers({1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"})


def test_rack_alternated_line():
    assert rack_alternated(SIX_IN_THREE_RACKS) == [1, 3, 5, 2, 4, 6]
    assert rack_alternated(brokers({1: "a", 2: "a", 3: "a", 4: "b"})) == [1, 4, 2, 3]


@pytest.mark.parametrize("seed", range(5))
def test_replicas_spread_over_racks_and_leaders_balance(seed):
    rack = {b.id: b.rack for b in SIX_IN_THREE_RACKS}
    out = place(SIX_IN_THREE_RACKS, 30, 3, Random(seed))
    assert len(out) == 30
    for replicas in out:
        assert len(set(replicas)) == 3
        assert len({rack[b] for b in replicas}) == 3  # one replica per rack
    leaders = Counter(r[0] for r in out)
    assert sorted(leaders.values()) == [5] * 6  # round robin: exactly balanced
    load = Counter(b for r in out for b in r)
    assert max(load.values()) - min(load.values()) <= 2


def test_two_replicas_never_share_a_rack_when_racks_allow():
    racks = brokers({1: "a", 2: "a", 3: "a", 4: "b"})
    for replicas in place(racks, 12, 2, Random(1)):
        assert {b.rack for b in racks if b.id in replicas} == {"a", "b"}


def test_more_replicas_than_racks_use_every_rack_then_repeat():
    racks = brokers({1: "a", 2: "a", 3: "b", 4: "b"})
    for replicas in place(racks, 8, 3, Random(2)):
        assert len(set(replicas)) == 3
        assert {b.rack for b in racks if b.id in replicas} == {"a", "b"}


def test_without_racks_replicas_are_distinct_and_leaders_rotate():
    out = place(brokers({1: None, 2: None, 3: None}), 9, 3, Random(3))
    assert all(sorted(r) == [1, 2, 3] for r in out)
    assert sorted(Counter(r[0] for r in out).values()) == [3, 3, 3]


def test_start_depends_on_the_random_generator():
    starts = {tuple(place(SIX_IN_THREE_RACKS, 1, 1, Random(s))[0]) for s in range(20)}
    assert len(starts) > 1
    assert place(SIX_IN_THREE_RACKS, 5, 2, Random(7)) == place(SIX_IN_THREE_RACKS, 5, 2, Random(7))


def test_start_partition_continues_the_round_robin():
    a = place(SIX_IN_THREE_RACKS, 6, 2, Random(4))
    b = place(SIX_IN_THREE_RACKS, 3, 2, Random(4), start_partition=3)
    assert [r[0] for r in b] == [r[0] for r in a[3:]]


def test_too_few_brokers():
    with pytest.raises(PlacementError):
        place(brokers({1: "a", 2: "b"}), 1, 3, Random(0))
    with pytest.raises(PlacementError):
        place(brokers({1: "a"}), 1, 0, Random(0))
    assert place(brokers({1: "a"}), 2, 1, Random(0)) == [[1], [1]]
