"""The rebalance machinery: session timers, preparing and completing the join phase, pending syncs.

Ported from the classic half of apache/kafka group-coordinator/.../GroupMetadataManager.java
(`prepareRebalance`, `maybePrepareRebalanceOrCompleteJoin`, `maybeCompleteJoinPhase`,
`tryCompleteInitialRebalanceElseSchedule`, `completeClassicGroupJoin`, `expireClassicGroupMemberHeartbeat`,
`schedulePendingSync`/`expirePendingSync`, `propagateAssignment`).

Timers (all keyed; scheduling a key replaces it):
- `heartbeat-{group}-{member}`: one per member (and per pending member). A heartbeat only moves
  `member.session_deadline_ms`; the timer is re-scheduled only when the deadline moves *earlier* than
  the armed one. When it fires, the operation re-arms itself at the member's current deadline if that
  moved, and otherwise expires the member. So a heartbeat costs O(1) and never touches the timer.
- `join-{group}`: the end of the join phase (rebalance timeout) or the KIP-134 initial delay.
- `sync-{group}`: members that never send SyncGroup are removed after the rebalance timeout.

Timer operations look their group up by id when they fire and return a `Result`; they do nothing if
the group or member is gone.

History (history.py): `prepare_rebalance` opens the group's entry with its cause and the member that started it;
`note_arrival` stamps each member's JoinGroup; `complete_join` records the generation, how the phase ended
(`end`) and the members dropped for missing it; members dropped for missing the sync phase are recorded on the
entry of the generation they did not sync; `persist_history` adds the group's history record to a Result that
writes its GroupMetadata.

KIP-469 (preregistration.py): the join phase also waits for pre-registered instances that are missing
(`all_joined`), bounded by the same join timer; the arrival of the last one ends it at once
(`complete_on_expected_arrival`), and a phase ended by its timer releases those still missing.
"""

from __future__ import annotations

import logging

from herd.coordinator import preregistration as prereg
from herd.coordinator.context import ShardContext, group_record
from herd.coordinator.errors import ErrorCode
from herd.coordinator.group import ClassicGroup
from herd.coordinator.member import Member
from herd.coordinator.responses import JoinGroupResponse, SyncGroupResponse
from herd.coordinator.result import EMPTY, Effects, Result
from herd.coordinator.state import GroupState, can_rebalance
from herd.coordinator.subscriptions import compute_subscribed_topics
from herd.coordinator.timer import Operation

log = logging.getLogger(__name__)

PR = GroupState.PREPARING_REBALANCE
CR = GroupState.COMPLETING_REBALANCE


def heartbeat_key(group_id: str, member_id: str) -> str:
    return f"heartbeat-{group_id}-{member_id}"


def join_key(group_id: str) -> str:
    return f"join-{group_id}"


def sync_key(group_id: str) -> str:
    return f"sync-{group_id}"


# --- session timers ---------------------------------------------------------------------------------


def arm_session(ctx: ShardContext, group: ClassicGroup, member: Member, timeout_ms: int | None = None) -> None:
    """Kafka's rescheduleClassicGroupMemberHeartbeat: the member must be heard of within the timeout."""
    deadline = ctx.now() + (member.session_timeout_ms if timeout_ms is None else timeout_ms)
    member.session_deadline_ms = deadline
    if member.armed_deadline_ms is None or deadline < member.armed_deadline_ms:
        _schedule_heartbeat(ctx, group.group_id, member, deadline)


def touch_session(ctx: ShardContext, group: ClassicGroup, member: Member) -> None:
    """A heartbeat: O(1), moves the deadline only (the armed timer re-arms itself when it fires)."""
    member.session_deadline_ms = ctx.now() + member.session_timeout_ms
    if member.armed_deadline_ms is None:
        _schedule_heartbeat(ctx, group.group_id, member, member.session_deadline_ms)


def _schedule_heartbeat(ctx: ShardContext, group_id: str, member: Member, deadline: int) -> None:
    member.armed_deadline_ms = deadline
    ctx.timer.schedule(heartbeat_key(group_id, member.member_id), deadline, _expire_op(ctx, group_id, member.member_id))


def _expire_op(ctx: ShardContext, group_id: str, member_id: str) -> Operation:
    return lambda: expire_heartbeat(ctx, group_id, member_id)


def cancel_session(ctx: ShardContext, group_id: str, member: Member) -> None:
    member.armed_deadline_ms = None
    ctx.timer.cancel(heartbeat_key(group_id, member.member_id))


