"""DescribeAcls (key 29), v1-v3.

v1: pattern type filter (KIP-290: ANY, MATCH, LITERAL, PREFIXED). v2: flexible. v3: no change (KIP-896 drops v0).
Kafka 4.x serves v1-v3.

As apache/kafka core/src/main/scala/kafka/server/AclApis.scala handleDescribeAcls: SECURITY_DISABLED without an
authorizer, CLUSTER_AUTHORIZATION_FAILED without DESCRIBE on the cluster, INVALID_REQUEST for a filter with an
UNKNOWN (or unknown) code; otherwise the ACLs the filter matches (herd.security.acls AclFilter: Kafka's
AclBindingFilter), grouped by resource pattern (DescribeAclsResponse.aclsResources).
"""

from __future__ import annotations

from itertools import groupby
from typing import Any

from kio.schema.errors import ErrorCode

from herd.security.acls import Operation
from herd.server.apis._acl_apis import acl_filter, refusal
from herd.server.apis._build import ctx_builder
from herd.server.broker import RequestContext

API_KEY = 29
MIN_VERSION = 1
MAX_VERSION = 3


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    flt = acl_filter(request)
    refused = refusal(ctx, Operation.DESCRIBE)
    if refused is None and (problem := flt.problem()) is not None:
        refused = (ErrorCode.invalid_request, problem)
    if refused is not None:
        return b.response(throttle_time=0, error_code=refused[0], error_message=refused[1], resources=())
    acls = ctx.broker.authorizer.acls(flt)
    resources = tuple(
        b(
            "DescribeAclsResource",
            resource_type=rtype,
            resource_name=name,
            pattern_type=pattern,
            acls=tuple(
                b(
                    "AclDescription",
                    principal=a.principal,
                    host=a.host,
                    operation=a.operation,
                    permission_type=a.permission,
                )
                for a in group
            ),
        )
        for (rtype, name, pattern), group in groupby(acls, lambda a: (a.resource_type, a.resource_name, a.pattern_type))
    )
    return b.response(throttle_time=0, error_code=ErrorCode.none, error_message=None, resources=resources)
