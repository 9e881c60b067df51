"""KIP-848's consumer group protocol in the coordinator core: ConsumerGroupHeartbeat's member
epochs, revocation before reassignment, leaving, expiry, static members, the offset APIs'
member-epoch fencing, ConsumerGroupDescribe, and how it sits beside classic groups.

``test_random_members_never_share_a_partition`` drives many members through joins, leaves,
lost heartbeats and topic changes from one seed and holds Kafka's invariant after every step:
no partition is owned by two members.  With the unsafe switch the same run must break it."""

from __future__ import annotations

import random
import time
import uuid

import pytest

from broker.group.assignors import range_, uniform
from broker.group.config import GroupConfig
from broker.group.consumer_group import wire_partitions
from broker.group.coordinator import GroupCoordinator
from broker.group.records import replay
from kraft.protocol import codec
from metadata.image import TopicImage

NONE, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, INCONSISTENT_GROUP_PROTOCOL = 0, 22, 25, 23
UNSUPPORTED_VERSION, INVALID_REQUEST, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP = 35, 42, 69, 68
FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID, UNSUPPORTED_ASSIGNOR, STALE_MEMBER_EPOCH = 110, 111, 112, 113
INVALID_REGULAR_EXPRESSION = 128


class Cluster:
    """A coordinator core over a mutable topic table; the records it writes are kept in
    ``log``, from which :meth:`fail_over` loads a new coordinator."""

    def __init__(self, topics: dict[str, int] | None = None, **config):
        self.topics: dict[str, TopicImage] = {}
        for name, count in (topics or {"t": 6}).items():
            self.create(name, count)
        self.now = 1_000_000
        self.config = GroupConfig(**config)
        self.log: list[tuple[int, bytes, bytes | None]] = []  # (partition, key, value)
        self.fail_over()

    def fail_over(self) -> None:
        self.core = GroupCoordinator(self.config, topics=lambda: self.topics)
        for partition in range(self.core.config.num_partitions):
            loaded = replay((k, v) for p, k, v in self.log if p == partition)
            self.core.load(partition, self.core.begin_loading(partition), loaded, self.now)

    def keep(self, out):
        for write in out.writes:
            self.log.extend((write.partition, k, v) for k, v in write.records)
            self.core.apply_write(write)
        return out

    def tick(self):
        self.keep(self.core.tick(self.now))

    def create(self, name: str, count: int) -> uuid.UUID:
        topic_id = uuid.uuid5(uuid.NAMESPACE_DNS, name)
        self.topics = {**self.topics, name: TopicImage(name, topic_id, dict.fromkeys(range(count)))}
        return topic_id

    def tid(self, name: str) -> uuid.UUID:
        return self.topics[name].id

    def hb(self, member_id="", epoch=0, *, group="g", topics=("t",), owned=None, version=1, **fields) -> dict:
        body = {"group_id": group, "member_id": member_id, "member_epoch": epoch, "instance_id": None,
                "rack_id": None, "rebalance_timeout_ms": -1, "subscribed_topic_names": None,
                "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": None}
        if epoch == 0:
            body.update(rebalance_timeout_ms=30000, subscribed_topic_names=list(topics), topic_partitions=[])
        if owned is not None:
            body["topic_partitions"] = wire_partitions(frozenset(owned))
        body.update(fields)
        return self.keep(self.core.handle("ConsumerGroupHeartbeat", version, body, self.now, client_id="c")).response

    def call(self, api, version, body):
        return self.keep(self.core.handle(api, version, body, self.now)).response


def assigned(response) -> set:
    return {(t["topic_id"], p) for t in response["assignment"]["topic_partitions"] for p in t["partitions"]}


def test_first_member_joins_and_gets_every_partition():
    c = Cluster()
    r = c.hb("m1")
    assert r["error_code"] == NONE and r["member_id"] == "m1" and r["member_epoch"] == 1
    assert r["heartbeat_interval_ms"] == 5000
    assert assigned(r) == {(c.tid("t"), p) for p in range(6)}
    # a heartbeat with nothing new carries no assignment and writes nothing
    written = len(c.log)
    again = c.hb("m1", 1)
    assert again["member_epoch"] == 1 and again["assignment"] is None
    assert c.hb("m1", 1, owned=assigned(r))["assignment"] is None and len(c.log) == written
    # a v0 join without a member id is given one
    r0 = c.hb("", version=0, group="g")
    assert r0["error_code"] == NONE and uuid.UUID(r0["member_id"])


