"""Heartbeat (key 12), v0-v4.

v1: throttle time. v2: no body change. v3: group instance id (KIP-345). v4: flexible. Kafka 4.x serves
v0-v4.

A heartbeat only moves the member's session deadline (O(1), no timer is touched). The answer tells the
member about a rebalance (REBALANCE_IN_PROGRESS), a stale generation (ILLEGAL_GENERATION), that it is gone
(UNKNOWN_MEMBER_ID) or was replaced (FENCED_INSTANCE_ID). An empty group id gets INVALID_GROUP_ID. While
the group's partition is loading Kafka answers NONE blindly (GroupCoordinatorService.heartbeat), and so
does herd: the member keeps its session and learns the real state on its next heartbeat.

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
READ on the group, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.coordinator import CoordinatorError, GroupCoordinatorShard
from herd.coordinator.requests import Heartbeat
from herd.coordinator.responses import HeartbeatResponse
from herd.server.apis._authorize import GROUP, READ, authorized
from herd.server.apis._build import builder
from herd.server.apis._groups import client_host, client_id, route
from herd.server.apis._requests import HeartbeatRequest
from herd.server.broker import RequestContext

API_KEY = 12
MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx: RequestContext, request: HeartbeatRequest) -> Any:
    group_id = request.group_id
    if ctx.broker.authorizer is not None and not authorized(ctx, READ, GROUP, group_id):
        return _answer(ctx, ErrorCode.group_authorization_failed)
    if not group_id:
        return _answer(ctx, ErrorCode.invalid_group_id)
    instance_id = getattr(request, "group_instance_id", None)
    try:  # the fast path: an error code at once unless a write is pending on the group's partition
        code = ctx.broker.coordinator.heartbeat(group_id, request.generation_id, request.member_id, instance_id)
    except CoordinatorError as e:
        code = _unavailable(e.code)
    if code is not None:
        if code:
            _count_error(ctx, code)
        return _response(ctx.api_version, code)
    req = Heartbeat(
        group_id=group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=instance_id,
        api_version=ctx.api_version,
        client_id=client_id(ctx),
        client_host=client_host(ctx),
    )
    return route(
        ctx,
        group_id,
        GroupCoordinatorShard.heartbeat,
        req,
        lambda response: _answer(ctx, response.error_code),
        lambda code: HeartbeatResponse(error_code=_unavailable(code)),
    )


def _answer(ctx: RequestContext, code: int) -> Any:
    if code:
        _count_error(ctx, code)
    return _response(ctx.api_version, code)


def _count_error(ctx: RequestContext, code: int) -> None:
    """herd_group_coordinator_heartbeat_errors_total (herd.server.metrics); the fast path tests `code` first."""
    errors = ctx.broker.metrics.heartbeat_errors
    errors[code] = errors.get(code, 0) + 1


def _unavailable(code: int) -> int:
    """The answer when the coordinator cannot take the heartbeat: NOT_COORDINATOR as it is, and NONE while
    the partition loads."""
    return ErrorCode.none if code == ErrorCode.coordinator_load_in_progress else code


_RESPONSES: dict[tuple[int, int], Any] = {}


def _response(version: int, error_code: int) -> Any:
    """kio responses are immutable, so the few a heartbeat can get are built once per version and error."""
    key = (version, error_code)
    response = _RESPONSES.get(key)
    if response is None:
        response = _RESPONSES[key] = builder(API_KEY, version).response(throttle_time=0, error_code=error_code)
    return response
