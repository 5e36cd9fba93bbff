"""CreateTopics (key 19), v2-v7.

v2-v4: no body change worth noting (Kafka 4.x's lowest is v2, KIP-896). v5: flexible; the answer carries the
partition count, replication factor and configs of each topic. v6: no body change. v7: topic ids.

A single node can hold one replica: a replication factor other than -1 or 1 gets INVALID_REPLICATION_FACTOR,
and a manual assignment naming another broker INVALID_REPLICA_ASSIGNMENT. Partition count -1 means
num.partitions. Names appearing twice in one request get INVALID_REQUEST, as in Kafka.

Limits, as Kafka's KRaft controller (apache/kafka metadata/src/main/java/org/apache/kafka/controller/
ReplicationControlManager.java, validateTotalNumberOfPartitions): a request asking for more than 10,000
partitions in all gets POLICY_VIOLATION "Excessively large number of partitions per request." for every topic,
before anything is created; a topic that would take the broker over `max.broker.partitions` gets
POLICY_VIOLATION. A topic is created with all its partitions or not at all; a disk failure gets
KAFKA_STORAGE_ERROR with nothing left behind.

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
CREATE on the cluster or the topic, else TOPIC_AUTHORIZATION_FAILED; without
DESCRIBE_CONFIGS on the topic its configs are left out of the answer (topic_config_error_code
TOPIC_AUTHORIZATION_FAILED), as ControllerApis.createTopics does.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from herd.cluster.topics import MAX_PARTITIONS_PER_REQUEST, TOO_MANY_PER_REQUEST, TopicError
from herd.server.apis._authorize import CREATE, DESCRIBE_CONFIGS, TOPIC, authorized, authorized_cluster
from herd.server.apis._build import Builder, ctx_builder
from herd.server.apis.describe_configs import topic_entries
from herd.server.broker import RequestContext

API_KEY = 19
MIN_VERSION = 2
MAX_VERSION = 7

log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    counts = Counter(t.name for t in request.topics)
    results = []
    requested = _total_partitions(request.topics, ctx.broker.config.get("num.partitions"))
    if requested > MAX_PARTITIONS_PER_REQUEST:
        log.warning(
            "refused a CreateTopics request for %d partitions from %s (at most %d per request)",
            requested,
            ctx.header.client_id,
            MAX_PARTITIONS_PER_REQUEST,
        )
        results = [_error(b, t.name, ErrorCode.policy_violation, TOO_MANY_PER_REQUEST) for t in request.topics]
        return b.response(throttle_time=0, topics=tuple(results))
    for topic in request.topics:
        if counts[topic.name] > 1:
            results.append(_error(b, topic.name, ErrorCode.invalid_request, "Duplicate topic name."))
        elif not (authorized_cluster(ctx, CREATE) or authorized(ctx, CREATE, TOPIC, topic.name)):
            results.append(_error(b, topic.name, ErrorCode.topic_authorization_failed, "Authorization failed."))
        else:
            results.append(await _create(b, ctx, topic, request.validate_only))
    return b.response(throttle_time=0, topics=tuple(results))


def _total_partitions(topics: Any, default: int) -> int:
    """ReplicationControlManager.validateTotalNumberOfPartitions: the partitions the whole request asks for."""
    return sum(max(_partition_count(topic, default), 0) for topic in topics)


def _partition_count(topic: Any, default: int) -> int:
    """The partitions one topic of the request asks for: its assignments, else num_partitions (-1: the default)."""
    if topic.assignments:
        return len(topic.assignments)
    return default if topic.num_partitions == -1 else topic.num_partitions


async def _create(b: Builder, ctx: RequestContext, topic: Any, validate_only: bool) -> Any:
    broker = ctx.broker
    # In cluster mode PostgreSQL keeps the one copy of each partition (replicate PostgreSQL itself for more): a
    # replication factor up to the number of live nodes is accepted, so tools that ask for 3 work unchanged.
    available = len(broker.nodes())
    if (
        topic.replication_factor not in (-1, 1)
        and not topic.assignments
        and not (broker.admin.places_partitions and 0 < topic.replication_factor <= available)
    ):
        return _error(
            b,
            topic.name,
            ErrorCode.invalid_replication_factor,
            f"Replication factor {topic.replication_factor} is larger than the {available} available "
            f"broker{'s' if available != 1 else ''}.",
        )
    if topic.assignments and broker.admin.places_partitions:
        return _error(
            b, topic.name, ErrorCode.invalid_replica_assignment, "In cluster mode herd places partitions itself."
        )
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            return _error(
                b,
                topic.name,
                ErrorCode.invalid_request,
                "Both numPartitions or replicationFactor and replicasAssignments were set.",
            )
        if any(list(a.broker_ids) != [broker.node_id] for a in topic.assignments):
            return _error(
                b,
                topic.name,
                ErrorCode.invalid_replica_assignment,
                f"Every replica must be on broker {broker.node_id}.",
            )
    partitions = _partition_count(topic, broker.config.get("num.partitions"))
    configs = {c.name: c.value for c in topic.configs}
    try:
        created = await broker.admin.create_topic(topic.name, partitions, configs, validate_only=validate_only)
    except TopicError as e:
        return _error(b, topic.name, ErrorCode(e.error_code), str(e))
    entries = tuple(
        b(
            "CreatableTopicConfigs",
            name=e.name,
            value=e.value,
            read_only=False,
            config_source=e.source,
            is_sensitive=False,
        )
        for e in topic_entries(broker, created.configs)
    )
    config_error = 0
    if not authorized(ctx, DESCRIBE_CONFIGS, TOPIC, topic.name):  # ControllerApis.createTopics: configs hidden
        entries, config_error = (), ErrorCode.topic_authorization_failed
    return b(
        "CreatableTopicResult",
        name=topic.name,
        topic_id=created.topic_id,
        error_code=ErrorCode.none,
        error_message=None,
        topic_config_error_code=config_error,
        num_partitions=partitions,
        replication_factor=1,
        configs=entries,
    )


def _error(b: Builder, name: str, error: ErrorCode, message: str) -> Any:
    import uuid

    return b(
        "CreatableTopicResult",
        name=name,
        topic_id=uuid.UUID(int=0),
        error_code=error,
        error_message=message,
        topic_config_error_code=0,
        num_partitions=-1,
        replication_factor=-1,
        configs=(),
    )
