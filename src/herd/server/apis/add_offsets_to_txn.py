"""AddOffsetsToTxn (key 25), v0-v4.

v1: no change. v2: PRODUCER_FENCED (below v2 it is INVALID_PRODUCER_EPOCH, KIP-588). v3: flexible. v4: KIP-890
part 1 errors.

Adds the group's `__consumer_offsets` partition (abs(hashCode(group id)) % offsets.topic.num.partitions) to the
transaction, exactly as AddPartitionsToTxn would (KafkaApis.handleAddOffsetsToTxnRequest calls
handleAddPartitionsToTransaction with that partition); TxnOffsetCommit then stages the offsets there, and the
transaction's marker in that partition makes them committed or drops them.

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on
the group (GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.cluster.topics import OFFSETS_TOPIC
from herd.coordinator.transactions import AddPartitions, PartitionErrors, TransactionCoordinatorShard
from herd.server.apis import _txn
from herd.server.apis._authorize import GROUP, READ, TRANSACTIONAL_ID, WRITE, authorized
from herd.server.apis._build import ctx_builder
from herd.server.apis._groups import then
from herd.server.broker import RequestContext

API_KEY = 25
MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    version = ctx.api_version

    def respond(code: int) -> Any:
        return b.response(throttle_time=0, error_code=_txn.fenced_for(version, 2, code))

    tid = request.transactional_id
    groups = ctx.broker.coordinator
    if ctx.broker.authorizer is not None:  # KafkaApis.handleAddOffsetsToTxnRequest
        if not authorized(ctx, WRITE, TRANSACTIONAL_ID, tid):
            return respond(ErrorCode.transactional_id_authorization_failed)
        if not authorized(ctx, READ, GROUP, request.group_id):
            return respond(ErrorCode.group_authorization_failed)
    if not tid:
        return respond(ErrorCode.invalid_request)
    if groups is None or groups.num_partitions == 0:
        return respond(ErrorCode.coordinator_not_available)
    partition = (OFFSETS_TOPIC, groups.partition_for(request.group_id))
    core = AddPartitions(tid, request.producer_id, request.producer_epoch, frozenset({partition}))
    return then(
        _txn.call(
            ctx,
            tid,
            TransactionCoordinatorShard.add_partitions,
            core,
            lambda code: PartitionErrors({partition: ErrorCode(code)}),
        ),
        lambda answer: respond(answer.errors[partition]),
    )
