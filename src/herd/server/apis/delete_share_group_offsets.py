"""DeleteShareGroupOffsets (key 92), v0: forget where an empty share group is in some topics
(kafka-share-groups.sh --delete-offsets). Kafka 4.2's KafkaApis.handleDeleteShareGroupOffsetsRequest,
GroupCoordinatorService.deleteShareGroupOffsets and GroupMetadataManager.sharePartitionsEligibleForOffsetDeletion /
completeDeleteShareGroupOffsets (docs/kip-932/share-admin-rules.md section 3):

1. share groups off UNSUPPORTED_VERSION, no DELETE on the group GROUP_AUTHORIZATION_FAILED, an empty group id
   INVALID_GROUP_ID (top level: the per-topic results are dropped);
2. per topic: no READ TOPIC_AUTHORIZATION_FAILED, an unknown topic UNKNOWN_TOPIC_OR_PARTITION;
3. on the group's coordinator shard: a missing group or one of another type GROUP_ID_NOT_FOUND, one with members
   NON_EMPTY_GROUP; a topic whose share state was never initialized UNKNOWN_TOPIC_OR_PARTITION "There is no offset
   information to delete."; the others move to deleting (record 15);
4. the share state of each of their partitions is deleted (`__share_group_state` tombstones, and the leader's
   memory); a topic whose state cannot be deleted answers that error and stays deleting;
5. the topics deleted leave record 15 (a new heartbeat initializes them again, at share.auto.offset.reset).
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from herd.coordinator import GroupCoordinatorShard
from herd.coordinator.share_groups import DeleteShareOffsets, ShareOffsetsDeleted
from herd.runtime.share_state import ShareStateError
from herd.server.apis._authorize import DELETE, READ, TOPIC, authorized
from herd.server.apis._build import ctx_builder
from herd.server.apis._share import ask_shard, offsets_refused
from herd.server.broker import RequestContext

API_KEY = 92
MIN_VERSION = 0
MAX_VERSION = 0

ZERO_UUID = uuid.UUID(int=0)


def handle(ctx: RequestContext, request: Any) -> Any:
    error = offsets_refused(ctx, request.group_id, DELETE)
    if error is not None:
        return _error(ctx, error)
    return _serve(ctx, request)


async def _serve(ctx: RequestContext, request: Any) -> Any:
    broker, group_id = ctx.broker, request.group_id
    results: dict[str, tuple[uuid.UUID, int, str | None]] = {}
    asked: dict[uuid.UUID, str] = {}
    for t in request.topics:
        topic = broker.cluster.get(t.topic_name)
        if broker.authorizer is not None and not authorized(ctx, READ, TOPIC, t.topic_name):
            results[t.topic_name] = (ZERO_UUID, ErrorCode.topic_authorization_failed, None)
        elif topic is None:
            results[t.topic_name] = (ZERO_UUID, ErrorCode.unknown_topic_or_partition, None)
        else:
            asked[topic.topic_id] = t.topic_name
    answer = await ask_shard(
        ctx, group_id, GroupCoordinatorShard.share_delete_offsets, DeleteShareOffsets(group_id, tuple(asked))
    )
    if answer.error_code != ErrorCode.none:
        return _error(ctx, ErrorCode(answer.error_code), answer.error_message)
    for topic_id, message in answer.refused.items():
        results[asked[topic_id]] = (topic_id, ErrorCode.unknown_topic_or_partition, message)
    deleted: list[uuid.UUID] = []
    for topic_id, partitions in answer.partitions.items():
        name = asked[topic_id]
        try:
            for index in sorted(partitions):
                await broker.shares.delete_state(group_id, topic_id, name, index)
        except ShareStateError as error:
            results[name] = (topic_id, error.code, str(error))
            continue
        deleted.append(topic_id)
        results[name] = (topic_id, ErrorCode.none, None)
    if deleted:
        await ask_shard(
            ctx, group_id, GroupCoordinatorShard.share_offsets_deleted, ShareOffsetsDeleted(group_id, tuple(deleted))
        )
    b = ctx_builder(ctx)
    responses = tuple(
        b(
            "DeleteShareGroupOffsetsResponseTopic",
            topic_name=name,
            topic_id=topic_id,
            error_code=code,
            error_message=message,
        )  # fmt: skip
        for name, (topic_id, code, message) in results.items()
    )
    return b.response(throttle_time=0, error_code=ErrorCode.none, error_message=None, responses=responses)


def _error(ctx: RequestContext, code: ErrorCode, message: str | None = None) -> Any:
    return ctx_builder(ctx).response(throttle_time=0, error_code=code, error_message=message, responses=())
