"""DescribeTopicPartitions (key 75), v0 (KIP-966; the Java admin client's describeTopics from Kafka 3.8 on).

The Metadata of topics, with their partitions paged: topics are described in name order, from the request's
`cursor` (its topic, from its partition index) on, until `response_partition_limit` partitions are given (at
least 1, at most Kafka's default `max.request.partition.size.limit`, 2,000); `next_cursor` then names the first
partition not given, or is null when everything was. As Kafka's DescribeTopicPartitionsRequestHandler and
KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse (apache/kafka core/src/main/java/kafka/server/handlers/,
core/src/main/scala/kafka/server/metadata/): an empty topic list means every topic (names before the cursor's
skipped); topics asked for are described once each, and one that does not exist gets UNKNOWN_TOPIC_OR_PARTITION
(INVALID_TOPIC_EXCEPTION for an illegal name) with no partitions, where a listing of every topic just leaves it
out; a cursor whose topic is not among the topics asked for, or with a negative partition index, is an invalid
request, answered (as DescribeTopicPartitionsRequest.getErrorResponse) with INVALID_REQUEST for every topic asked
for. When the limit runs out exactly at the end of a topic, the cursor names the next topic's partition 0.

Each partition is as Metadata gives it: its leader and leader epoch (real epochs in cluster mode; while no live
node leads it, leader -1 and no replicas, with no error, as Kafka answers a partition without a live leader), the
leader as the only replica and in-sync replica (herd has no followers: docs/compatibility.md), no eligible leader
replicas and no last known ELR (KIP-966's ELR needs followers), no offline replicas. Topic authorized operations
are those the ACLs allow the principal (every topic operation without an authorizer), for the topics it does not
know too, as Kafka's handler sets them on every topic it described. With an authorizer, topics the principal may
not DESCRIBE are left out of a listing and answered TOPIC_AUTHORIZATION_FAILED when named
(DescribeTopicPartitionsRequestHandler).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from herd.cluster.topics import Topic, TopicError, check_topic_name
from herd.server.apis._authorize import DESCRIBE, NOT_REQUESTED, TOPIC, authorized, authorized_operations
from herd.server.apis._build import Builder, ctx_builder
from herd.server.broker import RequestContext

API_KEY = 75
MIN_VERSION = 0
MAX_VERSION = 0

MAX_PARTITIONS = 2000  # Kafka's max.request.partition.size.limit default (ServerConfigs)
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


@dataclass(frozen=True, slots=True)
class Cursor:
    topic: str
    partition: int


class InvalidCursor(Exception):
    """The request's cursor cannot be followed (Kafka's InvalidRequestException)."""


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    cursor = Cursor(request.cursor.topic_name, request.cursor.partition_index) if request.cursor else None
    try:
        names = _names(ctx, request, cursor)
    except InvalidCursor:
        return b.response(
            throttle_time=0,
            next_cursor=None,
            topics=tuple(
                _error(b, ErrorCode.invalid_request, t.name, internal=False, operations=NOT_REQUESTED)
                for t in request.topics
            ),
        )
    limit = max(min(MAX_PARTITIONS, request.response_partition_limit), 1)
    topics, next_cursor = _page(b, ctx, names, cursor, limit, listing=not request.topics)
    return b.response(throttle_time=0, topics=tuple(topics), next_cursor=next_cursor)


def _names(ctx: RequestContext, request: Any, cursor: Cursor | None) -> list[str]:
    """The topics to describe, by name, from the cursor's topic on. Raises InvalidCursor."""
    start = cursor.topic if cursor else ""
    asked = [t.name for t in request.topics] if request.topics else [t.name for t in ctx.broker.cluster.topics()]
    names = sorted({name for name in asked if name >= start})
    if cursor is not None and ((request.topics and cursor.topic not in names) or cursor.partition < 0):
        raise InvalidCursor
    return names


def _page(b: Builder, ctx: RequestContext, names: list[str], cursor: Cursor | None, limit: int,
          listing: bool) -> tuple[list[Any], Any]:  # fmt: skip
    """The topics described within `limit` partitions, and the cursor of the rest (None: nothing is left)."""
    topics: list[Any] = []
    remaining = limit
    for name in names:
        if remaining == 0:
            return topics, b("Cursor", topic_name=name, partition_index=0)
        if ctx.broker.authorizer is not None and not authorized(ctx, DESCRIBE, TOPIC, name):
            if not listing:  # its existence is not disclosed (DescribeTopicPartitionsRequestHandler)
                topics.append(
                    _error(b, ErrorCode.topic_authorization_failed, name, internal=False, operations=NOT_REQUESTED)
                )
            continue
        topic = ctx.broker.cluster.get(name)
        if topic is None:
            if not listing:
                topics.append(_unknown(ctx, b, name))
            continue
        start = cursor.partition if cursor is not None and cursor.topic == name else 0
        end = min(len(topic.partitions), start + remaining)
        topics.append(_describe(b, ctx, topic, range(start, end)))
        if end < len(topic.partitions):
            return topics, b("Cursor", topic_name=name, partition_index=end)
        remaining -= max(end - start, 0)
    return topics, None


def _describe(b: Builder, ctx: RequestContext, topic: Topic, indexes: range) -> Any:
    partitions = []
    for i in indexes:
        node, epoch = ctx.broker.cluster.leader(topic.name, i)
        replicas = (node,) if node >= 0 else ()
        partitions.append(
            b(
                "DescribeTopicPartitionsResponsePartition",
                error_code=ErrorCode.none,
                partition_index=i,
                leader_id=node,
                leader_epoch=epoch,
                replica_nodes=replicas,
                isr_nodes=replicas,
                eligible_leader_replicas=(),
                last_known_elr=(),
                offline_replicas=(),
            )
        )
    return b(
        "DescribeTopicPartitionsResponseTopic",
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        partitions=tuple(partitions),
        topic_authorized_operations=authorized_operations(ctx, True, TOPIC, topic.name),
    )


def _unknown(ctx: RequestContext, b: Builder, name: str) -> Any:
    try:
        check_topic_name(name)
    except TopicError:
        code = ErrorCode.invalid_topic_exception
    else:
        code = ErrorCode.unknown_topic_or_partition
    operations = authorized_operations(ctx, True, TOPIC, name)
    return _error(b, code, name, internal=name in INTERNAL_TOPICS, operations=operations)


def _error(b: Builder, code: ErrorCode, name: str, *, internal: bool, operations: int) -> Any:
    return b(
        "DescribeTopicPartitionsResponseTopic",
        error_code=code,
        name=name,
        topic_id=uuid.UUID(int=0),
        is_internal=internal,
        partitions=(),
        topic_authorized_operations=operations,
    )
