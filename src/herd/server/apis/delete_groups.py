"""DeleteGroups (key 42), v0-v2.

v1: no body change. v2: flexible. Kafka 4.x serves v0-v2.

Each group is deleted by its own coordinator shard: only an Empty group can go (a group with members gets
NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND, an empty id INVALID_GROUP_ID); deletion writes a
tombstone for each committed offset and for the group, and is answered once they are durable. A group this
node does not coordinate gets NOT_COORDINATOR.

A share group (KIP-932): before its records go, the state of its share partitions is deleted from
`__share_group_state` (GroupCoordinatorService.deleteShareGroups and the persister's deleteState), so that a new
group of the same id starts afresh; if that fails, the group is not deleted and answers the error.

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
DELETE on each group, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from herd.coordinator import CoordinatorError, GroupCoordinatorShard
from herd.coordinator.requests import DeleteGroups
from herd.coordinator.responses import DeletableGroupResult, DeleteGroupsResponse
from herd.runtime.share_state import ShareStateError
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
    share_partitions = _share_partitions(ctx, group_id)
    if share_partitions:
        # a task: DeleteGroups gathers futures (herd.server.apis._groups.gather)
        return asyncio.ensure_future(_delete_share_group(ctx, group_id, share_partitions, req, on_error))
    return call(ctx, group_id, GroupCoordinatorShard.delete_groups, req, on_error)


def _share_partitions(ctx: RequestContext, group_id: str) -> list[tuple[uuid.UUID, int]]:
    """The share partitions of an empty share group this node coordinates whose state was initialized or is being
    initialized (its record 15); none for any other group."""
    coordinator = ctx.broker.coordinator
    if coordinator is None or not coordinator.hosts(group_id):
        return []
    try:
        group = coordinator.shard_for(group_id).shard.share_group(group_id)
    except CoordinatorError:
        return []
    if group is None or group.members or group.state_metadata is None:
        return []
    metadata = group.state_metadata
    return sorted(
        {
            (t, p)
            for topics in (metadata.initialized, metadata.initializing)
            for t, s in topics.items()
            for p in s.partitions
        }
    )


async def _delete_share_group(
    ctx: RequestContext,
    group_id: str,
    partitions: list[tuple[uuid.UUID, int]],
    req: DeleteGroups,
    on_error: Callable[[int], DeleteGroupsResponse],
) -> DeleteGroupsResponse:
    broker = ctx.broker
    if broker.share_state is not None:
        try:
            for topic_id, partition in partitions:
                await broker.share_state.delete(group_id, topic_id, partition)
        except ShareStateError as error:
            return on_error(error.code)
    broker.shares.forget_group(group_id)
    outcome = call(ctx, group_id, GroupCoordinatorShard.delete_groups, req, on_error)
    response = await outcome if isinstance(outcome, asyncio.Future) else outcome
    assert isinstance(response, DeleteGroupsResponse)
    return response
