"""Static membership (KIP-345) and the static leader rejoin (KIP-814).

A JoinGroup with a known `group.instance.id` and no member id replaces the member holding that
instance: it gets a fresh `instanceId-uuid`, the old member id is fenced (its parked JoinGroup or
SyncGroup is answered FENCED_INSTANCE_ID now, its later requests get FENCED_INSTANCE_ID), and:
- Stable and the selected protocol unchanged: no rebalance. The new mapping is persisted as a
  GroupMetadata record and the member is answered after it is durable; a leader on JoinGroup v9+ gets
  `skip_assignment=True` and the member list. If the write fails the replacement is undone and the
  joiner gets the mapped error (the rollback hook).
- Stable with a protocol change: rebalance.
- CompletingRebalance: a rebalance is forced (KAFKA-9801: the leader may be assigning the old id).
- PreparingRebalance: the new id simply takes part in the join phase.

Ported from apache/kafka group-coordinator/.../GroupMetadataManager.java
`classicGroupJoinNewStaticMember` and `updateStaticMemberThenRebalanceOrCompleteJoin`.
"""

from __future__ import annotations

from herd.coordinator import rebalance as rb
from herd.coordinator.context import ShardContext, group_record
from herd.coordinator.errors import ErrorCode, append_error_to_response_error
from herd.coordinator.group import ClassicGroup
from herd.coordinator.member import Member, Protocol
from herd.coordinator.requests import JoinGroup
from herd.coordinator.responses import JoinGroupResponse
from herd.coordinator.result import Effects, Reply, Result
from herd.coordinator.state import GroupState


def join_new_static_member(
    ctx: ShardContext, req: JoinGroup, group: ClassicGroup, new_id: str, handle: object, fx: Effects
) -> None:
    from herd.coordinator.membership import add_member_then_rebalance

    assert req.group_instance_id is not None
    old_id = group.static_member_id(req.group_instance_id)
    if old_id is None:
        add_member_then_rebalance(ctx, req, group, new_id, handle, fx)
    else:
        _replace(ctx, req, group, old_id, new_id, handle, fx)


def _replace(
    ctx: ShardContext, req: JoinGroup, group: ClassicGroup, old_id: str, new_id: str, handle: object, fx: Effects
) -> None:
    from herd.coordinator.membership import join_reason, rebalance_timeout

    instance_id = req.group_instance_id
    assert instance_id is not None
    current_leader = group.leader_id
    first_fence = len(fx.replies)
    old_member = group.members[old_id]
    rb.cancel_session(ctx, group.group_id, old_member)
    new = group.replace_static_member(instance_id, old_id, new_id, fx)
    fences = fx.replies[first_fence:]
    rb.arm_session(ctx, group, new)
    previous = (new.protocols, new.rebalance_timeout_ms, new.session_timeout_ms)
    group.update_member(new, req.protocols, rebalance_timeout(req), req.session_timeout_ms, handle)
    client = f"client reason: {join_reason(req.reason)}"
    if group.is_in(GroupState.STABLE):
        if group.protocol_name == group.select_protocol():
            _replace_without_rebalance(ctx, req, group, new, old_id, current_leader, previous, fences, fx)
        else:
            reason = (f"Group's selectedProtocol will change because static member {new_id} with instance id "
                      f"{instance_id} joined with change of protocol; {client}")
            rb.maybe_prepare_rebalance_or_complete_join(ctx, group, "static-protocol-change", reason, fx)
    elif group.is_in(GroupState.COMPLETING_REBALANCE):
        reason = f"Updating metadata for static member {new_id} with instance id {instance_id}; {client}"
        rb.prepare_rebalance(ctx, group, "static-member-rejoin", reason, fx)
    else:
        rb.maybe_complete_join_phase(ctx, group, fx)


def _replace_without_rebalance(
    ctx: ShardContext, req: JoinGroup, group: ClassicGroup, new: Member, old_id: str,
    current_leader: str | None, previous: tuple[tuple[Protocol, ...], int, int], fences: list[Reply], fx: Effects,
) -> None:
    fx.records.append(group_record(group, group.assignments()))
    if req.api_version >= 9:
        is_leader = group.is_leader(new.member_id)
        response = JoinGroupResponse(
            members=group.join_members() if is_leader else (),
            member_id=new.member_id,
            generation_id=group.generation_id,
            protocol_name=group.protocol_name,
            protocol_type=group.protocol_type,
            leader=group.leader_id or "",
            skip_assignment=is_leader,
        )
    else:
        response = JoinGroupResponse(
            member_id=new.member_id,
            generation_id=group.generation_id,
            protocol_name=group.protocol_name,
            protocol_type=group.protocol_type,
            leader=current_leader or "",
        )
    group.complete_join(new, response, fx)
    handle = fx.replies[-1].handle
    fx.on_failure(lambda err: _undo_replacement(ctx, group, new, old_id, current_leader, previous, fences, handle, err))


def _undo_replacement(
    ctx: ShardContext, group: ClassicGroup, new: Member, old_id: str, current_leader: str | None,
    previous: tuple[tuple[Protocol, ...], int, int], fences: list[Reply], handle: object, error: ErrorCode,
) -> Result:
    """The replacement record failed: give the instance back to the old member id (Kafka does)."""
    mapped = append_error_to_response_error(error)
    fx = Effects()
    fx.replies.extend(fences)  # Kafka fenced the old member's parked requests regardless of the write.
    instance_id = new.group_instance_id
    if ctx.groups.get(group.group_id) is group and instance_id is not None and group.members.get(new.member_id) is new:
        protocols, rebalance_timeout_ms, session_timeout_ms = previous
        group.update_member(new, protocols, rebalance_timeout_ms, session_timeout_ms, None)
        rb.cancel_session(ctx, group.group_id, new)
        old = group.replace_static_member(instance_id, new.member_id, old_id, fx)
        rb.arm_session(ctx, group, old)
    fx.reply(handle, JoinGroupResponse(
        error_code=mapped,
        member_id="",
        generation_id=group.generation_id,
        protocol_name=group.protocol_name,
        protocol_type=group.protocol_type,
        leader=current_leader or "",
    ))
    return fx.result()
