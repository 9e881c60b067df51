"""kraft.quotas: Kafka's windowed rates, which entity's quota applies (its order of
precedence), and the throttle times the manager decides, including a model of a greedy
producer under a quota (what the process tests in test_client_quotas_processes.py measure);
replication quotas (test_replication_throttle_processes.py runs them on real nodes)."""

from __future__ import annotations

import random

import pytest

from kraft.quotas.entities import entity, precedence, resolve, shared_by
from kraft.quotas.manager import ClientQuotaManager
from kraft.quotas.rate import SampledRate, SimpleRate
from kraft.quotas.replication import ALL_REPLICAS, ReplicationQuota, parse_rate, throttled_partitions

P = "producer_byte_rate"


def test_rate_counts_at_least_all_but_one_window_so_a_new_client_starts_idle():
    rate = SampledRate(samples=11, window_ms=1000)
    rate.record(10_000, 0)
    assert rate.window_size_ms(0) == 10_000  # ten whole windows assumed before the first value
    assert rate.rate(0) == 1000.0
    for t in range(1, 30_000, 100):  # a steady 10 per 100 ms: 100 per second
        rate.record(10, t)
    assert rate.rate(30_000) == pytest.approx(100, rel=0.1)  # the first burst has been forgotten


def test_windows_idle_for_all_the_windows_are_forgotten():
    rate = SampledRate(samples=3, window_ms=1000)
    rate.record(3000, 0)
    assert rate.rate(500) == 1200.0  # over 0.5 s and two windows assumed before
    assert rate.rate(3000) == 0.0


def test_precedence_is_kafkas_order():
    order = precedence("alice", "app")
    assert order == (
        (("client-id", "app"), ("user", "alice")), (("client-id", None), ("user", "alice")), (("user", "alice"),),
        (("client-id", "app"), ("user", None)), (("client-id", None), ("user", None)), (("user", None),),
        (("client-id", "app"),), (("client-id", None),))
    quotas = {e: {P: float(i)} for i, e in enumerate(order)}
    for i, e in enumerate(order):  # each level hides all the ones after it
        assert resolve(quotas, P, "alice", "app") == (e, float(i))
        del quotas[e]
    assert resolve(quotas, P, "alice", "app") is None
    # Without a client id only user entities apply (Kafka's quotaLimit).
    assert precedence("alice", "") == ((("user", "alice"),), (("user", None),))


def test_keys_resolve_on_their_own_and_shared_rates_follow_the_matched_entity():
    quotas = {entity("alice"): {P: 1.0}, entity(client_id="app"): {"consumer_byte_rate": 2.0}}
    assert resolve(quotas, "consumer_byte_rate", "alice", "app") == (entity(client_id="app"), 2.0)
    assert shared_by(entity("alice"), "alice", "app") == ("alice", "")
    assert shared_by(entity(None), "bob", "app") == ("bob", "")  # <default> user: one rate per user
    assert shared_by(entity(client_id="app"), "bob", "app") == ("", "app")
    assert shared_by(entity("alice", None), "alice", "x") == ("alice", "x")


def test_throttle_time_is_what_brings_the_rate_back_to_the_quota():
    m = ClientQuotaManager(samples=11, window_ms=1000)
    m.update({entity(client_id="app"): {P: 1000.0}})
    assert m.record(P, "ANONYMOUS", "other", 10**9, 0) == 0  # no quota applies to it
    assert m.record(P, "ANONYMOUS", "app", 10_000, 0) == 0  # 1000/s over ten assumed windows
    assert m.record(P, "ANONYMOUS", "app", 10_000, 0) == 10_000  # 2000/s: ten seconds' silence
    m = ClientQuotaManager(samples=11, window_ms=1000)
    m.update({entity(client_id="app"): {P: 1000.0}})
    for t in range(0, 20_000, 100):  # a steady 900 bytes/s
        assert m.record(P, "ANONYMOUS", "app", 90, t) == 0
    throttle = m.record(P, "ANONYMOUS", "app", 5000, 20_000)
    assert 3500 < throttle < 5000  # (900 * 11 + 5000) / 1000 - 11 s, about
    # Silent that long, it is about back at its quota (Kafka's formula assumes the window
    # grows by the silence; in fact old windows leave it meanwhile, so a little is left).
    assert m.record(P, "ANONYMOUS", "app", 0, 20_000 + throttle) < throttle / 5
    assert m.record(P, "ANONYMOUS", "app", 0, 20_000 + 1.2 * throttle) == 0
    # The client ids of one entity share a rate, and a new quota applies at once.
    m.update({entity(None): {P: 100.0}})
    assert m.record(P, "alice", "a", 1000, 20_000) == 0
    assert m.record(P, "alice", "b", 1000, 20_000) > 0
    assert m.record(P, "bob", "a", 1000, 20_000) == 0  # <default> user: bob has his own