def schedule_pending_member(ctx: ShardContext, group: ClassicGroup, member_id: str, session_timeout_ms: int) -> None:
    ctx.timer.schedule(
        heartbeat_key(group.group_id, member_id),
        ctx.now() + session_timeout_ms,
        _expire_op(ctx, group.group_id, member_id),
    )


def expire_heartbeat(ctx: ShardContext, group_id: str, member_id: str) -> Result:
    """Timer operation: the member (or pending member) was not heard of within its deadline."""
    group = ctx.groups.get(group_id)
    if group is None or group.is_in(GroupState.DEAD):
        return EMPTY
    fx = Effects()
    if group.is_pending(member_id):
        log.info("pending member %s of group %s expired", member_id, group_id)
        group.remove(member_id)
        if group.is_in(PR):
            maybe_complete_join_phase(ctx, group, fx)
        return fx.result()
    member = group.members.get(member_id)
    if member is None:
        return EMPTY
    member.armed_deadline_ms = None
    if member.session_deadline_ms > ctx.now():
        _schedule_heartbeat(ctx, group_id, member, member.session_deadline_ms)
        return EMPTY
    if member.has_satisfied_heartbeat():
        return EMPTY
    log.info("member %s of group %s failed its session, removing it", member_id, group_id)
    if group.is_in(PR, CR):  # it missed the phase running: it is dropped from it
        phase = "join" if group.is_in(PR) else "sync"
        ctx.history.dropped(group_id, [(member_id, member.group_instance_id)], phase)
    cause = "new-member-join-timeout" if member.is_new else "session-timeout"
    remove_member_and_update(ctx, group, member, cause, f"removing member {member_id} on heartbeat expiration", fx)
    return fx.result()


# --- removing members -------------------------------------------------------------------------------


def remove_member_and_update(
    ctx: ShardContext, group: ClassicGroup, member: Member, cause: str, reason: str, fx: Effects
) -> None:
    """Kafka's removeMemberAndUpdateClassicGroup (session expiry)."""
    unknown = ErrorCode.unknown_member_id
    group.complete_join(member, JoinGroupResponse(error_code=unknown, member_id=""), fx)
    group.remove(member.member_id)
    if group.is_in(GroupState.STABLE, CR):
        maybe_prepare_rebalance_or_complete_join(
            ctx, group, cause, reason, fx, member.member_id, member.group_instance_id
        )
    elif group.is_in(PR) and all_joined(ctx, group):
        complete_join(ctx, group, fx)


def remove_current_member(ctx: ShardContext, group: ClassicGroup, member_id: str, fx: Effects) -> None:
    """Kafka's removeCurrentMemberFromClassicGroup (explicit LeaveGroup)."""
    member = group.member(member_id)
    cancel_session(ctx, group.group_id, member)
    group.complete_join(member, JoinGroupResponse(error_code=ErrorCode.unknown_member_id, member_id=""), fx)
    group.remove(member_id)


# --- the join phase ---------------------------------------------------------------------------------


def maybe_prepare_rebalance_or_complete_join(
    ctx: ShardContext,
    group: ClassicGroup,
    cause: str,
    reason: str,
    fx: Effects,
    member_id: str | None = None,
    instance_id: str | None = None,
) -> None:
    if can_rebalance(group.state):
        prepare_rebalance(ctx, group, cause, reason, fx, member_id, instance_id)
    else:
        maybe_complete_join_phase(ctx, group, fx)


def prepare_rebalance(
    ctx: ShardContext,
    group: ClassicGroup,
    cause: str,
    reason: str,
    fx: Effects,
    member_id: str | None = None,
    instance_id: str | None = None,
) -> None:
    """Start a rebalance; `cause` is one of history.py's names, `member_id`/`instance_id` the member that
    started it, if one did."""
    prereg.end_hold(ctx, group.group_id)
    if group.is_in(CR):
        reset_and_propagate_with_error(ctx, group, ErrorCode.rebalance_in_progress, fx)
    ctx.timer.cancel(sync_key(group.group_id))
    initial = group.is_in(GroupState.EMPTY)
    group.transition_to(PR, ctx.now())
    ctx.history.start(group.group_id, cause, reason, group.generation_id, ctx.now(), member_id, instance_id)
    log.info("preparing to rebalance group %s (generation %s): %s", group.group_id, group.generation_id, reason)
    if initial:
        delay = ctx.config.group_initial_rebalance_delay_ms
        remaining = max(group.rebalance_timeout_ms() - delay, 0)
        _schedule_initial(ctx, group.group_id, delay, remaining)
    else:
        maybe_complete_join_else_schedule(ctx, group, fx)


