"""SyncGroup (key 14), v0-v5.

v1: throttle time. v2: no body change. v3: group instance id (KIP-345). v4: flexible. v5: protocol type
and name in request and answer (KIP-559: a non-null value that differs from the group's gets
INCONSISTENT_GROUP_PROTOCOL). Kafka 4.x serves v0-v5.

An empty group id gets INVALID_GROUP_ID before routing. The leader's SyncGroup carries the assignment,
which is persisted as a GroupMetadata record; every member's answer waits until that write is durable. A
follower that syncs before the leader is parked until the leader's assignment is stored.

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
READ on the group, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.coordinator import GroupCoordinatorShard
from herd.coordinator.requests import SyncAssignment, SyncGroup
from herd.coordinator.responses import SyncGroupResponse
from herd.server.apis._authorize import GROUP, READ, authorized
from herd.server.apis._build import ctx_builder
from herd.server.apis._groups import client_host, client_id, route
from herd.server.apis._requests import SyncGroupRequest
from herd.server.broker import RequestContext

API_KEY = 14
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx: RequestContext, request: SyncGroupRequest) -> Any:
    req = SyncGroup(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
        assignments=tuple(SyncAssignment(a.member_id, a.assignment) for a in request.assignments),
        api_version=ctx.api_version,
        client_id=client_id(ctx),
        client_host=client_host(ctx),
    )

    def respond(response: SyncGroupResponse) -> Any:
        b = ctx_builder(ctx)
        return b.response(
            throttle_time=0,
            error_code=response.error_code,
            protocol_type=response.protocol_type,
            protocol_name=response.protocol_name,
            assignment=response.assignment,
        )

    def on_error(code: int) -> SyncGroupResponse:
        return SyncGroupResponse(error_code=code)

    if ctx.broker.authorizer is not None and not authorized(ctx, READ, GROUP, req.group_id):
        return respond(on_error(ErrorCode.group_authorization_failed))
    if not req.group_id:
        return respond(on_error(ErrorCode.invalid_group_id))
    return route(ctx, req.group_id, GroupCoordinatorShard.sync_group, req, respond, on_error)
