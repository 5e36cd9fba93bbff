"""The states of a transactional id and the one table of the transitions between them.

Kafka's TransactionState (apache/kafka core/src/main/scala/kafka/coordinator/transaction/TransactionMetadata.scala):
each state has the id written in TransactionLogValue.TransactionStatus, the name DescribeTransactions and
ListTransactions show, and the set of states it may be entered from. `check_transition` is the only guard; an
illegal transition raises `IllegalStateTransition` (a bug, Kafka's IllegalStateException) before anything changes.

    Empty             <- Empty, CompleteCommit, CompleteAbort       (InitProducerId)
    Ongoing           <- Ongoing, Empty, CompleteCommit, CompleteAbort (AddPartitionsToTxn, AddOffsetsToTxn)
    PrepareCommit     <- Ongoing                                    (EndTxn commit)
    PrepareAbort      <- Ongoing, PrepareEpochFence                 (EndTxn abort, fencing, timeout)
    CompleteCommit    <- PrepareCommit                              (every marker written)
    CompleteAbort     <- PrepareAbort                               (every marker written)
    Dead              <- Empty, CompleteCommit, CompleteAbort       (transactional.id.expiration.ms)
    PrepareEpochFence <- Ongoing                                    (never written: a fence goes on to PrepareAbort)
"""

from __future__ import annotations

from enum import Enum

from herd.coordinator.errors import IllegalStateTransition


class TxnState(Enum):
    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    def __init__(self, status: int, kafka_name: str) -> None:
        self.status = status
        self.kafka_name = kafka_name

    @classmethod
    def from_status(cls, status: int) -> TxnState:
        """The state of a TransactionStatus byte; raises ValueError for an unknown one."""
        state = _BY_STATUS.get(status)
        if state is None:
            raise ValueError(f"unknown transaction state id {status}")
        return state

    @property
    def expiration_allowed(self) -> bool:
        """Kafka's isExpirationAllowed: a transactional id idle in these states may expire."""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


_BY_STATUS = {state.status: state for state in TxnState}

_S = TxnState
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


def check_transition(transactional_id: str, current: TxnState, target: TxnState) -> None:
    """Raises IllegalStateTransition unless Kafka allows `current` -> `target`."""
    if current not in VALID_PREVIOUS[target]:
        raise IllegalStateTransition(
            f"transactional id {transactional_id!r}: {current.kafka_name} -> {target.kafka_name} is not allowed"
        )
