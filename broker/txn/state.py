"""The transaction coordinator's data (sans-IO): its config, one transactional id's
metadata, Kafka's transition table, and the effects the core hands its shell
(:mod:`broker.txn.coordinator` moves the metadata through the table)."""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.group.config import int_setting
from broker.txn.log_records import TxnLogValue, TxnState
from kraft.protocol.error_codes import ErrorCode

S = TxnState
MAX_EPOCH = 32767  # Short.MAX_VALUE
NO_EPOCH = -1

# state -> the states it may be entered from (Kafka's TransactionState.validPreviousStates)
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


@dataclass(frozen=True, slots=True)
class TxnConfig:
    num_partitions: int = 50  # transaction.state.log.num.partitions
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
    abort_timed_out_interval_ms: int = 10_000  # transaction.abort.timed.out.transaction.cleanup.interval.ms
    remove_expired_interval_ms: int = 3_600_000  # transaction.remove.expired.transaction.cleanup.interval.ms

    @classmethod
    def from_config(cls, config) -> "TxnConfig":
        d = cls()

        def get(name, default):
            return int_setting(config, name, default)

        return cls(
            num_partitions=get("transaction.state.log.num.partitions", d.num_partitions),
            max_timeout_ms=get("transaction.max.timeout.ms", d.max_timeout_ms),
            id_expiration_ms=get("transactional.id.expiration.ms", d.id_expiration_ms),
            abort_timed_out_interval_ms=get("transaction.abort.timed.out.transaction.cleanup.interval.ms",
                                            d.abort_timed_out_interval_ms),
            remove_expired_interval_ms=get("transaction.remove.expired.transaction.cleanup.interval.ms",
                                           d.remove_expired_interval_ms),
        )


@dataclass(slots=True)
class TxnMetadata:
    """One transactional id: its current (durable) state and the transition in flight."""

    transactional_id: str
    partition: int
    value: TxnLogValue
    # the epoch a KIP-360 bump replaced: a retry of that InitProducerId may present it
    last_producer_epoch: int = NO_EPOCH
    pending: TxnLogValue | None = None  # a write not yet committed
    pending_last_epoch: int = NO_EPOCH

    @property
    def state(self) -> TxnState:
        return self.value.state


@dataclass(frozen=True, slots=True)
class Write:
    """The new state of ``transactional_id`` to append to ``__transaction_state-<partition>``
    (``value`` None: a tombstone).  ``reply``: the request that caused it is answered with
    the outcome of :meth:`TransactionCoordinator.write_done`; otherwise it was answered already."""

    partition: int
    coordinator_epoch: int
    transactional_id: str
    value: TxnLogValue | None
    reply: bool = True


@dataclass(frozen=True, slots=True)
class MarkerJob:
    """WriteTxnMarkers for one transaction: a COMMIT or ABORT marker on each partition."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: frozenset[tuple[str, int]]


@dataclass(slots=True)
class Result:
    error: int = ErrorCode.NONE
    producer_id: int = -1
    producer_epoch: int = -1
    write: Write | None = None
    markers: list[MarkerJob] = field(default_factory=list)
