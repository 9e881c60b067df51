"""Unit tests of the sans-IO Raft core (kraft.raft.node).

Each test names the part of the Raft paper (Ongaro & Ousterhout, "In Search of an
Understandable Consensus Algorithm", 2014) or of KIP-595 / KIP-996 / KIP-630 it covers.
"""

from random import Random

import pytest

from kraft.raft import (
    NO_LEADER, Batch, BeginQuorumEpochRequest, EndQuorumEpochRequest, Envelope, Errors,
    FetchRequest, FetchResponse, FetchSnapshotRequest, FetchSnapshotResponse, HardState,
    LeaderAndEpoch, NotLeaderError, OffsetAndEpoch, RaftConfig, RaftInvariantError, RaftNode,
    Role, VoteRequest, VoteResponse,
)
from kraft.raft.sim import Disk

T = 1000  # election timeout
FETCH_TIMEOUT = 2000


def node(node_id=1, voters=(1, 2, 3), *, seed=0, **kw):
    return RaftNode(RaftConfig(node_id, frozenset(voters), **kw), Random(seed))


def drain(n: RaftNode, disk: Disk | None = None):
    """Persist, send and apply everything; returns (messages, committed, readies)."""
    msgs, committed, readies = [], [], []
    while n.has_ready():
        rd = n.ready()
        readies.append(rd)
        if disk is not None:
            disk.write(rd)
            disk.sync()
        msgs += list(rd.messages) + list(rd.messages_after_persist)
        committed += list(rd.committed)
        n.advance(rd)
    return msgs, committed, readies


class Cluster:
    """Nodes linked by a lossless in-memory network with manual time."""

    def __init__(self, voters=(1, 2, 3), observers=(), seed=0, **kw):
        ids = list(voters) + list(observers)
        self.nodes = {i: RaftNode(RaftConfig(i, frozenset(voters), **kw), Random(seed * 100 + i))
                      for i in ids}
        self.disks = {i: Disk() for i in ids}
        self.applied = {i: [] for i in ids}
        self.now = 0
        self.cut: set[tuple[int, int]] = set()
        self.down: set[int] = set()
        self.sent: list[Envelope] = []

    def deliver(self, rounds=200):
        for _ in range(rounds):
            inbox = []
            for i, n in self.nodes.items():
                if i in self.down:
                    continue
                msgs, committed, _ = drain(n, self.disks[i])
                inbox += msgs
                for batch in committed:
                    self.applied[i].extend(batch.records)
            if not inbox:
                return
            self.sent += inbox
            for env in inbox:
                if env.dst in self.down or (env.src, env.dst) in self.cut:
                    continue
                self.nodes[env.dst].tick(self.now)
                self.nodes[env.dst].step(env)
        raise AssertionError("the cluster did not quiesce")

    def run(self, ms, step=10):
        end = self.now + ms
        while self.now < end:
            self.now += step
            for i, n in self.nodes.items():
                if i not in self.down:
                    n.tick(self.now)
            self.deliver()

    def leaders(self):
        return [i for i, n in self.nodes.items() if i not in self.down and n.role is Role.LEADER]

    def leader(self):
        self.run(0)
        for _ in range(100):
            leaders = self.leaders()
            if leaders:
                assert len(leaders) == 1
                return self.nodes[leaders[0]]
            self.run(100)
        raise AssertionError("no leader")


# ---------------------------------------------------------------- elections (Raft §5.2)


def test_single_voter_elects_itself_and_commits():
    """Raft §5.2: a one-voter quorum is its own majority."""
    n = node(1, (1,))
    assert n.role is Role.UNATTACHED
    n.tick(2 * T)
    # It leads only once its vote for itself is durable: a crash could take the vote back.
    assert n.role is Role.CANDIDATE and n.epoch == 1
    rd = n.ready()
    assert rd.hard_state == HardState(1, 1, NO_LEADER) and not rd.entries
    n.advance(rd)
    assert n.role is Role.LEADER and n.epoch == 1
    offset, epoch = n.propose([b"a", b"b"])
    assert (offset, epoch) == (2, 1)  # offset 0 holds the LeaderChange record
    _, committed, _ = drain(n)
    assert [b.records for b in committed][-1] == (b"a", b"b")
    assert committed[0].control


