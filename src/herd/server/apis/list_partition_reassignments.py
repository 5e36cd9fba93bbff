"""ListPartitionReassignments (key 46), v0. Kafka 4.x serves v0.

Kafka lists the partitions whose replicas are being changed (adding replicas catching up, removing ones to drop),
those asked for or (a null topic list) all of them; topics and partitions that do not exist, or are not being
reassigned, are left out without an error (apache/kafka metadata/src/main/java/org/apache/kafka/controller/
ReplicationControlManager.java, listPartitionReassignments).

herd has no replicas to catch up: a reassignment (AlterPartitionReassignments) moves a partition's leadership in
one PostgreSQL transaction and is complete once answered, so none is ever in progress and the list is always
empty. (The new leader opens the partition a few milliseconds after the move, as after any leadership change;
clients meanwhile get NOT_LEADER_OR_FOLLOWER and retry, which is not a reassignment in Kafka's sense either.)

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.server.apis._authorize import DESCRIBE, authorized_cluster
from herd.server.apis._build import ctx_builder
from herd.server.broker import RequestContext

API_KEY = 46
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx: RequestContext, request: Any) -> Any:
    error = ErrorCode.none if authorized_cluster(ctx, DESCRIBE) else ErrorCode.cluster_authorization_failed
    return ctx_builder(ctx).response(throttle_time=0, error_code=error, error_message=None, topics=())
