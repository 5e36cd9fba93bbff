"""FindCoordinator (key 10), v0-v6.

v1: key type (0 group, 1 transaction) and error message. v3: flexible. v4: a batch of keys answered one by one
(KIP-699). v5: no body change (KIP-890). v6: key type 2, share groups (KIP-932), which herd does not have
(INVALID_REQUEST).

A group's coordinator is the leader of partition abs(Java hashCode(groupId)) % offsets.topic.num.partitions of
__consumer_offsets, a transactional id's the leader of partition abs(hashCode(id)) %
transaction.state.log.num.partitions of __transaction_state (KafkaApis.getCoordinator). On a single node that is
this node while its coordinator runtime (group or transaction) hosts the partition. In cluster mode it is
whichever live node leads the partition (any node answers, from its view of the leaders); the node named may still
be loading the partition, and answers COORDINATOR_LOAD_IN_PROGRESS until it is done, as in Kafka. With no
coordinator known the answer is COORDINATOR_NOT_AVAILABLE, which clients retry. `__transaction_state` is made by
the first lookup of a transactional id, which is answered COORDINATOR_NOT_AVAILABLE (Kafka's auto-creation of an
internal topic in KafkaApis.getCoordinator).

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) or the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.cluster.topics import Node
from herd.server.apis import _authorize as authz
from herd.server.apis._authorize import DESCRIBE, authorized
from herd.server.apis._build import ctx_builder
from herd.server.broker import RequestContext

API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 6

GROUP, TRANSACTION, SHARE = 0, 1, 2


def _lookup(ctx: RequestContext, key: str, key_type: int) -> tuple[ErrorCode, str | None, Node | None]:
    if key_type not in (GROUP, TRANSACTION):
        return ErrorCode.invalid_request, f"key type {key_type} is not supported", None
    if ctx.broker.authorizer is not None:
        if key_type == GROUP and not authorized(ctx, DESCRIBE, authz.GROUP, key):
            return ErrorCode.group_authorization_failed, "Group authorization failed.", None
        if key_type == TRANSACTION and not authorized(ctx, DESCRIBE, authz.TRANSACTIONAL_ID, key):
            return ErrorCode.transactional_id_authorization_failed, "Transactional Id authorization failed.", None
    if key_type == GROUP and not key:
        return ErrorCode.invalid_request, "group id must not be empty", None
    broker = ctx.broker
    coordinator = broker.coordinator if key_type == GROUP else broker.transactions
    if coordinator is None and key_type == GROUP:
        # no group coordinator runs (tests of the shell)
        return ErrorCode.none, None, broker.node(broker.node_id, ctx.session.listener)
    transactions = broker.transactions
    if key_type == TRANSACTION and transactions is not None and not transactions.ensure_created():
        return ErrorCode.coordinator_not_available, "The coordinator is not available.", None  # made on first use
    if coordinator is not None and coordinator.num_partitions:
        # the partition's leader; this node (always, on one node) once it hosts the partition
        leader, _ = broker.cluster.leader(coordinator.topic, coordinator.partition_for(key))
        served = leader != broker.node_id or coordinator.hosts(key)
        node = broker.node(leader, ctx.session.listener) if served else None
        if node is not None:
            return ErrorCode.none, None, node
    return ErrorCode.coordinator_not_available, "The coordinator is not available.", None


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    key_type = getattr(request, "key_type", GROUP)
    if ctx.api_version >= 4:
        coordinators = []
        for key in request.coordinator_keys:
            error, message, node = _lookup(ctx, key, key_type)
            coordinators.append(
                b(
                    "Coordinator",
                    key=key,
                    node_id=node.node_id if node else -1,
                    host=node.host if node else "",
                    port=node.port if node else -1,
                    error_code=error,
                    error_message=message,
                )
            )
        return b.response(throttle_time=0, coordinators=tuple(coordinators))
    error, message, node = _lookup(ctx, request.key, key_type)
    return b.response(
        throttle_time=0,
        error_code=error,
        error_message=message,
        node_id=node.node_id if node else -1,
        host=node.host if node else "",
        port=node.port if node else -1,
    )
