"""`TransactionMetadata`: what the coordinator knows of one transactional id, and its state changes.

Kafka's TransactionMetadata (apache/kafka core/src/main/scala/kafka/coordinator/transaction/
TransactionMetadata.scala) prepares a transition (`prepareTransitionTo`, which sets `pendingState`), appends it,
and completes it once written (`completeTransitionTo`). herd's coordinator changes live state at once and appends
the record describing it (the runtime replays before it writes, and a write that fails fails the shard, which is
reloaded from its log: runtime/shard.py), so a transition here is one call, `transition`, guarded by the state
table (state.py); the pending state has no window to cover. Replies still wait for the write to be durable.

`last_producer_epoch` is memory only, as in Kafka: TransactionLogValue has no field for it, so a loaded id has -1
there and a KIP-360 retry that spans a coordinator move is fenced (TransactionMetadata.scala says as much).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from herd.coordinator.transactions.records import TopicPartition, TxnLogValue
from herd.coordinator.transactions.state import TxnState, check_transition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767  # Short.MaxValue


def epoch_exhausted(epoch: int) -> bool:
    """Kafka's TransactionMetadata.isEpochExhausted: no client gets an epoch of Short.MaxValue, so that the
    coordinator can always fence one more time."""
    return epoch >= MAX_EPOCH - 1


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    last_update_ms: int
    previous_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: frozenset[TopicPartition] = field(default_factory=frozenset)
    start_ms: int = -1
    """When the transaction began (its first partition was added); -1 when none is open."""

    def copy(self) -> TransactionMetadata:
        return replace(self)

    def transition(self, target: TxnState, now_ms: int, **changes: object) -> None:
        """Move to `target` (raises IllegalStateTransition, changing nothing, if Kafka forbids it), setting
        `changes` (field name -> value) and the last-update time."""
        check_transition(self.transactional_id, self.state, target)
        for name, value in changes.items():
            setattr(self, name, value)
        self.state = target
        self.last_update_ms = now_ms

    def value(self) -> TxnLogValue:
        """The TransactionLogValue describing this state."""
        return TxnLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            timeout_ms=self.timeout_ms,
            status=self.state.status,
            partitions=self.partitions,
            last_update_ms=self.last_update_ms,
            start_ms=self.start_ms,
            previous_producer_id=self.previous_producer_id,
        )

    @classmethod
    def from_value(cls, transactional_id: str, value: TxnLogValue) -> TransactionMetadata:
        """The metadata a record read back from the log describes (TransactionLog.readTxnRecordValue); raises
        ValueError for an unknown state id."""
        return cls(
            transactional_id=transactional_id,
            producer_id=value.producer_id,
            producer_epoch=value.producer_epoch,
            timeout_ms=value.timeout_ms,
            state=TxnState.from_status(value.status),
            last_update_ms=value.last_update_ms,
            previous_producer_id=value.previous_producer_id,
            partitions=value.partitions,
            start_ms=value.start_ms,
        )
