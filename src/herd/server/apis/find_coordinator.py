"""FindCoordinator (key 10), v0-v6.

v1: key type (0 group, 1 transaction) and error message. v3: flexible. v4: a batch of keys answered one by one
(KIP-699). v5: no body change (KIP-890). v6: key type 2, share groups (KIP-932), which herd does not have
(INVALID_REQUEST).

A group's coordinator is the leader of partition abs(Java hashCode(groupId)) % offsets.topic.num.partitions of
__consumer_offsets: this broker when its coordinator runtime hosts that partition (on a single node it hosts
them all), otherwise no broker is known and the answer is COORDINATOR_NOT_AVAILABLE, which clients retry.
Transactional ids are answered with this broker so that clients can ask, though transactions themselves are not
supported (see init_producer_id).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.server.apis._build import ctx_builder
from herd.server.broker import RequestContext

API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 6

GROUP, TRANSACTION, SHARE = 0, 1, 2


def _lookup(ctx: RequestContext, key: str, key_type: int) -> tuple[ErrorCode, str | None]:
    if key_type not in (GROUP, TRANSACTION):
        return ErrorCode.invalid_request, f"key type {key_type} is not supported"
    if key_type == GROUP and not key:
        return ErrorCode.invalid_request, "group id must not be empty"
    coordinator = ctx.broker.coordinator
    if key_type == GROUP and coordinator is not None and not coordinator.hosts(key):
        return ErrorCode.coordinator_not_available, "The coordinator is not available."
    return ErrorCode.none, None


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    broker = ctx.broker
    node, host, port = broker.node_id, broker.endpoint.host, broker.endpoint.port
    key_type = getattr(request, "key_type", GROUP)
    if ctx.api_version >= 4:
        coordinators = []
        for key in request.coordinator_keys:
            error, message = _lookup(ctx, key, key_type)
            ok = error is ErrorCode.none
            coordinators.append(b("Coordinator", key=key, node_id=node if ok else -1, host=host if ok else "",
                                  port=port if ok else -1, error_code=error, error_message=message))
        return b.response(throttle_time=0, coordinators=tuple(coordinators))
    error, message = _lookup(ctx, request.key, key_type)
    ok = error is ErrorCode.none
    return b.response(throttle_time=0, error_code=error, error_message=message, node_id=node if ok else -1,
                      host=host if ok else "", port=port if ok else -1)
