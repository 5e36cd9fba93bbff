"""JoinGroup, SyncGroup, Heartbeat and LeaveGroup for classic groups (dynamic members; static
replacement lives in static.py, what a join of either kind needs in joining.py).

Ported from apache/kafka group-coordinator/.../GroupMetadataManager.java (classic half:
`classicGroupJoinToClassicGroup`, `classicGroupJoinNewMember`, `classicGroupJoinExistingMember`,
`classicGroupSyncToClassicGroup`, `validateSyncGroup`,
`classicGroupHeartbeatToClassicGroup`, `classicGroupLeaveToClassicGroup`) and the request checks of
GroupCoordinatorService.java (empty group id, session-timeout bounds).

Like Kafka, these handlers change the group in memory directly and emit GroupMetadata records (marked
applied) at the points Kafka persists: group creation, generation completion (leader SyncGroup), the
group becoming Empty, static replacement in Stable. One deliberate difference: Kafka moves the group
to Stable when the leader's assignment write *completes*; herd moves it at once and holds every reply
until the write is durable, undoing it through the rollback hook if the write fails.
"""

from __future__ import annotations

from herd.coordinator import consumer_classic, static
from herd.coordinator import preregistration as prereg
from herd.coordinator import rebalance as rb
from herd.coordinator.consumer import records as consumer_records
from herd.coordinator.consumer.group import ConsumerGroupState
from herd.coordinator.context import ShardContext, empty_group_record, group_record
from herd.coordinator.errors import CoordinatorError, ErrorCode, append_error_to_response_error
from herd.coordinator.group import ClassicGroup
from herd.coordinator.history import ADMIN_REASON
from herd.coordinator.joining import add_member_then_rebalance, join_reason, rebalance_timeout, validate_join
from herd.coordinator.member import Member
from herd.coordinator.requests import UNKNOWN_MEMBER_ID, Heartbeat, JoinGroup, LeaveGroup, MemberIdentity, SyncGroup
from herd.coordinator.responses import (
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    LeaveMemberResponse,
    SyncGroupResponse,
)
from herd.coordinator.result import Effects, Reply, Result
from herd.coordinator.state import GroupState

EMPTY_STATE = GroupState.EMPTY
PR = GroupState.PREPARING_REBALANCE
CR = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD


# --- JoinGroup --------------------------------------------------------------------------------------


def join(ctx: ShardContext, req: JoinGroup, handle: object) -> Result:
    fx = Effects()
    error = validate_join(ctx.config, req)
    if error is not None:
        fx.reply(handle, JoinGroupResponse(error_code=error, member_id=req.member_id))
        return fx.result()
    if req.group_id in ctx.share_groups:  # Kafka's classicGroupJoin: a group of another type
        fx.reply(handle, JoinGroupResponse(error_code=ErrorCode.inconsistent_group_protocol, member_id=req.member_id))
        return fx.result()
    is_unknown = req.member_id == UNKNOWN_MEMBER_ID
    consumer_group = ctx.consumer_groups.get(req.group_id)
    if consumer_group is not None and consumer_group.state is not ConsumerGroupState.EMPTY:
        return consumer_classic.join(ctx, consumer_group, req, handle)  # a classic member of a consumer group
    group = ctx.groups.get(req.group_id)
    is_new_group = group is None
    if group is None:
        if not is_unknown:
            fx.reply(handle, JoinGroupResponse(error_code=ErrorCode.unknown_member_id, member_id=req.member_id))
            return fx.result()
        group = ClassicGroup(req.group_id, EMPTY_STATE, ctx.now())
        ctx.groups[req.group_id] = group
    if not _accept_joining_member(ctx, group, req.member_id):
        _reject_full(ctx, group, req.member_id)
        fx.reply(handle, JoinGroupResponse(error_code=ErrorCode.group_max_size_reached, member_id=""))
    elif is_unknown:
        _join_new_member(ctx, req, group, handle, fx)
    else:
        _join_existing_member(ctx, req, group, handle, fx)
    if is_new_group and not fx.records:
        fx.records.append(empty_group_record(group))
        fx.on_failure(lambda err: _undo_new_group(ctx, group, handle, err))
    if consumer_group is not None:  # an empty consumer group gives way (Kafka's maybeDeleteEmptyConsumerGroup)
        fx.records[:0] = consumer_records.group_tombstones(req.group_id, (), tuple(consumer_group.resolved))
    return fx.result()


def _accept_joining_member(ctx: ShardContext, group: ClassicGroup, member_id: str) -> bool:
    """group.max.size: awaiting joiners count in PreparingRebalance, members otherwise."""
    max_size = ctx.config.group_max_size
    if group.is_in(EMPTY_STATE, DEAD):
        return True
    if group.is_in(PR):
        member = group.members.get(member_id)
        return (member is not None and member.is_awaiting_join) or group.num_awaiting_join < max_size
    return group.has_member(member_id) or len(group.members) < max_size


