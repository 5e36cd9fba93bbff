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

KIP-469's hold (preregistration.py) also lives here: a pre-registered instance joining a Stable consumer
group while other pre-registered ones are missing is admitted without a rebalance (`_admit_and_hold`);
the hold ends with a rebalance when the last one joins, or at the rebalance timeout (`_end_hold`).

Ported from apache/kafka group-coordinator/.../GroupMetadataManager.java
`classicGroupJoinNewStaticMember` and `updateStaticMemberThenRebalanceOrCompleteJoin`.
"""

from __future__ import annotations

import logging

from herd.coordinator import preregistration as prereg
from herd.coordinator import rebalance as rb
from herd.coordinator.context import ShardContext, group_record
from herd.coordinator.errors import ErrorCode, append_error_to_response_error
from herd.coordinator.group import ClassicGroup
from herd.coordinator.joining import add_member_then_rebalance, join_reason, member_from_join, rebalance_timeout
from herd.coordinator.member import Member, MemberProtocol
from herd.coordinator.requests import JoinGroup
from herd.coordinator.responses import JoinGroupResponse
from herd.coordinator.result import EMPTY, Effects, Reply, Result
from herd.coordinator.state import GroupState

log = logging.getLogger(__name__)


def join_new_static_member(
    ctx: ShardContext, req: JoinGroup, group: ClassicGroup, new_id: str, handle: object, fx: Effects
) -> None:
    assert req.group_instance_id is not None
    old_id = group.static_member_id(req.group_instance_id)
    if old_id is None and _can_hold(ctx, req, group):
        _admit_and_hold(ctx, req, group, new_id, handle, fx)
    elif old_id is None:
        # KIP-469: the last missing pre-registered instance of a hold starts the rebalance that takes them all in
        last = group.group_id in ctx.expected_holds and prereg.is_expected(ctx, group.group_id, req.group_instance_id)
        add_member_then_rebalance(
            ctx, req, group, new_id, handle, fx, "expected-members-complete" if last else "member-join"
        )
    else:
        _replace(ctx, req, group, old_id, new_id, handle, fx)


def _replace(
    ctx: ShardContext, req: JoinGroup, group: ClassicGroup, old_id: str, new_id: str, handle: object, fx: Effects
) -> None:
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
            reason = (
                f"Group's selectedProtocol will change because static member {new_id} with instance id "
                f"{instance_id} joined with change of protocol; {client}"
            )
            rb.note_arrival(ctx, group, new_id)
            rb.maybe_prepare_rebalance_or_complete_join(
                ctx, group, "static-member-replaced", reason, fx, new_id, instance_id
            )
    elif group.is_in(GroupState.COMPLETING_REBALANCE):
        reason = f"Updating metadata for static member {new_id} with instance id {instance_id}; {client}"
        rb.note_arrival(ctx, group, new_id)
        rb.prepare_rebalance(ctx, group, "static-member-replaced", reason, fx, new_id, instance_id)
    else:
        rb.note_arrival(ctx, group, new_id)
        rb.maybe_complete_join_phase(ctx, group, fx)


def _replace_without_rebalance(
    ctx: ShardContext,
    req: JoinGroup,
    group: ClassicGroup,
    new: Member,
    old_id: str,
    current_leader: str | None,
    previous: tuple[tuple[MemberProtocol, ...], int, int],
    fences: list[Reply],
    fx: Effects,
) -> None:
    fx.records.append(group_record(group, group.assignments()))
    if req.api_version >= 9:  # KIP-814: a replaced leader gets the members but is told to skip assigning
        response = group.join_response(new.member_id, skip_assignment=group.is_leader(new.member_id))
    else:
        response = group.join_response(new.member_id, with_members=False, leader=current_leader or "")
    group.complete_join(new, response, fx)
    handle = fx.replies[-1].handle
    fx.on_failure(lambda err: _undo_replacement(ctx, group, new, old_id, current_leader, previous, fences, handle, err))


def _undo_replacement(
    ctx: ShardContext,
    group: ClassicGroup,
    new: Member,
    old_id: str,
    current_leader: str | None,
    previous: tuple[tuple[MemberProtocol, ...], int, int],
    fences: list[Reply],
    handle: object,
    error: ErrorCode,
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
    fx.reply(handle, group.join_response("", with_members=False, leader=current_leader or "", error_code=mapped))
    return fx.result()


# --- KIP-469: holding pre-registered arrivals -----------------------------------------------------------


def _can_hold(ctx: ShardContext, req: JoinGroup, group: ClassicGroup) -> bool:
    """A pre-registered instance joins a Stable consumer group (speaking its protocol) while others are missing."""
    instance_id = req.group_instance_id
    return (
        group.is_in(GroupState.STABLE)
        and req.protocol_type == "consumer" == group.protocol_type
        and prereg.is_expected(ctx, group.group_id, instance_id)
        and any(i != instance_id for i in prereg.missing(ctx, group))
        and any(p.name == group.protocol_name for p in req.protocols)
    )


def _admit_and_hold(
    ctx: ShardContext, req: JoinGroup, group: ClassicGroup, new_id: str, handle: object, fx: Effects
) -> None:
    """Admit the member into the current generation with no partitions; persist it; no rebalance yet."""
    member = member_from_join(ctx, req, new_id, assignment=prereg.EMPTY_CONSUMER_ASSIGNMENT)
    group.add(member)
    rb.arm_session(ctx, group, member)
    fx.records.append(group_record(group, group.assignments()))
    fx.reply(handle, group.join_response(new_id, with_members=False))
    start_hold(ctx, group)
    log.info(
        "group %s: pre-registered instance %s joined; held without a rebalance until %s join",
        group.group_id,
        req.group_instance_id,
        prereg.missing(ctx, group),
    )
    fx.on_failure(lambda err: _undo_admission(ctx, group, member, handle, err))


def _undo_admission(ctx: ShardContext, group: ClassicGroup, member: Member, handle: object, error: ErrorCode) -> Result:
    """The membership record failed: the member was never admitted."""
    if ctx.groups.get(group.group_id) is group and group.members.get(member.member_id) is member:
        rb.cancel_session(ctx, group.group_id, member)
        group.remove(member.member_id)
        if not prereg.arrived(ctx, group):  # it was the only one held: no hold to end with a rebalance
            prereg.end_hold(ctx, group.group_id)
    fx = Effects()
    fx.reply(handle, JoinGroupResponse(error_code=append_error_to_response_error(error), member_id=""))
    return fx.result()


def start_hold(ctx: ShardContext, group: ClassicGroup) -> None:
    """Arm the end of the hold, the rebalance timeout after the first held arrival (once per hold)."""
    group_id = group.group_id
    if group_id in ctx.expected_holds:
        return
    deadline = ctx.now() + group.rebalance_timeout_ms()
    ctx.expected_holds[group_id] = deadline
    ctx.timer.schedule(prereg.hold_key(group_id), deadline, lambda: _end_hold(ctx, group_id))


def _end_hold(ctx: ShardContext, group_id: str) -> Result:
    """Timer operation: release the instances still missing and rebalance the held ones in."""
    ctx.expected_holds.pop(group_id, None)
    group = ctx.groups.get(group_id)
    if group is None or not group.is_in(GroupState.STABLE):  # a rebalance started since: nothing is held
        return EMPTY
    fx = Effects()
    absent = prereg.missing(ctx, group)
    if absent:
        prereg.release(ctx, group, absent, fx)
    reason = (
        f"pre-registered instances {prereg.arrived(ctx, group)} joined; the rebalance timeout passed without {absent}"
    )
    rb.prepare_rebalance(ctx, group, "expected-members-timeout", reason, fx)
    return fx.result()


def end_hold_now(ctx: ShardContext, group: ClassicGroup, fx: Effects) -> None:
    """Nothing is missing any more (the operator withdrew it): rebalance the held members in."""
    if group.group_id in ctx.expected_holds and group.is_in(GroupState.STABLE) and not prereg.missing(ctx, group):
        reason = (
            f"pre-registered instances {prereg.arrived(ctx, group)} joined; the operator withdrew the "
            "others: no other is expected"
        )
        rb.prepare_rebalance(ctx, group, "expected-members-withdrawn", reason, fx)
