"""herd's pure transaction coordinator (KIP-98). Start at `shard.TransactionCoordinatorShard`."""

from herd.coordinator.transactions.config import TxnConfig
from herd.coordinator.transactions.messages import (
    AddPartitions,
    EndTxn,
    InitProducerId,
    ListTransactions,
    PartitionErrors,
    ProducerIdAndEpoch,
    TxnDescription,
    TxnListing,
    WriteMarkers,
)
from herd.coordinator.transactions.metadata import TransactionMetadata
from herd.coordinator.transactions.shard import TransactionCoordinatorShard
from herd.coordinator.transactions.state import TxnState

__all__ = [
    "AddPartitions",
    "EndTxn",
    "InitProducerId",
    "ListTransactions",
    "PartitionErrors",
    "ProducerIdAndEpoch",
    "TransactionCoordinatorShard",
    "TransactionMetadata",
    "TxnConfig",
    "TxnDescription",
    "TxnListing",
    "TxnState",
    "WriteMarkers",
]
