"""Authorization in the handlers: whether the request's principal may do an operation on a resource, and the
authorized operations fields.

Without an authorizer (authorizer.class.name empty) every check answers yes after one attribute test, and the
authorized operations, when asked for (Metadata v8+, DescribeCluster, DescribeGroups v3+; DescribeTopicPartitions
always), are every operation the resource type supports, as a bit field of AclOperation codes (apache/kafka
core/src/main/scala/kafka/server/AuthHelper.scala authorizedOperations with no authorizer: AclEntry
.supportedOperations; codes in clients/src/main/java/org/apache/kafka/common/acl/AclOperation.java). With an
authorizer, the operations the ACLs allow the principal (herd.security.acls). Not asked, NOT_REQUESTED.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from herd.security.acls import CLUSTER_NAME, SUPPORTED, ResourceType

if TYPE_CHECKING:
    from herd.server.broker import RequestContext

# denials, as Kafka's authorizer logs them to kafka.authorizer.logger (at INFO there; DEBUG here: a client retrying
# a denied request would fill the log)
audit = logging.getLogger("herd.security.authorizer")

NOT_REQUESTED = -(2**31)  # Integer.MIN_VALUE: "authorized operations were not asked for"

# AclOperation codes
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12


def _bits(*operations: int) -> int:
    return sum(1 << op for op in operations)


# -- with an authorizer (authorizer.class.name) ------------------------------------------------------------------
#
# Every handler asks through these, so that without an authorizer a check costs one attribute test. The principal
# and host are the connection's (Session); the decision is herd.security.acls'.

TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = (
    int(ResourceType.TOPIC),
    int(ResourceType.GROUP),
    int(ResourceType.CLUSTER),
    int(ResourceType.TRANSACTIONAL_ID),
)  # plain ints hash fastest
# every operation each resource type supports (AclEntry.supportedOperations), as a bit field
ALL_OPERATIONS = {int(kind): _bits(*ops) for kind, ops in SUPPORTED.items()}
TOPIC_OPERATIONS = ALL_OPERATIONS[TOPIC]


def authorized(ctx: RequestContext, operation: int, resource_type: int, name: str) -> bool:
    """May the request's principal do `operation` on the resource (always, without an authorizer)?"""
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return True
    session = ctx.session
    if authorizer.authorize(session.principal, session.host, operation, resource_type, name):
        return True
    if audit.isEnabledFor(logging.DEBUG):
        audit.debug(
            "Principal = %s is Denied operation = %s from host = %s on resource = %s:%s for request = %s",
            session.principal,
            operation,
            session.host,
            resource_type,
            name,
            ctx.header.api_key,
        )
    return False


def authorized_cluster(ctx: RequestContext, operation: int) -> bool:
    """`authorized` on the cluster (Kafka's AuthHelper.authorize on CLUSTER "kafka-cluster")."""
    return authorized(ctx, operation, CLUSTER, CLUSTER_NAME)


def authorized_any(ctx: RequestContext, operation: int, resource_type: int) -> bool:
    """May the principal do `operation` on some resource of the type (Kafka's authorizeByResourceType)?"""
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return True
    session = ctx.session
    return authorizer.authorize_by_resource_type(session.principal, session.host, operation, resource_type)


def authorized_operations(ctx: RequestContext, asked: bool, resource_type: int, name: str) -> int:
    """The authorized operations field: NOT_REQUESTED when not `asked`, every operation of the type without an
    authorizer, else those the principal may do on the resource (AuthHelper.authorizedOperations)."""
    if not asked:
        return NOT_REQUESTED
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return ALL_OPERATIONS[resource_type]
    session = ctx.session
    return authorizer.authorized_operations(session.principal, session.host, resource_type, name)


def topic_denied(ctx: RequestContext, entry: Any, topic: Any, operation: int) -> bool:
    """Whether the principal may not do `operation` on the topic a request's entry names (by `name` or `topic`,
    else the `topic` it resolved to by id; an unknown id is not denied, it is unknown). Call it only with an
    authorizer."""
    name = getattr(entry, "name", None) or getattr(entry, "topic", None) or (topic.name if topic is not None else None)
    return bool(name) and not authorized(ctx, operation, TOPIC, name)


def cluster_operations(ctx: RequestContext, asked: bool) -> int:
    """The cluster authorized operations field (Metadata v8-v10, DescribeCluster): as `authorized_operations`, but 0
    when the principal may not DESCRIBE the cluster (AuthHelper.computeDescribeClusterResponse, KafkaApis
    .handleTopicMetadataRequest)."""
    ops = authorized_operations(ctx, asked, CLUSTER, CLUSTER_NAME)
    return ops if ops == NOT_REQUESTED or ops & (1 << DESCRIBE) else 0