def _schedule_initial(ctx: ShardContext, group_id: str, delay: int, remaining: int) -> None:
    ctx.timer.schedule(
        join_key(group_id),
        ctx.now() + delay,
        lambda: try_complete_initial_rebalance(ctx, group_id, delay, remaining),
    )


def try_complete_initial_rebalance(ctx: ShardContext, group_id: str, delay: int, remaining: int) -> Result:
    """KIP-134: while new members keep arriving, extend the delay, capped by the rebalance timeout."""
    group = ctx.groups.get(group_id)
    if group is None or not group.is_in(PR):
        return EMPTY
    if group.new_member_added and remaining != 0:
        group.new_member_added = False
        _schedule_initial(
            ctx, group_id, min(ctx.config.group_initial_rebalance_delay_ms, remaining), max(remaining - delay, 0)
        )
        return EMPTY
    if remaining != 0 and _held_by_expected(ctx, group):
        _schedule_initial(ctx, group_id, remaining, 0)  # the rest of the rebalance timeout, at most
        return EMPTY
    fx = Effects()
    complete_join(ctx, group, fx, "initial-delay")
    return fx.result()


def note_arrival(ctx: ShardContext, group: ClassicGroup, member_id: str) -> None:
    """The member's JoinGroup is parked for a join phase (running, or about to start): the history stamps it."""
    ctx.history.arrived(group.group_id, member_id, ctx.now())


def persist_history(ctx: ShardContext, group: ClassicGroup, fx: Effects) -> None:
    """Add the group's history record to `fx` (which writes its GroupMetadata: no extra write), within what the
    batch has room for (history.py)."""
    if ctx.history.of(group.group_id):
        used = sum(len(r.key) + len(r.value or b"") for r in fx.records)
        record = ctx.history.record(group.group_id, ctx.config.history_batch_bytes - used)
        if record is not None:
            fx.records.append(record)


def maybe_complete_join_else_schedule(ctx: ShardContext, group: ClassicGroup, fx: Effects) -> None:
    if group.is_in(PR) and all_joined(ctx, group):
        complete_join(ctx, group, fx)
    else:
        _schedule_join_timeout(ctx, group)


def _schedule_join_timeout(ctx: ShardContext, group: ClassicGroup) -> None:
    group_id = group.group_id
    ctx.timer.schedule(
        join_key(group_id), ctx.now() + group.rebalance_timeout_ms(), lambda: complete_join_op(ctx, group_id)
    )


def maybe_complete_join_phase(ctx: ShardContext, group: ClassicGroup, fx: Effects) -> None:
    """Complete the join phase early once everyone has joined (not during the initial delay)."""
    if group.is_in(PR) and group.previous_state is not GroupState.EMPTY and all_joined(ctx, group):
        complete_join(ctx, group, fx)


def all_joined(ctx: ShardContext, group: ClassicGroup) -> bool:
    """Every member has rejoined and, if the group has members, no pre-registered instance is missing."""
    return group.has_all_members_joined() and not _held_by_expected(ctx, group)


def _held_by_expected(ctx: ShardContext, group: ClassicGroup) -> bool:
    """KIP-469: members are waiting for pre-registered instances (an empty group waits for nobody)."""
    if not group.members:
        return False
    absent = prereg.missing(ctx, group)
    if absent:
        log.info("group %s: join phase waiting for pre-registered instances %s", group.group_id, absent)
    return bool(absent)


def complete_on_expected_arrival(ctx: ShardContext, group: ClassicGroup, instance_id: str | None, fx: Effects) -> None:
    """KIP-469: `instance_id` has just joined. If it was the last pre-registered instance missing and every
    member has rejoined, the join phase ends now (even inside KIP-134's initial delay)."""
    if group.is_in(PR) and prereg.is_expected(ctx, group.group_id, instance_id) and all_joined(ctx, group):
        log.info(
            "group %s: the last pre-registered instance (%s) joined; completing the join phase",
            group.group_id,
            instance_id,
        )
        complete_join(ctx, group, fx, "expected-member-arrived")


def complete_join_op(ctx: ShardContext, group_id: str) -> Result:
    group = ctx.groups.get(group_id)
    if group is None or not group.is_in(PR):
        return EMPTY
    fx = Effects()
    complete_join(ctx, group, fx, "rebalance-timeout")
    return fx.result()


