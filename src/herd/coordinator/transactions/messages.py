"""The transaction coordinator's requests and responses, independent of API versions, and its marker jobs.

API modules (server/apis/init_producer_id.py, add_partitions_to_txn.py, add_offsets_to_txn.py, end_txn.py) turn
kio requests into these and the core's responses back into kio responses of the request's version.

`WriteMarkers` is what the coordinator asks of the runtime once a PrepareCommit or PrepareAbort is durable: write
a COMMIT or ABORT marker into every partition of the transaction, then call
`TransactionCoordinatorShard.markers_written(job)`, which completes the transaction (Kafka's
TransactionMarkerChannelManager.addTxnMarkersToSend and its completion, apache/kafka
core/src/main/scala/kafka/coordinator/transaction/TransactionMarkerChannelManager.scala). It travels as the handle
of a `Reply` (with no response): replies are released when everything written before them is durable, which is
exactly when Kafka starts sending markers, and a write that fails drops them with the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

from herd.coordinator.errors import ErrorCode
from herd.coordinator.transactions.records import TopicPartition


@dataclass(frozen=True, slots=True)
class InitProducerId:
    transactional_id: str
    timeout_ms: int
    producer_id: int = -1
    """v3+ (KIP-360): the producer id and epoch of a producer that wants its epoch bumped; -1 when new."""
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class AddPartitions:
    """AddPartitionsToTxn for one transaction (and AddOffsetsToTxn: the group's `__consumer_offsets` partition)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: frozenset[TopicPartition]
    verify_only: bool = False
    """v4+ (KIP-890 part 1): only check that the partitions are in the transaction, add nothing."""


@dataclass(frozen=True, slots=True)
class EndTxn:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool


@dataclass(frozen=True, slots=True)
class ProducerIdAndEpoch:
    """The answer to InitProducerId and EndTxn: an error, or the producer id and epoch (-1 with an error)."""

    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class PartitionErrors:
    """The answer to AddPartitions: an error code per partition asked for."""

    errors: dict[TopicPartition, ErrorCode]

    @classmethod
    def all(cls, partitions: frozenset[TopicPartition], error: ErrorCode) -> PartitionErrors:
        return cls({tp: error for tp in partitions})


@dataclass(frozen=True, slots=True)
class WriteMarkers:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class TxnDescription:
    """DescribeTransactions' answer for one transactional id (TransactionCoordinator.handleDescribeTransactions);
    an error answer carries the schema's defaults (DescribeTransactionsResponse.json: zeros and "")."""

    error: ErrorCode
    transactional_id: str
    state: str = ""
    timeout_ms: int = 0
    start_ms: int = 0
    producer_id: int = 0
    producer_epoch: int = 0
    partitions: frozenset[TopicPartition] = frozenset()


@dataclass(frozen=True, slots=True)
class ListTransactions:
    """ListTransactions' filters (empty: any); `states` are Kafka's state names, all known ones."""

    states: frozenset[str] = frozenset()
    producer_ids: frozenset[int] = frozenset()
    duration_ms: int = -1
    """v1 (KIP-994): only transactions running longer than this; -1: any."""


@dataclass(frozen=True, slots=True)
class TxnListing:
    transactional_id: str
    producer_id: int
    state: str