def test_a_partition_moves_only_after_its_owner_revoked_it():
    c = Cluster()
    a = c.hb("a")
    owned_a = assigned(a)
    b = c.hb("b")
    assert b["member_epoch"] == 2 and assigned(b) == set()  # all of it is still a's
    # a keeps half, at its epoch, until it shows it gave up the rest
    a2 = c.hb("a", 1, owned=owned_a)
    assert a2["member_epoch"] == 1 and len(assigned(a2)) == 3
    kept = assigned(a2)
    assert c.hb("b", 2)["assignment"] is None  # still unreleased
    a3 = c.hb("a", 1, owned=kept)
    assert a3["member_epoch"] == 2
    b2 = c.hb("b", 2, owned=set())
    assert assigned(b2) == owned_a - kept
    described = c.call("ConsumerGroupDescribe", 0, {"group_ids": ["g"], "include_authorized_operations": False})
    group = described["groups"][0]
    assert group["group_state"] == "Stable" and group["group_epoch"] == 2 and group["assignor_name"] == "uniform"
    members = {m["member_id"]: m for m in group["members"]}
    assert {p for t in members["b"]["assignment"]["topic_partitions"] for p in t["partitions"]} == \
        {p for _, p in owned_a - kept}
    assert members["b"]["assignment"]["topic_partitions"][0]["topic_name"] == "t"


def test_leave_and_session_expiry_free_partitions():
    c = Cluster(consumer_session_timeout_ms=45000)
    a, b = c.hb("a"), c.hb("b")
    c.hb("a", 1, owned=assigned(a))
    gone = c.hb("a", -1)
    assert gone["member_epoch"] == -1 and gone["error_code"] == NONE
    b2 = c.hb("b", 2, owned=set())
    assert len(assigned(b2)) == 6 and b2["member_epoch"] == 3
    assert b["member_epoch"] == 2
    c.now += 45001
    c.tick()
    assert c.hb("b", 3)["error_code"] == UNKNOWN_MEMBER_ID
    listed = c.call("ListGroups", 5, {"states_filter": [], "types_filter": ["consumer"]})
    assert listed["groups"] == [{"group_id": "g", "protocol_type": "consumer", "group_state": "Empty",
                                 "group_type": "consumer"}]


def test_a_member_that_does_not_revoke_in_time_is_removed():
    c = Cluster()
    a = c.hb("a", rebalance_timeout_ms=10000)
    c.hb("b")
    c.hb("a", 1, owned=assigned(a))  # asked to revoke 3
    c.now += 10001
    c.hb("b", 2, owned=set())  # b keeps its session
    c.tick()
    assert c.hb("a", 1, owned=assigned(a))["error_code"] == UNKNOWN_MEMBER_ID
    assert len(assigned(c.hb("b", 2, owned=set()))) == 6


def test_member_epoch_fencing():
    c = Cluster()
    a = c.hb("a")
    assert c.hb("a", 5)["error_code"] == FENCED_MEMBER_EPOCH
    c.hb("b")  # epoch 2 for the group
    kept = assigned(c.hb("a", 1, owned=assigned(a)))
    assert c.hb("a", 1, owned=kept)["member_epoch"] == 2
    # the answer that moved a to epoch 2 may be lost: its previous epoch is still accepted
    # while it owns no more than its assignment
    assert c.hb("a", 1, owned=kept)["error_code"] == NONE
    assert c.hb("a", 1)["error_code"] == FENCED_MEMBER_EPOCH  # owned not shown: not provably safe
    assert c.hb("nobody", 1)["error_code"] == UNKNOWN_MEMBER_ID
    # a member that lost its state rejoins with epoch 0 and starts over
    r = c.hb("a")
    assert r["error_code"] == NONE and r["member_epoch"] >= 3


@pytest.mark.parametrize("fields,code", [
    ({"group_id": ""}, INVALID_REQUEST),
    ({"rebalance_timeout_ms": -1}, INVALID_REQUEST),
    ({"topic_partitions": None}, INVALID_REQUEST),
    ({"subscribed_topic_names": None}, INVALID_REQUEST),
    ({"instance_id": ""}, INVALID_REQUEST),
    ({"member_epoch": -3}, INVALID_REQUEST),
    ({"server_assignor": "sticky"}, UNSUPPORTED_ASSIGNOR),
    ({"subscribed_topic_names": None, "subscribed_topic_regex": "t("}, INVALID_REGULAR_EXPRESSION),
    ({"subscribed_topic_names": None, "subscribed_topic_regex": "t(?=x)"}, INVALID_REGULAR_EXPRESSION),  # as RE2/J
])
def test_bad_heartbeats_get_kafkas_errors(fields, code):
    c = Cluster()
    r = c.hb("a", **fields)
    assert r["error_code"] == code and r["error_message"]
    assert c.core.table.groups.get("g") is None or not c.core.table.groups["g"].modern.members


