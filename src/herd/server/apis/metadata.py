"""Metadata (key 3), v0-v13.

v0: an empty topic list means every topic. v1: null means every topic, and an empty list none; controller id,
is_internal, rack. v2: cluster id. v4: allow_auto_topic_creation. v5: offline replicas. v7: leader epoch.
v8: authorized operations (herd.server.apis._authorize: every operation without an authorizer). v9: flexible. v10: topic
ids, and topics may be asked for by id. v11: cluster authorized operations removed. v12: topic names nullable in the
request. v13: top-level error code (Kafka 4.x's maximum). A topic without a name before v12, by id before v12,
or with neither name nor id gets INVALID_REQUEST, as Kafka's InvalidRequestException answers.

Brokers are the live nodes (one on an embedded node); each partition names its leader and leader epoch
(LEADER_NOT_AVAILABLE while no live node leads it, as when its leader just died and no other has taken it over
yet). Every node answers for the whole cluster; the controller id is the answering node, which serves admin
requests itself. An unknown topic is created when both the request (v4+; always before v4) and
`auto.create.topics.enable` allow it and its name is legal; otherwise UNKNOWN_TOPIC_OR_PARTITION (or
INVALID_TOPIC_EXCEPTION for an illegal name, UNKNOWN_TOPIC_ID for an unknown id). An auto-creation that cannot
be done is that topic's error and nothing else changes: KAFKA_STORAGE_ERROR when the disk failed (retriable for
clients; nothing of the topic is left), POLICY_VIOLATION past `max.broker.partitions`.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace
from typing import Any

from kio.schema.errors import ErrorCode

from herd.cluster.topics import TOPIC_ALREADY_EXISTS, Topic, TopicError, check_topic_name
from herd.server.apis._authorize import (
    CREATE,
    DESCRIBE,
    TOPIC,
    TOPIC_OPERATIONS,
    authorized,
    authorized_cluster,
    authorized_operations,
    cluster_operations,
)
from herd.server.apis._build import Builder, ctx_builder
from herd.server.broker import RequestContext

API_KEY = 3
MIN_VERSION = 0
MAX_VERSION = 13

log = logging.getLogger(__name__)


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    broker = ctx.broker
    if request.topics is None or (ctx.api_version == 0 and not request.topics):
        topics = [
            _describe(b, ctx, t)
            for t in broker.cluster.topics()
            if broker.authorizer is None or authorized(ctx, DESCRIBE, TOPIC, t.name)
        ]
    elif _invalid(ctx.api_version, request.topics):
        # Kafka's InvalidRequestException, answered as MetadataRequest.getErrorResponse does: every topic asked
        # for gets INVALID_REQUEST (a null name as "").
        topics = [
            _error(b, ErrorCode.invalid_request, getattr(t, "name", None) or "", getattr(t, "topic_id", None))
            for t in request.topics
        ]
    else:
        topics = [_lookup(b, ctx, request, entry) for entry in request.topics]
        if any(isinstance(t, _Create) for t in topics):
            return _created_then_answer(b, ctx, request, topics)
    return _response(b, ctx, request, topics)


def _response(b: Builder, ctx: RequestContext, request: Any, topics: list[Any]) -> Any:
    broker = ctx.broker
    nodes = tuple(
        b("MetadataResponseBroker", node_id=n.node_id, host=n.host, port=n.port, rack=n.rack)
        for n in broker.nodes(ctx.session.listener)
    )
    if getattr(request, "include_topic_authorized_operations", False):
        topics = [
            replace(
                t,
                topic_authorized_operations=TOPIC_OPERATIONS
                if t.name is None
                else authorized_operations(ctx, True, TOPIC, t.name),
            )
            for t in topics
        ]
    operations = cluster_operations(ctx, getattr(request, "include_cluster_authorized_operations", False))
    return b.response(
        throttle_time=0,
        brokers=nodes,
        cluster_id=broker.cluster.cluster_id,
        controller_id=broker.node_id,
        topics=tuple(topics),
        error_code=ErrorCode.none,
        cluster_authorized_operations=operations,
    )


class _Create:
    """A topic to auto-create (herd.cluster.api: in cluster mode a database round trip), before the answer."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


