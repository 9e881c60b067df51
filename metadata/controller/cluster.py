"""Cluster control: broker registration, heartbeats, fencing, controlled shutdown.

Theory of operation
-------------------
A broker registers (BrokerRegistration) and gets a broker epoch: the offset of its
RegisterBrokerRecord.  It starts fenced.  It then heartbeats; each heartbeat carries the
metadata offset it has applied.  Once that offset reaches its registration record (it has
caught up with the log far enough to know itself) and it does not ask to stay fenced, the
controller unfences it (UnfenceBrokerRecord) and it may lead partitions.

Heartbeat times are soft state, kept in memory on the active controller and never
written: a broker that has not heartbeated for ``broker.session.timeout.ms`` is fenced by
``tick`` (FenceBrokerRecord), leaving every ISR and handing its leaderships on.  A new
active controller gives every broker a fresh session.

A broker whose log directory failed names it in the heartbeat's offline_log_dirs: kraft
brokers host one log directory, so it is fenced (and stays fenced) as if it asked to be.

A broker that wants to shut down enters controlled shutdown
(BrokerRegistrationChangeRecord): it leaves the ISRs and its leaderships move to other
ISR members.  A later heartbeat answers should_shut_down (and fences it) once it leads
nothing and every active broker has reported a metadata offset past those moves, so
clients find the new leaders before the old one goes.
"""

from __future__ import annotations

import logging

from kraft.protocol.error_codes import ErrorCode
from metadata.controller.common import ApiError, ControllerContext, Txn
from metadata.controller.elections import (broker_leaving, elect_leaderless, leaving_changes, leaving_partitions,
                                           partitions_led_by)
from metadata.controller.sessions import BrokerSessions
from metadata.image import BrokerRegistration, ControllerRegistration, Endpoint, FeatureRange
from metadata.serde import make

log = logging.getLogger(__name__)


def check_broker_epoch(txn: Txn, broker_id: int, epoch: int) -> BrokerRegistration:
    """The broker's registration, when ``epoch`` is its current epoch.  -1 is no wildcard
    (as in Kafka's KRaft controller): anything that can reach the controller's port could
    otherwise fence, unfence or shrink the ISR of a broker it only knows the id of."""
    b = txn.image.broker(broker_id)
    if b is None:
        raise ApiError(ErrorCode.STALE_BROKER_EPOCH, f"no broker registration for broker {broker_id}")
    if b.epoch != epoch:
        raise ApiError(ErrorCode.STALE_BROKER_EPOCH,
                       f"broker {broker_id} has epoch {b.epoch}, not {epoch}")
    return b


def register_broker(ctx: ControllerContext, txn: Txn, version: int, req: dict, now_ms: int) -> dict:
    cfg = ctx.config
    if req["cluster_id"] != cfg.cluster_id:
        raise ApiError(ErrorCode.INCONSISTENT_CLUSTER_ID,
                       f"expected cluster id {cfg.cluster_id}, got {req['cluster_id']}")
    broker_id = req["broker_id"]
    _check_metadata_version(txn, req["features"], f"broker {broker_id}")
    existing = txn.image.broker(broker_id)
    if existing is not None and existing.incarnation_id == req["incarnation_id"]:
        ctx.sessions.touch(broker_id, now_ms)  # a retry of a registration we already have
        return {"error_code": 0, "broker_epoch": existing.epoch}
    if existing is not None:
        clean_restart = req["previous_broker_epoch"] == existing.epoch
        if ctx.sessions.has_valid_session(broker_id, now_ms) and not clean_restart:
            raise ApiError(ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                           f"another broker is registered with id {broker_id}")
        # the old incarnation is gone: it leaves every ISR and its leaderships move
        txn.add(*broker_leaving(txn.image, broker_id, cfg.unclean_leader_election_enable))
    epoch = txn.next_offset
    reg = BrokerRegistration(
        id=broker_id,
        epoch=epoch,
        incarnation_id=req["incarnation_id"],
        listeners=tuple(Endpoint(e["name"], e["host"], e["port"], e["security_protocol"])
                        for e in req["listeners"]),
        features=tuple(FeatureRange(f["name"], f["min_supported_version"], f["max_supported_version"])
                       for f in req["features"]),
        rack=req["rack"],
        fenced=True,
        in_controlled_shutdown=False,
        is_migrating_zk_broker=bool(req["is_migrating_zk_broker"]),
    )
    txn.add(reg.to_record())
    ctx.sessions.touch(broker_id, now_ms)
    return {"error_code": 0, "broker_epoch": epoch}


