"""AlterShareGroupOffsets (key 91), v0: set where an empty share group starts in some partitions
(kafka-share-groups.sh --reset-offsets). Kafka 4.2's KafkaApis.handleAlterShareGroupOffsetsRequest,
GroupCoordinatorService.alterShareGroupOffsets and GroupMetadataManager.alterShareGroupOffsets
(docs/kip-932/share-admin-rules.md section 2):

1. share groups off UNSUPPORTED_VERSION, no READ on the group GROUP_AUTHORIZATION_FAILED, an empty group id
   INVALID_GROUP_ID (top level: the per-topic results are dropped);
2. per topic: no READ TOPIC_AUTHORIZATION_FAILED (its topic id shown, as Kafka does), an unknown topic or
   partition UNKNOWN_TOPIC_OR_PARTITION (a negative partition too, where Kafka writes it into record 15 and then
   fails the whole request: herd refuses it where it is);
3. on the group's coordinator shard (NOT_COORDINATOR elsewhere): a group of another type GROUP_ID_NOT_FOUND, one
   with members NON_EMPTY_GROUP, a missing one is made; the partitions are marked initializing (record 15);
4. each partition's share state starts afresh at its new start offset (any offset, not checked, as in Kafka), at
   the group's epoch, in `__share_group_state` and in the leader's memory; a partition whose state cannot be
   written answers that error and stays initializing (a heartbeat initializes it again later, as in Kafka);
5. the partitions written are marked initialized (record 15) before the answer (Kafka does it after).
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from herd.coordinator import GroupCoordinatorShard
from herd.coordinator.share_groups import AlterShareOffsets, ShareOffsetsInitialized
from herd.runtime.share_state import ShareStateError
from herd.server.apis._authorize import READ, TOPIC, authorized
from herd.server.apis._build import ctx_builder
from herd.server.apis._share import ask_shard, offsets_refused
from herd.server.broker import RequestContext

API_KEY = 91
MIN_VERSION = 0
MAX_VERSION = 0

ZERO_UUID = uuid.UUID(int=0)


def handle(ctx: RequestContext, request: Any) -> Any:
    error = offsets_refused(ctx, request.group_id, READ)
    if error is not None:
        return _error(ctx, error)
    return _serve(ctx, request)


async def _serve(ctx: RequestContext, request: Any) -> Any:
    broker, group_id = ctx.broker, request.group_id
    results: dict[str, dict[int, tuple[int, str | None]]] = {}
    wanted: dict[uuid.UUID, dict[int, int]] = {}  # topic id -> partition -> new start offset
    names: dict[uuid.UUID, str] = {}
    for t in request.topics:
        rows = results.setdefault(t.topic_name, {})
        topic = broker.cluster.get(t.topic_name)
        for p in t.partitions:
            if broker.authorizer is not None and not authorized(ctx, READ, TOPIC, t.topic_name):
                rows[p.partition_index] = (ErrorCode.topic_authorization_failed, None)
            elif topic is None or not 0 <= p.partition_index < len(topic.partitions):
                rows[p.partition_index] = (ErrorCode.unknown_topic_or_partition, None)
            else:
                wanted.setdefault(topic.topic_id, {})[p.partition_index] = p.start_offset
                names[topic.topic_id] = t.topic_name
                rows[p.partition_index] = (ErrorCode.none, None)
    partitions = {topic_id: frozenset(parts) for topic_id, parts in wanted.items()}
    answer = await ask_shard(
        ctx, group_id, GroupCoordinatorShard.share_alter_offsets, AlterShareOffsets(group_id, partitions)
    )
    if answer.error_code != ErrorCode.none:
        return _error(ctx, ErrorCode(answer.error_code), answer.error_message)
    done: dict[uuid.UUID, frozenset[int]] = {}
    for topic_id, parts in wanted.items():
        for index, start in parts.items():
            try:
                await broker.shares.reset(group_id, names[topic_id], index, start, answer.state_epoch)
            except ShareStateError as error:
                results[names[topic_id]][index] = (error.code, str(error))
                continue
            done[topic_id] = done.get(topic_id, frozenset()) | {index}
    if done:
        await ask_shard(
            ctx, group_id, GroupCoordinatorShard.share_offsets_initialized, ShareOffsetsInitialized(group_id, done)
        )
    b = ctx_builder(ctx)
    responses = []
    for name, rows in results.items():
        topic = broker.cluster.get(name)
        responses.append(
            b(
                "AlterShareGroupOffsetsResponseTopic",
                topic_name=name,
                topic_id=topic.topic_id if topic is not None else ZERO_UUID,
                partitions=tuple(
                    b("AlterShareGroupOffsetsResponsePartition", partition_index=i, error_code=code, error_message=msg)
                    for i, (code, msg) in rows.items()
                ),
            )
        )
    return b.response(throttle_time=0, error_code=ErrorCode.none, error_message=None, responses=tuple(responses))


def _error(ctx: RequestContext, code: ErrorCode, message: str | None = None) -> Any:
    return ctx_builder(ctx).response(throttle_time=0, error_code=code, error_message=message, responses=())
