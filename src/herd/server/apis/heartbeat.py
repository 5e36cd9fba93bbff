"""Heartbeat (key 12), v0-v4.

v1: throttle time. v2: no body change. v3: group instance id (KIP-345). v4: flexible. Kafka 4.x serves
v0-v4.

A heartbeat only moves the member's session deadline (O(1), no timer is touched). The answer tells the
member about a rebalance (REBALANCE_IN_PROGRESS), a stale generation (ILLEGAL_GENERATION), that it is gone
(UNKNOWN_MEMBER_ID) or was replaced (FENCED_INSTANCE_ID). An empty group id gets INVALID_GROUP_ID. While
the group's partition is loading Kafka answers NONE blindly (GroupCoordinatorService.heartbeat), and so
does herd: the member keeps its session and learns the real state on its next heartbeat.
"""

from __future__ import annotations

from typing import Any

from herd.coordinator import ErrorCode
from herd.coordinator.requests import Heartbeat
from herd.coordinator.responses import HeartbeatResponse
from herd.server.apis._build import builder
from herd.server.apis._groups import client_host, client_id, route
from herd.server.broker import RequestContext

API_KEY = 12
MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx: RequestContext, request: Any) -> Any:
    req = Heartbeat(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        api_version=ctx.api_version,
        client_id=client_id(ctx),
        client_host=client_host(ctx),
    )

    def respond(response: HeartbeatResponse) -> Any:
        return _response(ctx.api_version, response.error_code)

    def on_error(code: int) -> HeartbeatResponse:
        if code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            code = ErrorCode.NONE
        return HeartbeatResponse(error_code=code)

    if not req.group_id:
        return respond(on_error(ErrorCode.INVALID_GROUP_ID))
    return route(ctx, req.group_id, "heartbeat", req, respond, on_error)


_RESPONSES: dict[tuple[int, int], Any] = {}


def _response(version: int, error_code: int) -> Any:
    """kio responses are immutable, so the few a heartbeat can get are built once per version and error."""
    key = (version, error_code)
    response = _RESPONSES.get(key)
    if response is None:
        response = _RESPONSES[key] = builder(API_KEY, version).response(throttle_time=0, error_code=error_code)
    return response
