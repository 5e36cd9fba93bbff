"""DescribeGroups (key 15), v0-v6.

v1: throttle time. v2: no body change. v3: authorized operations (KIP-430). v4: group instance id of each
member (KIP-345). v5: flexible. v6: error message, and an unknown group is answered GROUP_ID_NOT_FOUND
(KIP-1043) where v0-v5 describe it as Dead without an error. Kafka 4.x serves v0-v6.

Each group is asked of its own coordinator shard, so one request may span shards: a group this node does
not coordinate gets NOT_COORDINATOR, one whose partition is loading COORDINATOR_LOAD_IN_PROGRESS. A Stable
group shows its protocol and every member's metadata and assignment; other states show members only.
Asked for authorized operations, it answers those the ACLs allow the principal on the group (without an authorizer
every group operation, as Kafka does). A group the principal may not DESCRIBE gets GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.coordinator import GroupCoordinatorShard
from herd.coordinator.requests import DescribeGroups
from herd.coordinator.responses import DescribedGroup, DescribeGroupsResponse
from herd.server.apis._authorize import DESCRIBE, GROUP, authorized, authorized_operations
from herd.server.apis._build import ctx_builder
from herd.server.apis._groups import call, client_host, client_id, gather
from herd.server.broker import RequestContext

API_KEY = 15
MIN_VERSION = 0
MAX_VERSION = 6


def handle(ctx: RequestContext, request: Any) -> Any:
    include_ops = getattr(request, "include_authorized_operations", False)
    outcomes = [_describe_one(ctx, group_id, include_ops) for group_id in request.groups]

    def respond(responses: list[DescribeGroupsResponse]) -> Any:
        groups = [g for r in responses for g in r.groups]
        return _response(ctx, groups, include_ops)

    return gather(outcomes, respond)


def _describe_one(ctx: RequestContext, group_id: str, include_ops: bool) -> Any:
    req = DescribeGroups(
        groups=(group_id,),
        include_authorized_operations=include_ops,
        api_version=ctx.api_version,
        client_id=client_id(ctx),
        client_host=client_host(ctx),
    )

    def on_error(code: int) -> DescribeGroupsResponse:
        return DescribeGroupsResponse(groups=(DescribedGroup(group_id=group_id, error_code=code),))

    if not authorized(ctx, DESCRIBE, GROUP, group_id):
        return on_error(ErrorCode.group_authorization_failed)
    if not group_id:  # Kafka's isGroupIdNotEmpty check, before any shard is asked
        return on_error(ErrorCode.invalid_group_id)
    return call(ctx, group_id, GroupCoordinatorShard.describe_groups, req, on_error)


def _response(ctx: RequestContext, groups: list[DescribedGroup], include_ops: bool) -> Any:
    b = ctx_builder(ctx)
    described = []
    for g in groups:
        error, message = g.error_code, None
        if ctx.api_version >= 6 and error == 0 and g.group_state == "Dead" and not g.members:
            error = ErrorCode.group_id_not_found
            message = (
                f"Group {g.group_id} is not a classic group." if g.not_classic else f"Group {g.group_id} not found."
            )
        members = tuple(
            b(
                "DescribedGroupMember",
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.member_metadata,
                member_assignment=m.member_assignment,
            )
            for m in g.members
        )
        ops = authorized_operations(ctx, include_ops and error == 0, GROUP, g.group_id)
        described.append(
            b(
                "DescribedGroup",
                error_code=error,
                error_message=message,
                group_id=g.group_id,
                group_state=g.group_state,
                protocol_type=g.protocol_type,
                protocol_data=g.protocol_data,
                members=members,
                authorized_operations=ops,
            )
        )
    return b.response(throttle_time=0, groups=tuple(described))
