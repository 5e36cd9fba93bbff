"""OffsetCommit and OffsetFetch for classic and simple groups (first correct version).

Commit fencing follows apache/kafka group-coordinator/.../OffsetMetadataManager.java
`validateOffsetCommit` and classic/ClassicGroup.java `validateOffsetCommit`, in this order:
1. unknown group: generation < 0 is a "simple" commit (accepted; replaying the record creates an
   Empty group, as Kafka's replay does); otherwise GROUP_ID_NOT_FOUND on v9+, ILLEGAL_GENERATION below;
2. Dead group: COORDINATOR_NOT_AVAILABLE;
3. generation < 0 on an Empty group: accepted;
4. with a generation, member id or instance id: UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID, then
   ILLEGAL_GENERATION; without any of them a non-Empty group answers UNKNOWN_MEMBER_ID;
5. CompletingRebalance: REBALANCE_IN_PROGRESS (commits during PreparingRebalance are allowed).
Metadata longer than offset.metadata.max.bytes gets OFFSET_METADATA_TOO_LARGE per partition.

The commit handler does not touch state: it emits OffsetCommit records (v3, or v1 with an expire
timestamp) and `replay` applies them, so the answer follows durability and load is the same code.
"""

from __future__ import annotations

from herd.coordinator.context import ShardContext
from herd.coordinator.errors import ErrorCode, append_error_to_commit_error
from herd.coordinator.group import ClassicGroup
from herd.coordinator.records import OffsetValue, offset_commit_record
from herd.coordinator.requests import CommitPartition, FetchGroup, OffsetCommit, OffsetFetch
from herd.coordinator.responses import (
    CommitPartitionResponse,
    CommitTopicResponse,
    FetchGroupResponse,
    FetchPartitionResponse,
    FetchTopicResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
    error_response,
)
from herd.coordinator.result import Effects, Result
from herd.coordinator.state import GroupState


def commit(ctx: ShardContext, req: OffsetCommit, handle: object) -> Result:
    fx = Effects()
    error = ErrorCode.INVALID_GROUP_ID if not req.group_id else _validate_commit(ctx, req)
    topics = []
    for topic in req.topics:
        parts = tuple(_commit_partition(ctx, req, topic.name, p, error, fx) for p in topic.partitions)
        topics.append(CommitTopicResponse(topic.name, parts))
    response = OffsetCommitResponse(topics=tuple(topics))
    fx.reply(handle, response)
    if fx.records:
        fx.on_failure(lambda err: _commit_failed(handle, response, err))
    return fx.result()


def _commit_failed(handle: object, response: OffsetCommitResponse, error: ErrorCode) -> Result:
    fx = Effects()
    fx.reply(handle, error_response(response, append_error_to_commit_error(error)))
    return fx.result()


def _commit_partition(
    ctx: ShardContext, req: OffsetCommit, topic: str, p: CommitPartition, error: ErrorCode | None, fx: Effects
) -> CommitPartitionResponse:
    if error is not None:
        return CommitPartitionResponse(p.partition_index, error)
    metadata = p.committed_metadata or ""
    if len(metadata.encode("utf-16-le")) // 2 > ctx.config.offset_metadata_max_bytes:
        return CommitPartitionResponse(p.partition_index, ErrorCode.OFFSET_METADATA_TOO_LARGE)
    now = ctx.now()
    value = OffsetValue(
        offset=p.committed_offset,
        leader_epoch=p.committed_leader_epoch,
        metadata=metadata,
        commit_timestamp=p.commit_timestamp if p.commit_timestamp != -1 else now,
        expire_timestamp=_expire_timestamp(req, now),
    )
    fx.records.append(offset_commit_record(req.group_id, topic, p.partition_index, value))
    return CommitPartitionResponse(p.partition_index)


def _expire_timestamp(req: OffsetCommit, now: int) -> int:
    """RetentionTimeMs exists in OffsetCommit v2-4 only; -1 means the broker default."""
    if 2 <= req.api_version <= 4 and req.retention_time_ms != -1:
        return now + req.retention_time_ms
    return -1


def _validate_commit(ctx: ShardContext, req: OffsetCommit) -> ErrorCode | None:
    group = ctx.groups.get(req.group_id)
    generation = req.generation_id_or_member_epoch
    if group is None:
        if generation < 0:
            return None
        return ErrorCode.GROUP_ID_NOT_FOUND if req.api_version >= 9 else ErrorCode.ILLEGAL_GENERATION
    return validate_group_commit(group, req.member_id, req.group_instance_id, generation)


def validate_group_commit(
    group: ClassicGroup, member_id: str, instance_id: str | None, generation: int
) -> ErrorCode | None:
    if group.is_in(GroupState.DEAD):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if generation < 0 and group.is_in(GroupState.EMPTY):
        return None
    if generation >= 0 or member_id or instance_id is not None:
        if instance_id is not None:
            existing = group.static_member_id(instance_id)
            if existing is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        elif not group.has_member(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
    elif not group.is_in(GroupState.EMPTY):
        return ErrorCode.UNKNOWN_MEMBER_ID
    if group.is_in(GroupState.COMPLETING_REBALANCE):
        return ErrorCode.REBALANCE_IN_PROGRESS
    return None


# --- OffsetFetch ------------------------------------------------------------------------------------


def fetch(ctx: ShardContext, req: OffsetFetch, handle: object) -> Result:
    fx = Effects()
    fx.reply(handle, OffsetFetchResponse(groups=tuple(_fetch_group(ctx, g) for g in req.groups)))
    return fx.result()


def _fetch_group(ctx: ShardContext, req: FetchGroup) -> FetchGroupResponse:
    if not req.group_id:
        return FetchGroupResponse(req.group_id, error_code=ErrorCode.INVALID_GROUP_ID)
    offsets = ctx.offsets.get(req.group_id, {})
    if req.topics is None:
        return FetchGroupResponse(req.group_id, _all_offsets(offsets))
    topics = tuple(
        FetchTopicResponse(t.name, tuple(_partition(offsets, t.name, p) for p in t.partition_indexes))
        for t in req.topics
    )
    return FetchGroupResponse(req.group_id, topics)


def _partition(offsets: dict[tuple[str, int], OffsetValue], topic: str, partition: int) -> FetchPartitionResponse:
    value = offsets.get((topic, partition))
    if value is None:
        return FetchPartitionResponse(partition)
    return FetchPartitionResponse(partition, value.offset, value.leader_epoch, value.metadata)


def _all_offsets(offsets: dict[tuple[str, int], OffsetValue]) -> tuple[FetchTopicResponse, ...]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in offsets:
        by_topic.setdefault(topic, []).append(partition)
    return tuple(
        FetchTopicResponse(topic, tuple(_partition(offsets, topic, p) for p in sorted(parts)))
        for topic, parts in by_topic.items()
    )