def _check_metadata_version(txn: Txn, features: list[dict], who: str) -> None:
    """A node that declares metadata.version support must support the cluster's level."""
    level = txn.image.features.get("metadata.version")
    for f in features:
        if f["name"] == "metadata.version" and level is not None \
                and not f["min_supported_version"] <= level <= f["max_supported_version"]:
            raise ApiError(ErrorCode.UNSUPPORTED_VERSION,
                           f"{who} supports metadata.version {f['min_supported_version']}-"
                           f"{f['max_supported_version']}, the cluster is at {level}")


def register_controller(ctx: ControllerContext, txn: Txn, version: int, req: dict, now_ms: int) -> dict:
    _check_metadata_version(txn, req["features"], f"controller {req['controller_id']}")
    reg = ControllerRegistration(
        id=req["controller_id"],
        incarnation_id=req["incarnation_id"],
        zk_migration_ready=bool(req["zk_migration_ready"]),
        listeners=tuple(Endpoint(e["name"], e["host"], e["port"], e["security_protocol"])
                        for e in req["listeners"]),
        features=tuple(FeatureRange(f["name"], f["min_supported_version"], f["max_supported_version"])
                       for f in req["features"]),
    )
    if txn.image.controllers.get(reg.id) != reg:
        txn.add(reg.to_record())
    return {"error_code": 0, "error_message": None}


def broker_heartbeat(ctx: ControllerContext, txn: Txn, version: int, req: dict, now_ms: int) -> dict:
    broker_id = req["broker_id"]
    b = check_broker_epoch(txn, broker_id, req["broker_epoch"])
    ctx.sessions.touch(broker_id, now_ms, req["current_metadata_offset"])
    unclean = ctx.config.unclean_leader_election_enable
    caught_up = req["current_metadata_offset"] >= b.epoch
    # kraft brokers host one log directory: when it is offline, so is every replica of the
    # broker, which then leaves every ISR and leadership as if fenced.
    want_fence = req["want_fence"] or bool(req.get("offline_log_dirs"))
    should_shut_down = False
    if b.fenced:
        if req["want_shut_down"]:
            should_shut_down = True  # a fenced broker leads nothing: it may go at once
        elif caught_up and not want_fence and not b.in_controlled_shutdown:
            txn.add(make("UnfenceBrokerRecord", id=broker_id, epoch=b.epoch))
            txn.add(*elect_leaderless(txn.image, broker_id, unclean))
    elif want_fence:
        fence(txn, b, unclean, ctx.sessions)
    elif req["want_shut_down"] or b.in_controlled_shutdown:
        before = len(txn.records)
        if not b.in_controlled_shutdown:
            txn.add(make("BrokerRegistrationChangeRecord", broker_id=broker_id, broker_epoch=b.epoch,
                         in_controlled_shutdown=1))
        txn.add(*broker_leaving(txn.image, broker_id, unclean))
        sessions = ctx.sessions
        if len(txn.records) > before:
            sessions.controlled_shutdown_offset[broker_id] = txn.next_offset - 1
        # It may go once it leads nothing and every active broker has seen the moves.
        others = [b.id for b in txn.image.active_brokers() if b.id != broker_id]
        if partitions_led_by(txn.image, broker_id) == 0 \
                and sessions.lowest_metadata_offset(others) >= sessions.controlled_shutdown_offset.get(broker_id, -1):
            should_shut_down = True
            fence(txn, txn.image.broker(broker_id), unclean)
    now = txn.image.broker(broker_id)
    return {
        "error_code": 0,
        "is_caught_up": caught_up,
        "is_fenced": now.fenced,
        "should_shut_down": should_shut_down,
    }


# Partition changes one controller event writes for a broker being fenced; the rest follow,
# as many per tick (``continue_fencing``).  A broker in 66,000 ISRs (100,000 partitions x
# RF 3 on 3 brokers) made one event of 66,000 records: building, committing and replaying
# them held every node's loop for seconds, past the quorum's fetch timeout, and the
# leadership went back and forth (issue 19).  Kafka writes them in one event too, but its
# controller is not on the same thread as the quorum's timers.
FENCE_BATCH = 4000


