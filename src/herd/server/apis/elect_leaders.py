"""ElectLeaders (key 43), v0-v2.

v1: election type (KIP-460: 0 preferred, 1 unclean; v0 elects the preferred leader) and a top-level error code.
v2: flexible. Kafka 4.x serves v0-v2.

As Kafka's controller answers (apache/kafka metadata/src/main/java/org/apache/kafka/controller/
ReplicationControlManager.java, electLeaders/electLeader): each partition asked for is answered on its own:
UNKNOWN_TOPIC_OR_PARTITION ("No such topic as t", "No such partition as t-3"), ELECTION_NOT_NEEDED when it
already has the leader the election would give it, PREFERRED_LEADER_NOT_AVAILABLE or
ELIGIBLE_LEADERS_NOT_AVAILABLE when no node can lead it, else NONE once its new leader is stored. A null
partition list elects every partition and leaves out of the answer those that needed no election (each topic is
listed, with the rest). An unknown election type fails the request: INVALID_REQUEST ("Unknown election type 5")
at the top and for every partition, as ElectLeadersRequest.getErrorResponse answers.

herd keeps one replica of each partition, its leader, so what a preferred leader is follows herd's placement
rules (herd.cluster.placement, `elect`): one node leads everything, so on one node every election is
ELECTION_NOT_NEEDED. In cluster mode a preferred election moves a partition to the node a balancing step would
give it (undoing the imbalance failovers and moves on demand leave, as Kafka's preferred election does), an
unclean one gives a leader to a partition that has no live one (what the next controller step would do, done
now); each partition moved gets a new leader epoch, as at any leadership change (docs/cluster.md). A database
failure fails the request with KAFKA_STORAGE_ERROR (nothing was elected). The timeout is not waited for: the
answer comes once the change is stored.

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED at the top and per partition.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.cluster.api import Elected
from herd.cluster.placement import Election
from herd.cluster.topics import TopicError
from herd.server.apis._authorize import ALTER, authorized_cluster
from herd.server.apis._build import Builder, ctx_builder
from herd.server.broker import RequestContext

API_KEY = 43
MIN_VERSION = 0
MAX_VERSION = 2

PREFERRED, UNCLEAN = 0, 1
NOT_NEEDED_MESSAGE = "Leader election not needed for topic partition."


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    if not authorized_cluster(ctx, ALTER):
        return _failed(b, request, ErrorCode.cluster_authorization_failed, None)
    election = getattr(request, "election_type", PREFERRED)
    if election not in (PREFERRED, UNCLEAN):
        return _failed(b, request, ErrorCode.invalid_request, f"Unknown election type {election}")
    return _elect(b, ctx, request, preferred=election == PREFERRED)


async def _elect(b: Builder, ctx: RequestContext, request: Any, *, preferred: bool) -> Any:
    asked = (
        None
        if request.topic_partitions is None
        else [(t.topic, int(p)) for t in request.topic_partitions for p in t.partitions]
    )
    try:
        elected = await ctx.broker.admin.elect_leaders(asked, preferred=preferred)
    except TopicError as e:
        return _failed(b, request, ErrorCode(e.error_code), str(e))
    return _answer(
        b, ctx, request, lambda topic, index: elected.get((topic, index)), PREFERRED if preferred else UNCLEAN
    )


def _answer(b: Builder, ctx: RequestContext, request: Any, outcome: Any, election: int) -> Any:
    """The response, with `outcome(topic, index)` the election of each partition (None: it does not exist)."""
    results = []
    if request.topic_partitions is None:
        for topic in sorted(ctx.broker.cluster.topics(), key=lambda t: t.name):
            outcomes = [(i, outcome(topic.name, i)) for i in range(len(topic.partitions))]
            results.append(
                _topic(
                    b,
                    topic.name,
                    [
                        _result(b, ctx, topic.name, i, e, election)
                        for i, e in outcomes
                        if e is not None and e.outcome is not Election.NOT_NEEDED
                    ],
                )
            )
    else:
        for entry in request.topic_partitions:
            results.append(
                _topic(
                    b,
                    entry.topic,
                    [
                        _result(b, ctx, entry.topic, int(p), outcome(entry.topic, int(p)), election)
                        for p in entry.partitions
                    ],
                )
            )
    return b.response(throttle_time=0, error_code=ErrorCode.none, replica_election_results=tuple(results))


def _result(b: Builder, ctx: RequestContext, topic: str, index: int, elected: Elected | None, election: int) -> Any:
    if elected is None:
        return _partition(b, index, *_unknown(ctx, topic, index))
    if elected.outcome is Election.ELECTED:
        return _partition(b, index, ErrorCode.none, None)
    if elected.outcome is Election.NOT_NEEDED:
        return _partition(b, index, ErrorCode.election_not_needed, NOT_NEEDED_MESSAGE)
    if election == PREFERRED:
        return _partition(b, index, ErrorCode.preferred_leader_not_available, "The preferred leader was not available.")
    return _partition(
        b, index, ErrorCode.eligible_leaders_not_available, "Eligible topic partition leaders are not available."
    )


def _unknown(ctx: RequestContext, topic: str, index: int) -> tuple[ErrorCode, str]:
    if ctx.broker.cluster.get(topic) is None:
        return ErrorCode.unknown_topic_or_partition, f"No such topic as {topic}"
    return ErrorCode.unknown_topic_or_partition, f"No such partition as {topic}-{index}"


def _failed(b: Builder, request: Any, error: ErrorCode, message: str | None) -> Any:
    """ElectLeadersRequest.getErrorResponse: the error at the top and for every partition asked for."""
    results = tuple(
        _topic(b, t.topic, [_partition(b, int(p), error, message) for p in t.partitions])
        for t in request.topic_partitions or ()
    )
    return b.response(throttle_time=0, error_code=error, replica_election_results=results)


def _topic(b: Builder, name: str, partitions: list[Any]) -> Any:
    return b("ReplicaElectionResult", topic=name, partition_result=tuple(partitions))


def _partition(b: Builder, index: int, error: ErrorCode, message: str | None) -> Any:
    return b("PartitionResult", partition_id=index, error_code=error, error_message=message)
