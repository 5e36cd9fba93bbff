"""OffsetCommit, OffsetFetch and OffsetDelete for classic and simple groups.

Ported from apache/kafka group-coordinator/.../OffsetMetadataManager.java (`validateOffsetCommit`,
`commitOffset`, `fetchOffsets`, `fetchAllOffsets`, `deleteOffsets`) and classic/ClassicGroup.java
(`validateOffsetCommit`, `validateOffsetDelete`).

Commit fencing, in Kafka's order:
1. unknown group: generation < 0 is a "simple" commit, accepted (replaying its record creates an Empty
   group without a protocol type, as Kafka's replay does); otherwise GROUP_ID_NOT_FOUND on v9+ and
   ILLEGAL_GENERATION below;
2. Dead group: COORDINATOR_NOT_AVAILABLE;
3. generation < 0 on an Empty group: accepted;
4. with a generation, a member id or an instance id: UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID (the static
   member check first), then ILLEGAL_GENERATION; with none of them, a non-Empty group answers
   UNKNOWN_MEMBER_ID;
5. CompletingRebalance: REBALANCE_IN_PROGRESS (commits during PreparingRebalance are allowed).
A commit accepted while the group is Stable or PreparingRebalance keeps the member's session alive, as a
heartbeat would. Metadata longer than offset.metadata.max.bytes (counted in UTF-16 units, as Java's
String.length) gets OFFSET_METADATA_TOO_LARGE for that partition only. The empty string is a valid group id
for commits and fetches (Kafka keeps it for backwards compatibility; only OffsetDelete refuses it).

The handlers do not touch offsets: a commit emits one OffsetCommit record per partition (value v3, or v1
when OffsetCommit v2-v4 carried a retention time), a deletion emits tombstones, and `replay` applies them.
So the answer follows durability, and loading a partition runs the same code.

Fetch answers -1 with empty metadata for a partition without an offset, and every committed offset of the
group when no topics are named. With `require_stable` (v7+, KIP-447) a partition that has a pending
transactional offset answers UNSTABLE_OFFSET_COMMIT with offset -1 instead (the client retries); reads
already wait behind pending writes, as Kafka's require_stable fetch, a write operation, does.

TxnOffsetCommit (OffsetMetadataManager.commitTransactionalOffset, validateTransactionalOffsetCommit): an
unknown group is accepted with generation < 0 (replay creates a simple group) and gets ILLEGAL_GENERATION
otherwise, on every version; a known group is checked by ClassicGroup.validateOffsetCommit with
isTransactional=true: Dead COORDINATOR_NOT_AVAILABLE; generation < 0 on an Empty group accepted; with a
generation, member id or instance id, UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID then ILLEGAL_GENERATION (KIP-447
fencing of zombie consumers); with none of them (v0-2 carry none) accepted in any state; no
REBALANCE_IN_PROGRESS and no session kept alive. Each partition is written as an OffsetCommitValue v3 stamped
now (no expire timestamp), metadata too long gets OFFSET_METADATA_TOO_LARGE; the records form one
transactional batch of the request's producer (`Result.transaction`) and stay pending (txn_offsets.py) until
the transaction's marker commits or aborts them. A producer epoch older than one the producer already used in
this partition gets INVALID_PRODUCER_EPOCH on every partition and nothing is written (Kafka's log refuses the
batch; txn_offsets.py); KIP-890's verification that the transaction holds the partition is the transaction
coordinator's.

OffsetDelete: an unknown or Dead group gets GROUP_ID_NOT_FOUND; a group with members gets NON_EMPTY_GROUP
unless it is a "consumer" group, whose subscribed topics get GROUP_SUBSCRIBED_TO_TOPIC per partition; any
other partition is answered NONE and gets a tombstone if it has an offset, committed or pending. The group
itself stays, even with no offsets left (offset retention deletes it later if it is Empty).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from functools import partial

from herd.coordinator import rebalance as rb
from herd.coordinator.consumer.group import ConsumerGroup
from herd.coordinator.consumer.member import ConsumerMember
from herd.coordinator.context import ShardContext
from herd.coordinator.errors import ErrorCode, append_error_to_commit_error
from herd.coordinator.group import ClassicGroup
from herd.coordinator.records import (
    GroupOffsets,
    OffsetValue,
    Record,
    decode_offset_commit,
    load_offset_commits,
    offset_commit_record,
    offset_tombstone,
)
from herd.coordinator.requests import (
    CommitPartition,
    CompleteTransaction,
    FetchGroup,
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
    TxnOffsetCommit,
)
from herd.coordinator.responses import (
    CommitPartitionResponse,
    CommitTopicResponse,
    CompleteTransactionResponse,
    DeletePartitionResponse,
    DeleteTopicResponse,
    FetchGroupResponse,
    FetchPartitionResponse,
    FetchTopicResponse,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    error_response,
)
from herd.coordinator.result import Effects, Marker, Reply, Result
from herd.coordinator.state import GroupState
from herd.coordinator.subscriptions import is_subscribed, uses_consumer_protocol

log = logging.getLogger(__name__)

NO_EXPIRE_TIMESTAMP = -1
DEFAULT_RETENTION_TIME = -1


# --- OffsetCommit -----------------------------------------------------------------------------------


def commit(ctx: ShardContext, req: OffsetCommit, handle: object) -> Result:
    error = _validate_commit(ctx, req)
    if error is None:
        _keep_session_alive(ctx, req)
    records: list[Record] = []
    now = ctx.now()
    expire = _expire_timestamp(req, now)
    topics = tuple(
        CommitTopicResponse(
            topic.name,
            tuple(
                _commit_partition(ctx, req.group_id, topic.name, p, error, now, expire, records)
                for p in topic.partitions
            ),
        )
        for topic in req.topics
    )
    response = OffsetCommitResponse(topics=topics)
    if not records:
        return Result(replies=(Reply(handle, response),))
    return Result(tuple(records), (Reply(handle, response),), lambda err: _commit_failed(handle, response, err))


def _commit_failed(handle: object, response: OffsetCommitResponse, error: ErrorCode) -> Result:
    return Result(replies=(Reply(handle, error_response(response, append_error_to_commit_error(error))),))


def _commit_partition(
    ctx: ShardContext,
    group_id: str,
    topic: str,
    p: CommitPartition,
    error: ErrorCode | None,
    now: int,
    expire: int,
    records: list[Record],
) -> CommitPartitionResponse:
    if error is not None:
        return CommitPartitionResponse(p.partition_index, error)
    metadata = p.committed_metadata or ""
    if _java_length(metadata) > ctx.config.offset_metadata_max_bytes:
        return CommitPartitionResponse(p.partition_index, ErrorCode.offset_metadata_too_large)
    stamp = p.commit_timestamp if p.commit_timestamp != -1 else now
    value = OffsetValue(p.committed_offset, p.committed_leader_epoch, metadata, stamp, expire)
    records.append(offset_commit_record(group_id, topic, p.partition_index, value))
    return CommitPartitionResponse(p.partition_index)


def _java_length(text: str) -> int:
    """Java's String.length(): UTF-16 code units."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le")) // 2


