"""DescribeTransactions (key 65), v0 (KIP-664).

Each transactional id is answered by its transaction coordinator (herd.coordinator.transactions, Kafka's
TransactionCoordinator.handleDescribeTransactions): its state's name, timeout, start time (-1 when no transaction
is open), producer id and epoch, and the partitions of its open transaction; TRANSACTIONAL_ID_NOT_FOUND for an id
it does not know, NOT_COORDINATOR for one coordinated elsewhere, COORDINATOR_LOAD_IN_PROGRESS while loading,
INVALID_REQUEST for an empty id.

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
DESCRIBE on each transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
the partitions of topics the principal may not DESCRIBE are left out.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.coordinator.transactions import TransactionCoordinatorShard, TxnDescription
from herd.server.apis import _txn
from herd.server.apis._authorize import DESCRIBE, TOPIC, TRANSACTIONAL_ID, authorized
from herd.server.apis._build import ctx_builder
from herd.server.apis._groups import gather
from herd.server.broker import RequestContext

API_KEY = 65
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)

    def one(tid: str) -> Any:
        if not authorized(ctx, DESCRIBE, TRANSACTIONAL_ID, tid):
            return TxnDescription(ErrorCode.transactional_id_authorization_failed, tid)
        if not tid:
            return TxnDescription(ErrorCode.invalid_request, tid)
        return _txn.call(
            ctx,
            tid,
            TransactionCoordinatorShard.describe_transaction,
            tid,
            lambda code: TxnDescription(ErrorCode(code), tid),
        )

    def state(d: TxnDescription) -> Any:
        topics: dict[str, list[int]] = {}
        for topic, partition in sorted(d.partitions):
            topics.setdefault(topic, []).append(partition)
        topics = {
            t: ps
            for t, ps in topics.items()  # KafkaApis: only the topics the principal may describe
            if authorized(ctx, DESCRIBE, TOPIC, t)
        }
        return b(
            "TransactionState",
            error_code=d.error,
            transactional_id=d.transactional_id,
            transaction_state=d.state,
            transaction_timeout=d.timeout_ms,
            transaction_start_time=d.start_ms,
            producer_id=d.producer_id,
            producer_epoch=d.producer_epoch,
            topics=tuple(b("TopicData", topic=t, partitions=tuple(ps)) for t, ps in topics.items()),
        )

    return gather(
        [one(tid) for tid in request.transactional_ids],
        lambda answers: b.response(throttle_time=0, transaction_states=tuple(state(d) for d in answers)),
    )
