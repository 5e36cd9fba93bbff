"""DeleteAcls (key 31), v1-v3.

v1: pattern type filter (KIP-290). v2: flexible. v3: no change (KIP-896 drops v0). Kafka 4.x serves v1-v3.

As apache/kafka core/src/main/scala/kafka/server/AclApis.scala handleDeleteAcls: without an authorizer every filter
gets SECURITY_DISABLED, without ALTER on the cluster CLUSTER_AUTHORIZATION_FAILED. A filter with an UNKNOWN (or
unknown) code gets INVALID_REQUEST (AclControlManager.validateFilter); the others delete the ACLs they match, each
answered with the ACLs it deleted (an ACL two filters match is in both answers). The deletion is durable before the
answer; a storage failure is KAFKA_STORAGE_ERROR on each valid filter.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.security.acl_store import AclStoreError
from herd.security.acls import Acl, AclFilter, Operation
from herd.server.apis._acl_apis import acl_filter, refusal
from herd.server.apis._build import Builder, ctx_builder
from herd.server.broker import RequestContext

API_KEY = 31
MIN_VERSION = 1
MAX_VERSION = 3


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    refused = refusal(ctx, Operation.ALTER)
    if refused is not None:
        result = b("DeleteAclsFilterResult", error_code=refused[0], error_message=refused[1], matching_acls=())
        return b.response(throttle_time=0, filter_results=tuple(result for _ in request.filters))
    return _delete(ctx, [acl_filter(f) for f in request.filters])


async def _delete(ctx: RequestContext, filters: list[AclFilter]) -> Any:
    b = ctx_builder(ctx)
    problems = [f.problem() for f in filters]
    valid = [f for f, p in zip(filters, problems) if p is None]
    failed: str | None = None
    deleted: list[list[Acl]] = []
    try:
        deleted = await ctx.broker.acl_store.delete(valid) if valid else []
    except AclStoreError as e:
        failed = str(e)
    found = iter(deleted)
    results = []
    for problem in problems:
        if problem is not None:
            results.append(_result(b, ErrorCode.invalid_request, problem, []))
        elif failed is not None:
            results.append(_result(b, ErrorCode.kafka_storage_error, failed, []))
        else:
            results.append(_result(b, ErrorCode.none, None, next(found)))
    return b.response(throttle_time=0, filter_results=tuple(results))


def _result(b: Builder, code: ErrorCode, message: str | None, acls: list[Acl]) -> Any:
    matching = tuple(
        b(
            "DeleteAclsMatchingAcl",
            error_code=ErrorCode.none,
            error_message=None,
            resource_type=a.resource_type,
            resource_name=a.resource_name,
            pattern_type=a.pattern_type,
            principal=a.principal,
            host=a.host,
            operation=a.operation,
            permission_type=a.permission,
        )
        for a in acls
    )
    return b("DeleteAclsFilterResult", error_code=code, error_message=message, matching_acls=matching)
