"""Follower replication: one fetch loop per leader broker, pulling every partition this
broker follows from it (Kafka's ReplicaFetcherThread, as trio tasks).

Each round sends one Fetch (replica id = this broker) in an incremental fetch session
(KIP-227, ``broker/fetch_session.py``): the first carries every followed partition's fetch
offset and last fetched epoch, the next ones only the partitions whose position changed,
and the leader answers only the partitions with news; it long-polls the request.  Records are appended with
their offsets kept; a diverging epoch truncates the log (KIP-320); an out-of-range offset
asks the leader for its log bounds and truncates or restarts the log.

Replication quotas (``broker/replication_quotas.py``): while this broker's follower quota is
exceeded, the partitions it throttles whose replica here is outside the ISR are left out of
the fetch (the session forgets them, as Kafka's fetcher does) and come back once the rate
has fallen under the bound; what they append is recorded against the quota.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from broker.data_path import FETCH_STEP, whole_batches_prefix
from broker.fetch_session import FetchSessionHandler
from broker.partition_state_types import EpochEndOffset
from broker.replica_manager import ReplicaManager
from kraft import clock
from kraft.client import KafkaClient, NodeUnavailable
from kraft.protocol.error_codes import ErrorCode

log = logging.getLogger(__name__)

# v15: the fetch carries the follower's broker epoch (KIP-903; v13+ names topics by id).
FETCH_VERSION = 15
# Beyond a fetch's own wait (replica.fetch.wait.max.ms), how long its answer may take.
ANSWER_TIMEOUT_S = 10
# After an answer with errors for some partitions: Kafka holds back only those partitions
# for replica.fetch.backoff.ms and goes on fetching the others; this loop fetches them all
# together, so it waits this much at most, not the whole backoff.
PARTIAL_ERROR_BACKOFF_S = 0.2


class _PositionsView:
    """``key -> position`` over ``key -> (partition, position)``, without copying; the
    ``held`` keys (throttled) are left out."""

    def __init__(self, current: dict, held):
        self._current = current
        self._held = held

    def get(self, key):
        item = self._current.get(key)
        return None if item is None or key in self._held else item[1]


def broker_address(image, broker_id: int, listener_name: str | None) -> tuple[str, int] | None:
    broker = image.broker(broker_id)
    if broker is None or not broker.listeners:
        return None
    for endpoint in broker.listeners:
        if listener_name is None or endpoint.name == listener_name:
            return endpoint.host, endpoint.port
    return broker.listeners[0].host, broker.listeners[0].port


class ReplicaFetcherManager:
    def __init__(self, broker_id: int, replicas: ReplicaManager, client: KafkaClient,
                 listener_name: str | None, *, fetch_max_bytes: int = 10 << 20,
                 partition_max_bytes: int = 1 << 20, backoff_s: float = 0.2,
                 wait_max_ms: int = 500, min_bytes: int = 1,
                 broker_epoch: Callable[[], int] = lambda: -1):
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch  # this broker's registration, sent in each fetch
        self.replicas = replicas
        self.client = client
        self.listener_name = listener_name
        self.fetch_max_bytes = fetch_max_bytes
        self.partition_max_bytes = partition_max_bytes
        self.backoff_s = backoff_s  # replica.fetch.backoff.ms: after a fetch that failed
        # replica.fetch.wait.max.ms and replica.fetch.min.bytes: the leader answers a fetch
        # once it has min_bytes for it or wait_max_ms has passed (an idle follower asks
        # 1000 / wait_max_ms times a second per leader; acks=all waits for min_bytes too).
        self.wait_max_ms = wait_max_ms
        self.min_bytes = min_bytes
        self._running: set[int] = set()
        self._topic_ids: dict = {}  # topic name -> id
        self._topic_names: dict = {}  # topic id -> name

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            while True:
                for leader_id in self.replicas.followed_leaders():
                    if leader_id not in self._running:
                        self._running.add(leader_id)
                        nursery.start_soon(self._fetch_loop, leader_id)
                await self.replicas.followers_changed.wait()

    async def _fetch_loop(self, leader_id: int) -> None:
        session = FetchSessionHandler()
        # The partitions that changed (``Partition.notify``), or started or stopped being
        # followed from some leader (``ReplicaManager._track``), since the last round.
        changed: set = set()
        self.replicas.change_sinks.append(changed)
        positions: dict = {}  # key -> (partition, fetch position)
        for p in self.replicas.followed_from(leader_id):
            positions[(p.topic, p.index)] = (p, p.state.fetch_position())
        keys = None  # the first round sends every position
        held = frozenset()  # keys left out while the follower quota is exceeded
        try:
            while True:
                if keys is not None:
                    # Only the partitions that changed: a round costs what changed, not the
                    # thousands of partitions followed (creating 20,000 replicas rebuilt
                    # every position on every round, quadratic in the partitions).
                    for p in changed:
                        key = (p.topic, p.index)
                        item = positions.get(key)
                        if p.followed_leader == leader_id and self.replicas.get(*key) is p:
                            positions[key] = (p, p.state.fetch_position())
                        elif item is not None and item[0] is p:
                            del positions[key]  # the session forgets it
                        else:
                            continue
                        keys.append(key)
                    changed.clear()
                if not positions:
                    return
                now_held = self._throttled_out(positions)
                if now_held != held:
                    if keys is not None:
                        keys.extend(held ^ now_held)  # forgotten, or sent again
                    held = now_held
                address = broker_address(self.replicas.image, leader_id, self.listener_name)
                if address is None:
                    session.reset()
                    await trio.sleep(self.backoff_s)
                    continue
                try:
                    progressed = await self._fetch_once(address, positions, keys, session, held)
                    keys = []
                except NodeUnavailable as exc:
                    log.debug("fetch from broker %d failed: %s", leader_id, exc)
                    session.reset()
                    await trio.sleep(self.backoff_s)
                    continue
                except BaseException:
                    session.reset()
                    raise
                if not progressed:
                    await trio.sleep(min(self.backoff_s, PARTIAL_ERROR_BACKOFF_S))
        finally:
            # By identity: sets compare by value, and list.remove took another loop's empty
            # set, after which this loop's own remove raised and took the node down.
            sinks = self.replicas.change_sinks
            sinks[:] = [sink for sink in sinks if sink is not changed]
            self._running.discard(leader_id)

    def _throttled_out(self, positions: dict) -> frozenset:
        """The keys to leave out of this round: Kafka's shouldFollowerThrottle, a throttled
        partition whose replica here is not in the ISR, while the follower quota is exceeded."""
        quota = self.replicas.replication_quotas.follower
        if not quota.active or not quota.is_quota_exceeded(clock.monotonic_ms()):
            return frozenset()
        return frozenset(k for k, (p, _) in positions.items()
                         if quota.is_throttled(*k) and self.broker_id not in p.state.isr)

    async def _fetch_once(self, address, current: dict, changed_keys, session: FetchSessionHandler,
                          held=frozenset()) -> bool:
        """One Fetch; ``current``: key -> (partition, position) of every followed partition,
        ``changed_keys``: those whose position may have changed since the last round (None:
        any); ``held``: keys not to fetch this round."""
        # Only what changed since the leader's session last heard of it (KIP-227).
        session_id, session_epoch, send, forget = session.build(
            {k: pos for k, (_, pos) in current.items() if k not in held}
            if changed_keys is None or session.session_id == 0
            else _PositionsView(current, held), changed_keys)
        # The request names topics by id (v13+); learnt from the partitions sent, so a round
        # of an incremental session costs nothing per quiet partition.
        topic_ids, names = self._topic_ids, self._topic_names
        for key in send:
            topic_id = current[key][0].topic_id
            topic_ids[key[0]], names[topic_id] = topic_id, key[0]
        topics: dict[str, list] = {}
        for (topic, index), pos in send.items():
            topics.setdefault(topic, []).append({
                "partition": index, "current_leader_epoch": pos.current_leader_epoch,
                "fetch_offset": pos.fetch_offset, "last_fetched_epoch": pos.last_fetched_epoch,
                "log_start_offset": pos.log_start_offset, "partition_max_bytes": self.partition_max_bytes})
        forgotten: dict[str, list] = {}
        for topic, index in forget:
            forgotten.setdefault(topic, []).append(index)
        body = {"replica_state": {"replica_id": self.broker_id, "replica_epoch": self.broker_epoch()},
                "max_wait_ms": self.wait_max_ms, "min_bytes": self.min_bytes,
                "max_bytes": self.fetch_max_bytes, "isolation_level": 0,
                "session_id": session_id, "session_epoch": session_epoch,
                "topics": [{"topic_id": topic_ids[t], "partitions": ps} for t, ps in topics.items()],
                "forgotten_topics_data": [{"topic_id": topic_ids[t], "partitions": ps}
                                          for t, ps in forgotten.items() if t in topic_ids]}
        response = await self.client.request(*address, "Fetch", FETCH_VERSION, body,
                                             timeout_s=self.wait_max_ms / 1000 + ANSWER_TIMEOUT_S)
        if not session.on_response(response["error_code"], response["session_id"]):
            log.debug("fetch session with %s: %s; starting over", address,
                      ErrorCode(response["error_code"]).name)
            return response["error_code"] in (ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                                              ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        sent = current
        progressed = True
        handled = 0
        for topic in response["responses"]:
            name = names.get(topic["topic_id"])
            for resp in topic["partitions"]:
                handled += 1
                if handled % FETCH_STEP == 0:
                    await trio.sleep(0)  # an answer for 33,000 partitions: let the quorum's timers run
                item = sent.get((name, resp["partition_index"]))
                if item is None:
                    continue
                partition, pos = item
                if self.replicas.get(partition.topic, partition.index) is not partition:
                    continue  # removed while the fetch was in flight
                try:
                    ok = await self._handle(partition, pos, resp, address)
                except OSError as exc:  # the disk failed: the directory goes offline, not the node
                    self.replicas.fail_log_dir(f"appending fetched data to {partition.name}", exc)
                    return False
                progressed = progressed and ok
        return progressed

    async def _handle(self, partition, pos, resp, address) -> bool:
        error = resp["error_code"]
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            await self._out_of_range(partition, pos, address)
            return True
        if error != ErrorCode.NONE:
            log.debug("%s: fetch error %s", partition.name, ErrorCode(error).name)
            return False
        div = resp["diverging_epoch"]
        diverging = EpochEndOffset(div["epoch"], div["end_offset"]) if div["end_offset"] >= 0 else None
        data = whole_batches_prefix(resp["records"] or b"") if diverging is None else b""
        appended = partition.apply_fetched(pos, data, resp["high_watermark"], diverging, resp["log_start_offset"])
        quota = self.replicas.replication_quotas.follower
        if appended and quota.active and quota.is_throttled(partition.topic, partition.index):
            quota.record(appended, clock.monotonic_ms())  # in the ISR or not, as Kafka
        return True

    async def _out_of_range(self, partition, pos, address) -> None:
        body = {"replica_id": self.broker_id, "isolation_level": 0, "topics": [{
            "name": partition.topic, "partitions": [
                {"partition_index": partition.index, "current_leader_epoch": pos.current_leader_epoch,
                 "timestamp": ts} for ts in (-2, -1)]}]}
        response = await self.client.request(*address, "ListOffsets", 4, body, timeout_s=10)
        parts = response["topics"][0]["partitions"]
        start, end = parts[0]["offset"], parts[1]["offset"]
        if parts[0]["error_code"] or parts[1]["error_code"]:
            return
        partition.on_offset_out_of_range(start, end)
