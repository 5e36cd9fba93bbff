"""DescribeShareGroupOffsets (key 90), v0-v1: where a share group is in each partition (the share-partition start
offset, its leader epoch, and from v1 the lag: high watermark - start offset - records delivered for good past
it, KIP-1226). Kafka 4.2's KafkaApis.handleDescribeShareGroupOffsetsRequest and GroupCoordinatorService.
describeShareGroupOffsets / describeShareGroupAllOffsets (docs/kip-932/share-admin-rules.md section 1):

- per group: share groups off UNSUPPORTED_VERSION (no message), no DESCRIBE on the group GROUP_AUTHORIZATION_FAILED;
- Topics [] answers no topics; Topics null every partition whose share state is initialized (record 15), asked
  of the group's coordinator shard (NOT_COORDINATOR elsewhere), topics the client may not DESCRIBE left out;
- listed topics: no check of the group at all; a topic the client may not DESCRIBE TOPIC_AUTHORIZATION_FAILED on
  each partition (listed last, with a zero topic id), an unknown topic or partition, or one without state,
  start offset -1, leader epoch 0, lag -1 and no error.
The figures come from the share partition this node leads, else from its share coordinator
(herd.runtime.shares.SharePartitions.summary: `__share_group_state`, on this node or, in cluster mode, another); the
high watermark from the partition's log when this node leads it, else (cluster mode) from PostgreSQL, as consumer
lag is (herd.server.lag.end_offsets).
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from herd.coordinator import CoordinatorError, GroupCoordinatorShard
from herd.coordinator.share_groups import InitializedPartitions
from herd.server.apis._authorize import DESCRIBE, GROUP, TOPIC, authorized
from herd.server.apis._build import Builder, ctx_builder
from herd.server.apis._share import ask_shard
from herd.server.broker import RequestContext
from herd.server.lag import end_offsets

API_KEY = 90
MIN_VERSION = 0
MAX_VERSION = 1

ZERO_UUID = uuid.UUID(int=0)


def handle(ctx: RequestContext, request: Any) -> Any:
    return _serve(ctx, request)


async def _serve(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    groups = [await _group(ctx, b, g) for g in request.groups]
    return b.response(throttle_time=0, groups=tuple(groups))


async def _group(ctx: RequestContext, b: Builder, entry: Any) -> Any:
    broker, group_id = ctx.broker, entry.group_id

    def error(code: int, message: str | None = None) -> Any:
        return b("DescribeShareGroupOffsetsResponseGroup", group_id=group_id, topics=(), error_code=code,
                 error_message=message)  # fmt: skip

    if not broker.config.get("group.share.enable"):
        return error(ErrorCode.unsupported_version)
    if broker.authorizer is not None and not authorized(ctx, DESCRIBE, GROUP, group_id):
        return error(ErrorCode.group_authorization_failed)
    if entry.topics is None:
        try:
            wanted = await _initialized(ctx, group_id)
        except CoordinatorError as e:
            return error(e.code)
        names = {}
        for topic_id in wanted:
            topic = broker.cluster.by_id(topic_id)
            if topic is not None and (broker.authorizer is None or authorized(ctx, DESCRIBE, TOPIC, topic.name)):
                names[topic.name] = sorted(wanted[topic_id])
        topics = [await _topic(ctx, b, group_id, name, parts) for name, parts in sorted(names.items())]
        return b("DescribeShareGroupOffsetsResponseGroup", group_id=group_id, topics=tuple(topics),
                 error_code=ErrorCode.none, error_message=None)  # fmt: skip
    allowed, denied = [], []
    for t in entry.topics:
        if broker.authorizer is None or authorized(ctx, DESCRIBE, TOPIC, t.topic_name):
            allowed.append(await _topic(ctx, b, group_id, t.topic_name, sorted(set(t.partitions))))
        else:
            denied.append(_denied(b, t.topic_name, sorted(set(t.partitions))))
    return b("DescribeShareGroupOffsetsResponseGroup", group_id=group_id, topics=(*allowed, *denied),
             error_code=ErrorCode.none, error_message=None)  # fmt: skip


async def _initialized(ctx: RequestContext, group_id: str) -> dict[uuid.UUID, frozenset[int]]:
    """The group's partitions with initialized share state, from its coordinator shard; CoordinatorError
    (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE) when it cannot say."""
    if ctx.broker.coordinator is None:
        raise CoordinatorError(ErrorCode.coordinator_not_available)

    answer = await ask_shard(ctx, group_id, GroupCoordinatorShard.share_initialized_partitions,
                             InitializedPartitions(group_id))  # fmt: skip
    if answer.error_code != ErrorCode.none:
        raise CoordinatorError(ErrorCode(answer.error_code))
    return answer.partitions


async def _topic(ctx: RequestContext, b: Builder, group_id: str, name: str, partitions: list[int]) -> Any:
    broker = ctx.broker
    topic = broker.cluster.get(name)
    ends = await end_offsets(broker, {(name, index): None for index in partitions})
    rows = []
    for index in partitions:
        start, done, leader_epoch, lag = -1, -1, 0, -1
        if topic is not None and 0 <= index < len(topic.partitions):
            start, done, leader_epoch = await broker.shares.summary(group_id, name, index)
            end = ends.get((name, index))
            if start >= 0 and done >= 0 and end is not None:
                lag = end - start - done
        rows.append(
            b(
                "DescribeShareGroupOffsetsResponsePartition",
                partition_index=index,
                start_offset=start,
                leader_epoch=leader_epoch,
                lag=lag,
                error_code=ErrorCode.none,
                error_message=None,
            )  # fmt: skip
        )
    return b("DescribeShareGroupOffsetsResponseTopic", topic_name=name,
             topic_id=topic.topic_id if topic is not None else ZERO_UUID, partitions=tuple(rows))  # fmt: skip


def _denied(b: Builder, name: str, partitions: list[int]) -> Any:
    rows = tuple(
        b(
            "DescribeShareGroupOffsetsResponsePartition",
            partition_index=index,
            start_offset=-1,
            leader_epoch=0,
            lag=-1,
            error_code=ErrorCode.topic_authorization_failed,
            error_message=None,
        )  # fmt: skip
        for index in partitions
    )
    return b("DescribeShareGroupOffsetsResponseTopic", topic_name=name, topic_id=ZERO_UUID, partitions=rows)
