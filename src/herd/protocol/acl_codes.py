"""The codes of Kafka's ACL APIs (CreateAcls, DescribeAcls, DeleteAcls), with Kafka's names, shared by the broker's
authorizer (herd.security.acls) and the client's ACL administration (herd.client.admin_acls): apache/kafka
clients/src/main/java/org/apache/kafka/common/resource/ResourceType.java, PatternType.java and
clients/src/main/java/org/apache/kafka/common/acl/AclOperation.java, AclPermissionType.java. herd_acls and
acls.json store the same codes."""

from __future__ import annotations

import enum

CLUSTER_NAME = "kafka-cluster"  # the one name of the CLUSTER resource
WILDCARD = "*"  # a LITERAL resource name, or a host, matching every one


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3
