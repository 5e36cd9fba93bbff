"""What the transaction API modules share: routing a core request to the transaction coordinator runtime.

As `_groups` does for groups: the API module turns the kio request into a core request
(herd.coordinator.transactions.messages), `call` hands it to the runtime with the core's handler for it
(`TransactionCoordinatorShard.init_producer_id`, ...), and the answer is the core response, a future of it (a
reply waiting for its record to be durable), or `on_error(code)` when the runtime refuses (NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS). A node without a transaction coordinator answers NOT_COORDINATOR.

Clients before KIP-588 do not know PRODUCER_FENCED (90): InitProducerId below v4 and AddPartitionsToTxn,
AddOffsetsToTxn and EndTxn below v2 answer INVALID_PRODUCER_EPOCH (47) instead (apache/kafka
core/src/main/scala/kafka/server/KafkaApis.scala, "For older clients, they could not understand the new
PRODUCER_FENCED error code").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from herd.coordinator import CoordinatorError, ErrorCode
from herd.server.broker import RequestContext


def call(
    ctx: RequestContext,
    transactional_id: str,
    handler: Callable[..., Any],
    request: Any,
    on_error: Callable[[int], Any],
) -> Any:
    runtime = ctx.broker.transactions
    if runtime is None:
        return on_error(ErrorCode.not_coordinator)
    try:
        return runtime.call(transactional_id, handler, request)
    except CoordinatorError as e:
        return on_error(e.code)


def fenced_for(version: int, first_fenced_version: int, code: int) -> int:
    """`code`, or INVALID_PRODUCER_EPOCH for PRODUCER_FENCED below the version that knows it."""
    if code == ErrorCode.producer_fenced and version < first_fenced_version:
        return ErrorCode.invalid_producer_epoch
    return code
