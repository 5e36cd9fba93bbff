"""KIP-890 part 1: a producer's first transactional write to a partition is verified with its transaction
coordinator before it is appended.

A transactional batch that begins a producer's transaction in a partition (the log knows of no transaction of
that producer there) is appended only once the transaction coordinator confirms that the partition is in the
producer's transaction (AddPartitionsToTxn with `verify_only`). Without it, a write that arrives late (after the
transaction was aborted, or from a producer that never added the partition) opens a transaction no coordinator
will ever end, and the partition's last stable offset stays behind it for good: a hanging transaction. As Kafka's
ReplicaManager.appendRecordsWithTransactionVerification and AddPartitionsToTxnManager (apache/kafka
core/src/main/scala/kafka/server/ReplicaManager.scala, AddPartitionsToTxnManager.scala), with
`transaction.partition.verification.enable` at its default, true:

- the coordinator is asked on this node (its shard) or, in cluster mode, on the node that coordinates the
  transactional id (herd.server.peers, AddPartitionsToTxn v4);
- the answers a producer sees: a partition not in the transaction INVALID_TXN_STATE ("Partition was not added to
  the transaction"; the coordinator's TRANSACTION_ABORTABLE too, for clients before it); a fenced producer
  INVALID_PRODUCER_EPOCH; a coordinator that cannot answer now (CONCURRENT_TRANSACTIONS, NETWORK_EXCEPTION,
  COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR) NOT_ENOUGH_REPLICAS, which every
  producer retries without a metadata refresh; any other code as it is;
- a marker for the producer written between the verification and the append would make the verification stale
  (Kafka's VerificationGuard): the log's transaction state drops the producer's guard with every marker, and the
  append is refused INVALID_TXN_STATE when its guard is gone. The check and the append run without an await
  between them, on the loop that appends markers to data partitions.
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.add_partitions_to_txn.v4.request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from kio.schema.errors import ErrorCode

from herd.coordinator.transactions import TransactionCoordinatorShard
from herd.coordinator.transactions.messages import AddPartitions, PartitionErrors
from herd.protocol.values import make
from herd.server.apis import _txn
from herd.server.apis._groups import coordinator_node, resolved
from herd.server.broker import RequestContext
from herd.server.peers import PeerError

log = logging.getLogger(__name__)

ADD_PARTITIONS_TO_TXN = 24
VERIFY_VERSION = 4  # the first AddPartitionsToTxn version with `verify_only` (the broker-to-broker form)
NOT_IN_TRANSACTION = "Partition was not added to the transaction"
_RETRY = frozenset(
    {
        ErrorCode.concurrent_transactions,
        ErrorCode.network_exception,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
    }
)

TopicPartition = tuple[str, int]


async def verify(
    ctx: RequestContext,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: frozenset[TopicPartition],
) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
    """The partitions whose verification failed, with the error and message Produce answers for them."""
    codes = await _ask(ctx, transactional_id, producer_id, producer_epoch, partitions)
    return {tp: produce_error(ErrorCode(code)) for tp, code in codes.items() if code != ErrorCode.none}


def produce_error(error: ErrorCode) -> tuple[ErrorCode, str | None]:
    """The error and message Produce answers for a partition whose verification answered `error` (not NONE)."""
    if error in (ErrorCode.transaction_abortable, ErrorCode.invalid_txn_state):
        return ErrorCode.invalid_txn_state, NOT_IN_TRANSACTION
    if error is ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch, None
    if error in _RETRY:
        return ErrorCode.not_enough_replicas, (
            f"Unable to verify the partition has been added to the transaction. Underlying error: {error.name.upper()}"
        )
    return error, None


async def _ask(
    ctx: RequestContext,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: frozenset[TopicPartition],
) -> dict[TopicPartition, int]:
    request = AddPartitions(transactional_id, producer_id, producer_epoch, partitions, verify_only=True)
    answer = await resolved(
        _txn.call(
            ctx,
            transactional_id,
            TransactionCoordinatorShard.add_partitions,
            request,
            lambda code: PartitionErrors.all(partitions, ErrorCode(code)),
        )
    )
    codes = dict(answer.errors)
    if all(c == ErrorCode.not_coordinator for c in codes.values()):
        node = coordinator_node(ctx.broker, ctx.broker.transactions, transactional_id)
        if node is not None:
            codes = await _ask_node(ctx, node, transactional_id, producer_id, producer_epoch, partitions)
    return codes


async def _ask_node(
    ctx: RequestContext,
    node: Any,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: frozenset[TopicPartition],
) -> dict[TopicPartition, int]:
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(partitions):
        by_topic.setdefault(topic, []).append(index)
    request = make(
        AddPartitionsToTxnRequest,
        {
            "transactions": (
                make(
                    AddPartitionsToTxnTransaction,
                    {
                        "transactional_id": transactional_id,
                        "producer_id": producer_id,
                        "producer_epoch": producer_epoch,
                        "verify_only": True,
                        "topics": tuple(
                            make(AddPartitionsToTxnTopic, {"name": topic, "partitions": tuple(indexes)})
                            for topic, indexes in by_topic.items()
                        ),
                    },
                ),
            )
        },
    )
    try:
        answer = await ctx.broker.peers.request(node.host, node.port, ADD_PARTITIONS_TO_TXN, VERIFY_VERSION, request)
    except PeerError as error:
        log.warning("transaction %r: its coordinator could not verify a write: %s", transactional_id, error)
        return {tp: ErrorCode.network_exception for tp in partitions}
    if answer.error_code:
        return {tp: answer.error_code for tp in partitions}
    codes = {tp: ErrorCode.network_exception for tp in partitions}
    for result in answer.results_by_transaction:
        for topic in result.topic_results:
            for partition in topic.results_by_partition:
                codes[(topic.name, int(partition.partition_index))] = partition.partition_error_code
    return codes
