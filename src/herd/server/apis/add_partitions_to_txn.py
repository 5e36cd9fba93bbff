"""AddPartitionsToTxn (key 24), v0-v5.

v1: no change. v2: PRODUCER_FENCED (below v2 it is INVALID_PRODUCER_EPOCH, KIP-588). v3: flexible. v4: a batch of
transactions, each with `verify_only` (KIP-890 part 1: a broker asks whether partitions are in a transaction before
it appends a transactional batch), and a top-level error code; Kafka meant v4+ for brokers (CLUSTER_ACTION), which
herd checks it with an authorizer (CLUSTER_AUTHORIZATION_FAILED at the top). v5: no body change (KIP-890 errors).

As KafkaApis.handleAddPartitionsToTxnRequest: a transaction naming a partition that does not exist gets
UNKNOWN_TOPIC_OR_PARTITION for it and OPERATION_NOT_ATTEMPTED for its other partitions, and nothing is added;
otherwise the transaction coordinator (herd.coordinator.transactions) adds them (every partition gets the one
answer, once the Ongoing record is durable) or, with `verify_only`, answers NONE for each partition in the
transaction and TRANSACTION_ABORTABLE for the others. Each transaction of a batch goes to its own coordinator;
one this node does not coordinate gets NOT_COORDINATOR on its partitions.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.coordinator.transactions import AddPartitions, PartitionErrors, TransactionCoordinatorShard
from herd.coordinator.transactions.records import TopicPartition
from herd.server.apis import _txn
from herd.server.apis._authorize import CLUSTER_ACTION, TOPIC, TRANSACTIONAL_ID, WRITE, authorized, authorized_cluster
from herd.server.apis._build import Builder, ctx_builder
from herd.server.apis._groups import gather
from herd.server.broker import RequestContext

API_KEY = 24
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    version = ctx.api_version
    if version < 4:
        transactions = [
            (
                request.v3_and_below_transactional_id,
                request.v3_and_below_producer_id,
                request.v3_and_below_producer_epoch,
                False,
                request.v3_and_below_topics,
            )
        ]
    else:
        if not authorized_cluster(ctx, CLUSTER_ACTION):  # v4+ is the brokers' (KafkaApis: CLUSTER_ACTION)
            return b.response(
                throttle_time=0, error_code=ErrorCode.cluster_authorization_failed, results_by_transaction=()
            )
        transactions = [
            (t.transactional_id, t.producer_id, t.producer_epoch, t.verify_only, t.topics) for t in request.transactions
        ]
    outcomes = [_one(ctx, *transaction) for transaction in transactions]

    def respond(answers: list[PartitionErrors]) -> Any:
        if version < 4:
            return b.response(
                throttle_time=0, results_by_topic_v3_and_below=_topics(b, transactions[0][4], answers[0], version)
            )
        return b.response(
            throttle_time=0,
            error_code=ErrorCode.none,
            results_by_transaction=tuple(
                b("AddPartitionsToTxnResult", transactional_id=t[0], topic_results=_topics(b, t[4], a, version))
                for t, a in zip(transactions, answers)
            ),
        )

    return gather(outcomes, respond)


def _partitions(topics: Any) -> list[TopicPartition]:
    return [(t.name, int(p)) for t in topics for p in t.partitions]


def _one(ctx: RequestContext, tid: str, producer_id: int, epoch: int, verify_only: bool, topics: Any) -> Any:
    """The answer (or a future of it) for one transaction of the request."""
    partitions = frozenset(_partitions(topics))
    if not tid:
        return PartitionErrors.all(partitions, ErrorCode.invalid_request)
    denied: set[TopicPartition] = set()
    if ctx.api_version < 4 and ctx.broker.authorizer is not None:  # a client's: WRITE on the id and the topics
        if not authorized(ctx, WRITE, TRANSACTIONAL_ID, tid):
            return PartitionErrors.all(partitions, ErrorCode.transactional_id_authorization_failed)
        refused = {t for t in {tp[0] for tp in partitions} if not authorized(ctx, WRITE, TOPIC, t)}
        denied = {tp for tp in partitions if tp[0] in refused}
    missing = {tp for tp in partitions - denied if not _exists(ctx, tp)}
    if missing or denied:
        return PartitionErrors(
            {
                tp: ErrorCode.topic_authorization_failed
                if tp in denied
                else ErrorCode.unknown_topic_or_partition
                if tp in missing
                else ErrorCode.operation_not_attempted
                for tp in partitions
            }
        )
    core = AddPartitions(tid, producer_id, epoch, partitions, verify_only)
    return _txn.call(
        ctx,
        tid,
        TransactionCoordinatorShard.add_partitions,
        core,
        lambda code: PartitionErrors.all(partitions, ErrorCode(code)),
    )


def _exists(ctx: RequestContext, tp: TopicPartition) -> bool:
    topic = ctx.broker.cluster.get(tp[0])
    return topic is not None and 0 <= tp[1] < len(topic.partitions)


def _topics(b: Builder, topics: Any, answer: PartitionErrors, version: int) -> tuple[Any, ...]:
    return tuple(
        b(
            "AddPartitionsToTxnTopicResult",
            name=t.name,
            results_by_partition=tuple(
                b(
                    "AddPartitionsToTxnPartitionResult",
                    partition_index=p,
                    partition_error_code=_txn.fenced_for(version, 2, answer.errors[(t.name, int(p))]),
                )
                for p in t.partitions
            ),
        )
        for t in topics
    )
