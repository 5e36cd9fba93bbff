"""Authorized operations, as a Kafka broker without an authorizer answers them (herd has no ACLs).

Asked for them (Metadata v8+, DescribeCluster, DescribeGroups v3+; DescribeTopicPartitions always), Kafka
answers every operation the resource type supports, as a bit field of AclOperation codes (apache/kafka
core/src/main/scala/kafka/server/AuthHelper.scala authorizedOperations with no authorizer: AclEntry
.supportedOperations; codes in clients/src/main/java/org/apache/kafka/common/acl/AclOperation.java). Not asked,
it answers NOT_REQUESTED.
"""

from __future__ import annotations

NOT_REQUESTED = -(2**31)  # Integer.MIN_VALUE: "authorized operations were not asked for"

# AclOperation codes
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12


def _bits(*operations: int) -> int:
    return sum(1 << op for op in operations)


# AclEntry.supportedOperations of each resource type
CLUSTER_OPERATIONS = _bits(CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE)
TOPIC_OPERATIONS = _bits(READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS)
GROUP_OPERATIONS = _bits(READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS)


def operations(asked: bool, every: int) -> int:
    """What to answer for a resource whose type supports `every`: all of it when `asked`, else NOT_REQUESTED."""
    return every if asked else NOT_REQUESTED
