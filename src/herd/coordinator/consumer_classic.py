"""JoinGroup, SyncGroup, Heartbeat and LeaveGroup from classic members of a consumer group (KIP-848's online
migration), as Kafka 4.2 serves them (confluentinc/kafka branch 4.2, group-coordinator/.../GroupMetadataManager
.java: classicGroupJoinToConsumerGroup, classicGroupSyncToConsumerGroup, classicGroupHeartbeatToConsumerGroup,
classicGroupLeaveToConsumerGroup, throwIfRebalanceInProgress, the consumer-group join and sync timeouts).

A classic member inside a consumer group is a consumer-group member like any other: the server-side assignor
gives it a target and reconciliation (consumer/reconcile.py) moves it there, never handing it a partition another
member still owns. The classic protocol is only how it talks:
- JoinGroup is its heartbeat with a subscription: it updates the member (its topics and owned partitions from the
  embedded ConsumerProtocolSubscription), may bump the group epoch and compute a new target, reconciles the member,
  and answers at once with the member's epoch as the generation, no leader and no members (every classic member
  is a follower: the coordinator assigns);
- SyncGroup answers the member's assigned partitions in its own version of the consumer protocol;
- Heartbeat answers REBALANCE_IN_PROGRESS when the member must rejoin to move on: the group epoch is ahead of it,
  it has partitions to revoke, or the partitions it waited for are free. Told so, it has its rebalance timeout
  to rejoin (the join timeout), and after a JoinGroup its rebalance timeout to sync (the sync timeout), else it
  is fenced;
- LeaveGroup fences it (and downgrades the group when only classic members are left, migration.py).
Its session timeout is its own JoinGroup's, not the group's.
"""

from __future__ import annotations

import logging

from herd.coordinator import consumer_heartbeat as hb
from herd.coordinator import migration
from herd.coordinator.consumer import embedded
from herd.coordinator.consumer import records as rec
from herd.coordinator.consumer.group import ConsumerGroup
from herd.coordinator.consumer.member import ClassicMetadata, ConsumerMember, MemberState
from herd.coordinator.context import ShardContext
from herd.coordinator.errors import CoordinatorError, ErrorCode
from herd.coordinator.history import ADMIN_REASON
from herd.coordinator.joining import rebalance_timeout
from herd.coordinator.records import Record
from herd.coordinator.requests import UNKNOWN_MEMBER_ID, JoinGroup, LeaveGroup, MemberIdentity, SyncGroup
from herd.coordinator.responses import JoinGroupResponse, LeaveGroupResponse, LeaveMemberResponse, SyncGroupResponse
from herd.coordinator.result import Effects, Reply, Result

log = logging.getLogger(__name__)


# --- JoinGroup -------------------------------------------------------------------------------------------------


def join(ctx: ShardContext, group: ConsumerGroup, req: JoinGroup, handle: object) -> Result:
    """classicGroupJoinToConsumerGroup. The request passed JoinGroup's own checks (joining.validate_join)."""
    fx = Effects()
    try:
        records, response = _join(ctx, group, req, fx)
    except CoordinatorError as error:
        fx.reply(handle, JoinGroupResponse(error_code=error.code, member_id=req.member_id))
        return fx.result()
    fx.records.extend(records)
    fx.reply(handle, response)
    return fx.result()


