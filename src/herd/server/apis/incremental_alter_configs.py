"""IncrementalAlterConfigs (key 44), v0-v1.

v0: resources with per-config operations SET (0), DELETE (1), APPEND (2), SUBTRACT (3) (KIP-339). v1:
flexible. Kafka 4.x serves v0-v1.

herd alters GROUP resources (type 32, KIP-848's group configs) and knows one group config,
`herd.expected.instance.ids`: the group.instance.ids of static members the group expects (KIP-469
pre-registration; the rules and errors are in herd.coordinator.group_configs). Each GROUP resource goes to
its group's coordinator shard and is answered once its record is durable; a group this node does not
coordinate gets NOT_COORDINATOR (Kafka accepts the request on any broker; herd's admin client sends it to
the coordinator). Other resource types (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS) are not alterable
in herd and get INVALID_REQUEST; a resource named twice in one request gets INVALID_REQUEST for each copy,
as in Kafka. `validate_only` validates without changing anything.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from herd.coordinator import GroupCoordinatorShard
from herd.coordinator.requests import AlterGroupConfigs, GroupConfigOp
from herd.coordinator.responses import AlterGroupConfigsResponse
from herd.server.apis._build import ctx_builder
from herd.server.apis._groups import call, client_host, client_id, gather
from herd.server.broker import RequestContext

API_KEY = 44
MIN_VERSION = 0
MAX_VERSION = 1

GROUP = 32


def handle(ctx: RequestContext, request: Any) -> Any:
    resources = list(request.resources)
    counts = Counter((r.resource_type, r.resource_name) for r in resources)
    outcomes = [_alter_one(ctx, r, request.validate_only, counts[(r.resource_type, r.resource_name)] > 1)
                for r in resources]

    def respond(responses: list[AlterGroupConfigsResponse]) -> Any:
        b = ctx_builder(ctx)
        results = tuple(b("AlterConfigsResourceResponse", error_code=resp.error_code,
                          error_message=resp.error_message, resource_type=r.resource_type,
                          resource_name=r.resource_name)
                        for r, resp in zip(resources, responses, strict=True))
        return b.response(throttle_time=0, responses=results)

    return gather(outcomes, respond)


def _alter_one(ctx: RequestContext, resource: Any, validate_only: bool, duplicated: bool) -> Any:
    if duplicated:
        return _error(ErrorCode.invalid_request, "Duplicate resource.")
    if resource.resource_type != GROUP:
        return _error(ErrorCode.invalid_request, f"herd alters only GROUP resources (type {GROUP}), not type "
                                                 f"{resource.resource_type}")
    group_id = resource.resource_name
    if not group_id:
        return _error(ErrorCode.invalid_request, "Default group resources are not allowed.")
    ops = tuple(GroupConfigOp(c.name, int(c.config_operation), c.value) for c in resource.configs)
    req = AlterGroupConfigs(group_id=group_id, ops=ops, validate_only=validate_only, api_version=ctx.api_version,
                            client_id=client_id(ctx), client_host=client_host(ctx))
    return call(ctx, group_id, GroupCoordinatorShard.alter_group_configs, req, lambda code: _error(code, None))


def _error(code: int, message: str | None) -> AlterGroupConfigsResponse:
    return AlterGroupConfigsResponse(error_code=code, error_message=message)