def _reject_full(ctx: ShardContext, group: ClassicGroup, member_id: str) -> None:
    member = group.remove(member_id)
    if member is not None:
        rb.cancel_session(ctx, group.group_id, member)


def _undo_new_group(ctx: ShardContext, group: ClassicGroup, handle: object, error: ErrorCode) -> Result:
    """The creation record failed: Kafka reverts its snapshot, so the group disappears again."""
    mapped = append_error_to_response_error(error)
    fx = Effects()
    if ctx.groups.get(group.group_id) is group:
        for member in list(group.members.values()):
            if member.join_reply is not None and member.join_reply is not handle:
                fx.reply(member.join_reply, JoinGroupResponse(error_code=mapped))
            rb.cancel_session(ctx, group.group_id, member)
        for pending in group.pending_members:
            ctx.timer.cancel(rb.heartbeat_key(group.group_id, pending))
        ctx.timer.cancel(rb.join_key(group.group_id))
        group.transition_to(DEAD, ctx.now())
        del ctx.groups[group.group_id]
        ctx.history.forget(group.group_id)
    fx.reply(handle, JoinGroupResponse(error_code=mapped))
    return fx.result()


def _join_new_member(ctx: ShardContext, req: JoinGroup, group: ClassicGroup, handle: object, fx: Effects) -> None:
    if group.is_in(DEAD):
        fx.reply(handle, JoinGroupResponse(error_code=ErrorCode.coordinator_not_available, member_id=""))
    elif not group.supports_protocols(req.protocol_type, req.protocols):
        fx.reply(handle, JoinGroupResponse(error_code=ErrorCode.inconsistent_group_protocol, member_id=""))
    else:
        new_id = ctx.generate_member_id(req.client_id, req.group_instance_id)
        if req.group_instance_id is not None:
            static.join_new_static_member(ctx, req, group, new_id, handle, fx)
        elif req.api_version >= 4:
            # KIP-394: hand out the id and wait for the member to come back with it.
            group.pending_members.add(new_id)
            rb.schedule_pending_member(ctx, group, new_id, req.session_timeout_ms)
            fx.reply(handle, JoinGroupResponse(error_code=ErrorCode.member_id_required, member_id=new_id))
        else:
            add_member_then_rebalance(ctx, req, group, new_id, handle, fx)


def _join_existing_member(ctx: ShardContext, req: JoinGroup, group: ClassicGroup, handle: object, fx: Effects) -> None:
    member_id = req.member_id
    if group.is_in(DEAD):
        fx.reply(handle, JoinGroupResponse(error_code=ErrorCode.coordinator_not_available, member_id=member_id))
    elif not group.supports_protocols(req.protocol_type, req.protocols):
        fx.reply(handle, JoinGroupResponse(error_code=ErrorCode.inconsistent_group_protocol, member_id=member_id))
    elif group.is_pending(member_id):
        if req.group_instance_id is not None:
            fx.reply(handle, JoinGroupResponse(error_code=ErrorCode.unknown_server_error, member_id=member_id))
            return
        add_member_then_rebalance(ctx, req, group, member_id, handle, fx)
    else:
        try:
            group.validate_member(member_id, req.group_instance_id)
        except CoordinatorError as e:
            fx.reply(handle, JoinGroupResponse(error_code=e.code, member_id=member_id))
            return
        _rejoin(ctx, req, group, group.member(member_id), handle, fx)


def _rejoin(
    ctx: ShardContext, req: JoinGroup, group: ClassicGroup, member: Member, handle: object, fx: Effects
) -> None:
    client = f"client reason: {join_reason(req.reason)}"
    during = f"during {group.state}; {client}"
    if group.is_in(PR):
        _update_then_rebalance(
            ctx, req, group, member, handle, "member-join", f"Member {member.member_id} is joining group {during}", fx
        )
    elif group.is_in(STABLE) and group.is_leader(member.member_id):
        _update_then_rebalance(
            ctx, req, group, member, handle, "leader-rejoin", f"Leader {member.member_id} re-joining group {during}", fx
        )
    elif group.is_in(CR, STABLE) and not member.matches(req.protocols):
        _update_then_rebalance(
            ctx,
            req,
            group,
            member,
            handle,
            "protocol-change",
            f"Updating metadata for member {member.member_id} {during}",
            fx,
        )
    elif group.is_in(CR, STABLE):
        fx.reply(handle, group.join_response(member.member_id, with_members=group.is_in(CR)))
    else:
        fx.reply(handle, JoinGroupResponse(error_code=ErrorCode.unknown_member_id, member_id=member.member_id))