def _join(
    ctx: ShardContext, group: ConsumerGroup, req: JoinGroup, fx: Effects
) -> tuple[list[Record], JoinGroupResponse]:
    group_id = group.group_id
    if ctx.config.group_consumer_migration_policy == "disabled":
        log.info(
            "Cannot join the consumer group %s with the classic protocol because the group migration is disabled.",
            group_id,
        )
        raise CoordinatorError(
            ErrorCode.inconsistent_group_protocol,
            f"Cannot join the consumer group {group_id} with the classic protocol because the group migration is "
            "disabled.",
        )
    unknown = req.member_id == UNKNOWN_MEMBER_ID
    member_id = ctx.new_uuid() if unknown else req.member_id
    max_size = ctx.config.group_consumer_max_size
    if len(group.members) >= max_size and member_id not in group.members:
        raise CoordinatorError(
            ErrorCode.group_max_size_reached,
            f"The consumer group has reached its maximum capacity of {max_size} members.",
        )
    if not group.supports_classic_protocols(req.protocol_type, (p.name for p in req.protocols)):
        raise CoordinatorError(
            ErrorCode.inconsistent_group_protocol, f"Member {member_id}'s protocols are not supported."
        )
    if unknown and req.group_instance_id is None and req.api_version >= 4:
        # KIP-394: a dynamic member without an id gets one and comes back with it (requiresKnownMemberId)
        log.info(
            "[GroupId %s] Dynamic member with unknown member id joins the consumer group. Created a new member id "
            "%s and requesting the member to rejoin with this id.",
            group_id,
            member_id,
        )
        return [], JoinGroupResponse(error_code=ErrorCode.member_id_required, member_id=member_id)
    try:
        subscription = embedded.decode_subscription(req.protocols[0].metadata)
    except embedded.MalformedProtocol:
        raise CoordinatorError(
            ErrorCode.inconsistent_group_protocol,
            "Malformed embedded consumer protocol in subscription deserialization.",
        ) from None

    records: list[Record] = []
    if req.group_instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            member = ConsumerMember(member_id)
            log.info("[GroupId %s] Member %s joins the consumer group using the classic protocol.", group_id, member_id)
    else:
        member = _static_member(group, member_id, req.group_instance_id, unknown, records)
    replaced = group.static_member(req.group_instance_id)
    downgrade = replaced is not None and migration.may_downgrade_replacing(ctx, group, replaced)

    updated = ConsumerMember(
        member.member_id,
        member_epoch=member.member_epoch,
        previous_member_epoch=member.previous_member_epoch,
        state=member.state,
        instance_id=req.group_instance_id if req.group_instance_id is not None else member.instance_id,
        rack_id=subscription.rack_id if subscription.rack_id is not None else member.rack_id,
        client_id=req.client_id,
        client_host=req.client_host,
        subscribed_topic_names=frozenset(subscription.topics),
        subscribed_topic_regex=None,  # a classic member subscribes to names only
        rebalance_timeout_ms=rebalance_timeout(req),
        server_assignor=member.server_assignor,
        assigned=member.assigned,
        pending_revocation=member.pending_revocation,
        classic=ClassicMetadata(req.session_timeout_ms, tuple((p.name, p.metadata) for p in req.protocols)),
    )
    names_changed = False
    if updated != member:
        records.append(rec.member_subscription_record(group_id, updated))
        names_changed = updated.subscribed_topic_names != member.subscribed_topic_names
    regex_update = hb.maybe_update_regexes(ctx, group, member, updated, records, None)
    bump = names_changed or regex_update is not hb.RegexUpdate.NO_CHANGE

    group_epoch = group.group_epoch
    if bump or hb.metadata_may_have_moved(ctx, group):
        group_epoch = hb.maybe_bump_group_epoch(ctx, group, bump, member, updated, records)
        if group_epoch > group.group_epoch:
            hb.rebalance_started(ctx, group, *hb.bump_cause(group, member, updated, bump), updated)
    owned = ctx.topics.with_ids(subscription.owned)

    if downgrade:
        if not bump:
            target = group.target(replaced.member_id if replaced is not None else updated.member_id)
            updated = hb.maybe_reconcile(ctx, group, updated, group.assignment_epoch, target, False, owned, records)
        converted = Effects()
        if migration.to_classic_group(ctx, group, (), updated, bump, records, converted) is not None:
            hb.forget(ctx, group)
            records.extend(converted.records)
            fx.replies.extend(converted.replies)
            return records, _join_response(updated)
        downgrade = False  # a member's protocol cannot be read: it stays a consumer group

    if group_epoch > group.assignment_epoch:
        target = hb.new_target_assignment(ctx, group, group_epoch, member, updated, records)
        target_epoch = group_epoch
    else:
        target_epoch = group.assignment_epoch
        previous = group.static_members.get(updated.instance_id) if updated.instance_id is not None else None
        target = group.target(previous if previous is not None else updated.member_id)
    updated = hb.maybe_reconcile(ctx, group, updated, target_epoch, target, bump, owned, records)
    if target_epoch == group_epoch and updated.is_reconciled_to(group_epoch):
        hb.maybe_rebalance_done(ctx, group, group_epoch, updated.member_id, records)

    hb.cancel_classic_join_timeout(ctx, group_id, updated.member_id)
    hb.arm_session(ctx, group_id, updated.member_id, req.session_timeout_ms)
    _arm_sync_timeout(ctx, group_id, updated.member_id, rebalance_timeout(req))
    return records, _join_response(updated)


def _join_response(member: ConsumerMember) -> JoinGroupResponse:
    assert member.classic is not None
    return JoinGroupResponse(
        member_id=member.member_id,
        generation_id=member.member_epoch,
        protocol_type=ConsumerGroup.PROTOCOL_TYPE,
        protocol_name=member.classic.protocol_name,
    )


