"""InitProducerId (key 22), v0-v5.

v1: no change. v2: flexible. v3: the producer id and epoch of a producer bumping its epoch (KIP-360). v4: no
body change (PRODUCER_FENCED may be answered; below v4 it is INVALID_PRODUCER_EPOCH, KIP-588). v5: KIP-890.
(v6, KIP-939 two-phase commit, is not served.)

A transactional id goes to its transaction coordinator (herd.coordinator.transactions, Kafka's
TransactionCoordinator.handleInitProducerId): a new id gets a producer id and epoch 0, a known one its epoch
bumped (an open transaction is first aborted under a bumped epoch, answered CONCURRENT_TRANSACTIONS so the client
retries), a KIP-360 producer naming its producer id and epoch is bumped or fenced. A producer id without an epoch
or an epoch without a producer id is INVALID_REQUEST (KafkaApis.handleInitProducerIdRequest), an empty
transactional id INVALID_REQUEST.

For idempotent producers (no transactional id) herd hands out a fresh producer id with epoch 0, or bumps the
epoch of the id the producer names (KIP-360). Ids, for both, start from the wall clock in milliseconds times
1000 plus a counter, so a restarted broker never hands out an id it gave before.

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
WRITE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an
idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from kio.schema.errors import ErrorCode

from herd.coordinator.transactions import InitProducerId, ProducerIdAndEpoch, TransactionCoordinatorShard
from herd.server.apis import _txn
from herd.server.apis._authorize import (
    IDEMPOTENT_WRITE,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
    authorized,
    authorized_any,
    authorized_cluster,
)
from herd.server.apis._build import ctx_builder, ms
from herd.server.apis._groups import then
from herd.server.broker import RequestContext

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 5

MAX_EPOCH = 32767
_ids = itertools.count(int(time.time() * 1000) * 1000)


def new_producer_id() -> int:
    """A producer id never handed out before by this process, nor (the wall clock moving on) by an earlier one."""
    return next(_ids)


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    producer_id = getattr(request, "producer_id", -1)
    epoch = getattr(request, "producer_epoch", -1)
    if ctx.broker.authorizer is not None and (refused := _refused(ctx, request.transactional_id)) is not None:
        return b.response(throttle_time=0, error_code=refused, producer_id=-1, producer_epoch=-1)
    if request.transactional_id is not None:
        return _transactional(ctx, request, producer_id, epoch)
    if producer_id >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        return b.response(throttle_time=0, error_code=ErrorCode.none, producer_id=producer_id, producer_epoch=epoch + 1)
    return b.response(throttle_time=0, error_code=ErrorCode.none, producer_id=new_producer_id(), producer_epoch=0)


def _refused(ctx: RequestContext, tid: str | None) -> ErrorCode | None:
    """KafkaApis.handleInitProducerIdRequest: WRITE on the transactional id, or for an idempotent producer
    IDEMPOTENT_WRITE on the cluster or WRITE on some topic (authorizeByResourceType)."""
    if tid is not None:
        if authorized(ctx, WRITE, TRANSACTIONAL_ID, tid):
            return None
        return ErrorCode.transactional_id_authorization_failed
    if authorized_cluster(ctx, IDEMPOTENT_WRITE) or authorized_any(ctx, WRITE, TOPIC):
        return None
    return ErrorCode.cluster_authorization_failed


def _transactional(ctx: RequestContext, request: Any, producer_id: int, epoch: int) -> Any:
    b = ctx_builder(ctx)
    version = ctx.api_version

    def respond(answer: ProducerIdAndEpoch) -> Any:
        return b.response(
            throttle_time=0,
            error_code=_txn.fenced_for(version, 4, answer.error),
            producer_id=answer.producer_id,
            producer_epoch=answer.producer_epoch,
        )

    tid = request.transactional_id
    if not tid:
        return respond(ProducerIdAndEpoch(ErrorCode.invalid_request))
    core = InitProducerId(tid, ms(request.transaction_timeout), producer_id, epoch)
    return then(
        _txn.call(
            ctx,
            tid,
            TransactionCoordinatorShard.init_producer_id,
            core,
            lambda code: ProducerIdAndEpoch(ErrorCode(code)),
        ),
        respond,
    )
