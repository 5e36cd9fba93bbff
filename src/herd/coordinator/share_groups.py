"""Share groups (KIP-932) in the shard: ShareGroupHeartbeat and ShareGroupDescribe, members' sessions, and the
initialization of the share partitions' state. The rules of a heartbeat are in share/heartbeat.py and the group's
records in share/group.py; this module drives them from the shard as consumer_heartbeat.py drives consumer groups
(Kafka 4.2's GroupCoordinatorService.shareGroupHeartbeat and shareGroupDescribe, GroupMetadataManager's share
session timers).

Share-state initialization. A heartbeat that finds subscribed partitions without share state marks them
initializing (record 15) and names them in its Outcome; Kafka then asks the share coordinator to initialize them
(InitializeShareGroupState with start offset -1: the partition's leader resolves it through share.auto.offset.reset
on first use) from a timer task of delay 0, and writes record 15 again once that is done, moving them to
initialized; the next heartbeat then assigns them. herd does the same from a timer of delay 0 (`_initialize`). A
new share partition's state is nothing but that start offset of -1, which is what the data side (share/partition.py)
starts from when it finds no state, so there is nothing else to write; the durable share state of issue 32 will
write its ShareSnapshot at this point.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from herd.coordinator import kafka_group_configs
from herd.coordinator.consumer.assignment import Assignment
from herd.coordinator.context import ShardContext
from herd.coordinator.errors import ErrorCode
from herd.coordinator.records import Record
from herd.coordinator.responses import (
    DescribedShareGroup,
    DescribedShareMember,
    DescribedShareTopic,
    ShareGroupDescribeResponse,
    ShareOffsetsAnswer,
)
from herd.coordinator.result import Reply, Result, Rollback
from herd.coordinator.share import heartbeat as hb
from herd.coordinator.share import records as rec
from herd.coordinator.share.group import ShareGroup
from herd.coordinator.share.heartbeat import LEAVE_GROUP_MEMBER_EPOCH, ShareGroupHeartbeat, ShareSettings

SHARE_GROUP_TYPE = "share"
ASSIGNOR_NAME = "simple"
# Kafka's CoordinatorRuntime timer retries a failed timer operation after 500 ms (EventBasedCoordinatorTimer)
TIMER_RETRY_BACKOFF_MS = 500


def session_key(group_id: str, member_id: str) -> str:
    return f"share-session:{group_id}:{member_id}"


def initialize_key(group_id: str) -> str:
    return f"share-initialize:{group_id}"


def is_other_type(ctx: ShardContext, group_id: str) -> bool:
    """Whether a classic or consumer group has the id (a simple group holding only offsets counts: Kafka's group of
    that id would be a classic group)."""
    return group_id in ctx.groups or group_id in ctx.consumer_groups


def settings(ctx: ShardContext, group_id: str) -> ShareSettings:
    """The broker's share-group settings, with the group's share.session.timeout.ms and share.heartbeat.interval.ms
    where it sets them."""
    config, overrides = ctx.config, ctx.group_configs.get(group_id)
    return ShareSettings(
        max_size=config.group_share_max_size,
        session_timeout_ms=kafka_group_configs.int_value(
            overrides, kafka_group_configs.SHARE_SESSION_TIMEOUT_MS, config.group_share_session_timeout_ms
        ),
        heartbeat_interval_ms=kafka_group_configs.int_value(
            overrides, kafka_group_configs.SHARE_HEARTBEAT_INTERVAL_MS, config.group_share_heartbeat_interval_ms
        ),
        initialize_retry_interval_ms=config.group_share_initialize_retry_interval_ms,
    )


def _view(ctx: ShardContext, group_id: str) -> hb.ShareView:
    return hb.ShareView(ctx.share_groups, lambda g: is_other_type(ctx, g), ctx.topics, settings(ctx, group_id))


# --- ShareGroupHeartbeat -------------------------------------------------------------------------------------------


def handle(ctx: ShardContext, req: ShareGroupHeartbeat, reply: object) -> Result:
    """The Result of one ShareGroupHeartbeat: its records and its answer, or an error answer and nothing. A leave
    cancels the member's session (and starts it again if its records are not written); any other heartbeat
    (re)arms it; partitions to initialize are initialized by a timer once the heartbeat is written."""
    view = _view(ctx, req.group_id)
    outcome = hb.heartbeat(view, req, ctx.now())
    response = outcome.response
    replies = (Reply(reply, response),)
    if response.error_code != ErrorCode.none:
        return Result(replies=replies)
    group_id, member_id = req.group_id, req.member_id
    rollback: Rollback | None = None
    if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
        _cancel_session(ctx, group_id, member_id)
        rollback = _rearm_session(ctx, group_id, member_id, None)
    elif outcome.arm_session:
        arm_session(ctx, group_id, member_id, view.settings.session_timeout_ms)
    if outcome.initialize:
        rollback = _schedule_initialize(ctx, group_id, outcome.initialize)
    return Result(records=outcome.records, replies=replies, rollback=rollback)


def _schedule_initialize(ctx: ShardContext, group_id: str, parts: Mapping[uuid.UUID, frozenset[int]]) -> Rollback:
    """Initialize `parts` from a timer of delay 0 (Kafka's timer.add(new TimerTask(0)) of persisterInitialize), with
    whatever other heartbeats of the group asked for meanwhile; the rollback forgets them if the heartbeat's
    records are not written (their record 15 did not mark them initializing)."""
    pending = ctx.share_initializing.setdefault(group_id, {})
    for topic_id, partitions in parts.items():
        pending[topic_id] = pending.get(topic_id, frozenset()) | partitions
    ctx.timer.schedule(initialize_key(group_id), ctx.now(), lambda: _initialize(ctx, group_id))

    def rollback(error: ErrorCode) -> Result:
        left = ctx.share_initializing.get(group_id)
        if left is not None:
            for topic_id, partitions in parts.items():
                remaining = left.get(topic_id, frozenset()) - partitions
                if remaining:
                    left[topic_id] = remaining
                else:
                    left.pop(topic_id, None)
            if not left:
                del ctx.share_initializing[group_id]
                ctx.timer.cancel(initialize_key(group_id))
        return Result()

    return rollback


def _initialize(ctx: ShardContext, group_id: str) -> Result:
    """The share partitions asked for are initialized: record 15 moves them from initializing to initialized
    (GroupMetadataManager.initializeShareGroupState). Partitions no longer initializing (the group was deleted,
    or their topic) are left out; if the record is not written they stay initializing, and a heartbeat after
    group.share.initialize.retry.interval.ms asks again (Kafka's persister retries then gives up the same way)."""
    parts = ctx.share_initializing.pop(group_id, None)
    group = ctx.share_groups.get(group_id)
    if not parts or group is None or group.state_metadata is None:
        return Result()
    initializing = group.state_metadata.initializing
    done = {
        topic_id: partitions & initializing[topic_id].partitions
        for topic_id, partitions in parts.items()
        if topic_id in initializing and partitions & initializing[topic_id].partitions
    }
    if not done:
        return Result()
    return Result(records=(hb.initialized(group, done, ctx.topics),))


# --- sessions --------------------------------------------------------------------------------------------------------


def arm_session(ctx: ShardContext, group_id: str, member_id: str, timeout_ms: int) -> None:
    """The member must be heard of within `timeout_ms`: the deadline moves, and the timer is only scheduled when none
    is (it re-arms itself for a later deadline when it fires), as consumer_heartbeat.arm_session."""
    deadline = ctx.now() + timeout_ms
    session = ctx.share_sessions.get((group_id, member_id))
    if session is None:
        ctx.share_sessions[(group_id, member_id)] = session = [deadline, -1]
    session[0] = deadline
    if session[1] == -1:
        _schedule_session(ctx, group_id, member_id, session, deadline)


def _schedule_session(ctx: ShardContext, group_id: str, member_id: str, session: list[int], deadline: int) -> None:
    session[1] = deadline
    ctx.timer.schedule(session_key(group_id, member_id), deadline, lambda: _session_expired(ctx, group_id, member_id))


def _cancel_session(ctx: ShardContext, group_id: str, member_id: str) -> None:
    ctx.share_sessions.pop((group_id, member_id), None)
    ctx.timer.cancel(session_key(group_id, member_id))


def _rearm_session(ctx: ShardContext, group_id: str, member_id: str, retry_ms: int | None) -> Rollback:
    """The rollback of a leave or fence whose records were not written: the member is still in the group, so its
    session starts again (for `retry_ms` when it was the session's own expiry: tried again soon, as Kafka's timer
    retries it)."""

    def rollback(error: ErrorCode) -> Result:
        group = ctx.share_groups.get(group_id)
        if group is not None and member_id in group.members:
            timeout = retry_ms if retry_ms is not None else settings(ctx, group_id).session_timeout_ms
            arm_session(ctx, group_id, member_id, timeout)
        return Result()

    return rollback


def _session_expired(ctx: ShardContext, group_id: str, member_id: str) -> Result:
    """shareGroupFenceMemberOperation(groupId, memberId, "the member session expired"): the member's records go as
    on a leave; nothing if it is gone already."""
    session = ctx.share_sessions.get((group_id, member_id))
    if session is not None:
        session[1] = -1
        if session[0] > ctx.now():  # heard of since: wait for the new deadline
            _schedule_session(ctx, group_id, member_id, session, session[0])
            return Result()
    ctx.share_sessions.pop((group_id, member_id), None)
    records = hb.fence(_view(ctx, group_id), group_id, member_id)
    if not records:
        return Result()
    return Result(records=records, rollback=_rearm_session(ctx, group_id, member_id, TIMER_RETRY_BACKOFF_MS))


def on_loaded(ctx: ShardContext) -> None:
    """After a load: every member's session starts (GroupMetadataManager.onLoaded)."""
    for group in ctx.share_groups.values():
        timeout = settings(ctx, group.group_id).session_timeout_ms
        for member_id in group.members:
            arm_session(ctx, group.group_id, member_id, timeout)


def on_unloaded(ctx: ShardContext) -> None:
    for group_id, member_id in ctx.share_sessions:
        ctx.timer.cancel(session_key(group_id, member_id))
    for group_id in ctx.share_initializing:
        ctx.timer.cancel(initialize_key(group_id))
    ctx.share_groups.clear()
    ctx.share_sessions.clear()
    ctx.share_initializing.clear()


def forget(ctx: ShardContext, group_id: str) -> None:
    """The group is gone (deleted): its members' sessions and its pending initialization go."""
    for key in [k for k in ctx.share_sessions if k[0] == group_id]:
        _cancel_session(ctx, *key)
    if ctx.share_initializing.pop(group_id, None) is not None:
        ctx.timer.cancel(initialize_key(group_id))


# --- DeleteGroups ----------------------------------------------------------------------------------------------------


def delete(ctx: ShardContext, group: ShareGroup) -> tuple[ErrorCode, tuple[Record, ...]]:
    """DeleteGroups of a share group: NON_EMPTY_GROUP while it has members, else its tombstones (ShareGroup.
    createGroupTombstoneRecords). A share group holds no committed offsets (OffsetCommit refuses it)."""
    if group.members:
        return ErrorCode.non_empty_group, ()
    return ErrorCode.none, rec.group_tombstones(group.group_id, tuple(group.members))


# --- the share-group offset admin APIs (KIP-932) --------------------------------------------------------------------
# Kafka 4.2's GroupMetadataManager.alterShareGroupOffsets, sharePartitionsEligibleForOffsetDeletion and
# completeDeleteShareGroupOffsets, and the record 15 changes around the share coordinator's work
# (docs/kip-932/share-admin-rules.md). The share coordinator's part is the runtime's (server/apis/*_share_group_*).

Partitions = dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class InitializedPartitions:
    """A read of the share partitions whose state is initialized (GroupMetadataManager.initializedShareGroupPartitions:
    no check of the group's existence or type; none for a group that has none)."""

    group_id: str


@dataclass(frozen=True, slots=True)
class AlterShareOffsets:
    group_id: str
    partitions: Partitions  # the topics (known to the caller) and partitions whose start offsets are set


@dataclass(frozen=True, slots=True)
class ShareOffsetsInitialized:
    """The share coordinator initialized these partitions: record 15 moves them to initialized."""

    group_id: str
    partitions: Partitions


@dataclass(frozen=True, slots=True)
class DeleteShareOffsets:
    group_id: str
    topic_ids: tuple[uuid.UUID, ...]


@dataclass(frozen=True, slots=True)
class ShareOffsetsDeleted:
    """The share coordinator deleted these topics' state: record 15 drops them from deleting."""

    group_id: str
    topic_ids: tuple[uuid.UUID, ...]


def initialized_partitions(ctx: ShardContext, req: InitializedPartitions, reply: object) -> Result:
    group = ctx.share_groups.get(req.group_id)
    metadata = group.state_metadata if group is not None else None
    found = {t: s.partitions for t, s in metadata.initialized.items()} if metadata is not None else {}
    return Result(replies=(Reply(reply, ShareOffsetsAnswer(partitions=found)),))


def _empty_share_group(ctx: ShardContext, group_id: str, create: bool) -> tuple[ShareGroup | None, ShareOffsetsAnswer]:
    """The group, if it may have its offsets changed: a share group (GROUP_ID_NOT_FOUND for another type, or for a
    missing one unless `create`) without members (NON_EMPTY_GROUP)."""
    group = ctx.share_groups.get(group_id)
    if group is None:
        if is_other_type(ctx, group_id):
            return None, ShareOffsetsAnswer(ErrorCode.group_id_not_found, f"Group {group_id} is not a share group.")
        if not create:
            return None, ShareOffsetsAnswer(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
        return ShareGroup(group_id), ShareOffsetsAnswer()
    if group.members:
        return None, ShareOffsetsAnswer(ErrorCode.non_empty_group, "The group is not empty.")
    return group, ShareOffsetsAnswer()


def alter_offsets(ctx: ShardContext, req: AlterShareOffsets, reply: object) -> Result:
    """AlterShareGroupOffsets on the group's shard: an empty share group (made if there is none) marks the
    partitions initializing (record 15; no record when there are none) and answers the state epoch (the group's
    epoch) at which the share coordinator is to initialize them."""
    group, answer = _empty_share_group(ctx, req.group_id, create=True)
    if group is None or not req.partitions:
        return Result(replies=(Reply(reply, answer),))
    metadata = group.state_metadata or rec.StateMetadata()
    now = ctx.now()
    initializing = dict(metadata.initializing)
    for topic_id, parts in req.partitions.items():
        old = initializing.get(topic_id)
        name = ctx.topics.by_id[topic_id].name if topic_id in ctx.topics.by_id else (old.name if old else "")
        initializing[topic_id] = rec.TopicState(name, (old.partitions if old else frozenset()) | parts, now)
    deleting = {t: n for t, n in metadata.deleting.items() if t not in req.partitions}
    record = rec.state_metadata_record(group.group_id, rec.StateMetadata(initializing, metadata.initialized, deleting))
    answer = ShareOffsetsAnswer(state_epoch=group.group_epoch, partitions=dict(req.partitions))
    return Result(records=(record,), replies=(Reply(reply, answer),))


def offsets_initialized(ctx: ShardContext, req: ShareOffsetsInitialized, reply: object) -> Result:
    group = ctx.share_groups.get(req.group_id)
    if group is None or group.state_metadata is None:
        return Result(replies=(Reply(reply, ShareOffsetsAnswer()),))
    record = hb.initialized(group, req.partitions, ctx.topics)
    return Result(records=(record,), replies=(Reply(reply, ShareOffsetsAnswer()),))


def delete_offsets(ctx: ShardContext, req: DeleteShareOffsets, reply: object) -> Result:
    """DeleteShareGroupOffsets on the group's shard: an existing empty share group; a topic whose state was never
    initialized has "no offset information to delete"; the others move to deleting (record 15) and their
    partitions are answered for the share coordinator to delete."""
    group, answer = _empty_share_group(ctx, req.group_id, create=False)
    if group is None:
        return Result(replies=(Reply(reply, answer),))
    metadata = group.state_metadata or rec.StateMetadata()
    eligible: Partitions = {}
    refused: dict[uuid.UUID, str] = {}
    for topic_id in req.topic_ids:
        known = metadata.initialized.get(topic_id)
        if known is None:
            refused[topic_id] = "There is no offset information to delete."
        else:
            eligible[topic_id] = known.partitions
    if not eligible:
        return Result(replies=(Reply(reply, ShareOffsetsAnswer(refused=refused)),))
    deleting = dict(metadata.deleting)
    for topic_id in eligible:
        deleting[topic_id] = metadata.initialized[topic_id].name
    record = rec.state_metadata_record(
        group.group_id,
        rec.StateMetadata(
            {t: s for t, s in metadata.initializing.items() if t not in eligible},
            {t: s for t, s in metadata.initialized.items() if t not in eligible},
            deleting,
        ),
    )
    return Result(records=(record,), replies=(Reply(reply, ShareOffsetsAnswer(partitions=eligible, refused=refused)),))


def offsets_deleted(ctx: ShardContext, req: ShareOffsetsDeleted, reply: object) -> Result:
    group = ctx.share_groups.get(req.group_id)
    if group is None or group.state_metadata is None:
        return Result(replies=(Reply(reply, ShareOffsetsAnswer()),))
    metadata = group.state_metadata
    deleting = {t: n for t, n in metadata.deleting.items() if t not in req.topic_ids}
    record = rec.state_metadata_record(
        group.group_id, rec.StateMetadata(metadata.initializing, metadata.initialized, deleting)
    )
    return Result(records=(record,), replies=(Reply(reply, ShareOffsetsAnswer()),))


# --- ShareGroupDescribe ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupDescribe:
    group_ids: tuple[str, ...]


def describe(ctx: ShardContext, req: ShareGroupDescribe, reply: object) -> Result:
    """GroupMetadataManager.shareGroupDescribe and ShareGroup.asDescribedGroup: GROUP_ID_NOT_FOUND for a group that
    is not a share group; partitions of topics the image no longer has are left out."""
    groups = tuple(_describe_one(ctx, group_id) for group_id in req.group_ids)
    return Result(replies=(Reply(reply, ShareGroupDescribeResponse(groups)),))


def _describe_one(ctx: ShardContext, group_id: str) -> DescribedShareGroup:
    group = ctx.share_groups.get(group_id)
    if group is None:
        message = f"Group {group_id} is not a share group." if is_other_type(ctx, group_id) else None
        return DescribedShareGroup(
            group_id=group_id,
            error_code=ErrorCode.group_id_not_found,
            error_message=message or f"Group {group_id} not found.",
        )
    names = {info.topic_id: name for name, info in ctx.topics.by_name.items()}

    def described(of: Assignment) -> tuple[DescribedShareTopic, ...]:
        return tuple(
            DescribedShareTopic(topic_id, names[topic_id], tuple(sorted(parts)))
            for topic_id, parts in sorted(of.items())
            if topic_id in names
        )

    members = tuple(
        DescribedShareMember(
            member_id=m.member_id,
            rack_id=m.rack_id,
            member_epoch=m.member_epoch,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=tuple(sorted(m.subscribed_topic_names)),
            assignment=described(m.assigned),
        )
        for m in group.members.values()
    )
    return DescribedShareGroup(
        group_id=group_id,
        group_state=group.state.value,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=ASSIGNOR_NAME,
        members=members,
    )
