"""OffsetDelete (key 47), v0 (KIP-496). Kafka 4.x serves v0 only.

As in Kafka's KafkaApis.handleOffsetDeleteRequest: a topic the cluster does not have, or a partition
index it does not have, is answered UNKNOWN_TOPIC_OR_PARTITION here and not sent on; an empty group id is
INVALID_GROUP_ID. Everything else goes to the group's coordinator shard (offsets.py `delete`): an unknown
group gets GROUP_ID_NOT_FOUND, a group with members NON_EMPTY_GROUP unless it is a "consumer" group, whose
subscribed topics get GROUP_SUBSCRIBED_TO_TOPIC per partition; the other partitions are answered NONE and
their committed offsets get tombstones, answered once durable. A group-level error (including
NOT_COORDINATOR and COORDINATOR_LOAD_IN_PROGRESS) is the top-level error code and replaces every topic, as
Kafka's `OffsetDeleteResponse.Builder.merge` does.

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
DELETE on the group (else GROUP_AUTHORIZATION_FAILED), READ on each topic (else
TOPIC_AUTHORIZATION_FAILED per partition).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.coordinator import GroupCoordinatorShard
from herd.coordinator.requests import DeleteTopic, OffsetDelete
from herd.coordinator.responses import OffsetDeleteResponse
from herd.server.apis._authorize import DELETE, GROUP, READ, TOPIC, authorized
from herd.server.apis._build import ctx_builder
from herd.server.apis._groups import client_host, client_id, route
from herd.server.broker import RequestContext

API_KEY = 47
MIN_VERSION = 0
MAX_VERSION = 0

Local = dict[tuple[str, int], int]  # (topic, partition) -> error code answered without the coordinator


def handle(ctx: RequestContext, request: Any) -> Any:
    if not authorized(ctx, DELETE, GROUP, request.group_id):
        return ctx_builder(ctx).response(error_code=ErrorCode.group_authorization_failed, throttle_time=0, topics=())
    local: Local = {}
    topics = tuple(_known(ctx, entry, local) for entry in request.topics)
    req = OffsetDelete(
        group_id=request.group_id,
        topics=tuple(t for t in topics if t.partitions),
        api_version=ctx.api_version,
        client_id=client_id(ctx),
        client_host=client_host(ctx),
    )

    def respond(response: OffsetDeleteResponse) -> Any:
        return _response(ctx, request, local, response)

    def on_error(code: int) -> OffsetDeleteResponse:
        return OffsetDeleteResponse(error_code=code)

    if not req.group_id:
        return respond(on_error(ErrorCode.invalid_group_id))
    return route(ctx, req.group_id, GroupCoordinatorShard.offset_delete, req, respond, on_error)


def _known(ctx: RequestContext, entry: Any, local: Local) -> DeleteTopic:
    """The entry's partitions the cluster has; the others get UNKNOWN_TOPIC_OR_PARTITION in `local`."""
    if not authorized(ctx, READ, TOPIC, entry.name):
        local.update({(entry.name, p.partition_index): ErrorCode.topic_authorization_failed for p in entry.partitions})
        return DeleteTopic(entry.name, ())
    topic = ctx.broker.cluster.get(entry.name)
    known = []
    for p in entry.partitions:
        if topic is not None and 0 <= p.partition_index < len(topic.partitions):
            known.append(p.partition_index)
        else:
            local[(entry.name, p.partition_index)] = ErrorCode.unknown_topic_or_partition
    return DeleteTopic(entry.name, tuple(known))


def _response(ctx: RequestContext, request: Any, local: Local, response: OffsetDeleteResponse) -> Any:
    b = ctx_builder(ctx)
    if response.error_code:
        return b.response(error_code=response.error_code, throttle_time=0, topics=())
    decided = {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}
    topics = tuple(
        b(
            "OffsetDeleteResponseTopic",
            name=entry.name,
            partitions=tuple(
                b(
                    "OffsetDeleteResponsePartition",
                    partition_index=p.partition_index,
                    error_code=local.get(
                        (entry.name, p.partition_index), decided.get((entry.name, p.partition_index), ErrorCode.none)
                    ),
                )
                for p in entry.partitions
            ),
        )
        for entry in request.topics
    )
    return b.response(error_code=ErrorCode.none, throttle_time=0, topics=topics)