def test_a_fetch_taken_back_and_request_time_throttles_capped_at_a_window():
    m = ClientQuotaManager(samples=11, window_ms=1000)
    m.update({entity(client_id="c"): {"consumer_byte_rate": 100.0, "request_percentage": 1.0}})
    assert m.record("consumer_byte_rate", "u", "c", 5000, 0) > 0
    m.unrecord("consumer_byte_rate", "u", "c", 5000, 0)
    assert m.record("consumer_byte_rate", "u", "c", 900, 0) == 0
    assert m.max_value_in_window("consumer_byte_rate", "u", "c") == 1000.0
    assert m.record("request_percentage", "u", "c", 1000.0, 0) == 1000  # (not 9990)


def greedy_producer(samples: int, seed: int, seconds: int = 60) -> list[tuple[float, int]]:
    """What a producer that sends as fast as it may gets acknowledged, by time: batches of
    about 256 KB at about 30 MB/s, silent for each throttle time."""
    rnd = random.Random(seed)
    m = ClientQuotaManager(samples=samples, window_ms=1000)
    m.update({entity(client_id="p"): {P: 1048576.0}})
    t, sent = 0.0, []
    while t < seconds * 1000:
        size = int(262144 * rnd.uniform(0.5, 1.5))
        throttle = m.record(P, "ANONYMOUS", "p", size, t)
        sent.append((t, size))
        t += size / (30_000 * rnd.uniform(0.5, 1.5)) + throttle + rnd.uniform(0, 5)
    return sent


def twenty_second_rates(samples: int) -> list[float]:
    rates = []
    for seed in range(5):
        sent = greedy_producer(samples, seed)
        for start in range(0, 40_001, 2500):
            rates.append(sum(n for t, n in sent if start <= t < start + 20_000) / 20 / 1048576)
    return rates


def test_a_greedy_producer_averages_its_quota():
    """With two windows every 20 s stretch is within 10 % of the quota; with Kafka's default
    eleven the opening burst of ten windows' worth echoes every 12 s or so, and 20 s
    stretches swing between about 0.6 and 1.25 of it (around the quota on average)."""
    two = twenty_second_rates(2)
    assert 0.9 < min(two) and max(two) < 1.1
    eleven = twenty_second_rates(11)
    assert min(eleven) < 0.75 and max(eleven) > 1.15
    assert 0.9 < sum(eleven) / len(eleven) < 1.1


# ---------------------------------------------------------------- replication quotas


def test_simple_rate_counts_from_the_first_value_not_ten_windows_before():
    rate = SimpleRate(samples=11, window_ms=1000)
    rate.record(3000, 0)
    assert rate.rate(0) == 3000.0  # one window at least: a burst is a high rate at once
    assert rate.rate(3000) == 1000.0
    assert rate.peek(3000) == 1000.0  # the same, read without purging
    assert rate.rate(20_000) == 0.0 and rate.peek(20_000) == 0.0  # every window expired


def test_throttled_replicas_name_partitions_of_one_broker_or_all():
    assert throttled_partitions("0:1,1:2, 2:1", 1) == {0, 2}
    assert throttled_partitions("0:1,1:2", 3) == frozenset()
    assert throttled_partitions(" * ", 3) == ALL_REPLICAS
    assert throttled_partitions("0:1,bad", 1) == frozenset()  # never throttle on a value we cannot read
    assert parse_rate(None) is None and parse_rate(str(2**63 - 1)) is None and parse_rate("x") is None
    assert parse_rate("1048576") == 1048576


def test_a_replication_quota_throttles_listed_partitions_while_over_its_bound():
    quota = ReplicationQuota(samples=11, window_ms=1000)
    quota.update(1000, {"t": frozenset({0}), "u": ALL_REPLICAS, "v": frozenset()})
    assert quota.active and quota.is_throttled("t", 0) and quota.is_throttled("u", 7)
    assert not quota.is_throttled("t", 1) and not quota.is_throttled("v", 0) and not quota.is_throttled("w", 0)
    assert not quota.is_quota_exceeded(0)
    quota.record(1000, 0)
    assert not quota.is_quota_exceeded(0)  # at the bound, not over it (Kafka's Quota.acceptable)
    quota.record(1, 0)
    assert quota.is_quota_exceeded(0) and quota.is_quota_exceeded(1000)
    assert not quota.is_quota_exceeded(1100)  # 1001 bytes over 1.1 s
    quota.update(None, {"t": frozenset({0})})  # unbounded: the rate is still measured
    assert not quota.is_quota_exceeded(0) and quota.byte_rate(1001) == pytest.approx(1000)
    quota.update(1000, {})
    assert not quota.active
