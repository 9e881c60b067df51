"""QuorumController: the sans-IO heart of the active controller.

Theory of operation
-------------------
The controller keeps two images.  The *committed* image is the metadata log up to the
last committed record, fed by ``replay`` (and ``load_snapshot``) as the Raft layer commits.
On the active controller the *working* image is the committed one plus every record this
controller has handed out but not yet seen committed (``pending``).  Requests are checked
and answered against the working image, so a request sees the effect of every earlier
request even before it commits, and two CreateTopics of one name cannot both succeed.

``handle`` and ``tick`` return a ControllerResult: records for the caller to append to
the log as one batch, at once and in order (the controller has already counted them
from ``next_offset``: a broker epoch is the offset of its registration record), and a
response to send once ``commit_offset`` has committed.

When the committed records are this controller's own pending ones, the working image is
already right, and the committed image becomes the image those records led to when the
controller wrote them (each pending batch keeps it): the same object, not a second copy
built by replaying them again, so once nothing is pending the two images are one.
Anything else (a leadership change, records the controller did not write, an offset that
is not the one it expected) rebuilds the working image from the committed one; losing
leadership drops every pending record and the soft state (``BrokerSessions``).

Request handlers (``HANDLERS``, a module per area) get a ``ControllerContext`` (settings,
random source, broker sessions) and a ``Txn`` over the working image, never the controller.

The interface the Raft layer drives::

    on_leader_change(leader_id, epoch, next_offset)  # next_offset: where our appends start
    replay(records, last_offset)                      # a committed batch, in log order
    load_snapshot(records, last_offset)               # a snapshot replaces everything
    resign()                                          # e.g. an append failed or was misplaced
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace
from random import Random
from typing import Sequence

from kraft.protocol.error_codes import ErrorCode
from metadata.controller import (acl_control, cluster, config_control, feature_control, partitions, quota_control,
                                 reassignment, scram_control, topics)
from metadata.controller.elections import elect_unclean_leaders, rebalance_leaders
from metadata.controller.common import (ApiError, ControllerConfig, ControllerContext, ControllerResult, Handler, Txn,
                                       error_response)
from metadata.controller.sessions import BrokerSessions

# requests that renew a broker's session (and tie it to their connection)
_SESSION_APIS = frozenset({"BrokerHeartbeat", "BrokerRegistration"})
from metadata.delta import apply_records, image_from_records
from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata import serde
from metadata.serde import MetadataRecord, make

HANDLERS: dict[str, Handler] = {
    "BrokerRegistration": cluster.register_broker,
    "BrokerHeartbeat": cluster.broker_heartbeat,
    "UnregisterBroker": cluster.unregister_broker,
    "ControllerRegistration": cluster.register_controller,
    "AllocateProducerIds": cluster.allocate_producer_ids,
    "CreateTopics": topics.create_topics,
    "DeleteTopics": topics.delete_topics,
    "CreatePartitions": topics.create_partitions,
    "AlterPartition": partitions.alter_partition,
    "ElectLeaders": partitions.elect_leaders,
    "AlterPartitionReassignments": reassignment.alter_partition_reassignments,
    "ListPartitionReassignments": reassignment.list_partition_reassignments,
    "IncrementalAlterConfigs": config_control.incremental_alter_configs,
    "AlterConfigs": config_control.alter_configs,
    "AlterUserScramCredentials": scram_control.alter_user_scram_credentials,
    "DescribeUserScramCredentials": scram_control.describe_user_scram_credentials,
    "CreateAcls": acl_control.create_acls,
    "DeleteAcls": acl_control.delete_acls,
    "DescribeAcls": acl_control.describe_acls,
    "AlterClientQuotas": quota_control.alter_client_quotas,
    "DescribeClientQuotas": quota_control.describe_client_quotas,
    "UpdateFeatures": feature_control.update_features,
}


@dataclass(frozen=True, slots=True)
class _Pending:
    base_offset: int
    last_offset: int
    records: tuple[MetadataRecord, ...]
    image: MetadataImage  # the committed image once these records commit
    values: tuple[bytes, ...]  # the records encoded


class QuorumController:
    """The controller state machine of one controller node (active or standby)."""

    def __init__(self, config: ControllerConfig, rng: Random | None = None,
                 bootstrap: Sequence[MetadataRecord] = ()):
        """``bootstrap``: records (at least metadata.version's FeatureLevelRecord, as
        ``kraftctl format`` sets it) that an active controller writes first when the log
        holds no metadata yet."""
        self.config = config
        self.rng = rng if rng is not None else Random()
        self.bootstrap = tuple(bootstrap)
        self._committed: MetadataImage = EMPTY_IMAGE
        self._working: MetadataImage = EMPTY_IMAGE
        self._pending: deque[_Pending] = deque()
        self._active = False
        self.leader_id: int | None = None
        self.epoch = -1
        self._next_offset = 0
        self.sessions = BrokerSessions(config.broker_session_timeout_ms,
                                       config.broker_session_disconnect_timeout_ms)
        self._context = ControllerContext(config, self.rng, self.sessions)  # what handlers get
        self._last_noop_ms: int | None = None
        self._last_rebalance_ms: int | None = None
        self._last_unclean_check_ms: int | None = None

    # -- state

    @property
    def is_active(self) -> bool:
        return self._active

    @property
    def image(self) -> MetadataImage:
        """The committed image."""
        return self._committed

    @property
    def working_image(self) -> MetadataImage:
        """The committed image plus this controller's pending records."""
        return self._working

    @property
    def next_offset(self) -> int:
        return self._next_offset

    @property
    def pending_offsets(self) -> list[tuple[int, int]]:
        return [(p.base_offset, p.last_offset) for p in self._pending]

    # -- driven by Raft

    def on_leader_change(self, leader_id: int | None, epoch: int, next_offset: int | None = None) -> None:
        """A new leader (or none) for ``epoch``; when it is this node, pass ``next_offset``.

        Call it for this node only once every record committed before the epoch has been
        replayed (as Kafka's Raft client does), so the working image starts complete.
        """
        self.leader_id = leader_id
        self.epoch = epoch
        if leader_id == self.config.node_id:
            if next_offset is None:
                raise ValueError("becoming active needs the offset the next append will get")
            self._drop_pending()
            self._active = True
            self._next_offset = next_offset
            self._clear_soft_state()
        else:
            self.resign()

    def resign(self) -> None:
        """Stop being active: drop pending records and soft state."""
        self._active = False
        self._drop_pending()
        self._clear_soft_state()

    def _clear_soft_state(self) -> None:
        self.sessions.clear()
        self._last_noop_ms = None
        self._last_rebalance_ms = None
        self._last_unclean_check_ms = None

    def _drop_pending(self) -> None:
        self._pending.clear()
        self._working = self._committed

    def replay(self, records: Sequence[MetadataRecord], last_offset: int) -> None:
        """Apply a committed batch whose last record is at ``last_offset``."""
        if last_offset <= self._committed.offset:
            return  # already applied (a replay after a snapshot load, say)
        if self._active and records and self._is_next_pending(records, last_offset):
            self._committed = self._pending.popleft().image  # ours, as expected
            return
        self._committed = apply_records(self._committed, records, last_offset)
        if not self._active:
            self._working = self._committed
            return
        if not records and not self._pending:
            # a control batch (no metadata records): nothing of ours to reconcile, but our
            # appends now start after it
            self._working = self._committed
            self._next_offset = max(self._next_offset, last_offset + 1)
            return
        if (self._pending and self._pending[0].base_offset <= last_offset) or last_offset >= self._next_offset:
            # something else was committed where we meant to write: we are not the leader
            # we think we are
            self.resign()
            return
        self._rebuild_working()  # records from before our time (a previous leader's)

    def replay_encoded(self, values: Sequence[bytes], last_offset: int) -> None:
        """``replay`` for a committed batch as the log holds it: the active controller's own
        batch, committed where it was expected, is not decoded again (decoding and comparing
        them cost the active controller a tenth of its time while it fenced a broker in
        20,000 ISRs, issue 19)."""
        if self._active and values and self._pending and last_offset > self._committed.offset:
            p = self._pending[0]
            if p.last_offset == last_offset and p.values == tuple(values):
                self._committed = self._pending.popleft().image
                return
        self.replay(serde.decode_all(values), last_offset)

    def _is_next_pending(self, records: Sequence[MetadataRecord], last_offset: int) -> bool:
        if not self._pending:
            return False
        p = self._pending[0]
        return p.base_offset == last_offset - len(records) + 1 and p.last_offset == last_offset \
            and list(p.records) == list(records)

    def load_snapshot(self, records: Sequence[MetadataRecord], last_offset: int) -> None:
        """Replace the committed image with a snapshot ending at ``last_offset``."""
        self._committed = image_from_records(records, last_offset)
        while self._pending and self._pending[0].last_offset <= last_offset:
            self._pending.popleft()
        self._rebuild_working()

    def _rebuild_working(self) -> None:
        image = self._committed
        for i, p in enumerate(self._pending):
            image = apply_records(image, p.records, p.last_offset)
            self._pending[i] = replace(p, image=image)
        self._working = image

    # -- requests and time

    def handle(self, api: str, version: int, body: dict, now_ms: int,
               connection_id: str = "") -> ControllerResult:
        """Process one controller request (decoded ``body`` of ``api`` at ``version``);
        ``connection_id``: the connection it came on (a broker's session may end when the
        one its heartbeats come on closes, see ``connection_closed``)."""
        handler = HANDLERS.get(api)
        if handler is None:
            raise KeyError(f"the controller does not handle {api}")
        if not self._active:
            return self._result(Txn(self._working, self._next_offset),
                                error_response(api, body, ErrorCode.NOT_CONTROLLER))
        txn = self._new_txn()
        try:
            response = handler(self._context, txn, version, body, now_ms)
        except ApiError as e:
            txn = self._new_txn()  # a top-level error writes nothing of its own
            response = error_response(api, body, e.code, e.message)
        if api in _SESSION_APIS and response.get("error_code") == 0:
            self.sessions.heard_on(body["broker_id"], connection_id)
        return self._result(txn, response)

    def start_sessions(self, now_ms: int) -> None:
        """Just active: every registered broker gets a whole session from now (as Kafka's
        new controller gives), at once rather than at the first tick, so that a
        CreateTopics handled in between does not count the brokers that have not
        heartbeated to this controller yet as unusable."""
        if self._active:
            self.sessions.start(self._working.brokers, now_ms)

    def brokers_gone(self, broker_ids, now_ms: int) -> list[int]:
        """Brokers known to have lost their process (their node refused or closed the
        quorum's connections) when this controller became active: each session ends
        ``kraft.broker.session.disconnect.timeout.ms`` from now unless the broker heartbeats
        (a new controller otherwise gives every broker a whole session).  Returns those
        registered and not fenced."""
        if not self._active:
            return []
        gone = [b for b in broker_ids
                if (reg := self._working.broker(b)) is not None and not reg.fenced]
        self.sessions.start(gone, now_ms)
        for b in gone:
            self.sessions.lost(b, now_ms)
        return gone

    def connection_closed(self, connection_id: str, now_ms: int) -> int | None:
        """A connection to this controller closed: a broker whose heartbeats came on it
        is fenced ``kraft.broker.session.disconnect.timeout.ms`` later unless heard again
        (by ``tick``).  Returns that broker's id."""
        if not self._active:
            return None
        return self.sessions.connection_closed(connection_id, now_ms)

    def skip_to(self, next_offset: int) -> None:
        """The log now ends at ``next_offset`` with records the quorum appended itself (a
        VotersRecord): the next batch goes after them.  What was proposed before them is
        unaffected (it lies below)."""
        if self._active:
            self._next_offset = max(self._next_offset, next_offset)

    def _new_txn(self) -> Txn:
        txn = Txn(self._working, self._next_offset)
        if self._active and self.bootstrap and self._working.is_empty():
            txn.add(*self.bootstrap)  # a new cluster: its first records
        return txn

    def tick(self, now_ms: int) -> ControllerResult:
        """Fence brokers whose session expired, move leaders back to preferred replicas every
        ``leader.imbalance.check.interval.seconds``, elect unclean leaders where a topic allows
        it every ``unclean.leader.election.interval.ms``, and write a NoOpRecord every
        ``metadata.max.idle.interval.ms``."""
        if not self._active:
            return self._result(Txn(self._working, self._next_offset), None)
        txn = self._new_txn()
        self.sessions.start(self._working.brokers, now_ms)  # a fresh session after failover
        # The next batch of a fence only once the quorum has committed all but one batch's
        # worth of what is pending: written faster than followers apply them, 4,000 changes
        # per tick piled up uncommitted, every heartbeat's answer waited for the pile, and
        # brokers went unheard past their session and were fenced in turn (issue 19).
        if sum(len(p.records) for p in self._pending) < cluster.FENCE_BATCH:
            cluster.continue_fencing(self._context, txn)  # before: a broker fenced now waits a tick
        cluster.expire_sessions(self._context, txn, now_ms)
        if self.config.auto_leader_rebalance_enable:
            if self._last_rebalance_ms is None:
                self._last_rebalance_ms = now_ms
            elif now_ms - self._last_rebalance_ms >= self.config.leader_imbalance_check_interval_ms:
                txn.add(*rebalance_leaders(txn.image, self.config.leader_imbalance_per_broker_percentage))
                self._last_rebalance_ms = now_ms
        if self._last_unclean_check_ms is None:
            self._last_unclean_check_ms = now_ms
        elif now_ms - self._last_unclean_check_ms >= self.config.unclean_leader_election_interval_ms:
            txn.add(*elect_unclean_leaders(txn.image, self.config.unclean_leader_election_enable))
            self._last_unclean_check_ms = now_ms
        interval = self.config.max_idle_interval_ms
        if self._last_noop_ms is None:
            self._last_noop_ms = now_ms
        elif interval > 0 and now_ms - self._last_noop_ms >= interval:
            txn.add(make("NoOpRecord"))
            self._last_noop_ms = now_ms
        return self._result(txn, None)

    def next_tick_ms(self, now_ms: int) -> int:
        """When ``tick`` next has something to do: now while a fence is part-way (or a
        newly active controller has not looked at the fenced brokers yet), else the
        earliest of a broker's session end, the next NoOpRecord, leader rebalance and
        unclean-election check.  Anything that moves one of these sooner (a request, a
        closed connection) is a reason for the caller to ask again."""
        if not self._active:
            return now_ms + self.config.max_idle_interval_ms
        last = (self._last_noop_ms, self._last_unclean_check_ms,
                self._last_rebalance_ms if self.config.auto_leader_rebalance_enable else 0)
        if self.sessions.leaving or not self.sessions.leaving_checked or None in last:
            return now_ms
        due = [self._last_unclean_check_ms + self.config.unclean_leader_election_interval_ms,
               self.sessions.next_end_ms(b.id for b in self._working.brokers.values()
                                         if not b.fenced)]
        if self.config.max_idle_interval_ms > 0:
            due.append(self._last_noop_ms + self.config.max_idle_interval_ms)
        if self.config.auto_leader_rebalance_enable:
            due.append(self._last_rebalance_ms + self.config.leader_imbalance_check_interval_ms)
        return min(due)

    def _result(self, txn: Txn, response: dict | None) -> ControllerResult:
        if not txn.records:
            wait = self._pending[-1].last_offset if self._pending else self._committed.offset
            return ControllerResult((), response, self._next_offset, wait)
        base = self._next_offset
        last = base + len(txn.records) - 1
        records = tuple(txn.records)
        values = tuple(serde.encode_all(records))
        self._working = txn.image
        self._pending.append(_Pending(base, last, records, self._working, values))
        self._next_offset = last + 1
        return ControllerResult(records, response, base, last, values)
