"""DescribeGroups, ListGroups and DeleteGroups, of classic groups, KIP-848 consumer groups and KIP-932 share groups.

DescribeGroups describes classic groups only: a consumer or share group is answered as Kafka answers it (Dead;
from v6 GROUP_ID_NOT_FOUND "Group <id> is not a classic group.", GroupMetadataManager.describeGroups). ListGroups
lists all three, each with its type (classic, consumer, share) and a consumer or share group with protocol type
"consumer" or "share" and its state (ModernGroup.asListedGroup). DeleteGroups deletes an Empty consumer group
with its offsets and its records' tombstones (ConsumerGroup.validateDeleteGroup, createGroupTombstoneRecords),
and an Empty share group with its records' tombstones (share_groups.delete; Kafka first moves its share
partitions to deleting and has the share coordinator delete their state, which herd does not keep yet).

Describe: a Stable group shows its protocol and each member's metadata for it and assignment;
other states show members without metadata; an unknown group is described as Dead with no error
(DescribeGroups v0-5). List: filters by state and type, case-insensitively (Kafka lower-cases
both sides). Delete: only Empty groups; others get NON_EMPTY_GROUP, unknown ones GROUP_ID_NOT_FOUND.
Deletion writes a tombstone for every committed offset, then the GroupMetadata tombstone (and herd's rebalance
history tombstone, history.py); replaying them removes the group (apache/kafka ClassicGroup.validateDeleteGroup,
createGroupTombstoneRecords).
"""

from __future__ import annotations

from herd.coordinator import offsets, share_groups
from herd.coordinator.consumer import records as consumer_records
from herd.coordinator.consumer.group import ConsumerGroup, ConsumerGroupState
from herd.coordinator.context import ShardContext
from herd.coordinator.errors import ErrorCode
from herd.coordinator.group import ClassicGroup
from herd.coordinator.records import group_tombstone, offset_tombstone, rebalance_history_tombstone
from herd.coordinator.requests import DeleteGroups, DescribeGroups, ListGroups
from herd.coordinator.responses import (
    DeletableGroupResult,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribedMember,
    DescribeGroupsResponse,
    ListedGroup,
    ListGroupsResponse,
)
from herd.coordinator.result import Effects, Result
from herd.coordinator.share.group import ShareGroup
from herd.coordinator.share_groups import SHARE_GROUP_TYPE
from herd.coordinator.state import GroupState

GROUP_TYPE = "classic"
CONSUMER_GROUP_TYPE = "consumer"


def describe(ctx: ShardContext, req: DescribeGroups, handle: object) -> Result:
    fx = Effects()
    fx.reply(handle, DescribeGroupsResponse(groups=tuple(_describe(ctx, g) for g in req.groups)))
    return fx.result()


def _describe(ctx: ShardContext, group_id: str) -> DescribedGroup:
    if not group_id:
        return DescribedGroup(group_id=group_id, error_code=ErrorCode.invalid_group_id)
    group = ctx.groups.get(group_id)
    if group is None:
        not_classic = group_id in ctx.consumer_groups or group_id in ctx.share_groups
        return DescribedGroup(group_id=group_id, group_state=str(GroupState.DEAD), not_classic=not_classic)
    stable = group.is_in(GroupState.STABLE)
    members = tuple(
        DescribedMember(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.metadata(group.protocol_name) if stable else b"",
            m.assignment if stable else b"",
        )
        for m in group.members.values()
    )
    return DescribedGroup(
        group_id=group_id,
        group_state=str(group.state),
        protocol_type=group.protocol_type or "",
        protocol_data=(group.protocol_name or "") if stable else "",
        members=members,
    )


def list_groups(ctx: ShardContext, req: ListGroups, handle: object) -> Result:
    states = {s.lower() for s in req.states_filter}
    types = {t.lower() for t in req.types_filter}
    listed = (
        tuple(
            ListedGroup(g.group_id, g.protocol_type or "", str(g.state), GROUP_TYPE)
            for g in ctx.groups.values()
            if _listed(g, states, types)
        )
        + tuple(
            ListedGroup(g.group_id, ConsumerGroup.PROTOCOL_TYPE, g.state.value, CONSUMER_GROUP_TYPE)
            for g in ctx.consumer_groups.values()
            if (not states or g.state.value.lower() in states) and (not types or CONSUMER_GROUP_TYPE in types)
        )
        + tuple(
            ListedGroup(g.group_id, ShareGroup.PROTOCOL_TYPE, g.state.value, SHARE_GROUP_TYPE)
            for g in ctx.share_groups.values()
            if (not states or g.state.value.lower() in states) and (not types or SHARE_GROUP_TYPE in types)
        )
    )
    fx = Effects()
    fx.reply(handle, ListGroupsResponse(groups=listed))
    return fx.result()


def _listed(group: ClassicGroup, states: set[str], types: set[str]) -> bool:
    if group.is_in(GroupState.DEAD):
        return False
    if states and str(group.state).lower() not in states:
        return False
    return not types or GROUP_TYPE in types


def delete(ctx: ShardContext, req: DeleteGroups, handle: object) -> Result:
    fx = Effects()
    results = tuple(DeletableGroupResult(gid, _delete_one(ctx, gid, fx)) for gid in req.groups_names)
    fx.reply(handle, DeleteGroupsResponse(results=results))
    return fx.result()


def _delete_one(ctx: ShardContext, group_id: str, fx: Effects) -> ErrorCode:
    if not group_id:
        return ErrorCode.invalid_group_id
    share_group = ctx.share_groups.get(group_id)
    if share_group is not None:
        error, tombstones = share_groups.delete(ctx, share_group)
        fx.records.extend(tombstones)
        return error
    consumer_group = ctx.consumer_groups.get(group_id)
    if consumer_group is not None:
        if consumer_group.state is not ConsumerGroupState.EMPTY:
            return ErrorCode.non_empty_group
        for topic, partition in offsets.group_offset_keys(ctx, group_id):
            fx.records.append(offset_tombstone(group_id, topic, partition))
        fx.records.extend(
            consumer_records.group_tombstones(group_id, tuple(consumer_group.members), tuple(consumer_group.resolved))
        )
        if ctx.history.of(group_id) or not ctx.history.size:
            fx.records.append(rebalance_history_tombstone(group_id))
        return ErrorCode.none
    group = ctx.groups.get(group_id)
    if group is None or group.is_in(GroupState.DEAD):
        return ErrorCode.group_id_not_found
    if not group.is_in(GroupState.EMPTY):
        return ErrorCode.non_empty_group
    for topic, partition in offsets.group_offset_keys(ctx, group_id):  # committed and pending (deleteAllOffsets)
        fx.records.append(offset_tombstone(group_id, topic, partition))
    fx.records.append(group_tombstone(group_id))
    if ctx.history.of(group_id) or not ctx.history.size:  # (size 0: a record from before may remain)
        fx.records.append(rebalance_history_tombstone(group_id))
    return ErrorCode.none