def test_regex_subscription_follows_new_topics():
    c = Cluster({"orders-eu": 2, "payments": 2})
    r = c.hb("a", topics=(), subscribed_topic_names=None, subscribed_topic_regex="orders-.*")
    assert assigned(r) == {(c.tid("orders-eu"), 0), (c.tid("orders-eu"), 1)}
    c.create("orders-us", 1)
    r2 = c.hb("a", 1)
    assert r2["member_epoch"] == 2 and (c.tid("orders-us"), 0) in assigned(r2)
    c.create("__consumer_offsets", 3)  # internal topics never match
    assert c.hb("a", 2)["assignment"] is None


def test_with_acls_a_regex_takes_in_only_what_its_member_may_describe():
    """Kafka 4 (KAFKA-18813): each member's regex matches are filtered by its own DESCRIBE
    permission (handed in by the ACL check); a name it subscribes to was checked before."""
    from broker.group.consumer_group import DESCRIBABLE

    c = Cluster({"orders-eu": 2, "orders-secret": 2, "payments": 1}, acls=True)
    regex = {"topics": (), "subscribed_topic_names": None, "subscribed_topic_regex": "orders-.*"}
    alice = {DESCRIBABLE: lambda t: t != "orders-secret"}
    r = c.hb("a", **regex, **alice)
    assert {t for t, _ in assigned(r)} == {c.tid("orders-eu")}
    # bob may see everything: his own regex takes in orders-secret, which only he can be given
    b = c.hb("b", **regex, **{DESCRIBABLE: lambda t: True})
    described = c.call("ConsumerGroupDescribe", 0, {"group_ids": ["g"], "include_authorized_operations": False})
    targets = {m["member_id"]: {t["topic_name"] for t in m["target_assignment"]["topic_partitions"]}
               for m in described["groups"][0]["members"]}
    assert "orders-secret" not in targets["a"] and "orders-secret" in targets["b"]
    c.create("orders-us", 1)  # a new match: each member's next heartbeat matches it with its ACLs
    r1 = c.hb("a", r["member_epoch"], **alice)
    c.fail_over()  # a new coordinator: regex matches wait for each member's own heartbeat
    r2 = c.hb("a", r1["member_epoch"], **alice)
    assert r2["error_code"] == NONE
    c.hb("b", b["member_epoch"], **{DESCRIBABLE: lambda t: True})
    described = c.call("ConsumerGroupDescribe", 0, {"group_ids": ["g"], "include_authorized_operations": False})
    targets = {m["member_id"]: {t["topic_name"] for t in m["target_assignment"]["topic_partitions"]}
               for m in described["groups"][0]["members"]}
    assert "orders-secret" not in targets["a"] and targets["a"] | targets["b"] == {"orders-eu", "orders-us",
                                                                                   "orders-secret"}
    # an ACL change (alice may now see orders-secret) counts once
    # group.consumer.regex.refresh.interval.ms has passed since her matches were made
    c.hb("b", b["member_epoch"], member_epoch=-1)  # (b leaves: a alone takes in what she may see)

    def a_target():
        described = c.call("ConsumerGroupDescribe", 0, {"group_ids": ["g"], "include_authorized_operations": False})
        return {t["topic_name"] for m in described["groups"][0]["members"] for t in m["target_assignment"][
            "topic_partitions"]}
    everyone = {DESCRIBABLE: lambda t: True}
    r3 = c.hb("a", r2["member_epoch"], **everyone)
    assert r3["error_code"] == NONE and a_target() == {"orders-eu", "orders-us"}
    c.now += 600_000
    r4 = c.hb("a", r3["member_epoch"], **everyone)
    assert r4["error_code"] == NONE and a_target() == {"orders-eu", "orders-us", "orders-secret"}
    # without ACLs the check is not there, and a regex takes in every match
    plain = Cluster({"orders-eu": 2, "orders-secret": 2})
    assert len(assigned(plain.hb("a", **regex))) == 4


