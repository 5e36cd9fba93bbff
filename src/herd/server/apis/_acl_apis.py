"""What CreateAcls, DescribeAcls and DeleteAcls share: the refusals before any ACL is looked at, as apache/kafka
core/src/main/scala/kafka/server/AclApis.scala answers them (SECURITY_DISABLED without an authorizer, else
CLUSTER_AUTHORIZATION_FAILED without the cluster operation), and the filter of a request."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.security.acls import AclFilter
from herd.server.apis._authorize import authorized_cluster
from herd.server.broker import RequestContext


def refusal(ctx: RequestContext, operation: int) -> tuple[ErrorCode, str] | None:
    """Why the request is refused as a whole, or None."""
    if ctx.broker.authorizer is None:
        return ErrorCode.security_disabled, "No Authorizer is configured."
    if not authorized_cluster(ctx, operation):
        return ErrorCode.cluster_authorization_failed, "Cluster authorization failed."
    return None


def acl_filter(f: Any) -> AclFilter:
    """The filter of a DescribeAcls request or a DeleteAcls filter (the same fields)."""
    return AclFilter(
        f.resource_type_filter,
        f.resource_name_filter,
        f.pattern_type_filter,
        f.principal_filter,
        f.host_filter,
        f.operation,
        f.permission_type,
    )