async def _created_then_answer(b: Builder, ctx: RequestContext, request: Any, topics: list[Any]) -> Any:
    answered = []
    for entry in topics:
        if isinstance(entry, _Create):
            topic: Topic | None
            try:
                topic = await ctx.broker.admin.create_topic(entry.name, ctx.broker.config.get("num.partitions"))
            except TopicError as e:
                topic = ctx.broker.cluster.get(entry.name) if e.error_code == TOPIC_ALREADY_EXISTS else None
                if topic is None:
                    answered.append(_error(b, ErrorCode(e.error_code), entry.name))
                    continue
            else:
                log.info("auto-created topic %s for a Metadata request from %s", entry.name, ctx.header.client_id)
            entry = _describe(b, ctx, topic)
        answered.append(entry)
    return _response(b, ctx, request, answered)


def _has_id(entry: Any) -> bool:
    topic_id = getattr(entry, "topic_id", None)
    return topic_id is not None and topic_id.int != 0


def _invalid(version: int, entries: Any) -> bool:
    """KafkaApis.handleTopicMetadataRequest: before v12 a topic needs a name and cannot be asked for by id; from
    v12 a topic with neither a name nor an id is as invalid (Kafka fails it on the null name)."""
    if version < 12:
        return any(getattr(t, "name", None) is None or _has_id(t) for t in entries)
    return any(t.name is None and not _has_id(t) for t in entries)


def _lookup(b: Builder, ctx: RequestContext, request: Any, entry: Any) -> Any:
    cluster = ctx.broker.cluster
    checked = ctx.broker.authorizer is not None
    name = getattr(entry, "name", None)
    if name is None:  # v12+, by id (`_invalid` refused the rest)
        topic = cluster.by_id(entry.topic_id)
        if topic is None:
            return _error(b, ErrorCode.unknown_topic_id, None, entry.topic_id)
        if checked and not authorized(ctx, DESCRIBE, TOPIC, topic.name):
            return _error(b, ErrorCode.topic_authorization_failed, None, entry.topic_id)
        return _describe(b, ctx, topic)
    if checked and not authorized(ctx, DESCRIBE, TOPIC, name):
        return _error(b, ErrorCode.topic_authorization_failed, name)
    topic = cluster.get(name)
    if topic is not None:
        return _describe(b, ctx, topic)
    try:
        check_topic_name(name)
    except TopicError:
        return _error(b, ErrorCode.invalid_topic_exception, name)
    allowed = getattr(request, "allow_auto_topic_creation", True)
    if allowed and ctx.broker.config.get("auto.create.topics.enable") and not name.startswith("__"):
        if checked and not (authorized_cluster(ctx, CREATE) or authorized(ctx, CREATE, TOPIC, name)):
            return _error(b, ErrorCode.topic_authorization_failed, name)
        return _Create(name)
    return _error(b, ErrorCode.unknown_topic_or_partition, name)


def _describe(b: Builder, ctx: RequestContext, topic: Topic) -> Any:
    cluster = ctx.broker.cluster
    partitions = []
    for i in range(len(topic.partitions)):
        node, epoch = cluster.leader(topic.name, i)
        replicas = (node,) if node >= 0 else ()
        partitions.append(
            b(
                "MetadataResponsePartition",
                error_code=ErrorCode.none if node >= 0 else ErrorCode.leader_not_available,
                partition_index=i,
                leader_id=node,
                leader_epoch=epoch,
                replica_nodes=replicas,
                isr_nodes=replicas,
                offline_replicas=(),
            )
        )
    return b(
        "MetadataResponseTopic",
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        partitions=tuple(partitions),
    )


def _error(b: Builder, code: ErrorCode, name: str | None, topic_id: Any = None) -> Any:
    return b(
        "MetadataResponseTopic",
        error_code=code,
        name=name,
        topic_id=topic_id or uuid.UUID(int=0),
        is_internal=False,
        partitions=(),
    )