def _static_member(
    group: ConsumerGroup, member_id: str, instance_id: str, create: bool, records: list[Record]
) -> ConsumerMember:
    """getOrMaybeSubscribeStaticConsumerGroupMember for a classic member: a JoinGroup without a member id takes
    the instance id's place at once (whatever protocol its holder speaks), one with an id must be its holder."""
    existing = group.static_member(instance_id)
    if create:
        if existing is None:
            log.info(
                "[GroupId %s] Static member %s with instance id %s joins the consumer group using the classic "
                "protocol.",
                group.group_id,
                member_id,
                instance_id,
            )
            return ConsumerMember(member_id)
        log.info(
            "[GroupId %s] Static member with instance id %s re-joins the consumer group using the classic protocol. "
            "Created a new member %s to replace the existing member %s.",
            group.group_id,
            instance_id,
            member_id,
            existing.member_id,
        )
        return hb.replace_static_member(group, existing, member_id, records)
    if existing is None:
        raise CoordinatorError(ErrorCode.unknown_member_id, f"Instance id {instance_id} is unknown.")
    if existing.member_id != member_id:
        raise CoordinatorError(
            ErrorCode.fenced_instance_id,
            f"Static member {member_id} with instance id {instance_id} was fenced by member {existing.member_id}.",
        )
    return existing


# --- SyncGroup, Heartbeat --------------------------------------------------------------------------------------


def sync(ctx: ShardContext, group: ConsumerGroup, req: SyncGroup, handle: object) -> Result:
    """classicGroupSyncToConsumerGroup: the member's assigned partitions, in its version of the consumer protocol.
    The answer is released once everything written before it is durable, as Kafka's waits for its append."""
    try:
        member = _classic_member(group, req.member_id, req.group_instance_id)
        _check_generation(member, req.generation_id)
        _check_protocol(member, req.protocol_type, req.protocol_name)
        _check_not_rebalancing(ctx, group, member)
    except CoordinatorError as error:
        return Result(replies=(Reply(handle, SyncGroupResponse(error_code=error.code)),))
    assert member.classic is not None
    ctx.timer.cancel(hb.classic_sync_key(group.group_id, member.member_id))
    hb.arm_session(ctx, group.group_id, member.member_id, member.classic.session_timeout_ms)
    names = ctx.topics.with_names(member.assigned)
    version = embedded.version(member.classic.protocols[0][1]) if member.classic.protocols[0][1] else 0
    response = SyncGroupResponse(
        protocol_type=req.protocol_type,
        protocol_name=req.protocol_name,
        assignment=embedded.encode_assignment(names, version),
    )
    return Result(replies=(Reply(handle, response),))


def heartbeat_error(
    ctx: ShardContext, group: ConsumerGroup, generation_id: int, member_id: str, instance_id: str | None
) -> ErrorCode:
    """classicGroupHeartbeatToConsumerGroup: the session moves on, and REBALANCE_IN_PROGRESS when the member must
    rejoin to move on (the group epoch is ahead of it, it has partitions to revoke, or all it waited for is free);
    from then it has its rebalance timeout to rejoin."""
    try:
        member = _classic_member(group, member_id, instance_id)
        _check_generation(member, generation_id)
    except CoordinatorError as error:
        return ErrorCode(error.code)
    assert member.classic is not None
    hb.arm_session(ctx, group.group_id, member.member_id, member.classic.session_timeout_ms)
    if (
        member.member_epoch < group.group_epoch
        or member.state is MemberState.UNREVOKED_PARTITIONS
        or (member.state is MemberState.UNRELEASED_PARTITIONS and not group.waiting_on_unreleased(member))
    ):
        _arm_join_timeout(ctx, group.group_id, member)
        return ErrorCode.rebalance_in_progress
    return ErrorCode.none


def _classic_member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
    """validateConsumerGroupMember and throwIfMemberDoesNotUseClassicProtocol."""
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            raise hb.unknown_member(group, member_id)
    else:
        member = group.static_member(instance_id)
        if member is None:
            raise CoordinatorError(
                ErrorCode.unknown_member_id,
                f"Member with instance id {instance_id} is not a member of group {group.group_id}.",
            )
        if member.member_id != member_id:
            raise CoordinatorError(
                ErrorCode.fenced_instance_id,
                f"Static member {member_id} with instance id {instance_id} was fenced by member {member.member_id}.",
            )
    if member.classic is None:
        raise CoordinatorError(
            ErrorCode.unknown_member_id, f"Member {member.member_id} does not use the classic protocol."
        )
    return member


def _check_generation(member: ConsumerMember, generation_id: int) -> None:
    if member.member_epoch != generation_id:
        raise CoordinatorError(
            ErrorCode.illegal_generation,
            f"The request generation id {generation_id} is not equal to the member epoch {member.member_epoch} of "
            f"member {member.member_id}.",
        )