def fence(txn: Txn, b: BrokerRegistration, unclean: bool, sessions: BrokerSessions | None = None) -> None:
    """Leadership and ISR changes for ``b`` going away (those it leads first), then its
    FenceBrokerRecord.  With ``sessions``, at most ``FENCE_BATCH`` changes now and the rest
    by ``continue_fencing``."""
    if sessions is None:
        txn.add(*broker_leaving(txn.image, b.id, unclean))
    else:
        sessions.leaving[b.id] = None  # listed afresh: not what an earlier fence left
        _fence_batch(txn, sessions, b.id, unclean)
    txn.add(make("FenceBrokerRecord", id=b.id, epoch=b.epoch))


def continue_fencing(ctx: ControllerContext, txn: Txn) -> None:
    """The next ``FENCE_BATCH`` changes for each fenced broker still in an ISR; a newly
    active controller looks at every fenced broker once (its predecessor may have been
    part-way through)."""
    sessions = ctx.sessions
    if not sessions.leaving_checked:
        sessions.leaving_checked = True
        for b in txn.image.brokers.values():
            if b.fenced:
                sessions.leaving.setdefault(b.id, None)
    for broker_id in sorted(sessions.leaving):
        b = txn.image.broker(broker_id)
        if b is None or not b.fenced:  # unregistered, or back
            del sessions.leaving[broker_id]
            continue
        if _fence_batch(txn, sessions, broker_id, ctx.config.unclean_leader_election_enable):
            log.info("fencing broker %d: its last leadership and ISR changes are written", broker_id)


def _fence_batch(txn: Txn, sessions: BrokerSessions, broker_id: int, unclean: bool) -> bool:
    """The next ``FENCE_BATCH`` changes of ``broker_id``'s fence; True when they were its last.

    Its partitions are listed once, at the first batch: a pass over 100,000 for each batch
    cost the controller more than the batch itself.  A fenced broker joins no ISR and is
    elected nowhere, so the list stays complete while the batches go out."""
    keys = sessions.leaving.get(broker_id)
    if keys is None:
        listed = leaving_partitions(txn.image, broker_id)
        log.info("fencing broker %d: %d partitions to change (those it leads first, %d per batch)",
                 broker_id, len(listed), FENCE_BATCH)
        keys = sessions.leaving[broker_id] = iter(listed)
    changes = leaving_changes(txn.image, broker_id, unclean, keys, limit=FENCE_BATCH)
    txn.add(*changes)
    if len(changes) < FENCE_BATCH:
        del sessions.leaving[broker_id]
        return True
    return False


def unregister_broker(ctx: ControllerContext, txn: Txn, version: int, req: dict, now_ms: int) -> dict:
    broker_id = req["broker_id"]
    b = txn.image.broker(broker_id)
    if b is None:
        raise ApiError(ErrorCode.BROKER_ID_NOT_REGISTERED, f"broker {broker_id} is not registered")
    txn.add(*broker_leaving(txn.image, broker_id, ctx.config.unclean_leader_election_enable))
    txn.add(make("UnregisterBrokerRecord", broker_id=broker_id, broker_epoch=b.epoch))
    ctx.sessions.forget(broker_id)
    return {"error_code": 0, "error_message": None}


def allocate_producer_ids(ctx: ControllerContext, txn: Txn, version: int, req: dict, now_ms: int) -> dict:
    b = check_broker_epoch(txn, req["broker_id"], req["broker_epoch"])
    start = txn.image.next_producer_id
    size = ctx.config.producer_id_block_size
    if start > (1 << 63) - 1 - size:
        raise ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, "producer ids are exhausted")
    txn.add(make("ProducerIdsRecord", broker_id=b.id, broker_epoch=b.epoch, next_producer_id=start + size))
    return {"error_code": 0, "producer_id_start": start, "producer_id_len": size}


def expire_sessions(ctx: ControllerContext, txn: Txn, now_ms: int) -> None:
    """Fence every unfenced broker whose session has run out."""
    for broker_id in sorted(txn.image.brokers):
        b = txn.image.broker(broker_id)
        if b.fenced:
            continue
        if not ctx.sessions.has_valid_session(broker_id, now_ms):
            fence(txn, b, ctx.config.unclean_leader_election_enable, ctx.sessions)