def test_a_backtracking_regex_costs_linear_time():
    """``(a+)+$`` takes time exponential in the name's length in a backtracking engine
    (Python's ``re``: 2 s for these 25 characters, doubling with each more): one heartbeat
    would stall the node.  RE2 answers at once."""
    c = Cluster({"a" * 24 + "b": 1})
    started = time.monotonic()
    r = c.hb("m", topics=(), subscribed_topic_names=None, subscribed_topic_regex="(a+)+$")
    assert r["error_code"] == NONE and assigned(r) == set()
    assert time.monotonic() - started < 0.5


def test_offset_commit_and_fetch_are_fenced_by_member_epoch():
    c = Cluster()
    c.hb("a")

    def commit(member, epoch, version=9):
        body = {"group_id": "g", "generation_id_or_member_epoch": epoch, "member_id": member,
                "group_instance_id": None, "retention_time_ms": -1,
                "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 7,
                                                         "committed_leader_epoch": -1, "committed_metadata": ""}]}]}
        return c.call("OffsetCommit", version, body)["topics"][0]["partitions"][0]["error_code"]

    assert commit("a", 0) == STALE_MEMBER_EPOCH
    assert commit("a", 1, version=8) == UNSUPPORTED_VERSION
    assert commit("x", 1) == UNKNOWN_MEMBER_ID
    assert commit("", -1) == UNKNOWN_MEMBER_ID  # a simple commit only while the group has no member
    assert commit("a", 1) == NONE

    def fetch(member, epoch):
        return c.call("OffsetFetch", 9, {"groups": [{"group_id": "g", "member_id": member, "member_epoch": epoch,
                                                     "topics": None}], "require_stable": False})["groups"][0]
    assert fetch("a", 0)["error_code"] == STALE_MEMBER_EPOCH
    assert fetch("b", 1)["error_code"] == UNKNOWN_MEMBER_ID
    assert fetch("a", 1)["topics"][0]["partitions"][0]["committed_offset"] == 7
    assert fetch(None, -1)["error_code"] == NONE  # the admin client's fetch
    # OffsetDelete refuses the subscribed topic; DeleteGroups a group with members
    deleted = c.call("OffsetDelete", 0, {"group_id": "g", "topics": [{"name": "t", "partitions": [
        {"partition_index": 0}]}]})
    assert deleted["topics"][0]["partitions"][0]["error_code"] == 86  # GROUP_SUBSCRIBED_TO_TOPIC
    assert c.call("DeleteGroups", 2, {"groups_names": ["g"]})["results"][0]["error_code"] == NON_EMPTY_GROUP
    c.hb("a", -1)
    assert c.call("DeleteGroups", 2, {"groups_names": ["g"]})["results"][0]["error_code"] == NONE


def test_groups_in_use_keep_their_kind_with_migration_disabled():
    # (with the default policy they convert: tests/test_consumer_group_migration.py)
    c = Cluster(consumer_migration_policy="disabled")
    join = {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}], "reason": None}
    c.hb("a")
    # a classic member may still join the consumer group (as in Kafka, whatever the policy)
    assert c.call("JoinGroup", 9, join)["error_code"] == 79
    assert c.call("JoinGroup", 9, {**join, "protocol_type": "connect"})["error_code"] == INCONSISTENT_GROUP_PROTOCOL
    described = c.call("DescribeGroups", 5, {"groups": ["g"], "include_authorized_operations": False})
    assert described["groups"][0]["group_state"] == "Dead"  # as Kafka: ConsumerGroupDescribe describes it
    c.hb("a", -1)
    # an empty consumer group becomes a classic one on JoinGroup, and back
    assert c.call("JoinGroup", 9, join)["error_code"] == 79  # MEMBER_ID_REQUIRED: a classic join goes on
    # its pending classic member holds it classic
    assert c.hb("z")["error_code"] == GROUP_ID_NOT_FOUND
    c.call("JoinGroup", 3, {**join, "group_id": "classic"})
    r = c.hb("a", group="classic")
    assert r["error_code"] == GROUP_ID_NOT_FOUND and "not a consumer group" in r["error_message"]
    assert c.call("ConsumerGroupDescribe", 0, {"group_ids": ["classic", "nope"],
                                               "include_authorized_operations": False})["groups"][1][
        "error_code"] == GROUP_ID_NOT_FOUND