def _update_then_rebalance(
    ctx: ShardContext,
    req: JoinGroup,
    group: ClassicGroup,
    member: Member,
    handle: object,
    cause: str,
    reason: str,
    fx: Effects,
) -> None:
    group.update_member(member, req.protocols, rebalance_timeout(req), req.session_timeout_ms, handle)
    rb.note_arrival(ctx, group, member.member_id)
    rb.maybe_prepare_rebalance_or_complete_join(
        ctx, group, cause, reason, fx, member.member_id, member.group_instance_id
    )


# --- SyncGroup --------------------------------------------------------------------------------------


def sync(ctx: ShardContext, req: SyncGroup, handle: object) -> Result:
    fx = Effects()
    group = ctx.groups.get(req.group_id)
    if group is None and (consumer_group := ctx.consumer_groups.get(req.group_id)) is not None:
        return consumer_classic.sync(ctx, consumer_group, req, handle)
    if not req.group_id:
        fx.reply(handle, SyncGroupResponse(error_code=ErrorCode.invalid_group_id))
    elif group is None or group.is_empty():
        fx.reply(handle, SyncGroupResponse(error_code=ErrorCode.unknown_member_id))
    elif (error := _validate_sync(group, req)) is not None:
        fx.reply(handle, SyncGroupResponse(error_code=error))
    elif group.is_in(PR):
        fx.reply(handle, SyncGroupResponse(error_code=ErrorCode.rebalance_in_progress))
    elif group.is_in(CR):
        group.member(req.member_id).sync_reply = handle
        rb.remove_pending_sync_member(ctx, group, req.member_id)
        if group.is_leader(req.member_id):
            _complete_generation(ctx, group, req, fx)
    elif group.is_in(STABLE):
        rb.remove_pending_sync_member(ctx, group, req.member_id)
        fx.reply(
            handle,
            SyncGroupResponse(
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                assignment=group.member(req.member_id).assignment,
            ),
        )
    return fx.result()


def _validate_sync(group: ClassicGroup, req: SyncGroup) -> ErrorCode | None:
    if group.is_in(DEAD):
        return ErrorCode.coordinator_not_available
    try:
        group.validate_member(req.member_id, req.group_instance_id)
    except CoordinatorError as e:
        return e.code
    if req.generation_id != group.generation_id:
        return ErrorCode.illegal_generation
    # KIP-559 (SyncGroup v5): a non-null protocol type/name must match the group's.
    if _inconsistent(req.protocol_type, group.protocol_type) or _inconsistent(req.protocol_name, group.protocol_name):
        return ErrorCode.inconsistent_group_protocol
    return None


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current


def _complete_generation(ctx: ShardContext, group: ClassicGroup, req: SyncGroup, fx: Effects) -> None:
    """The leader's assignment: persist it, go Stable, answer everyone waiting (after durability)."""
    assignments = {a.member_id: a.assignment for a in req.assignments}
    for member in group.members.values():
        assignments.setdefault(member.member_id, b"")
        member.assignment = assignments[member.member_id]
    fx.records.append(group_record(group, assignments))
    prereg.fulfil(ctx, group, fx)
    group.transition_to(STABLE, ctx.now())
    ctx.history.finish(group.group_id, assignments, group.protocol_type == "consumer", ctx.now())
    rb.persist_history(ctx, group, fx)
    first = len(fx.replies)
    rb.propagate_assignment(ctx, group, ErrorCode.none, fx)
    handles = [r.handle for r in fx.replies[first:]]
    generation = group.generation_id
    fx.on_failure(lambda err: _undo_generation(ctx, group, generation, req.member_id, handles, err))


def _undo_generation(
    ctx: ShardContext, group: ClassicGroup, generation: int, leader_id: str, handles: list[object], error: ErrorCode
) -> Result:
    """Kafka's failed-assignment path: waiting members get the mapped error and the group rebalances."""
    mapped = append_error_to_response_error(error)
    fx = Effects()
    for handle in handles:
        fx.reply(handle, SyncGroupResponse(error_code=mapped))
    if ctx.groups.get(group.group_id) is group and group.generation_id == generation and group.is_in(STABLE):
        for member in group.members.values():
            member.assignment = b""
        reason = f"Error {mapped.name.upper()} when storing group assignment during SyncGroup (member: {leader_id})."
        ctx.history.reopen(group.group_id, generation)
        rb.prepare_rebalance(ctx, group, "append-failure", reason, fx, leader_id)
    return fx.result()


# --- Heartbeat --------------------------------------------------------------------------------------


_HEARTBEAT_RESPONSES: dict[int, HeartbeatResponse] = {}


def heartbeat(ctx: ShardContext, req: Heartbeat, handle: object) -> Result:
    """No records, one reply, responses shared per error code (they are immutable)."""
    code = heartbeat_error(ctx, req.group_id, req.generation_id, req.member_id, req.group_instance_id)
    response = _HEARTBEAT_RESPONSES.get(code)
    if response is None:
        response = _HEARTBEAT_RESPONSES[code] = HeartbeatResponse(error_code=code)
    return Result(replies=(Reply(handle, response),))


