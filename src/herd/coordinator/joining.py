"""What a JoinGroup needs whether its member is dynamic (membership.py) or static (static.py): the request's
stateless checks, the client's reason as Kafka logs it, the member's rebalance timeout, the member a request
describes, and adding a new member then rebalancing (Kafka's `addMemberThenRebalanceOrCompleteJoin`).

membership.py imports static.py for a static member's first join; both import this module, which imports
neither.
"""

from __future__ import annotations

from herd.coordinator import rebalance as rb
from herd.coordinator.config import CoordinatorConfig
from herd.coordinator.context import ShardContext
from herd.coordinator.errors import ErrorCode
from herd.coordinator.group import ClassicGroup
from herd.coordinator.member import Member
from herd.coordinator.requests import JoinGroup
from herd.coordinator.result import Effects
from herd.coordinator.state import GroupState


def validate_join(config: CoordinatorConfig, req: JoinGroup) -> ErrorCode | None:
    """The stateless checks of Kafka's GroupCoordinatorService: INVALID_GROUP_ID for an empty group id,
    INVALID_SESSION_TIMEOUT outside [group.min.session.timeout.ms, group.max.session.timeout.ms]; None if
    the request passes. The JoinGroup API runs them before routing (so the answer does not depend on
    whether the group's partition is loaded, as in Kafka), and the handler runs them again (the core rejects
    invalid input on its own)."""
    if not req.group_id:
        return ErrorCode.invalid_group_id
    if not config.group_min_session_timeout_ms <= req.session_timeout_ms <= config.group_max_session_timeout_ms:
        return ErrorCode.invalid_session_timeout
    return None


def join_reason(reason: str | None) -> str:
    return reason if reason else "not provided"


def rebalance_timeout(req: JoinGroup) -> int:
    """JoinGroup v0 has no rebalance timeout: Kafka uses the session timeout."""
    if req.api_version == 0 or req.rebalance_timeout_ms < 0:
        return req.session_timeout_ms
    return req.rebalance_timeout_ms


def member_from_join(ctx: ShardContext, req: JoinGroup, member_id: str, **state: object) -> Member:
    """The member a JoinGroup describes, joining now; `state` sets the rest (is_new, assignment)."""
    return Member(
        member_id=member_id,
        group_instance_id=req.group_instance_id,
        client_id=req.client_id,
        client_host=req.client_host,
        rebalance_timeout_ms=rebalance_timeout(req),
        session_timeout_ms=req.session_timeout_ms,
        protocol_type=req.protocol_type,
        protocols=req.protocols,
        joined_at_ms=ctx.now(),
        **state,  # type: ignore[arg-type]
    )


def add_member_then_rebalance(
    ctx: ShardContext,
    req: JoinGroup,
    group: ClassicGroup,
    member_id: str,
    handle: object,
    fx: Effects,
    cause: str = "member-join",
) -> None:
    """`cause`: the history's name of the rebalance this may start (member-join, or KIP-469's
    expected-members-complete)."""
    member = member_from_join(ctx, req, member_id, is_new=True)
    if group.is_in(GroupState.PREPARING_REBALANCE) and group.previous_state is GroupState.EMPTY:
        group.new_member_added = True
    group.add(member, handle)
    rb.note_arrival(ctx, group, member_id)
    # KAFKA-7610: a parked join of a new member times out after the new-member join timeout.
    rb.arm_session(ctx, group, member, ctx.config.new_member_join_timeout_ms)
    reason = (
        f"Adding new member {member_id} with group instance id {req.group_instance_id}; "
        f"client reason: {join_reason(req.reason)}"
    )
    rb.maybe_prepare_rebalance_or_complete_join(ctx, group, cause, reason, fx, member_id, req.group_instance_id)
    rb.complete_on_expected_arrival(ctx, group, req.group_instance_id, fx)
