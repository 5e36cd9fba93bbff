"""DeleteGroups (key 42), v0-v2.

v1: no body change. v2: flexible. Kafka 4.x serves v0-v2.

Each group is deleted by its own coordinator shard: only an Empty group can go (a group with members gets
NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND, an empty id INVALID_GROUP_ID); deletion writes a
tombstone for each committed offset and for the group, and is answered once they are durable. A group this
node does not coordinate gets NOT_COORDINATOR.

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
DELETE on each group, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.coordinator import GroupCoordinatorShard
from herd.coordinator.requests import DeleteGroups
from herd.coordinator.responses import DeletableGroupResult, DeleteGroupsResponse
from herd.server.apis._authorize import DELETE, GROUP, authorized
from herd.server.apis._build import ctx_builder
from herd.server.apis._groups import call, client_host, client_id, gather
from herd.server.broker import RequestContext

API_KEY = 42
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx: RequestContext, request: Any) -> Any:
    outcomes = [_delete_one(ctx, group_id) for group_id in request.groups_names]

    def respond(responses: list[DeleteGroupsResponse]) -> Any:
        b = ctx_builder(ctx)
        results = tuple(
            b("DeletableGroupResult", group_id=r.group_id, error_code=r.error_code)
            for response in responses
            for r in response.results
        )
        return b.response(throttle_time=0, results=results)

    return gather(outcomes, respond)


def _delete_one(ctx: RequestContext, group_id: str) -> Any:
    def on_error(code: int) -> DeleteGroupsResponse:
        return DeleteGroupsResponse(results=(DeletableGroupResult(group_id, code),))

    if not authorized(ctx, DELETE, GROUP, group_id):
        return on_error(ErrorCode.group_authorization_failed)
    if not group_id:
        return on_error(ErrorCode.invalid_group_id)
    req = DeleteGroups(
        groups_names=(group_id,), api_version=ctx.api_version, client_id=client_id(ctx), client_host=client_host(ctx)
    )
    return call(ctx, group_id, GroupCoordinatorShard.delete_groups, req, on_error)
