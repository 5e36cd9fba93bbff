"""JoinGroup (key 11), v0-v9.

v1: rebalance timeout (v0 has none: the session timeout serves as both, as in Kafka). v2: throttle time.
v3: no body change. v4: KIP-394, a dynamic member joining without a member id gets MEMBER_ID_REQUIRED with
its new id and must join again with it. v5: group instance id (KIP-345 static membership). v6: flexible.
v7: protocol type in the answer, protocol name nullable (KIP-559). v8: reason (KIP-800). v9: skip
assignment for a static leader that rejoined without a rebalance (KIP-814). Kafka 4.x serves v0-v9.

Stateless checks come first, as in Kafka's GroupCoordinatorService: an empty group id gets
INVALID_GROUP_ID, a session timeout outside [group.min.session.timeout.ms, group.max.session.timeout.ms]
INVALID_SESSION_TIMEOUT. Then the group's coordinator shard decides; a join that has to wait for the
rebalance is parked there and answered later (the connection keeps its place in the response order).

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
READ on the group, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.coordinator import GroupCoordinatorShard
from herd.coordinator.joining import validate_join
from herd.coordinator.member import MemberProtocol
from herd.coordinator.requests import JoinGroup
from herd.coordinator.responses import JoinGroupResponse
from herd.server.apis._authorize import GROUP, READ, authorized
from herd.server.apis._build import ctx_builder, ms
from herd.server.apis._groups import client_host, client_id, route
from herd.server.apis._requests import JoinGroupRequest
from herd.server.broker import RequestContext

API_KEY = 11
MIN_VERSION = 0
MAX_VERSION = 9


def handle(ctx: RequestContext, request: JoinGroupRequest) -> Any:
    if ctx.broker.authorizer is not None and not authorized(ctx, READ, GROUP, request.group_id):
        return _response(ctx, JoinGroupResponse(error_code=ErrorCode.group_authorization_failed, member_id=""))
    req = JoinGroup(
        group_id=request.group_id,
        session_timeout_ms=ms(request.session_timeout),
        rebalance_timeout_ms=ms(getattr(request, "rebalance_timeout", -1)),
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=request.protocol_type,
        protocols=tuple(MemberProtocol(p.name, p.metadata) for p in request.protocols),
        reason=getattr(request, "reason", None),
        api_version=ctx.api_version,
        client_id=client_id(ctx),
        client_host=client_host(ctx),
    )

    def respond(response: JoinGroupResponse) -> Any:
        return _response(ctx, response)

    def on_error(code: int) -> JoinGroupResponse:
        return JoinGroupResponse(error_code=code, member_id=req.member_id)

    error = validate_join(ctx.broker.coordinator.config, req)
    if error is not None:
        return respond(on_error(error))
    return route(ctx, req.group_id, GroupCoordinatorShard.join_group, req, respond, on_error)


def _response(ctx: RequestContext, r: JoinGroupResponse) -> Any:
    b = ctx_builder(ctx)
    members = tuple(
        b("JoinGroupResponseMember", member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata)
        for m in r.members
    )
    protocol_name = r.protocol_name if r.protocol_name is not None or ctx.api_version >= 7 else ""
    return b.response(
        throttle_time=0,
        error_code=r.error_code,
        generation_id=r.generation_id,
        protocol_type=r.protocol_type,
        protocol_name=protocol_name,
        leader=r.leader,
        skip_assignment=r.skip_assignment,
        member_id=r.member_id,
        members=members,
    )
