"""The Raft core's Fetch on Kafka's wire (kraft.raft.wire): what a Kafka leader reads."""

from kraft.raft import FetchRequest, RaftConfig
from kraft.raft import wire
from kraft.raft.messages import Envelope, FetchResponse
from test_raft_node import Cluster, drain


def test_a_fetch_asks_the_leader_to_park_it_as_long_as_kafkas_followers_do():
    """Kafka's leader parks a Fetch for its MaxWaitMs and answers one of 0 at once: a
    follower that sent 0 to it would fetch in a busy loop."""
    wait = RaftConfig(1, frozenset({1, 2, 3})).fetch_max_wait_ms
    assert wait == 500  # KafkaRaftClient's MAX_FETCH_WAIT_MS
    request = FetchRequest(2, 1, 10, 1, max_wait_ms=wait)
    api, version, body = wire.request_to_wire(request, "cluster")
    assert api == "Fetch" and body["max_wait_ms"] == 500
    replica, decoded = wire.request_from_wire(api, body, voters={1, 2, 3})
    assert replica == 2 and decoded.max_wait_ms == 500


def test_the_leader_parks_a_fetch_for_the_wait_it_asks():
    c = Cluster()
    leader = c.leader()
    c.run(100)
    follower_id = next(i for i, n in c.nodes.items() if n is not leader)
    c.sent.clear()
    end = leader.log.end_offset
    last_epoch = leader.log.last.epoch
    leader.step(Envelope(follower_id, leader.id, 9001,
                         FetchRequest(follower_id, leader.epoch, end, last_epoch, max_wait_ms=2000)))

    def answered():
        msgs, _, _ = drain(leader)
        return [e for e in msgs if isinstance(e.message, FetchResponse) and e.correlation_id == 9001]

    assert not answered()  # parked
    leader.tick(c.now + 1500)
    assert not answered()  # past the leader's own 500 ms, within the 2,000 asked
    leader.tick(c.now + 2010)
    assert answered()
