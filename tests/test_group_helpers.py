"""Helpers for the group coordinator tests: a loaded core and request builders.

Every request goes through the wire codec (encode then decode at its version) and every
response and completion is encoded at the request's version, so the tests exercise the
message shapes real clients send and would receive.
"""

from __future__ import annotations

import struct
from random import Random

from broker.group.config import GroupConfig
from broker.group.coordinator import GroupCoordinator
from broker.group.output import Output
from broker.group.records import LoadedPartition
from kraft.protocol import codec


def wire(api: str, version: int, **fields) -> dict:
    """A request body as a client would send it, decoded as the broker sees it."""
    body = codec.default_message(api, "request")
    body.update(fields)
    return codec.decode(api, "request", version, codec.encode(api, "request", version, body))


def check_response(api: str, version: int, response: dict) -> dict:
    return codec.decode(api, "response", version, codec.encode(api, "response", version, response))


def subscription(*topics: str, version: int = 0) -> bytes:
    body = codec.default_message("ConsumerProtocolSubscription", "data")
    body["topics"] = list(topics)
    return struct.pack(">h", version) + codec.encode("ConsumerProtocolSubscription", "data", version, body)


class Harness:
    """A coordinator owning every group (one ``__consumer_offsets`` partition), a clock,
    and a record of parked tickets and completed responses."""

    def __init__(self, **config):
        config.setdefault("num_partitions", 1)
        config.setdefault("initial_rebalance_delay_ms", 0)
        config.setdefault("min_session_timeout_ms", 10)
        self.core = GroupCoordinator(GroupConfig(**config), rng=Random(7))
        for p in range(self.core.config.num_partitions):
            self.core.load(p, self.core.begin_loading(p), LoadedPartition(), 0)
        self.now = 0
        self.done: dict[int, dict] = {}  # ticket -> response
        self.api_of: dict[int, tuple[str, int]] = {}
        self.writes = []

    def absorb(self, out: Output, api: str | None = None, version: int = 0) -> Output:
        for w in out.writes:
            self.writes.append(w)
            self.core.apply_write(w)
        if out.ticket is not None:
            self.api_of[out.ticket] = (api, version)
        for ticket, response in out.completions:
            assert ticket not in self.done, "a ticket completed twice"
            a, v = self.api_of[ticket]
            self.done[ticket] = check_response(a, v, response)
        if out.response is not None:
            out.response = check_response(api, version, out.response)
        return out

    def call(self, api: str, version: int, client_id: str = "client", **fields) -> Output:
        out = self.core.handle(api, version, wire(api, version, **fields), self.now, client_id=client_id,
                               client_host="/127.0.0.1")
        return self.absorb(out, api, version)

    def result(self, out: Output) -> dict | None:
        """The response of ``out``: immediate, or its completion if it arrived (else None)."""
        return out.response if out.response is not None else self.done.get(out.ticket)

    def tick(self, now: int) -> Output:
        self.now = now
        return self.absorb(self.core.tick(now))

    # -------------------------------------------------------------- request shorthands

    def join(self, group="g", member_id="", *, protocols=(("range", b"r"),), instance=None, version=5,
             session_ms=10_000, rebalance_ms=30_000, protocol_type="consumer") -> Output:
        return self.call("JoinGroup", version, group_id=group, member_id=member_id, group_instance_id=instance,
                         session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms,
                         protocol_type=protocol_type,
                         protocols=[{"name": n, "metadata": m} for n, m in protocols])

    def join_new(self, group="g", **kw) -> tuple[str, Output]:
        """KIP-394 first join (MEMBER_ID_REQUIRED) then the rejoin with the given id."""
        first = self.join(group, **kw)
        assert first.response["error_code"] == 79, first.response
        member_id = first.response["member_id"]
        return member_id, self.join(group, member_id, **kw)

    def sync(self, group, member_id, generation, assignments=None, *, instance=None, version=3) -> Output:
        return self.call("SyncGroup", version, group_id=group, member_id=member_id, generation_id=generation,
                         group_instance_id=instance,
                         assignments=[{"member_id": k, "assignment": v} for k, v in (assignments or {}).items()])

    def heartbeat(self, group, member_id, generation, *, instance=None, version=3) -> int:
        out = self.call("Heartbeat", version, group_id=group, member_id=member_id, generation_id=generation,
                        group_instance_id=instance)
        return out.response["error_code"]

    def leave(self, group, *members, version=3) -> dict:
        if version < 3:
            return self.call("LeaveGroup", version, group_id=group, member_id=members[0]).response
        return self.call("LeaveGroup", version, group_id=group,
                         members=[{"member_id": m, "group_instance_id": None} if isinstance(m, str)
                                  else {"member_id": m[0], "group_instance_id": m[1]} for m in members]).response

    def commit(self, group, offsets: dict, *, member_id="", generation=-1, version=8, instance=None) -> dict:
        topics = {}
        for (t, p), (offset, meta) in offsets.items():
            topics.setdefault(t, []).append({"partition_index": p, "committed_offset": offset,
                                             "committed_leader_epoch": 3, "committed_metadata": meta})
        out = self.call("OffsetCommit", version, group_id=group, generation_id_or_member_epoch=generation,
                        member_id=member_id, group_instance_id=instance,
                        topics=[{"name": t, "partitions": ps} for t, ps in topics.items()])
        return out.response

    def fetch(self, group, topics: dict | None, *, version=7) -> dict:
        spec = None if topics is None else [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]
        if version >= 8:
            return self.call("OffsetFetch", version, groups=[{"group_id": group, "topics": spec}]).response
        return self.call("OffsetFetch", version, group_id=group, topics=spec).response

    def stable_group(self, group="g", n=1, **kw) -> tuple[list[str], int]:
        """n members joined and synced; returns (member ids, generation)."""
        ids = []
        outs = []
        for _ in range(n):
            member_id, out = self.join_new(group, **kw)
            ids.append(member_id)
            outs.append(out)
            if len(ids) > 1:  # earlier members rejoin to let the rebalance finish
                for earlier in ids[:-1]:
                    outs[ids.index(earlier)] = self.join(group, earlier, **kw)
        results = [self.result(o) for o in outs]
        assert all(r is not None and r["error_code"] == 0 for r in results), results
        generation = results[0]["generation_id"]
        leader = results[0]["leader"]
        assignments = {m: f"assign-{m}".encode() for m in ids}
        syncs = {}
        for m in ids:
            if m != leader:
                syncs[m] = self.sync(group, m, generation)
        syncs[leader] = self.sync(group, leader, generation, assignments)
        for m, out in syncs.items():
            assert self.result(out)["assignment"] == assignments[m]
        return ids, generation


def offsets_of(fetch_response: dict) -> dict:
    """{(topic, partition): (offset, metadata)} from an OffsetFetch v2-7 response."""
    return {(t["name"], p["partition_index"]): (p["committed_offset"], p["metadata"])
            for t in fetch_response["topics"] for p in t["partitions"]}