def test_three_voters_elect_one_leader_and_replicate():
    """Raft §5.2-5.3: one leader per epoch; entries reach every member in order."""
    c = Cluster()
    leader = c.leader()
    for i in range(5):
        leader.propose([b"r%d" % i])
    c.run(200)
    for i, records in c.applied.items():
        assert records[1:] == [b"r%d" % k for k in range(5)], i
    epochs = {n.epoch for n in c.nodes.values()}
    assert epochs == {leader.epoch}


def test_propose_on_a_follower_raises_not_leader():
    c = Cluster()
    leader = c.leader()
    follower = next(n for n in c.nodes.values() if n is not leader)
    with pytest.raises(NotLeaderError) as info:
        follower.propose([b"x"])
    assert info.value.leader == LeaderAndEpoch(leader.id, leader.epoch)


def test_new_leader_after_the_old_one_stops():
    """KIP-595: followers that stop hearing from the leader elect a new one."""
    c = Cluster()
    old = c.leader()
    old.propose([b"before"])
    c.run(100)
    c.down.add(old.id)
    c.run(FETCH_TIMEOUT + 4 * T)
    new = c.leader()
    assert new is not old and new.epoch > old.epoch
    new.propose([b"after"])
    c.run(100)
    for i in c.nodes:
        if i != old.id:
            data = [r for r in c.applied[i] if not r.startswith(b"LeaderChange")]
            assert data == [b"before", b"after"], i