def test_group_max_size():
    c = Cluster(consumer_max_size=1)
    assert c.hb("a")["error_code"] == NONE
    refused = c.hb("b")
    assert refused["error_code"] == 81 and "maximum capacity of 1" in refused["error_message"]
    assert c.hb("a")["error_code"] == NONE  # its own rejoin is no new member


def test_static_member_rejoins_with_its_assignment():
    c = Cluster()
    a = c.hb("a", instance_id="i1")
    assert c.hb("a", 1, instance_id="i1", member_epoch=-2)["member_epoch"] == -2
    assert c.hb("x", instance_id="i2")["error_code"] == NONE  # another member meanwhile
    r = c.hb("a2", instance_id="i1")
    assert r["error_code"] == NONE and assigned(r) <= assigned(a) and assigned(r)
    assert c.hb("a3", instance_id="i1")["error_code"] == UNRELEASED_INSTANCE_ID


def test_a_new_coordinator_carries_on_from_the_records():
    c = Cluster({"t": 4, "u": 2})
    a = c.hb("a", instance_id="ia", rack_id="r1", server_assignor="range")
    c.hb("b", topics=("t", "u"))
    a2 = c.hb("a", 1, owned=assigned(a))  # a revoking, b waiting
    before = c.call("ConsumerGroupDescribe", 0, {"group_ids": ["g"], "include_authorized_operations": False})
    c.fail_over()
    after = c.call("ConsumerGroupDescribe", 0, {"group_ids": ["g"], "include_authorized_operations": False})
    assert after == before and after["groups"][0]["group_state"] == "Reconciling"
    # the members go on where they were, without rejoining
    assert c.hb("a", 1, instance_id="ia", owned=assigned(a2))["member_epoch"] == 2
    assert c.hb("b", 2, owned=set())["error_code"] == NONE
    c.hb("a", -1, instance_id="ia")
    c.hb("b", 2, member_epoch=-1)
    c.fail_over()
    listed = c.call("ListGroups", 5, {"states_filter": [], "types_filter": []})["groups"]
    assert listed == [{"group_id": "g", "protocol_type": "consumer", "group_state": "Empty",
                       "group_type": "consumer"}]
    assert c.call("DeleteGroups", 2, {"groups_names": ["g"]})["results"][0]["error_code"] == NONE
    c.fail_over()
    assert c.call("ListGroups", 5, {"states_filter": [], "types_filter": []})["groups"] == []


def test_assignors_balance_and_stick():
    t1, t2 = uuid.uuid4(), uuid.uuid4()
    topics = {"a": (t1, 5), "b": (t2, 4)}
    subs = {m: frozenset({"a", "b"}) for m in ("m1", "m2", "m3")}
    first = uniform(subs, topics, {})
    assert sorted(len(v) for v in first.values()) == [3, 3, 3]
    assert set().union(*first.values()) == {(t1, p) for p in range(5)} | {(t2, p) for p in range(4)}
    subs4 = {**subs, "m4": frozenset({"a", "b"})}
    second = uniform(subs4, topics, first)
    assert sorted(len(v) for v in second.values()) == [2, 2, 2, 3]
    moved = sum(len(first[m] - second[m]) for m in first)
    assert moved == 2  # only what the new member needs moves
    ranged = range_({"m1": frozenset({"a"}), "m2": frozenset({"a"})}, topics, {})
    assert ranged["m1"] == {(t1, 0), (t1, 1), (t1, 2)} and ranged["m2"] == {(t1, 3), (t1, 4)}
    # as Kafka's: static members first, by instance id (a restarted instance keeps its ranges)
    static = range_({"m1": frozenset({"a"}), "m2": frozenset({"a"}), "z9": frozenset({"a"})}, topics, {},
                    {"m1": None, "m2": "i-b", "z9": "i-a"})
    assert static["z9"] == {(t1, 0), (t1, 1)} and static["m2"] == {(t1, 2), (t1, 3)} and static["m1"] == {(t1, 4)}