def complete_join(ctx: ShardContext, group: ClassicGroup, fx: Effects, end: str = "all-joined") -> None:
    """Kafka's completeClassicGroupJoin: drop dynamic laggards, elect, start the next generation. `end` says
    what ended the join phase (history.py's join_end)."""
    ctx.timer.cancel(join_key(group.group_id))
    late = [m for m in group.not_yet_rejoined() if not m.is_static]
    for member in late:
        group.remove(member.member_id)
        cancel_session(ctx, group.group_id, member)
    if late:
        ctx.history.dropped(group.group_id, [(m.member_id, m.group_instance_id) for m in late], "join")
        log.info("group %s removed dynamic members who did not rejoin: %s", group.group_id, [m.member_id for m in late])
    if group.is_in(GroupState.DEAD):
        return
    if not group.maybe_elect_new_joined_leader() and group.members:
        log.error("group %s could not complete rebalance because no members rejoined", group.group_id)
        _schedule_join_timeout(ctx, group)
        return
    absent = prereg.missing(ctx, group) if group.members else []
    group.init_next_generation(ctx.now())
    group.subscribed_topics = compute_subscribed_topics(group)  # as Kafka's initNextGeneration does
    ctx.history.join_completed(
        group.group_id,
        group.generation_id,
        group.protocol_name,
        group.leader_id,
        [
            (m.member_id, m.group_instance_id, m.client_id, m.client_host, m.is_awaiting_join)
            for m in group.members.values()
        ],
        end,
        ctx.now(),
    )
    if group.is_in(GroupState.EMPTY):
        log.info("group %s with generation %s is now empty", group.group_id, group.generation_id)
        fx.records.append(group_record(group, {}))
        persist_history(ctx, group, fx)
        return
    if absent:
        prereg.release(ctx, group, absent, fx)
    _answer_joins(ctx, group, fx)


def _answer_joins(ctx: ShardContext, group: ClassicGroup, fx: Effects) -> None:
    for member in list(group.members.values()):
        group.complete_join(member, group.join_response(member.member_id), fx)
        arm_session(ctx, group, member)
        member.is_new = False
        group.pending_sync_members.add(member.member_id)
    _schedule_pending_sync(ctx, group)


# --- the sync phase ---------------------------------------------------------------------------------


def _schedule_pending_sync(ctx: ShardContext, group: ClassicGroup) -> None:
    group_id, generation = group.group_id, group.generation_id
    ctx.timer.schedule(
        sync_key(group_id),
        ctx.now() + group.rebalance_timeout_ms(),
        lambda: expire_pending_sync(ctx, group_id, generation),
    )


def remove_pending_sync_member(ctx: ShardContext, group: ClassicGroup, member_id: str) -> None:
    group.pending_sync_members.discard(member_id)
    if not group.is_in(CR, GroupState.STABLE) or not group.pending_sync_members:
        ctx.timer.cancel(sync_key(group.group_id))


def expire_pending_sync(ctx: ShardContext, group_id: str, generation: int) -> Result:
    """Timer operation (KAFKA-12890): members that never sent SyncGroup are removed."""
    group = ctx.groups.get(group_id)
    if group is None or group.generation_id != generation or not group.is_in(CR, GroupState.STABLE):
        return EMPTY
    if not group.pending_sync_members:
        return EMPTY
    laggards = sorted(group.pending_sync_members, key=list(group.members).index)
    entry = ctx.history.last(group_id)
    if entry is not None and entry.generation == generation:
        ctx.history.dropped(group_id, [(m, group.members[m].group_instance_id) for m in laggards], "sync", entry)
    for member_id in laggards:
        member = group.remove(member_id)
        if member is not None:
            cancel_session(ctx, group_id, member)
    fx = Effects()
    only = laggards[0] if len(laggards) == 1 else None
    prepare_rebalance(ctx, group, "sync-timeout", f"removing {laggards} on pending sync request expiration", fx, only)
    return fx.result()


def propagate_assignment(ctx: ShardContext, group: ClassicGroup, error: ErrorCode, fx: Effects) -> None:
    ok = error is ErrorCode.none
    for member in list(group.members.values()):
        response = SyncGroupResponse(
            error_code=error,
            protocol_type=group.protocol_type if ok else None,
            protocol_name=group.protocol_name if ok else None,
            assignment=member.assignment,
        )
        if group.complete_sync(member, response, fx):
            arm_session(ctx, group, member)


def reset_and_propagate_with_error(ctx: ShardContext, group: ClassicGroup, error: ErrorCode, fx: Effects) -> None:
    if not group.is_in(CR):
        raise ValueError(f"group {group.group_id} must be CompletingRebalance to reset its assignment")
    for member in group.members.values():
        member.assignment = b""
    propagate_assignment(ctx, group, error, fx)
