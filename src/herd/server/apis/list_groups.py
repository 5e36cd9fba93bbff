"""ListGroups (key 16), v0-v5.

v1: throttle time. v2: no body change. v3: flexible. v4: states filter (KIP-518). v5: types filter and the
group type of each group (KIP-848; every herd group is "classic"). Kafka 4.x serves v0-v5.

Every coordinator shard this node hosts is asked and the answers are concatenated. Filters match
case-insensitively. While any hosted partition is still loading the answer is COORDINATOR_LOAD_IN_PROGRESS
with no groups (clients retry), as Kafka answers.

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
every group with DESCRIBE on the cluster, else only the groups the principal may
DESCRIBE.
"""

from __future__ import annotations

from typing import Any

from herd.coordinator import CoordinatorError, GroupCoordinatorShard
from herd.coordinator.requests import ListGroups
from herd.coordinator.responses import ListGroupsResponse
from herd.server.apis._authorize import DESCRIBE, GROUP, authorized, authorized_cluster
from herd.server.apis._build import ctx_builder
from herd.server.apis._groups import client_host, client_id, gather
from herd.server.broker import RequestContext

API_KEY = 16
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx: RequestContext, request: Any) -> Any:
    req = ListGroups(
        states_filter=tuple(getattr(request, "states_filter", ())),
        types_filter=tuple(getattr(request, "types_filter", ())),
        api_version=ctx.api_version,
        client_id=client_id(ctx),
        client_host=client_host(ctx),
    )
    try:
        outcomes = ctx.broker.coordinator.call_all(GroupCoordinatorShard.list_groups, req)
    except CoordinatorError as e:
        return _response(ctx, [ListGroupsResponse(error_code=e.code)])
    return gather(outcomes, lambda responses: _response(ctx, responses))


def _response(ctx: RequestContext, responses: list[ListGroupsResponse]) -> Any:
    b = ctx_builder(ctx)
    error = next((r.error_code for r in responses if r.error_code), 0)
    every = ctx.broker.authorizer is None or authorized_cluster(ctx, DESCRIBE)
    groups = tuple(
        b(
            "ListedGroup",
            group_id=g.group_id,
            protocol_type=g.protocol_type,
            group_state=g.group_state,
            group_type=g.group_type,
        )
        for r in responses
        for g in r.groups
        if every or authorized(ctx, DESCRIBE, GROUP, g.group_id)
    )
    return b.response(throttle_time=0, error_code=error, groups=groups)
