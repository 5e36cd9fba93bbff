"""LeaveGroup (key 13), v0-v5.

v1: throttle time. v2: no body change. v3: a batch of members (member id, group instance id) with an error
per member (KIP-345: an administrator can remove static members by instance id). v4: flexible. v5: a
reason per member (KIP-800). Kafka 4.x serves v0-v5.

v0-v2 leave one member and answer with one error. v3+ answer each member (UNKNOWN_MEMBER_ID,
FENCED_INSTANCE_ID when the instance id belongs to another member id); the whole batch causes a single
rebalance. An empty group id gets INVALID_GROUP_ID.

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
READ on the group, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.coordinator import GroupCoordinatorShard
from herd.coordinator.requests import LeaveGroup, MemberIdentity
from herd.coordinator.responses import LeaveGroupResponse
from herd.server.apis._authorize import GROUP, READ, authorized
from herd.server.apis._build import ctx_builder
from herd.server.apis._groups import client_host, client_id, route
from herd.server.broker import RequestContext

API_KEY = 13
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx: RequestContext, request: Any) -> Any:
    if ctx.api_version >= 3:
        members = tuple(
            MemberIdentity(m.member_id, m.group_instance_id, getattr(m, "reason", None)) for m in request.members
        )
        req = LeaveGroup(
            group_id=request.group_id,
            members=members,
            api_version=ctx.api_version,
            client_id=client_id(ctx),
            client_host=client_host(ctx),
        )
    else:
        req = LeaveGroup(
            group_id=request.group_id,
            member_id=request.member_id,
            api_version=ctx.api_version,
            client_id=client_id(ctx),
            client_host=client_host(ctx),
        )

    def respond(response: LeaveGroupResponse) -> Any:
        b = ctx_builder(ctx)
        members = tuple(
            b("MemberResponse", member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=m.error_code)
            for m in response.members
        )
        return b.response(throttle_time=0, error_code=response.error_code, members=members)

    def on_error(code: int) -> LeaveGroupResponse:
        return LeaveGroupResponse(error_code=code)

    if ctx.broker.authorizer is not None and not authorized(ctx, READ, GROUP, req.group_id):
        return respond(on_error(ErrorCode.group_authorization_failed))
    if not req.group_id:
        return respond(on_error(ErrorCode.invalid_group_id))
    return route(ctx, req.group_id, GroupCoordinatorShard.leave_group, req, respond, on_error)
