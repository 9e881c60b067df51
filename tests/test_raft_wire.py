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


def test_every_field_of_every_quorum_message_crosses_the_wire():
    """The simulator hands the core's messages over as objects; real nodes send them as
    Kafka's bytes.  A field the wire cannot carry made the two disagree (the fetcher's
    high watermark, which only Fetch v18 carries, was always -1 between processes), so
    each message, every field set away from its default, must come back equal."""
    import uuid

    from kraft.protocol.rpc import decode_request, decode_response, encode_request, encode_response
    from kraft.raft import messages as m

    voters = {1, 2, 3}
    directory = uuid.UUID(int=7)
    leader = m.LeaderAndEpoch(2, 9)
    requests = [
        m.VoteRequest(9, 2, 8, 41, pre_vote=True, voter_directory_id=directory),
        m.BeginQuorumEpochRequest(2, 9),
        m.EndQuorumEpochRequest(2, 9, preferred_successors=(3, 1)),
        m.FetchRequest(3, 9, 41, 8, observer=False, directory_id=directory, max_wait_ms=500),
        m.FetchRequest(7, 9, 41, 8, observer=True, directory_id=directory, max_wait_ms=500),
        m.FetchSnapshotRequest(3, 9, m.OffsetAndEpoch(40, 8), 1024),
    ]
    responses = [
        m.VoteResponse(m.Errors.NONE, 2, 9, True, pre_vote=True),
        m.BeginQuorumEpochResponse(m.Errors.FENCED_LEADER_EPOCH, 2, 9),
        m.EndQuorumEpochResponse(m.Errors.NONE, 2, 9),
        m.FetchResponse(m.Errors.NONE, leader, 40, 5, (m.Batch(41, 9, (b"a", b"b")),)),
        m.FetchResponse(m.Errors.NONE, leader, 40, 5, diverging_epoch=m.OffsetAndEpoch(30, 7)),
        m.FetchResponse(m.Errors.NONE, leader, 40, 5, snapshot_id=m.OffsetAndEpoch(35, 8)),
        m.FetchSnapshotResponse(m.Errors.NONE, leader, m.OffsetAndEpoch(40, 8), 4096, 1024, b"chunk"),
    ]
    for message in requests:
        api, version, body = wire.request_to_wire(message, "cluster")
        frame = encode_request(api, version, 1, body)
        _, back = wire.request_from_wire(api, decode_request(frame[4:]).body, voters)
        assert back == message
    for message in responses:
        api, version, body = wire.response_to_wire(message)
        frame = encode_response(api, version, 1, body)
        assert wire.response_from_wire(api, decode_response(api, version, frame[4:])[1]) == message
