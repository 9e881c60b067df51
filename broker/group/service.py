"""The trio shell around the group coordinator core: persistence through ``__consumer_offsets``,
parked responses, partition loading, the expiration ticker.

The store the broker provides (over its replica manager)::

    store.is_leader(partition) -> bool
    await store.append(partition, batch_bytes) -> None   # returns once committed (acks=all);
                                                         # raises on failure (an exception
                                                         # with ``error_code`` is mapped)
    store.read_all(partition) -> iterable of batch bytes  # (may also be awaitable)

Every output of the core is processed the same way: its writes are appended (each partition
through a FIFO lock, so the log holds them in the order the core made them), committed
offsets are applied, and only then are the immediate response and the completions of parked
requests released.  If a write fails, the responses of that output carry the error instead.
"""

from __future__ import annotations

import inspect
import logging
import math
import time
from collections.abc import Callable, Mapping
from random import Random

import trio

from broker.group.config import GroupConfig, setting
from broker.group.coordinator import GroupCoordinator
from broker.group.output import Output, Write
from broker.group.records import TxnMarker, TxnRecord, partition_for, replay
from kraft.protocol.error_codes import ErrorCode
from kraft.records import build_batch, decode_batches
from kraft.records.control import ControlType, decode_control_key

log = logging.getLogger(__name__)

# How often a coordinator with no member sessions and no join phase ticks (offsets
# retention; a request wakes it at once).
IDLE_TICK_S = 1.0
IDLE_TICK_MAX_S = 10.0  # how long an idle coordinator sleeps at most (wall-clock jumps)

GROUP_APIS = ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit", "OffsetFetch",
              "ListGroups", "DescribeGroups", "DeleteGroups", "OffsetDelete", "TxnOffsetCommit",
              "ConsumerGroupHeartbeat", "ConsumerGroupDescribe")
# The versions this service answers (within the schema table).
GROUP_API_VERSIONS: dict[str, tuple[int, int]] = {
    "JoinGroup": (0, 9), "SyncGroup": (0, 5), "Heartbeat": (0, 4), "LeaveGroup": (0, 5),
    "OffsetCommit": (0, 9), "OffsetFetch": (0, 9), "ListGroups": (0, 5), "DescribeGroups": (0, 5),
    "DeleteGroups": (0, 2), "OffsetDelete": (0, 0), "TxnOffsetCommit": (0, 4),
    "ConsumerGroupHeartbeat": (0, 1), "ConsumerGroupDescribe": (0, 0),
}
# The APIs of KIP-848's consumer group protocol, advertised only while
# group.coordinator.rebalance.protocols names "consumer"
CONSUMER_PROTOCOL_APIS = ("ConsumerGroupHeartbeat", "ConsumerGroupDescribe")


def group_api_versions(config) -> dict[str, tuple[int, int]]:
    """The group APIs a broker with ``config`` answers."""
    protocols = setting(config, "group.coordinator.rebalance.protocols", ["classic", "consumer"])
    if isinstance(protocols, str):
        protocols = protocols.split(",")
    if "consumer" in {p.strip().lower() for p in protocols}:
        return dict(GROUP_API_VERSIONS)
    return {api: v for api, v in GROUP_API_VERSIONS.items() if api not in CONSUMER_PROTOCOL_APIS}


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


def _append_error(exc: BaseException, api: str | None) -> int:
    code = getattr(exc, "error_code", None)
    if code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE if api == "OffsetCommit" else ErrorCode.UNKNOWN_SERVER_ERROR
    return ErrorCode.COORDINATOR_NOT_AVAILABLE


def with_error(api: str, response: dict, code: int) -> dict:
    """``response`` with every error code it carries replaced by ``code``."""
    out = dict(response)
    if api in ("OffsetCommit", "TxnOffsetCommit"):
        out["topics"] = [{**t, "partitions": [{**p, "error_code": int(code)} for p in t["partitions"]]}
                         for t in response["topics"]]
    elif api == "OffsetDelete":
        out["error_code"] = int(code)
        out["topics"] = []
    elif api == "DeleteGroups":
        out["results"] = [{**r, "error_code": int(code) if r["error_code"] == 0 else r["error_code"]}
                          for r in response["results"]]
    elif api == "LeaveGroup":
        out["error_code"] = int(code)
        out["members"] = []
    else:
        out["error_code"] = int(code)
    return out