def test_uniform_quotas_for_one_subscription_match_the_general_way():
    """Every member on the same topics takes the quota path: as balanced as the general
    algorithm, every partition once, and no more partitions moved than it moves."""
    from broker.group.assignors import _uniform_any_subscriptions, _uniform_same_subscription

    rng = random.Random(7)
    for _ in range(200):
        topics = {f"t{i}": (uuid.UUID(int=i + 1), rng.randint(0, 12)) for i in range(rng.randint(1, 3))}
        members = [f"m{i}" for i in range(rng.randint(1, 8))]
        subs = {m: frozenset(topics) for m in members}
        every = [(tid, p) for tid, n in topics.values() for p in range(n)]
        previous: dict = {}  # a target assignment: each partition with one member at most
        for p in every:
            if rng.random() < 0.8:
                owner = rng.choice(members + ["gone"])
                previous[owner] = previous.get(owner, frozenset()) | {p}
        fast = _uniform_same_subscription(subs, topics, previous)
        slow = _uniform_any_subscriptions(subs, topics, previous)
        for result in (fast, slow):
            counts = sorted(len(v) for v in result.values())
            assert counts[-1] - counts[0] <= 1 and sorted(p for v in result.values() for p in v) == sorted(every)

        def moved(result):
            return sum(len(result[m] - previous.get(m, frozenset())) for m in members)
        assert moved(fast) <= moved(slow)


def test_heartbeat_round_trips_on_the_wire():
    for version in (0, 1):
        body = {"group_id": "g", "member_id": "m", "member_epoch": 3, "instance_id": None, "rack_id": "r",
                "rebalance_timeout_ms": -1, "subscribed_topic_names": ["a"], "server_assignor": None,
                "topic_partitions": [{"topic_id": uuid.UUID(int=5), "partitions": [1, 2]}]}
        if version == 1:
            body["subscribed_topic_regex"] = "x.*"
        data = codec.encode("ConsumerGroupHeartbeat", "request", version, body)
        assert codec.decode("ConsumerGroupHeartbeat", "request", version, data) == {
            "subscribed_topic_regex": None, **body}


def _simulate(seed: int, unsafe: bool) -> list[str]:
    """Members that behave like Kafka clients (they give up what they are no longer sent,
    heartbeat with what they own, and give up everything once their rebalance timeout, the
    shorter of their two timeouts, passed without a heartbeat answered) plus random joins,
    leaves, crashes, new partitions and coordinator fail-overs.  Returns the violations of
    "no partition owned by two members"; a failing seed replays with ``_simulate(seed, ...)``."""
    rng = random.Random(seed)
    c = Cluster({"t": 8, "u": 3}, unsafe_assign_before_revocation=unsafe)
    clients: dict[str, dict] = {}  # member id -> {"epoch", "owned"}
    violations = []
    for step in range(400):
        c.now += rng.randint(1, 3000)
        roll = rng.random()
        if roll < 0.12 and len(clients) < 6:
            mid = f"m{step}"
            r = c.hb(mid, topics=rng.choice([("t",), ("t", "u"), ("u",)]))
            clients[mid] = {"epoch": r["member_epoch"], "owned": assigned(r), "answered": c.now}
        elif roll < 0.17 and clients:
            mid = rng.choice(sorted(clients))
            c.hb(mid, -1)
            del clients[mid]
        elif roll < 0.19 and clients:
            del clients[rng.choice(sorted(clients))]  # crashed: its session expires
        elif roll < 0.21:
            name = rng.choice(["t", "u"])
            c.create(name, len(c.topics[name].partitions) + 1)
        elif roll < 0.23:
            c.fail_over()  # a new coordinator loads the group from its records
        elif clients:
            mid = rng.choice(sorted(clients))
            me = clients[mid]
            r = c.hb(mid, me["epoch"], owned=me["owned"])
            if r["error_code"]:
                del clients[mid]  # fenced or removed: gives up everything, as a client does
                continue
            me["epoch"], me["answered"] = r["member_epoch"], c.now
            if r["assignment"] is not None:
                me["owned"] = assigned(r)
        c.tick()
        for mid in [m for m, me in clients.items() if c.now - me["answered"] >= 30000]:
            del clients[mid]  # it may have been removed: it stops consuming before it is reassigned
        seen: dict = {}
        for mid, me in clients.items():
            for p in me["owned"]:
                if p in seen:
                    violations.append(f"seed {seed} step {step}: {p} owned by {seen[p]} and {mid}")
                seen[p] = mid
    return violations


def test_random_members_never_share_a_partition():
    for seed in range(30):
        assert _simulate(seed, unsafe=False) == [], f"replay: _simulate({seed}, unsafe=False)"


def test_the_unsafe_switch_lets_two_members_own_a_partition():
    assert any(_simulate(seed, unsafe=True) for seed in range(20))
