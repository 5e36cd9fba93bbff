"""ListTransactions (key 66), v0-v1 (KIP-664).

v1: `duration_filter`, only transactions running longer than that many milliseconds (KIP-994). v2 (a regular
expression over transactional ids, KIP-1152) is not served.

Every `__transaction_state` partition this node hosts is asked (TransactionStateManager.listTransactionStates):
COORDINATOR_LOAD_IN_PROGRESS while one is loading; state filters that name no state are answered in
`unknown_state_filters` (and, as in Kafka, then match nothing). In cluster mode each node answers for the
partitions it leads, as each Kafka broker does; the admin client asks every node.

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
only the transactional ids the principal may DESCRIBE.
"""

from __future__ import annotations

from typing import Any

from herd.coordinator import CoordinatorError, ErrorCode
from herd.coordinator.transactions import ListTransactions, TransactionCoordinatorShard, TxnListing, TxnState
from herd.server.apis._authorize import DESCRIBE, TRANSACTIONAL_ID, authorized
from herd.server.apis._build import ctx_builder
from herd.server.apis._groups import gather
from herd.server.broker import RequestContext

API_KEY = 66
MIN_VERSION = 0
MAX_VERSION = 1

_NAMES = frozenset(s.kafka_name for s in TxnState)


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    unknown = tuple(name for name in request.state_filters if name not in _NAMES)
    filters = ListTransactions(
        frozenset(request.state_filters),
        frozenset(request.producer_id_filters),
        getattr(request, "duration_filter", -1),
    )

    checked = ctx.broker.authorizer is not None  # only the ids the principal may DESCRIBE (KafkaApis
    # .handleListTransactionsRequest)

    def respond(error: int, listings: list[tuple[TxnListing, ...]]) -> Any:
        return b.response(
            throttle_time=0,
            error_code=error,
            unknown_state_filters=unknown,
            transaction_states=tuple(
                b(
                    "TransactionState",
                    transactional_id=t.transactional_id,
                    producer_id=t.producer_id,
                    transaction_state=t.state,
                )
                for listing in listings
                for t in listing
                if not checked or authorized(ctx, DESCRIBE, TRANSACTIONAL_ID, t.transactional_id)
            ),
        )

    runtime = ctx.broker.transactions
    if runtime is None:
        return respond(ErrorCode.coordinator_not_available, [])
    try:
        outcomes = runtime.call_all(TransactionCoordinatorShard.list_transactions, filters)
    except CoordinatorError as e:
        return respond(e.code, [])
    return gather(outcomes, lambda listings: respond(ErrorCode.none, listings))