def _expire_timestamp(req: OffsetCommit, now: int) -> int:
    """RetentionTimeMs exists in OffsetCommit v2-4 only; -1 means the broker default (no expire timestamp)."""
    if 2 <= req.api_version <= 4 and req.retention_time_ms != DEFAULT_RETENTION_TIME:
        return now + req.retention_time_ms
    return NO_EXPIRE_TIMESTAMP


def _keep_session_alive(ctx: ShardContext, req: OffsetCommit) -> None:
    """Kafka: a commit in Stable or PreparingRebalance reschedules the member's heartbeat."""
    group = ctx.groups.get(req.group_id)
    if group is not None and group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE):
        member = group.members.get(req.member_id)
        if member is not None:
            rb.touch_session(ctx, group, member)


def _validate_commit(ctx: ShardContext, req: OffsetCommit) -> ErrorCode | None:
    if req.group_id in ctx.share_groups:
        return ErrorCode.group_id_not_found  # ShareGroup.validateOffsetCommit: "Group %s is not a consumer group."
    group = ctx.groups.get(req.group_id)
    generation = req.generation_id_or_member_epoch
    consumer_group = ctx.consumer_groups.get(req.group_id)
    if consumer_group is not None:
        return validate_consumer_commit(consumer_group, req.member_id, generation, req.api_version)
    if group is None:
        if generation < 0:
            return None
        return ErrorCode.group_id_not_found if req.api_version >= 9 else ErrorCode.illegal_generation
    return validate_group_commit(group, req.member_id, req.group_instance_id, generation)