def _check_protocol(member: ConsumerMember, protocol_type: str | None, protocol_name: str | None) -> None:
    """throwIfClassicProtocolUnmatched: a protocol type or name sent must be the one the join answer named."""
    assert member.classic is not None
    if protocol_type is not None and protocol_type != ConsumerGroup.PROTOCOL_TYPE:
        raise CoordinatorError(ErrorCode.inconsistent_group_protocol)
    if protocol_name is not None and protocol_name != member.classic.protocol_name:
        raise CoordinatorError(ErrorCode.inconsistent_group_protocol)


def _check_not_rebalancing(ctx: ShardContext, group: ConsumerGroup, member: ConsumerMember) -> None:
    """throwIfRebalanceInProgress: the group moved on since the member joined, and it has nothing to revoke first
    (then its next heartbeat sends it back)."""
    if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
        _arm_join_timeout(ctx, group.group_id, member)
        raise CoordinatorError(
            ErrorCode.rebalance_in_progress,
            f"A new rebalance is triggered in group {group.group_id} and member {member.member_id} should rejoin "
            "to catch up.",
        )


def _arm_join_timeout(ctx: ShardContext, group_id: str, member: ConsumerMember) -> None:
    """scheduleConsumerGroupJoinTimeoutIfAbsent: a member told to rejoin is fenced if it does not within its
    rebalance timeout."""
    key = (group_id, member.member_id)
    if key in ctx.classic_join_timeouts:
        return
    ctx.classic_join_timeouts.add(key)
    member_id = member.member_id

    def expired() -> Result:
        ctx.classic_join_timeouts.discard(key)
        return hb.fence_operation(
            ctx,
            group_id,
            member_id,
            "rebalance-timeout",
            "the classic member failed to join within the rebalance timeout",
        )

    ctx.timer.schedule(hb.classic_join_key(group_id, member_id), ctx.now() + member.rebalance_timeout_ms, expired)


def _arm_sync_timeout(ctx: ShardContext, group_id: str, member_id: str, timeout_ms: int) -> None:
    """scheduleConsumerGroupSyncTimeout: a member that joined must sync within its rebalance timeout."""
    ctx.timer.schedule(
        hb.classic_sync_key(group_id, member_id),
        ctx.now() + timeout_ms,
        lambda: hb.fence_operation(
            ctx, group_id, member_id, "rebalance-timeout", "the member failed to sync within timeout"
        ),
    )


# --- LeaveGroup ------------------------------------------------------------------------------------------------


def leave(ctx: ShardContext, group: ConsumerGroup, req: LeaveGroup, handle: object) -> Result:
    """classicGroupLeaveToConsumerGroup: each member named leaves (any member, whatever protocol it speaks: an
    admin removes consumer-protocol members this way too), in one fencing."""
    identities = req.members if req.api_version >= 3 else (MemberIdentity(req.member_id),)
    responses: list[LeaveMemberResponse] = []
    leaving: dict[str, ConsumerMember] = {}
    admin = False
    for who in identities:
        try:
            member = _leaving_member(group, who)
        except CoordinatorError as error:
            responses.append(LeaveMemberResponse(who.member_id, who.group_instance_id, error.code))
            continue
        log.info(
            "[GroupId %s] Member %s (instance id %s) has left group through explicit `LeaveGroup` request; client "
            "reason: %s",
            group.group_id,
            member.member_id,
            member.instance_id,
            who.reason or "not provided",
        )
        admin = admin or who.member_id == UNKNOWN_MEMBER_ID or (who.reason or "").startswith(ADMIN_REASON)
        responses.append(LeaveMemberResponse(who.member_id, who.group_instance_id))
        leaving[member.member_id] = member
    records: list[Record] = []
    if leaving:
        described = ", ".join(leaving)
        cause = "admin-removal" if admin else "member-leave"
        records = hb.fence(
            ctx, group, list(leaving.values()), cause, f"explicit `LeaveGroup` request for ({described})"
        )
    response = LeaveGroupResponse(members=tuple(responses))
    if req.api_version < 3:
        response = LeaveGroupResponse(error_code=responses[0].error_code)
    rollback = hb.rearm_sessions(ctx, group.group_id, tuple(leaving)) if records else None
    return Result(records=tuple(records), replies=(Reply(handle, response),), rollback=rollback)


def _leaving_member(group: ConsumerGroup, who: MemberIdentity) -> ConsumerMember:
    if who.group_instance_id is None:
        member = group.members.get(who.member_id)
        if member is None:
            raise hb.unknown_member(group, who.member_id)
        return member
    member = group.static_member(who.group_instance_id)
    if member is None:
        raise CoordinatorError(ErrorCode.unknown_member_id, f"Instance id {who.group_instance_id} is unknown.")
    if who.member_id != UNKNOWN_MEMBER_ID and who.member_id != member.member_id:
        raise CoordinatorError(ErrorCode.fenced_instance_id)
    return member
