"""DeleteTopics (key 20), v1-v6.

v1: throttle time (Kafka 4.x's lowest, KIP-896). v4: flexible. v5: error message. v6: topics by name or id.

Internal topics cannot be deleted (INVALID_TOPIC_EXCEPTION); with delete.topic.enable=false every deletion
gets TOPIC_DELETION_DISABLED. A deleted topic's data is removed at once, and the group coordinator writes
tombstones for the offsets committed on it (Kafka's onPartitionsDeleted). A deletion the disk refuses gets
KAFKA_STORAGE_ERROR and changes nothing (the topic stays, with its data).

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED (by name: before its
existence is looked at).
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from herd.cluster.topics import TopicError
from herd.server.apis._authorize import DELETE, TOPIC, authorized
from herd.server.apis._build import ctx_builder
from herd.server.broker import RequestContext

API_KEY = 20
MIN_VERSION = 1
MAX_VERSION = 6

_ZERO = uuid.UUID(int=0)


async def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    results = []
    for name, topic_id in wanted:
        error, message, name, topic_id = await _delete(ctx, name, topic_id)
        results.append(
            b("DeletableTopicResult", name=name, topic_id=topic_id or _ZERO, error_code=error, error_message=message)
        )
    return b.response(throttle_time=0, responses=tuple(results))


async def _delete(
    ctx: RequestContext, name: str | None, topic_id: uuid.UUID | None
) -> tuple[ErrorCode, str | None, Any, Any]:
    cluster = ctx.broker.cluster
    topic = cluster.get(name) if name else (cluster.by_id(topic_id) if topic_id else None)
    # by name, checked before its existence is (ControllerApis.deleteTopics); by id, once it is found
    target = name or (topic.name if topic is not None else None)
    if target and not authorized(ctx, DELETE, TOPIC, target):
        return ErrorCode.topic_authorization_failed, "Authorization failed.", name or None, topic_id
    if topic is None:
        code = ErrorCode.unknown_topic_id if not name and topic_id else ErrorCode.unknown_topic_or_partition
        return code, "This server does not host this topic.", name, topic_id
    if not ctx.broker.config.get("delete.topic.enable"):
        return ErrorCode.topic_deletion_disabled, "Topic deletion is disabled.", topic.name, topic.topic_id
    if topic.internal:
        return (
            ErrorCode.invalid_topic_exception,
            f"Cannot delete internal topic {topic.name}",
            topic.name,
            topic.topic_id,
        )
    try:
        await ctx.broker.admin.delete_topic(topic.name)  # which tells the node (Broker.forget_topics)
    except TopicError as e:
        return ErrorCode(e.error_code), str(e), topic.name, topic.topic_id
    return ErrorCode.none, None, topic.name, topic.topic_id
