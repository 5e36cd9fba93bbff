"""AlterPartitionReassignments (key 45), v0-v1.

v1: allow_replication_factor_change (KIP-860; when false, a reassignment that changes a partition's replica count
is refused). Kafka 4.x serves v0-v1.

Each partition is answered on its own, as Kafka's controller does (apache/kafka metadata/src/main/java/org/apache/
kafka/controller/ReplicationControlManager.java, alterPartitionReassignment, validateManualPartitionAssignment):
UNKNOWN_TOPIC_OR_PARTITION ("Unable to find a topic named t.", "Unable to find partition t:3."); a null replica
list cancels a reassignment in progress, and none ever is (below): NO_REASSIGNMENT_IN_PROGRESS; an empty list, a
node that is not a live node ("... includes broker 7, but no such broker is registered.") or one named twice:
INVALID_REPLICA_ASSIGNMENT with Kafka's messages.

herd keeps one replica of each partition, its leader (PostgreSQL stores it once in cluster mode; docs/
compatibility.md), so a reassignment names one node, the partition's new leader. Several replicas cannot be
honoured: INVALID_REPLICATION_FACTOR ("The replication factor is changed from 1 to 3", Kafka's words) when the
request forbids changing the replication factor, otherwise INVALID_REPLICA_ASSIGNMENT saying that herd keeps one
replica. A reassignment to the node that leads the partition changes nothing (NONE, as Kafka answers a
reassignment to the current replicas). In cluster mode a reassignment to another node moves the leadership there
(`SharedCluster.move_partition`, as a move on demand: docs/cluster.md), with a new leader epoch; it is complete
when answered (the new leader takes the partition over a few milliseconds later, as after any move), so
ListPartitionReassignments never lists one. A database failure is that partition's KAFKA_STORAGE_ERROR. On one node
the only node there is leads everything. The timeout is not waited for.

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED at the top and per
partition.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.cluster.placement import MoveError
from herd.server.apis._authorize import ALTER, authorized_cluster
from herd.server.apis._build import ctx_builder
from herd.server.broker import RequestContext

API_KEY = 45
MIN_VERSION = 0
MAX_VERSION = 1

# MoveError's HTTP status (herd.cluster.shared) -> the error a reassignment answers, for a change the view did not
# foresee (another node moved or deleted the partition meanwhile)
_MOVE_ERRORS = {
    404: ErrorCode.unknown_topic_or_partition,
    400: ErrorCode.invalid_replica_assignment,
    503: ErrorCode.kafka_storage_error,
}


class Refused(Exception):
    """A partition's reassignment refused: the error code and Kafka's message."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error


async def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    allow = getattr(request, "allow_replication_factor_change", True)
    allowed = authorized_cluster(ctx, ALTER)  # else the error at the top and on every partition (getErrorResponse)
    topics = []
    for topic in request.topics:
        partitions = []
        for partition in topic.partitions:
            if allowed:
                error, message = await _reassign(ctx, topic.name, partition, allow)
            else:
                error, message = ErrorCode.cluster_authorization_failed, None
            partitions.append(
                b(
                    "ReassignablePartitionResponse",
                    partition_index=partition.partition_index,
                    error_code=error,
                    error_message=message,
                )
            )
        topics.append(b("ReassignableTopicResponse", name=topic.name, partitions=tuple(partitions)))
    return b.response(
        throttle_time=0,
        allow_replication_factor_change=allow,
        error_code=ErrorCode.none if allowed else ErrorCode.cluster_authorization_failed,
        error_message=None,
        responses=tuple(topics),
    )


async def _reassign(ctx: RequestContext, topic: str, partition: Any, allow: bool) -> tuple[ErrorCode, str | None]:
    try:
        target = _target(ctx, topic, partition, allow)
        if target != ctx.broker.cluster.leader(topic, partition.partition_index)[0]:
            await _move(ctx, topic, partition.partition_index, target)
    except Refused as e:
        return e.error, str(e)
    return ErrorCode.none, None


def _target(ctx: RequestContext, topic: str, partition: Any, allow: bool) -> int:
    """The node the partition is to be led by. Raises Refused."""
    found = ctx.broker.cluster.get(topic)
    if found is None:
        raise Refused(ErrorCode.unknown_topic_or_partition, f"Unable to find a topic named {topic}.")
    index = partition.partition_index
    if not 0 <= index < len(found.partitions):
        raise Refused(ErrorCode.unknown_topic_or_partition, f"Unable to find partition {topic}:{index}.")
    if partition.replicas is None:
        raise Refused(ErrorCode.no_reassignment_in_progress, "No partition reassignment is in progress.")
    replicas = [int(r) for r in partition.replicas]
    _check_assignment(replicas, {n.node_id for n in ctx.broker.nodes()})
    if len(replicas) != 1:
        if not allow:
            raise Refused(
                ErrorCode.invalid_replication_factor, f"The replication factor is changed from 1 to {len(replicas)}"
            )
        raise Refused(
            ErrorCode.invalid_replica_assignment,
            f"herd keeps one replica of each partition, its leader: a reassignment names the one node to "
            f"lead it, not {len(replicas)}.",
        )
    return replicas[0]


def _check_assignment(replicas: list[int], live: set[int]) -> None:
    """ReplicationControlManager.validateManualPartitionAssignment, with herd's live nodes as the registered
    brokers. Raises Refused."""
    if not replicas:
        raise Refused(
            ErrorCode.invalid_replica_assignment, "The manual partition assignment includes an empty replica list."
        )
    previous = None
    for node in sorted(replicas):
        if node not in live:
            raise Refused(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes broker {node}, but no such broker is registered.",
            )
        if node == previous:
            raise Refused(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes the broker {node} more than once.",
            )
        previous = node


async def _move(ctx: RequestContext, topic: str, index: int, target: int) -> None:
    """Cluster mode: lead the partition from `target` (one node: `_target` allowed only the leader). Raises
    Refused."""
    try:
        await ctx.broker.cluster.move_partition(topic, index, target)  # type: ignore[attr-defined]
    except MoveError as e:
        if e.status == 409:  # the target led it already: nothing to change
            return
        raise Refused(_MOVE_ERRORS.get(e.status, ErrorCode.unknown_server_error), str(e)) from None