class _Waiter:
    __slots__ = ("event", "response")

    def __init__(self):
        self.event = trio.Event()
        self.response: dict | None = None


class GroupCoordinatorService:
    """Serve the group APIs for the ``__consumer_offsets`` partitions this broker leads.

    Args:
        broker_id: this broker's id (for logs).
        config: a ServerConfig or a mapping of Kafka config names (``offsets.topic.num.partitions``,
            ``group.initial.rebalance.delay.ms``, ``group.min/max.session.timeout.ms``,
            ``offsets.retention.minutes``, ...).
        store: see the module docstring.
        clock: milliseconds now (wall clock by default).
        tick_interval_s: how often ``run`` expires sessions and rebalance timeouts.
        topics: ``() -> {name: topic}`` of the metadata image (KIP-848 groups' subscriptions).
        group_configs: ``(group id) -> {key: value}``, a group's own configs in the metadata image.
    """

    def __init__(self, broker_id: int, config, store, *, clock: Callable[[], int] | None = None,
                 rng: Random | None = None, tick_interval_s: float = 0.05, topics: Callable[[], Mapping] | None = None,
                 group_configs: Callable[[str], Mapping[str, str]] | None = None):
        self.broker_id = broker_id
        self.config = config if isinstance(config, GroupConfig) else GroupConfig.from_config(config)
        self.store = store
        self.clock = clock or _wall_clock_ms
        self.tick_interval_s = tick_interval_s
        self._activity = trio.Event()  # set by every request
        if self.config.unsafe_assign_before_revocation:
            log.warning("UNSAFE MODE: kraft.unsafe.consumer.group.assign.before.revocation=true — a partition "
                        "moves to its new owner before the old one revoked it (KIP-848 groups)")
        self.core = GroupCoordinator(self.config, rng=rng or Random(), is_leader=store.is_leader, topics=topics,
                                     group_configs=group_configs)
        self._waiters: dict[int, _Waiter] = {}
        self._ticket_api: dict[int, str] = {}
        self._locks: dict[int, trio.Lock] = {}
        self._load_send, self._load_recv = trio.open_memory_channel(math.inf)

    # ------------------------------------------------------------------ public API

    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition whose leader coordinates ``group_id``."""
        return partition_for(group_id, self.config.num_partitions)

    def on_become_leader(self, partition: int) -> None:
        """This broker now leads ``partition``: load its groups (``run`` does the reading);
        until then its groups answer COORDINATOR_LOAD_IN_PROGRESS.  Idempotent: a partition
        already owned or loading is left as it is (only this broker wrote to it meanwhile)."""
        if partition in self.core.table.owned or partition in self.core.table.loading:
            return
        token = self.core.begin_loading(partition)
        self._load_send.send_nowait((partition, token))

    def on_txn_marker(self, partition: int, producer_id: int, producer_epoch: int, committed: bool) -> None:
        """A transaction marker of ``producer_id`` is committed on ``partition`` (the
        replica manager's hook): its TxnOffsetCommit offsets are applied or dropped."""
        self.core.complete_txn(partition, producer_id, committed)

    def on_resign(self, partition: int) -> None:
        """This broker no longer leads ``partition``: drop its groups; NOT_COORDINATOR after."""
        self._deliver(self.core.unload(partition).completions, None)

    async def load_partition(self, partition: int, token: int) -> None:
        records = []
        result = self.store.read_all(partition)
        if inspect.isawaitable(result):
            result = await result
        for data in result:
            for batch in decode_batches(data):
                if batch.is_control:
                    if batch.is_transactional:
                        for r in batch.records:
                            kind = decode_control_key(r.key).type
                            if kind in (ControlType.COMMIT, ControlType.ABORT):
                                records.append(TxnMarker(batch.producer_id, kind == ControlType.COMMIT))
                    continue
                if batch.is_transactional:
                    records.extend(TxnRecord(batch.producer_id, r.key, r.value) for r in batch.records)
                else:
                    records.extend((r.key, r.value) for r in batch.records)
            await trio.lowlevel.checkpoint()
        loaded = replay(records)
        if self.core.load(partition, token, loaded, self.clock()):
            log.info("broker %s: loaded %d groups from __consumer_offsets-%d",
                     self.broker_id, len(loaded.group_ids()), partition)

    async def handle(self, api: str, version: int, body: dict, *, client_id: str | None = "",
                     client_host: str = "") -> dict:
        """Answer one group API request (decoded body); returns the response body."""
        out = self.core.handle(api, version, body, self.clock(),
                               client_id=client_id or "", client_host=client_host)
        self._activity.set()  # a member or a join phase may have a deadline now
        waiter = None
        if out.ticket is not None:
            waiter = self._waiters[out.ticket] = _Waiter()
            self._ticket_api[out.ticket] = api
        try:
            response = await self._process(out, api)
            if waiter is None:
                return response
            await waiter.event.wait()
            return waiter.response
        finally:
            if waiter is not None:
                self._waiters.pop(out.ticket, None)
                self._ticket_api.pop(out.ticket, None)

    async def tick(self) -> None:
        """One round of expirations (``run`` calls this periodically)."""
        await self._process(self.core.tick(self.clock()), None)

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Load partitions as leadership arrives and tick expirations; runs until cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._loader, nursery)
            task_status.started()
            while True:
                if self.core.has_deadlines():
                    await trio.sleep(self.tick_interval_s)
                else:  # nothing to expire but offsets: an idle node does not wake 20 times a second
                    now = self.clock()
                    until_offsets_s = (self.core.next_offsets_check_ms(now) - now) / 1000
                    with trio.move_on_after(max(IDLE_TICK_S, min(until_offsets_s, IDLE_TICK_MAX_S))):
                        await self._activity.wait()
                    self._activity = trio.Event()
                nursery.start_soon(self.tick)

    # ------------------------------------------------------------------ internals

    async def _loader(self, nursery: trio.Nursery) -> None:
        async for partition, token in self._load_recv:
            nursery.start_soon(self._load_logged, partition, token)

    async def _load_logged(self, partition: int, token: int) -> None:
        try:
            await self.load_partition(partition, token)
            self._activity.set()  # its groups' members have sessions to expire now
        except Exception:
            log.exception("broker %s: loading __consumer_offsets-%d failed; retrying", self.broker_id, partition)
            await trio.sleep(1)
            if self.core.table.loading.get(partition) == token:
                self._load_send.send_nowait((partition, token))

    async def _process(self, out: Output, api: str | None) -> dict | None:
        """Persist ``out``'s writes, then release its response and completions."""
        error = 0
        for write in out.writes:
            if error:
                break
            error = await self._append(write, api)
            if error:
                failed = self.core.write_failed(write, self.clock())
                self._deliver(failed.completions, None)
        self._deliver(out.completions, error)
        if out.response is None:
            return None
        return with_error(api, out.response, error) if error else out.response

    async def _append(self, write: Write, api: str | None) -> int:
        lock = self._locks.setdefault(write.partition, trio.Lock())
        async with lock:
            if write.producer is None:
                batch = build_batch(list(write.records), timestamp=self.clock())
            else:  # TxnOffsetCommit: part of the producer's transaction, ended by its marker
                batch = build_batch(list(write.records), timestamp=self.clock(), producer_id=write.producer[0],
                                    producer_epoch=write.producer[1], transactional=True)
            try:
                await self.store.append(write.partition, batch)
            except Exception as exc:  # noqa: BLE001 - any failed append becomes an error code
                log.info("broker %s: append to __consumer_offsets-%d failed: %r",
                         self.broker_id, write.partition, exc)
                return _append_error(exc, api)
            self.core.apply_write(write)
        return 0

    def _deliver(self, completions: list[tuple[int, dict]], error: int) -> None:
        for ticket, response in completions:
            waiter = self._waiters.get(ticket)
            if waiter is None:
                continue  # the client went away
            if error:
                response = with_error(self._ticket_api.get(ticket, "JoinGroup"), response, error)
            waiter.response = response
            waiter.event.set()
