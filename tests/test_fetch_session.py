"""Incremental fetch sessions (KIP-227): the leader's cache and the follower's handler."""

from __future__ import annotations

from broker.fetch_session import FetchSessionCache, FetchSessionHandler
from kraft.protocol.error_codes import ErrorCode


def _request(session_id, epoch, send, forget=()):
    topics: dict = {}
    for (topic, index), offset in send.items():
        topics.setdefault(topic, []).append({"partition": index, "fetch_offset": offset})
    wanted = [({"topic": t, "topic_id": None}, t, p) for t, ps in topics.items() for p in ps]
    return {"session_id": session_id, "session_epoch": epoch}, wanted, list(forget)


def test_a_follower_sends_only_what_changed_and_the_leader_keeps_the_rest():
    cache, handler = FetchSessionCache(), FetchSessionHandler()
    positions = {("t", i): i for i in range(1000)}
    sid, epoch, send, forget = handler.build(positions)
    assert (sid, epoch, len(send), forget) == (0, 0, 1000, [])
    body, wanted, forgotten = _request(sid, epoch, send)
    ctx = cache.context(body, 12, wanted, forgotten)
    assert ctx.response_session_id != 0 and not ctx.incremental and len(ctx.wanted) == 1000
    assert handler.on_response(0, ctx.response_session_id)

    positions[("t", 7)] = 70
    del positions[("t", 8)]
    sid, epoch, send, forget = handler.build(positions)
    assert (sid, epoch, send, forget) == (ctx.response_session_id, 1, {("t", 7): 70}, [("t", 8)])
    body, wanted, forgotten = _request(sid, epoch, send, forget)
    ctx2 = cache.context(body, 12, wanted, forgotten)
    assert ctx2.incremental and len(ctx2.wanted) == 999  # the whole session is read
    assert {p["fetch_offset"] for _, name, p in ctx2.wanted if p["partition"] == 7} == {70}
    assert handler.on_response(0, sid)

    # A replayed epoch, or a session the leader lost, makes the follower start over in full.
    assert cache.context(body, 12, wanted, forgotten).error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert FetchSessionCache().context(body, 12, wanted, forgotten).error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    handler.build(positions)
    assert not handler.on_response(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0)
    assert handler.build(positions)[:2] == (0, 0)


def test_an_incremental_answer_holds_only_partitions_with_news():
    cache = FetchSessionCache()
    body, wanted, forgotten = _request(0, 0, {("t", 0): 0, ("t", 1): 0})
    ctx = cache.context(body, 12, wanted, forgotten)
    quiet = {"error_code": 0, "records": b"", "high_watermark": 5, "log_start_offset": 0}
    assert ctx.session.must_answer(("t", 0), dict(quiet)) and ctx.session.must_answer(("t", 1), dict(quiet))
    assert not ctx.session.must_answer(("t", 0), dict(quiet))  # nothing new
    assert ctx.session.must_answer(("t", 0), dict(quiet, high_watermark=6))
    assert ctx.session.must_answer(("t", 1), dict(quiet, records=b"x"))
    assert ctx.session.must_answer(("t", 1), dict(quiet, error_code=6))


def test_sessionless_fetches_and_a_bounded_cache():
    cache = FetchSessionCache(max_sessions=2)
    body, wanted, forgotten = _request(0, -1, {("t", 0): 0})
    assert cache.context(body, 12, wanted, forgotten).session is None and len(cache) == 0
    assert cache.context(body, 6, wanted, forgotten).session is None
    for _ in range(3):
        cache.context(*_request(0, 0, {("t", 0): 0})[:1], 12, wanted, forgotten)
    assert len(cache) == 2


def test_no_slots_answer_full_fetches_without_a_session():
    # max.incremental.fetch.session.cache.slots=0: every fetch is full, session id 0, and
    # a follower's handler keeps fetching in full.
    cache, handler = FetchSessionCache(max_sessions=0), FetchSessionHandler()
    positions = {("t", i): i for i in range(10)}
    for _ in range(3):
        sid, epoch, send, forget = handler.build(positions)
        assert (sid, epoch, len(send)) == (0, 0, 10)
        body, wanted, forgotten = _request(sid, epoch, send, forget)
        ctx = cache.context(body, 12, wanted, forgotten)
        assert (ctx.error, ctx.session, ctx.response_session_id, len(ctx.wanted)) == (ErrorCode.NONE, None, 0, 10)
        assert handler.on_response(0, ctx.response_session_id)
    assert len(cache) == 0


def test_a_follower_told_only_what_changed_forgets_partitions_it_stopped_following():
    """The replica fetcher passes only the keys that changed, removed ones included: the
    session must forget those, or the leader keeps answering for them."""
    handler = FetchSessionHandler()
    positions = {("t", i): i for i in range(10)}
    handler.build(positions)
    assert handler.on_response(0, 5)
    del positions[("t", 3)]
    positions[("t", 4)] = 40
    positions[("u", 0)] = 0
    sid, epoch, send, forget = handler.build(positions, [("t", 3), ("t", 4), ("u", 0)])
    assert (sid, send, forget) == (5, {("t", 4): 40, ("u", 0): 0}, [("t", 3)])
    assert handler.on_response(0, 5)
    assert handler.build(positions, [("t", 3)])[2:] == ({}, [])  # forgotten once