def heartbeat_error(
    ctx: ShardContext, group_id: str, generation_id: int, member_id: str, instance_id: str | None
) -> ErrorCode:
    """A heartbeat's whole effect (the session deadline moves) and its answer's error code. The hot path: the
    runtime calls it directly when nothing is waiting to be written (a heartbeat never writes), skipping the
    request and Result objects of `heartbeat`."""
    if not group_id:
        return ErrorCode.invalid_group_id
    group = ctx.groups.get(group_id)
    if group is None:
        consumer_group = ctx.consumer_groups.get(group_id)
        if consumer_group is not None:
            return consumer_classic.heartbeat_error(ctx, consumer_group, generation_id, member_id, instance_id)
        return ErrorCode.unknown_member_id
    if group.is_in(DEAD):
        return ErrorCode.coordinator_not_available
    try:
        group.validate_member(member_id, instance_id)
    except CoordinatorError as e:
        return e.code
    if generation_id != group.generation_id:
        return ErrorCode.illegal_generation
    if group.is_in(EMPTY_STATE):
        return ErrorCode.unknown_member_id
    rb.touch_session(ctx, group, group.member(member_id))
    return ErrorCode.rebalance_in_progress if group.is_in(PR) else ErrorCode.none


# --- LeaveGroup -------------------------------------------------------------------------------------


def leave(ctx: ShardContext, req: LeaveGroup, handle: object) -> Result:
    fx = Effects()
    identities = req.members if req.api_version >= 3 else (MemberIdentity(req.member_id),)
    group = ctx.groups.get(req.group_id)
    if group is None and req.group_id and (consumer_group := ctx.consumer_groups.get(req.group_id)) is not None:
        return consumer_classic.leave(ctx, consumer_group, req, handle)
    if not req.group_id:
        response = LeaveGroupResponse(error_code=ErrorCode.invalid_group_id)
    elif group is None:
        response = LeaveGroupResponse(error_code=ErrorCode.unknown_member_id)
    elif group.is_in(DEAD):
        response = LeaveGroupResponse(error_code=ErrorCode.coordinator_not_available)
    else:
        members = tuple(_leave_one(ctx, group, identity, fx) for identity in identities)
        _rebalance_after_leave(ctx, group, identities, members, fx)
        response = LeaveGroupResponse(members=members)
    if req.api_version < 3 and response.members:
        response = LeaveGroupResponse(error_code=response.members[0].error_code)
    fx.reply(handle, response)
    return fx.result()


def _leave_one(ctx: ShardContext, group: ClassicGroup, who: MemberIdentity, fx: Effects) -> LeaveMemberResponse:
    if who.member_id == UNKNOWN_MEMBER_ID:
        # Administrative removal by instance id (KIP-345).
        static_id = group.static_member_id(who.group_instance_id)
        if static_id is None:
            return LeaveMemberResponse(who.member_id, who.group_instance_id, ErrorCode.unknown_member_id)
        rb.remove_current_member(ctx, group, static_id, fx)
    elif group.is_pending(who.member_id):
        group.remove(who.member_id)
        ctx.timer.cancel(rb.heartbeat_key(group.group_id, who.member_id))
    else:
        try:
            group.validate_member(who.member_id, who.group_instance_id)
        except CoordinatorError as e:
            return LeaveMemberResponse(who.member_id, who.group_instance_id, e.code)
        rb.remove_current_member(ctx, group, who.member_id, fx)
    return LeaveMemberResponse(who.member_id, who.group_instance_id)


def _rebalance_after_leave(
    ctx: ShardContext,
    group: ClassicGroup,
    identities: tuple[MemberIdentity, ...],
    responses: tuple[LeaveMemberResponse, ...],
    fx: Effects,
) -> None:
    left = [(who, r) for who, r in zip(identities, responses, strict=True) if r.error_code == ErrorCode.none]
    if not left:
        return
    described = ", ".join(
        (r.member_id or f"instance {r.group_instance_id}") + f" (client reason: {join_reason(who.reason)})"
        for who, r in left
    )
    reason = f"explicit `LeaveGroup` request for ({described}) members."
    admin = any(who.member_id == UNKNOWN_MEMBER_ID or (who.reason or "").startswith(ADMIN_REASON) for who, _ in left)
    first, _ = left[0]
    if group.is_in(STABLE, CR):
        rb.maybe_prepare_rebalance_or_complete_join(
            ctx,
            group,
            "admin-removal" if admin else "member-leave",
            reason,
            fx,
            first.member_id or None,
            first.group_instance_id,
        )
    elif group.is_in(PR):
        rb.maybe_complete_join_phase(ctx, group, fx)
