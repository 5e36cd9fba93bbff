"""EndTxn (key 26), v0-v4.

v1: no change. v2: PRODUCER_FENCED (below v2 it is INVALID_PRODUCER_EPOCH, KIP-588). v3: flexible. v4: KIP-890
part 1 errors (TRANSACTION_ABORTABLE). v5 is not served: a client sends it only to a broker whose
transaction.version is 2 (KIP-890 part 2: the epoch bumped by every EndTxn, the response carrying the new producer
id and epoch), and Kafka treats every v5 request as such (KafkaApis.handleEndTxnRequest); herd's
transaction.version is 0.

The transaction coordinator (herd.coordinator.transactions, Kafka's TransactionCoordinator.handleEndTransaction)
answers once the PrepareCommit or PrepareAbort is durable; the markers are written afterwards and the transaction
then completes. A retry while they are written is CONCURRENT_TRANSACTIONS, a retry after NONE, the other outcome
INVALID_TXN_STATE.

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
WRITE on the transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.coordinator.transactions import EndTxn, ProducerIdAndEpoch, TransactionCoordinatorShard
from herd.server.apis import _txn
from herd.server.apis._authorize import TRANSACTIONAL_ID, WRITE, authorized
from herd.server.apis._build import ctx_builder
from herd.server.apis._groups import then
from herd.server.broker import RequestContext

API_KEY = 26
MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    version = ctx.api_version

    def respond(answer: ProducerIdAndEpoch) -> Any:
        return b.response(
            throttle_time=0,
            error_code=_txn.fenced_for(version, 2, answer.error),
            producer_id=answer.producer_id,
            producer_epoch=answer.producer_epoch,
        )

    tid = request.transactional_id
    if ctx.broker.authorizer is not None and not authorized(ctx, WRITE, TRANSACTIONAL_ID, tid):
        return respond(ProducerIdAndEpoch(ErrorCode.transactional_id_authorization_failed))
    if not tid:
        return respond(ProducerIdAndEpoch(ErrorCode.invalid_request))
    core = EndTxn(tid, request.producer_id, request.producer_epoch, request.committed)
    return then(
        _txn.call(
            ctx, tid, TransactionCoordinatorShard.end_txn, core, lambda code: ProducerIdAndEpoch(ErrorCode(code))
        ),
        respond,
    )
