"""The steps of a JoinGroup that dynamic members (membership.py) and static members (static.py) share.

Kafka's GroupMetadataManager keeps the classic group's JoinGroup in one class of over 6,000 lines; herd splits it by
kind of member: membership.py is the JoinGroup entry point and the dynamic member's path (a new member, a known
member rejoining), static.py the static member's (KIP-345 replacement, KIP-469's hold). Both paths end the same
way, and this module is that common part:
- `validate_join`: the stateless checks of GroupCoordinatorService (empty group id, session-timeout bounds), which
  the JoinGroup API also runs before routing (herd.server.apis.join_group);
- `join_reason` and `rebalance_timeout`: the client's reason as Kafka logs it, and JoinGroup v0's rebalance timeout
  (the session timeout);
- `member_from_join`: the `Member` a request describes;
- `add_member_then_rebalance`: Kafka's `addMemberThenRebalanceOrCompleteJoin`.

It is a module of its own, rather than part of membership.py, because membership.py dispatches a static member's
first join to static.py: were these steps in membership.py, static.py would import it back, and the two modules
would form a cycle (which tests/unit/test_imports.py refuses). It imports neither of them.
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