def test_followers_told_the_leader_is_gone_elect_without_the_fetch_timeout():
    """A killed leader's connections close at once: followers the driver tells so
    (``peer_gone``) elect a new leader well before ``fetch_timeout_ms``."""
    c = Cluster()
    old = c.leader()
    old.propose([b"before"])
    c.run(100)
    c.down.add(old.id)
    for i, n in c.nodes.items():
        if i != old.id:
            n.peer_gone(old.id)
    c.run(FETCH_TIMEOUT // 4)
    leaders = c.leaders()  # without running any longer
    assert len(leaders) == 1 and leaders[0] != old.id
    assert c.nodes[leaders[0]].epoch > old.epoch


def test_one_follower_wrongly_told_the_leader_is_gone_disrupts_nothing():
    """Pre-vote (KIP-996): the other follower still hears from the leader and refuses,
    so the epoch stays and the mistaken follower follows the leader again."""
    c = Cluster()
    leader = c.leader()
    epoch = leader.epoch
    wrong = next(n for n in c.nodes.values() if n is not leader)
    wrong.peer_gone(leader.id)
    c.run(3 * FETCH_TIMEOUT)
    asked = [e for e in c.sent if e.src == wrong.id and isinstance(e.message, VoteRequest)]
    assert asked and all(e.message.pre_vote for e in asked)  # it did run, and only pre-voted
    assert leader.role is Role.LEADER and leader.epoch == epoch
    assert wrong.role is Role.FOLLOWER and wrong.leader_id == leader.id
    assert {n.epoch for n in c.nodes.values()} == {epoch}


class RefusingCluster(Cluster):
    """A request to a down node is refused at once, and its sender told so, as the driver
    does (``peer_gone``)."""

    def deliver(self, rounds=200):
        for _ in range(rounds):
            inbox = []
            for i, n in self.nodes.items():
                if i not in self.down:
                    inbox += drain(n, self.disks[i])[0]
            if not inbox:
                return
            self.sent += inbox
            for env in inbox:
                if env.dst in self.down:
                    if env.is_request:
                        self.nodes[env.src].peer_gone(env.dst)
                    continue
                self.nodes[env.dst].tick(self.now)
                self.nodes[env.dst].step(env)
        raise AssertionError("the cluster did not quiesce")


def test_an_observer_that_asks_a_gone_voter_asks_another_at_once():
    """A broker (observer) whose leader died picks a voter at random to learn the new one;
    the dead voter refuses at once, and the observer asks another after the fetch backoff
    instead of waiting out request_timeout_ms (2 s: longer than a test's broker session)."""
    asked_the_dead = 0
    for seed in range(12):
        c = RefusingCluster(observers=(4,), seed=seed)
        old = c.leader()
        c.run(200)
        observer = c.nodes[4]
        assert observer.leader_id == old.id
        c.down.add(old.id)
        sent_before = len(c.sent)
        for n in c.nodes.values():
            if n.id != old.id:
                n.peer_gone(old.id)
        c.run(FETCH_TIMEOUT // 2)
        (new,) = c.leaders()
        c.run(300)
        assert observer.leader_id == new, seed
        asked_the_dead += any(e.src == 4 and e.dst == old.id and isinstance(e.message, FetchRequest)
                              for e in c.sent[sent_before:])
    assert asked_the_dead  # the seeds do reach the case


def test_peer_gone_of_a_node_that_is_not_the_leader_changes_nothing():
    c = Cluster()
    leader = c.leader()
    a, b = [n for n in c.nodes.values() if n is not leader]
    a.peer_gone(b.id)
    leader.peer_gone(a.id)
    assert a.role is Role.FOLLOWER and leader.role is Role.LEADER


# ---------------------------------------------------------------- vote rules (Raft §5.2, §5.4.1)


def vote(src, dst, epoch, last_epoch, last_offset, pre=False, cid=1):
    return Envelope(src, dst, cid, VoteRequest(epoch, src, last_epoch, last_offset, pre))


def replies(n, disk=None):
    msgs, _, readies = drain(n, disk)
    return msgs, readies


def test_vote_is_granted_once_per_epoch_and_only_after_persisting():
    """Raft §5.2: at most one vote per epoch; KIP-595: the vote is durable before it leaves."""
    n = node(1)
    n.step(vote(2, 1, 1, 0, 0))
    rd = n.ready()
    assert rd.hard_state == HardState(1, voted_id=2)
    assert rd.messages == ()
    (grant,) = rd.messages_after_persist
    assert grant.message.vote_granted and grant.correlation_id == 1
    n.advance(rd)
    n.step(vote(3, 1, 1, 0, 0, cid=7))
    (env,), _ = replies(n)
    assert not env.message.vote_granted
    n.step(vote(2, 1, 1, 0, 0, cid=8))  # the same candidate asking again is granted again
    (env,), _ = replies(n)
    assert env.message.vote_granted


def test_vote_rejected_when_the_candidate_log_is_behind():
    """Raft §5.4.1: grant only if the candidate's log is at least as up to date."""
    batches = [Batch(0, 1, (b"a",)), Batch(1, 2, (b"b", b"c"))]
    n = RaftNode(RaftConfig(1, frozenset({1, 2, 3})), Random(0), hard_state=HardState(2),
                 batches=batches)
    n.step(vote(2, 1, 3, 1, 5))  # higher offset but older last epoch
    (env,), _ = replies(n)
    assert not env.message.vote_granted
    n.step(vote(3, 1, 3, 2, 2, cid=2))  # same last epoch, shorter log
    (env,), _ = replies(n)
    assert not env.message.vote_granted
    n.step(vote(3, 1, 3, 2, 3, cid=3))  # equal log
    (env,), _ = replies(n)
    assert env.message.vote_granted


def test_stale_epoch_vote_is_fenced():
    n = RaftNode(RaftConfig(1, frozenset({1, 2, 3})), Random(0), hard_state=HardState(5))
    n.step(vote(2, 1, 4, 0, 0))
    (env,), _ = replies(n)
    assert env.message.error_code is Errors.FENCED_LEADER_EPOCH
    assert env.message.leader_epoch == 5


def test_observers_never_run_and_vote_only_when_asked():
    """An observer never starts an election.  Asked for its vote, it answers on the merits
    and makes the vote durable: the candidate counts it because a VotersRecord the observer
    has not fetched yet added it (KIP-853 grants such votes too).  A replica that lost its
    disk (observer_only) abstains."""
    n = node(4, (1, 2, 3))
    assert not n.is_voter
    n.tick(100 * T)
    assert n.role in (Role.UNATTACHED, Role.FOLLOWER)
    assert not n.has_ready() or n.ready().hard_state is None
    n = node(4, (1, 2, 3))
    n.step(vote(2, 4, 1, 0, 0))
    msgs, readies = replies(n)
    (env,) = [m for m in msgs if isinstance(m.message, VoteResponse)]
    assert env.message.vote_granted
    msgs = []
    assert [rd.hard_state for rd in readies if rd.hard_state] == [HardState(1, 2, NO_LEADER)]
    lost = RaftNode(RaftConfig(3, frozenset({1, 2, 3}), observer_only=True), Random(0))
    lost.step(vote(2, 3, 1, 0, 0))
    msgs, _ = replies(lost)
    (env,) = [m for m in msgs if isinstance(m.message, VoteResponse)]
    assert not env.message.vote_granted
    assert env.message.error_code is Errors.INCONSISTENT_VOTER_SET


# ---------------------------------------------------------------- pre-vote (KIP-996)


def test_pre_vote_neither_bumps_the_epoch_nor_persists():
    """KIP-996: a pre-vote is answered without changing or persisting state."""
    n = node(1)
    n.step(vote(2, 1, 1, 0, 0, pre=True))
    (env,), readies = replies(n)
    assert env.message.vote_granted and env.message.pre_vote
    assert n.epoch == 0 and n.voted_id == NO_LEADER
    assert all(rd.hard_state is None for rd in readies)


def test_election_timeout_starts_with_a_pre_vote():
    """KIP-996: the timer leads to Prospective (no epoch bump); a majority makes a candidate."""
    n = node(1)
    n.tick(2 * T)
    assert n.role is Role.PROSPECTIVE and n.epoch == 0
    msgs, readies = replies(n)
    assert all(m.message.pre_vote and m.message.candidate_epoch == 1 for m in msgs)
    assert all(rd.hard_state is None for rd in readies)
    first = msgs[0]
    n.step(Envelope(first.dst, 1, first.correlation_id,
                    VoteResponse(Errors.NONE, NO_LEADER, 0, True, True)))
    assert n.role is Role.CANDIDATE and n.epoch == 1 and n.voted_id == 1
    rd = n.ready()
    assert rd.hard_state == HardState(1, voted_id=1)
    assert all(not m.message.pre_vote for m in rd.messages_after_persist)


def test_follower_with_a_live_leader_refuses_pre_votes():
    """KIP-996: a voter that fetched from a leader within the fetch timeout says no."""
    c = Cluster()
    leader = c.leader()
    follower = next(n for n in c.nodes.values() if n is not leader)
    challenger = next(i for i in c.nodes if i not in (leader.id, follower.id))
    follower.step(vote(challenger, follower.id, leader.epoch + 1, leader.epoch, 10 ** 6,
                       pre=True, cid=99))
    msgs, _ = replies(follower)
    answer = [m for m in msgs if isinstance(m.message, VoteResponse)][0]
    assert not answer.message.vote_granted
    assert answer.message.leader_id == leader.id


def test_a_partitioned_voter_cannot_disrupt_the_leader():
    """KIP-996: the isolated voter's pre-votes fail, so the epoch stays put."""
    c = Cluster()
    leader = c.leader()
    epoch = leader.epoch
    lone = next(i for i in c.nodes if i != leader.id)
    c.cut = {(lone, j) for j in c.nodes} | {(j, lone) for j in c.nodes}
    c.run(3 * FETCH_TIMEOUT)
    assert c.nodes[lone].epoch == epoch  # never managed a real candidacy
    c.cut = set()
    c.run(3 * FETCH_TIMEOUT)
    assert leader.role is Role.LEADER and leader.epoch == epoch


# ---------------------------------------------------------------- leader lifecycle (KIP-595)


def test_check_quorum_resigns_a_leader_that_lost_its_followers():
    """KIP-595: a leader not fetched by a majority within 1.5 x fetch timeout resigns."""
    c = Cluster()
    leader = c.leader()
    others = [i for i in c.nodes if i != leader.id]
    c.cut = {(leader.id, j) for j in others} | {(j, leader.id) for j in others}
    c.run(int(1.5 * FETCH_TIMEOUT) + 100)
    assert leader.role is not Role.LEADER
    ends = [m for m in c.sent if isinstance(m.message, EndQuorumEpochRequest)
            and m.src == leader.id]
    assert ends


def test_graceful_resign_sends_end_quorum_epoch_and_successor_takes_over():
    """KIP-595: EndQuorumEpoch names preferred successors; one of them wins quickly."""
    c = Cluster()
    leader = c.leader()
    epoch = leader.epoch
    leader.resign()
    msgs, _ = replies(leader)
    ends = [m for m in msgs if isinstance(m.message, EndQuorumEpochRequest)]
    assert {m.dst for m in ends} == set(c.nodes) - {leader.id}
    assert set(ends[0].message.preferred_successors) == set(c.nodes) - {leader.id}
    c.down.add(leader.id)
    for env in ends:
        c.nodes[env.dst].step(env)
    c.run(2 * T)
    new = c.leader()
    assert new is not leader and new.epoch == epoch + 1


def test_begin_quorum_epoch_makes_a_voter_follow():
    n = node(2)
    n.step(Envelope(1, 2, 5, BeginQuorumEpochRequest(1, 3)))
    assert n.role is Role.FOLLOWER and n.leader == LeaderAndEpoch(1, 3)
    msgs, readies = replies(n)
    assert readies[0].hard_state == HardState(3, leader_id=1)
    assert any(isinstance(m.message, FetchRequest) and m.dst == 1 for m in msgs)


def test_stale_and_duplicate_responses_are_dropped():
    """A response counts once, and only for a request this node has in flight."""
    n = node(1)
    n.tick(2 * T)
    msgs, _ = replies(n)
    first = msgs[0]
    grant = VoteResponse(Errors.NONE, NO_LEADER, 0, True, True)
    n.step(Envelope(first.dst, 1, first.correlation_id + 100, grant))  # unknown id
    n.step(Envelope(3 if first.dst == 2 else 2, 1, first.correlation_id, grant))  # wrong peer
    assert n.role is Role.PROSPECTIVE


# ---------------------------------------------------------------- replication and commit


def leader_of(batches, epoch_before, voters=(1, 2, 3), **kw):
    """A node restored with ``batches`` that wins an election in epoch_before + 1."""
    n = RaftNode(RaftConfig(1, frozenset(voters), **kw), Random(0),
                 hard_state=HardState(epoch_before), batches=batches)
    disk = Disk()
    for b in batches:
        disk.batches.append(b)
    n.tick(2 * T)
    msgs, _ = replies(n, disk)
    for m in msgs:
        n.step(Envelope(m.dst, 1, m.correlation_id, VoteResponse(Errors.NONE, NO_LEADER,
                                                                 epoch_before, True, True)))
    msgs, _ = replies(n, disk)
    for m in msgs:
        if isinstance(m.message, VoteRequest):
            n.step(Envelope(m.dst, 1, m.correlation_id,
                            VoteResponse(Errors.NONE, NO_LEADER, n.epoch, True)))
    assert n.role is Role.LEADER
    replies(n, disk)
    return n


def fetch(n, replica, offset, last_epoch, cid=1000, observer=False):
    n.step(Envelope(replica, n.id, cid, FetchRequest(replica, n.epoch, offset, last_epoch,
                                                     observer)))
    msgs, _ = replies(n)
    out = [m.message for m in msgs if isinstance(m.message, FetchResponse)]
    return out[-1] if out else None


def test_high_watermark_needs_an_entry_of_the_current_epoch():
    """Raft §5.4.2 (Figure 8): older-epoch entries commit only through a current one."""
    old = [Batch(0, 1, (b"a", b"b")), Batch(2, 1, (b"c",))]
    n = leader_of(old, epoch_before=1)
    assert n.epoch == 2 and n.log.end_offset == 4  # LeaderChange at offset 3
    resp = fetch(n, 2, 3, 1)  # follower holds exactly the old entries
    assert n.high_watermark == 0
    assert resp.records[0].base_offset == 3
    fetch(n, 2, 4, 2, cid=1001)  # and now the LeaderChange too
    assert n.high_watermark == 4


def test_a_quiet_batch_commits_without_answering_the_parked_fetches():
    """KIP-595 long polls: a batch nobody waits on (the controller's NoOpRecord, proposed
    ``quiet``) reaches each follower in one fetch answer; its commit does not answer the
    parked fetches again, as Kafka's leader before KIP-1166 never does.  The followers
    learn that high watermark with the next answer: the next batch's, or the wait's end.
    Any other batch's commit answers them at once."""
    c = Cluster()
    leader = c.leader()
    c.run(100)  # both followers' fetches parked at the leader
    followers = [n for n in c.nodes.values() if n is not leader]

    def answers():
        return [e.message for e in c.sent if isinstance(e.message, FetchResponse)]

    c.sent.clear()
    quiet, _ = leader.propose([b"noop"], quiet=True)
    c.deliver()
    assert leader.high_watermark == quiet + 1
    assert len(answers()) == 2 and all(a.records for a in answers())  # the batch, once each
    assert all(f.high_watermark == quiet for f in followers)  # its commit: not yet told

    c.sent.clear()
    loud, _ = leader.propose([b"create topic"])
    c.deliver()
    assert leader.high_watermark == loud + 1
    assert all(f.high_watermark == loud + 1 for f in followers)  # told at once
    assert any(not a.records for a in answers())  # by answers carrying only the commit

    c.sent.clear()
    quiet, _ = leader.propose([b"noop"], quiet=True)
    c.deliver()
    assert all(f.high_watermark == quiet for f in followers)
    c.run(leader.config.fetch_max_wait_ms + 20)  # the parked fetches' wait ends
    assert all(f.high_watermark == quiet + 1 for f in followers)


def test_the_second_ack_of_a_commit_is_answered_with_it_at_once():
    """A Fetch (v17) does not say which high watermark the fetcher knows, so the leader
    remembers what it last told each one.  When the first follower's ack commits a batch,
    the second follower's ack finds the high watermark already moved: it must still be
    answered at once, not parked for a fetch wait (it was, by a leader that took the
    high watermark before this fetch for what the fetcher knew: that follower then learned
    every commit up to 500 ms late)."""
    n = leader_of([], epoch_before=1)
    end = n.log.end_offset
    for replica in (2, 3):
        assert fetch(n, replica, 0, 0, cid=replica).records
    for replica in (2, 3):  # caught up: answered or parked
        fetch(n, replica, end, n.epoch, cid=10 + replica)
    assert n.high_watermark == end
    offset, _ = n.propose([b"create topic"])
    replies(n)  # any parked fetch is answered with the batch; the leader fsyncs it
    first = fetch(n, 2, offset + 1, n.epoch, cid=30)
    assert first.high_watermark == offset + 1 == n.high_watermark  # this ack committed it
    second = fetch(n, 3, offset + 1, n.epoch, cid=31)
    assert second is not None and second.high_watermark == offset + 1
    assert fetch(n, 3, offset + 1, n.epoch, cid=32) is None  # told: parked again


def test_a_fetcher_unheard_of_for_longer_than_a_long_poll_is_told_the_high_watermark_again():
    """The leader remembers the high watermark it last told each fetcher; one that went
    quiet for longer than two long polls may have restarted (its memory of it gone) or
    missed the answer, so its next fetch is answered at once, not parked for a wait."""
    n = leader_of([], epoch_before=1, voters=(1,))
    end = n.log.end_offset
    assert n.high_watermark == end
    assert fetch(n, 7, 0, 0, cid=1, observer=True).records
    assert fetch(n, 7, end, n.epoch, cid=2, observer=True) is None  # told: parked
    n.tick(n._now + 600)  # the parked fetch's wait ends (answered); it fetches again at once
    replies(n)
    assert fetch(n, 7, end, n.epoch, cid=3, observer=True) is None
    n.tick(n._now + 3000)  # then nothing from it for 3 s: a restart
    replies(n)
    again = fetch(n, 7, end, n.epoch, cid=4, observer=True)
    assert again is not None and again.high_watermark == end


def test_leader_counts_only_its_fsynced_log_end():
    """KIP-595: the leader's own log end counts for the HW only once it is durable."""
    n = node(1, (1,))
    n.tick(2 * T)
    replies(n)
    hw = n.high_watermark
    n.propose([b"x"])
    assert n.high_watermark == hw
    rd = n.ready()
    assert n.high_watermark == hw  # written, not yet fsynced
    n.advance(rd)
    assert n.high_watermark == n.log.end_offset


def test_divergent_follower_truncates_to_the_leaders_epoch_end():
    """KIP-595 Fetch: DivergingEpoch = end offset of the largest epoch <= the follower's."""
    leader = leader_of([Batch(0, 1, (b"a", b"b", b"c")), Batch(3, 3, (b"d",))], epoch_before=3)
    resp = fetch(leader, 2, 6, 2)  # follower: epoch 2 entries up to offset 6, never committed
    assert resp.error_code is Errors.NONE
    assert resp.diverging_epoch == OffsetAndEpoch(3, 1)
    follower = RaftNode(RaftConfig(2, frozenset({1, 2, 3})), Random(1),
                        hard_state=HardState(2, leader_id=3),
                        batches=[Batch(0, 1, (b"a", b"b", b"c")), Batch(3, 2, (b"x", b"y", b"z"))])
    follower.step(Envelope(1, 2, 1, BeginQuorumEpochRequest(1, leader.epoch)))
    msgs, _ = replies(follower)
    (req,) = [m for m in msgs if isinstance(m.message, FetchRequest)]
    assert (req.message.fetch_offset, req.message.last_fetched_epoch) == (6, 2)
    follower.step(Envelope(1, 2, req.correlation_id, resp))
    assert follower.log.end_offset == 3
    rd = follower.ready()
    assert rd.truncate_to == 3
    follower.advance(rd)


def test_a_diverging_fetch_teaches_no_high_watermark():
    """KIP-595: after truncating, the follower's log is unverified until a fetch succeeds.

    (Found by the simulator: a follower whose old-epoch prefix differed from the leader's
    took the leader's high watermark with the diverging answer and applied wrong entries.)
    """
    f = RaftNode(RaftConfig(2, frozenset({1, 2, 3})), Random(1), hard_state=HardState(5),
                 batches=[Batch(0, 2, (b"old", b"old")), Batch(2, 4, (b"x",))])
    f.step(Envelope(3, 2, 1, BeginQuorumEpochRequest(3, 5)))
    msgs, _ = replies(f)
    (req,) = [m for m in msgs if isinstance(m.message, FetchRequest)]
    f.step(Envelope(3, 2, req.correlation_id, FetchResponse(
        Errors.NONE, LeaderAndEpoch(3, 5), high_watermark=3,
        diverging_epoch=OffsetAndEpoch(2, 3))))
    assert f.log.end_offset == 2 and f.high_watermark == 0
    msgs, readies = replies(f)
    assert all(not rd.committed for rd in readies)
    (req,) = [m for m in msgs if isinstance(m.message, FetchRequest)]
    assert (req.message.fetch_offset, req.message.last_fetched_epoch) == (2, 2)


def test_follower_never_truncates_below_its_high_watermark():
    """The core's own oracle: committed entries are never removed."""
    f = RaftNode(RaftConfig(2, frozenset({1, 2, 3})), Random(1), hard_state=HardState(2, leader_id=1),
                 batches=[Batch(0, 1, (b"a", b"b"))])
    drain(f)
    f._set_high_watermark(2)
    with pytest.raises(RaftInvariantError):
        f._truncate(1)


def test_observer_replicates_without_counting_towards_commit():
    """KIP-595: observers fetch (observer=True) and apply; only voters form the HW."""
    c = Cluster(voters=(1, 2, 3), observers=(4,))
    leader = c.leader()
    leader.propose([b"x"])
    c.run(300)
    assert c.applied[4][-1:] == [b"x"]
    assert any(isinstance(m.message, FetchRequest) and m.message.observer and m.src == 4
               for m in c.sent)
    hw = leader.high_watermark
    others = [i for i in (1, 2, 3) if i != leader.id]
    c.down.update(others)
    leader.propose([b"y"])
    c.run(300)
    assert leader.high_watermark == hw  # the observer alone is no majority
    assert c.nodes[4].log.end_offset == leader.log.end_offset


def test_non_leader_answers_fetch_with_the_leader_it_knows():
    c = Cluster()
    leader = c.leader()
    follower = next(n for n in c.nodes.values() if n is not leader)
    resp = fetch(follower, 4, 0, 0)
    assert resp.error_code is Errors.NOT_LEADER_OR_FOLLOWER
    assert resp.current_leader == LeaderAndEpoch(leader.id, leader.epoch)


def test_fetch_with_an_old_epoch_is_fenced():
    n = leader_of([], epoch_before=4)
    n.step(Envelope(2, 1, 77, FetchRequest(2, 3, 0, 0)))
    msgs, _ = replies(n)
    (resp,) = [m.message for m in msgs if isinstance(m.message, FetchResponse)]
    assert resp.error_code is Errors.FENCED_LEADER_EPOCH


# ---------------------------------------------------------------- snapshots (KIP-630)


def test_snapshot_trims_the_log_and_is_persisted():
    n = node(1, (1,))
    n.tick(2 * T)
    drain(n)  # its vote for itself becomes durable: now it leads
    for i in range(5):
        n.propose([b"%d" % i])
    drain(n)
    snap = n.create_snapshot(4, b"state@4")
    assert n.log.start_offset == 4 and snap.snapshot_id == OffsetAndEpoch(4, 1)
    rd = n.ready()
    assert rd.snapshot == snap
    n.advance(rd)
    with pytest.raises(ValueError):
        n.create_snapshot(99, b"")


def test_follower_below_log_start_fetches_the_snapshot_in_chunks():
    """KIP-630: Fetch answers SnapshotId; FetchSnapshot pulls it; fetching resumes after it."""
    c = Cluster(voters=(1, 2, 3), fetch_snapshot_max_bytes=4)
    leader = c.leader()
    lagging = next(i for i in c.nodes if i != leader.id)
    c.down.add(lagging)
    for i in range(6):
        leader.propose([b"r%d" % i])
    c.run(300)
    leader.create_snapshot(leader.high_watermark, b"0123456789abc")
    c.run(10)
    assert leader.log.start_offset > c.nodes[lagging].log.end_offset
    c.down.discard(lagging)
    c.run(FETCH_TIMEOUT)
    f = c.nodes[lagging]
    assert f.log.snapshot is not None and f.log.snapshot.data == b"0123456789abc"
    assert f.log.end_offset == leader.log.end_offset
    chunks = [m.message for m in c.sent if isinstance(m.message, FetchSnapshotResponse)]
    assert len(chunks) >= 4 and all(len(ch.unaligned_records) <= 4 for ch in chunks)
    assert c.disks[lagging].snapshot.data == b"0123456789abc"


def test_fetch_snapshot_errors():
    n = leader_of([], epoch_before=0)
    n.step(Envelope(2, 1, 5, FetchSnapshotRequest(2, n.epoch, OffsetAndEpoch(9, 1), 0)))
    msgs, _ = replies(n)
    assert msgs[-1].message.error_code is Errors.SNAPSHOT_NOT_FOUND
    n.propose([b"x"])
    drain(n)
    fetch(n, 2, n.log.end_offset, n.epoch)
    fetch(n, 3, n.log.end_offset, n.epoch, cid=1001)
    drain(n)
    snap = n.create_snapshot(n.high_watermark, b"abc")
    n.step(Envelope(2, 1, 6, FetchSnapshotRequest(2, n.epoch, snap.snapshot_id, 9)))
    msgs, _ = replies(n)
    assert msgs[-1].message.error_code is Errors.POSITION_OUT_OF_RANGE


# ---------------------------------------------------------------- restart


def test_restart_from_persisted_state():
    """The core rebuilds from hard state + snapshot + log; a former leader does not lead."""
    disk = Disk()
    n = RaftNode(RaftConfig(1, frozenset({1})), Random(0))
    n.tick(2 * T)
    drain(n, disk)
    for i in range(4):
        n.propose([b"%d" % i])
    drain(n, disk)
    n.create_snapshot(3, b"snap")
    n.propose([b"tail"])
    drain(n, disk)
    again = RaftNode(RaftConfig(1, frozenset({1})), Random(0), hard_state=disk.hard_state,
                     snapshot=disk.snapshot, batches=disk.batches)
    assert again.epoch == n.epoch and again.log.end_offset == n.log.end_offset
    assert again.log.start_offset == 3 and again.role is Role.RESIGNED
    rd = again.ready()
    assert rd.load_snapshot == disk.snapshot  # the state machine starts from the snapshot
    again.advance(rd)
    again.tick(5 * T)
    assert again.role is Role.CANDIDATE  # leads once the vote for itself is durable
    again.advance(again.ready())
    assert again.role is Role.LEADER and again.epoch == n.epoch + 1
    _, committed, _ = drain(again, disk)
    records = [r for b in committed for r in b.records]
    assert records[:2] == [b"2", b"3"] and b"tail" in records  # replayed above the snapshot


def test_voted_node_restarts_remembering_its_vote():
    n = RaftNode(RaftConfig(1, frozenset({1, 2, 3})), Random(0), hard_state=HardState(4, 2))
    assert n.role is Role.VOTED
    n.step(vote(3, 1, 4, 9, 9))
    (env,), _ = replies(n)
    assert not env.message.vote_granted


def test_clock_cannot_go_back():
    n = node(1)
    n.tick(100)
    with pytest.raises(RaftInvariantError):
        n.tick(50)
