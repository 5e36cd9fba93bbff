"""CreatePartitions (key 37), v0-v3.

v1: no body change. v2: flexible. v3: no body change. Kafka 4.x serves v0-v3.

Grows a topic to `count` partitions. A count that is not larger than the current one gets INVALID_PARTITIONS,
an unknown topic UNKNOWN_TOPIC_OR_PARTITION, a manual assignment naming another broker
INVALID_REPLICA_ASSIGNMENT; a topic named twice in one request INVALID_REQUEST.

A request adding more than 10,000 partitions in all is refused for every topic with POLICY_VIOLATION "Unable to
perform excessively large batch operation.", as Kafka's controller refuses a user operation of more than
QuorumController.MAX_RECORDS_PER_USER_OP records (apache/kafka metadata/src/main/java/org/apache/kafka/
controller/ReplicationControlManager.java, createPartitions); growing past `max.broker.partitions` gets
POLICY_VIOLATION. The new partitions are made all or none; a disk failure gets KAFKA_STORAGE_ERROR.

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
ALTER on each topic, else TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from herd.cluster.topics import MAX_PARTITIONS_PER_REQUEST, TopicError
from herd.server.apis._authorize import ALTER, TOPIC, authorized
from herd.server.apis._build import ctx_builder
from herd.server.broker import RequestContext

API_KEY = 37
MIN_VERSION = 0
MAX_VERSION = 3

log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    counts = Counter(t.name for t in request.topics)
    results = []
    added = _new_partitions(ctx, request.topics)
    if added > MAX_PARTITIONS_PER_REQUEST:
        log.warning(
            "refused a CreatePartitions request adding %d partitions from %s (at most %d per request)",
            added,
            ctx.header.client_id,
            MAX_PARTITIONS_PER_REQUEST,
        )
        results = [
            b(
                "CreatePartitionsTopicResult",
                name=t.name,
                error_code=ErrorCode.policy_violation,
                error_message="Unable to perform excessively large batch operation.",
            )
            for t in request.topics
        ]
        return b.response(throttle_time=0, results=tuple(results))
    for topic in request.topics:
        error, message = await _grow(ctx, topic, request.validate_only, counts[topic.name] > 1)
        results.append(b("CreatePartitionsTopicResult", name=topic.name, error_code=error, error_message=message))
    return b.response(throttle_time=0, results=tuple(results))


def _new_partitions(ctx: RequestContext, topics: Any) -> int:
    total = 0
    for topic in topics:
        existing = ctx.broker.cluster.get(topic.name)
        if existing is not None and topic.count > len(existing.partitions):
            total += topic.count - len(existing.partitions)
    return total


async def _grow(ctx: RequestContext, topic: Any, validate_only: bool, duplicate: bool) -> tuple[ErrorCode, str | None]:
    node = ctx.broker.node_id
    if duplicate:
        return ErrorCode.invalid_request, "Duplicate topic in request."
    if not authorized(ctx, ALTER, TOPIC, topic.name):
        return ErrorCode.topic_authorization_failed, "The topic authorization is failed."
    if topic.assignments and ctx.broker.admin.places_partitions:
        return ErrorCode.invalid_replica_assignment, "In cluster mode herd places partitions itself."
    if topic.assignments and any(list(a.broker_ids) != [node] for a in topic.assignments):
        return ErrorCode.invalid_replica_assignment, f"Every replica must be on broker {node}."
    existing = ctx.broker.cluster.get(topic.name)
    if existing is not None and existing.internal:
        return ErrorCode.invalid_request, f"Cannot add partitions to internal topic {topic.name}"
    try:
        await ctx.broker.admin.add_partitions(topic.name, topic.count, validate_only=validate_only)
    except TopicError as e:
        return ErrorCode(e.error_code), str(e)
    return ErrorCode.none, None