def validate_consumer_commit(
    group: ConsumerGroup, member_id: str, member_epoch: int, api_version: int = 9, *, transactional: bool = False
) -> ErrorCode | None:
    """ConsumerGroup.validateOffsetCommit (KIP-848): an admin's commit (epoch < 0) only to an empty group; else
    the member must be there, commit with OffsetCommit v9+ unless transactional or a classic member, and at its
    current epoch (STALE_MEMBER_EPOCH; a classic member's generation: ILLEGAL_GENERATION)."""
    if member_epoch < 0 and not group.members:
        return None
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.unknown_member_id
    if not transactional and member.classic is None and api_version < 9:
        return ErrorCode.unsupported_version
    return _check_member_epoch(member, member_epoch)


def _check_member_epoch(member: ConsumerMember, received: int) -> ErrorCode | None:
    """ConsumerGroup.validateMemberEpoch."""
    if received == member.member_epoch:
        return None
    return ErrorCode.illegal_generation if member.classic is not None else ErrorCode.stale_member_epoch


def validate_consumer_fetch(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> ErrorCode | None:
    """ConsumerGroup.validateOffsetFetch: an admin's fetch (no member, epoch < 0) is fine; else the member must be
    there at its current epoch."""
    if member_id is None and member_epoch < 0:
        return None
    member = group.members.get(member_id or "")
    if member is None:
        return ErrorCode.unknown_member_id
    return _check_member_epoch(member, member_epoch)


def validate_group_commit(
    group: ClassicGroup, member_id: str, instance_id: str | None, generation: int, *, transactional: bool = False
) -> ErrorCode | None:
    """ClassicGroup.validateOffsetCommit; a transactional commit is neither refused for lacking a member (older
    TxnOffsetCommit versions carry none) nor during CompletingRebalance."""
    if group.is_in(GroupState.DEAD):
        return ErrorCode.coordinator_not_available
    if generation < 0 and group.is_in(GroupState.EMPTY):
        return None
    if generation >= 0 or member_id or instance_id is not None:
        member_error = _validate_member(group, member_id, instance_id)
        if member_error is not None:
            return member_error
        if generation != group.generation_id:
            return ErrorCode.illegal_generation
    elif not transactional and not group.is_in(GroupState.EMPTY):
        return ErrorCode.unknown_member_id
    if not transactional and group.is_in(GroupState.COMPLETING_REBALANCE):
        return ErrorCode.rebalance_in_progress
    return None


def _validate_member(group: ClassicGroup, member_id: str, instance_id: str | None) -> ErrorCode | None:
    if instance_id is not None:
        existing = group.static_member_id(instance_id)
        if existing is None:
            return ErrorCode.unknown_member_id
        if existing != member_id:
            return ErrorCode.fenced_instance_id
    elif not group.has_member(member_id):
        return ErrorCode.unknown_member_id
    return None


# --- TxnOffsetCommit --------------------------------------------------------------------------------


def txn_commit(ctx: ShardContext, req: TxnOffsetCommit, handle: object) -> Result:
    """Stage the request's offsets as one transactional batch of its producer (see the module docstring)."""
    error = _validate_txn_commit(ctx, req)
    records: list[Record] = []
    now = ctx.now()
    topics = tuple(
        CommitTopicResponse(
            topic.name,
            tuple(
                _commit_partition(ctx, req.group_id, topic.name, p, error, now, NO_EXPIRE_TIMESTAMP, records)
                for p in topic.partitions
            ),
        )
        for topic in req.topics
    )
    response = OffsetCommitResponse(topics=topics)
    if not records:
        return Result(replies=(Reply(handle, response),))
    if ctx.txn.stale_epoch(req.producer_id, req.producer_epoch):  # what the log would refuse the batch with
        log.info(
            "group %s: refusing offsets of producer %d at epoch %d, an older epoch than it used here",
            req.group_id,
            req.producer_id,
            req.producer_epoch,
        )
        return Result(replies=(Reply(handle, error_response(response, ErrorCode.invalid_producer_epoch)),))
    return Result(
        tuple(records),
        (Reply(handle, response),),
        lambda err: _commit_failed(handle, response, err),
        (req.producer_id, req.producer_epoch),
    )


def _validate_txn_commit(ctx: ShardContext, req: TxnOffsetCommit) -> ErrorCode | None:
    if req.group_id in ctx.share_groups:
        return ErrorCode.group_id_not_found  # as OffsetCommit
    consumer_group = ctx.consumer_groups.get(req.group_id)
    if consumer_group is not None:
        if req.generation_id == -1 and req.member_id == "" and req.group_instance_id is None:
            return None  # older TxnOffsetCommit versions carry no member (Kafka's validateOffsetCommit)
        return validate_consumer_commit(consumer_group, req.member_id, req.generation_id, transactional=True)
    group = ctx.groups.get(req.group_id)
    if group is None:
        return None if req.generation_id < 0 else ErrorCode.illegal_generation
    return validate_group_commit(group, req.member_id, req.group_instance_id, req.generation_id, transactional=True)


def complete_transaction(ctx: ShardContext, req: CompleteTransaction, handle: object) -> Result:
    """The marker to write for a transaction the transaction coordinator completed (Kafka's
    CoordinatorRuntime.completeTransaction); the runtime writes it and replays it with
    `replay_end_transaction_marker`. The answer (CompleteTransactionResponse) waits for it to be durable."""
    return Result(
        replies=(Reply(handle, CompleteTransactionResponse()),),
        marker=Marker(req.producer_id, req.producer_epoch, req.commit, req.coordinator_epoch),
    )


# --- OffsetFetch ------------------------------------------------------------------------------------


def fetch(ctx: ShardContext, req: OffsetFetch, handle: object) -> Result:
    response = OffsetFetchResponse(groups=tuple(_fetch_group(ctx, g, req.require_stable) for g in req.groups))
    return Result(replies=(Reply(handle, response),))


def _fetch_group(ctx: ShardContext, req: FetchGroup, require_stable: bool) -> FetchGroupResponse:
    consumer_group = ctx.consumer_groups.get(req.group_id)
    if consumer_group is not None:
        error = validate_consumer_fetch(consumer_group, req.member_id, req.member_epoch)
        if error is not None:
            return FetchGroupResponse(req.group_id, error_code=error)
    group = ctx.groups.get(req.group_id)
    dead = group is not None and group.is_in(GroupState.DEAD)  # Kafka: GROUP_ID_NOT_FOUND, answered as unknown
    # a share group holds no offsets: Kafka's validateOffsetFetch refuses it and fetchOffsets answers -1 everywhere
    offsets = {} if dead or req.group_id in ctx.share_groups else ctx.offsets.get(req.group_id, {})
    txn = ctx.txn
    open_group = require_stable and txn.holds_group(req.group_id)

    def partition(topic: str, index: int) -> FetchPartitionResponse:
        if open_group and txn.holds(req.group_id, topic, index):
            return FetchPartitionResponse(index, error_code=ErrorCode.unstable_offset_commit)
        return _partition(offsets, topic, index)

    if req.topics is None:
        return FetchGroupResponse(req.group_id, _all_offsets(offsets, partition))
    if open_group:
        topics = tuple(
            FetchTopicResponse(t.name, tuple(partition(t.name, p) for p in t.partition_indexes)) for t in req.topics
        )
    else:
        topics = tuple(FetchTopicResponse(t.name, _committed(offsets, t.name, t.partition_indexes)) for t in req.topics)
    return FetchGroupResponse(req.group_id, topics)


def _partition(offsets: GroupOffsets, topic: str, partition: int) -> FetchPartitionResponse:
    value = offsets.get((topic, partition))
    if value is None:
        return FetchPartitionResponse(partition)
    return FetchPartitionResponse(partition, value.offset, value.leader_epoch, value.metadata)


def _committed(offsets: GroupOffsets, topic: str, partitions: Iterable[int]) -> tuple[FetchPartitionResponse, ...]:
    """`_partition` of each of `partitions`, inlined: a consumer fetches the offsets of all its partitions after every
    rebalance. Each answer is built with tuple.__new__, which skips the NamedTuple's keyword parsing (the same
    fields, in order)."""
    get, new = offsets.get, tuple.__new__
    out = []
    for index in partitions:
        value = get((topic, index))
        if value is None:
            out.append(FetchPartitionResponse(index))
        else:
            out.append(new(FetchPartitionResponse, (index, value.offset, value.leader_epoch, value.metadata, 0)))
    return tuple(out)


def _all_offsets(
    offsets: GroupOffsets, partition: Callable[[str, int], FetchPartitionResponse]
) -> tuple[FetchTopicResponse, ...]:
    """Every committed offset of the group (Kafka's fetchAllOffsets: a partition with only a pending offset is
    not listed)."""
    by_topic: dict[str, list[int]] = {}
    for topic, index in offsets:
        by_topic.setdefault(topic, []).append(index)
    return tuple(
        FetchTopicResponse(topic, tuple(partition(topic, p) for p in sorted(parts)))
        for topic, parts in by_topic.items()
    )


# --- OffsetDelete -----------------------------------------------------------------------------------


def delete(ctx: ShardContext, req: OffsetDelete, handle: object) -> Result:
    fx = Effects()
    group = ctx.groups.get(req.group_id)
    error = ErrorCode.invalid_group_id if not req.group_id else _validate_delete(group)
    if error is not None or group is None:
        fx.reply(handle, OffsetDeleteResponse(error_code=error or ErrorCode.group_id_not_found))
        return fx.result()
    offsets = ctx.offsets.get(req.group_id, {})
    topics = []
    for topic in req.topics:
        subscribed = is_subscribed(group, topic.name)
        partitions = tuple(
            _delete_partition(ctx, req.group_id, topic.name, p, subscribed, offsets, fx.records)
            for p in topic.partitions
        )
        topics.append(DeleteTopicResponse(topic.name, partitions))
    fx.reply(handle, OffsetDeleteResponse(topics=tuple(topics)))
    return fx.result()


def _validate_delete(group: ClassicGroup | None) -> ErrorCode | None:
    """ClassicGroup.validateOffsetDelete."""
    if group is None or group.is_in(GroupState.DEAD):
        return ErrorCode.group_id_not_found
    if not group.is_in(GroupState.EMPTY) and not uses_consumer_protocol(group):
        return ErrorCode.non_empty_group
    return None


def _delete_partition(
    ctx: ShardContext,
    group_id: str,
    topic: str,
    partition: int,
    subscribed: bool,
    offsets: GroupOffsets,
    records: list[Record],
) -> DeletePartitionResponse:
    if subscribed:
        return DeletePartitionResponse(partition, ErrorCode.group_subscribed_to_topic)
    if (topic, partition) in offsets or ctx.txn.holds(group_id, topic, partition):
        records.append(offset_tombstone(group_id, topic, partition))
    return DeletePartitionResponse(partition)


# --- deleted topics ---------------------------------------------------------------------------------


def on_topics_deleted(ctx: ShardContext, topics: frozenset[str]) -> Result:
    """Kafka's OffsetMetadataManager.onPartitionsDeleted: a tombstone for every committed or pending offset of
    the deleted topics, in every group of this shard (one per partition). The groups stay; an Empty group left
    without offsets is deleted by the next retention check, as in Kafka (retention.py)."""
    keys = {
        (group_id, topic, partition)
        for group_id, group_offsets in ctx.offsets.items()
        for topic, partition in group_offsets
        if topic in topics
    }
    keys.update(
        (group_id, topic, partition)
        for group_id in ctx.txn.open
        for topic, partition in ctx.txn.open_keys(group_id)
        if topic in topics
    )
    return Result(records=tuple(offset_tombstone(*key) for key in sorted(keys)))


def group_offset_keys(ctx: ShardContext, group_id: str) -> list[tuple[str, int]]:
    """Every partition of the group with an offset, committed or pending, sorted (DeleteGroups writes a tombstone
    for each: Kafka's deleteAllOffsets)."""
    return sorted(set(ctx.offsets.get(group_id, ())).union(ctx.txn.open_keys(group_id)))


# --- replay -----------------------------------------------------------------------------------------


def replay_offset(
    ctx: ShardContext, key: bytes, value: bytes | None, producer_id: int = -1, producer_epoch: int = -1
) -> None:
    """Apply one OffsetCommit record (a tombstone deletes, pending offsets of the partition too). A value for a
    group that does not exist creates a simple group, as Kafka's replay does. A value of a transactional batch
    (`producer_id` >= 0) is pending until its marker (txn_offsets.py). Raises ValueError if the record does
    not decode."""
    replay_decoded_offset(ctx, decode_offset_commit(key, value), producer_id, producer_epoch)


def replay_decoded_offset(
    ctx: ShardContext,
    decoded: tuple[str, str, int, OffsetValue | None],
    producer_id: int = -1,
    producer_epoch: int = -1,
) -> None:
    """`replay_offset` of a record already decoded (an OffsetCommitRecord the shard has just written)."""
    group_id, topic, partition, offset = decoded
    txn = ctx.txn
    if offset is None:
        _remove(ctx, group_id, topic, partition)
        if txn:
            txn.deleted(group_id, (topic, partition))
    elif producer_id >= 0:
        _ensure_group(ctx, group_id)
        txn.stage(producer_id, group_id, (topic, partition), offset)
        txn.saw_epoch(producer_id, producer_epoch)
    else:
        _offsets_of(ctx, group_id)[(topic, partition)] = offset
        if txn:
            txn.committed(group_id, (topic, partition))


def replay_end_transaction_marker(ctx: ShardContext, producer_id: int, commit: bool, producer_epoch: int = -1) -> None:
    """Kafka's replayEndTransactionMarker: the producer's pending offsets become committed (COMMIT) or vanish
    (ABORT). A marker of a producer without pending offsets changes nothing but the producer's epoch."""
    ctx.txn.saw_epoch(producer_id, producer_epoch)
    done = ctx.txn.complete(producer_id, commit)
    for group_id, key, value in done:
        _offsets_of(ctx, group_id)[key] = value
    if done:
        log.debug(
            "producer %d: transaction %s, %d offsets committed",
            producer_id,
            "committed" if commit else "aborted",
            len(done),
        )


def replay_loaded_batch(
    ctx: ShardContext, records: list[tuple[bytes, bytes | None]], other: Callable[[bytes, bytes | None], None]
) -> int:
    """`replay_offset` for every OffsetCommit record of one loaded batch and `other(key, value)` for anything
    else, in order, faster (`records.load_offset_commits`); returns how many records could not be decoded
    (each is skipped with a warning, as `replay` would raise for it alone)."""
    return load_offset_commits(records, partial(_offsets_of, ctx), partial(_remove, ctx), other)


def _remove(ctx: ShardContext, group_id: str, topic: str, partition: int) -> None:
    group_offsets = ctx.offsets.get(group_id)
    if group_offsets is not None:
        group_offsets.pop((topic, partition), None)
        if not group_offsets:
            del ctx.offsets[group_id]


def _ensure_group(ctx: ShardContext, group_id: str) -> None:
    """A group that does not exist is created as a simple group (Kafka's replay); a consumer group (KIP-848)
    exists too, and keeps its offsets as any group does."""
    if group_id not in ctx.groups and group_id not in ctx.consumer_groups:
        ctx.groups[group_id] = ClassicGroup(group_id, GroupState.EMPTY, ctx.now())


def _offsets_of(ctx: ShardContext, group_id: str) -> GroupOffsets:
    """The group's offsets; a group that does not exist is created as a simple group (Kafka's replay)."""
    _ensure_group(ctx, group_id)
    group_offsets = ctx.offsets.get(group_id)
    if group_offsets is None:
        group_offsets = ctx.offsets[group_id] = {}
    return group_offsets
