"""Classic group states and the one table of allowed transitions.

Copied from apache/kafka group-coordinator/.../classic/ClassicGroupState.java: each state lists the
states it may be entered from. `check_transition` raises `IllegalStateTransition` (and the caller
changes nothing) for anything else.

- Empty: no members; offsets may remain. Entered from PreparingRebalance (the last member left).
  Answers JoinGroup; Sync/Heartbeat get UNKNOWN_MEMBER_ID.
- PreparingRebalance: collecting JoinGroups. Entered from Stable, CompletingRebalance, Empty.
  Heartbeats get REBALANCE_IN_PROGRESS; commits are allowed.
- CompletingRebalance: joins answered, waiting for the leader's SyncGroup. Entered from
  PreparingRebalance. Heartbeats accepted; commits get REBALANCE_IN_PROGRESS.
- Stable: the generation's assignment is stored. Entered from CompletingRebalance.
- Dead: the group is gone (deleted or unloaded). Entered from any state, including Dead.
"""

from __future__ import annotations

from enum import Enum

from herd.coordinator.errors import IllegalStateTransition


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


def check_transition(current: GroupState, target: GroupState, group_id: str = "") -> None:
    """Raises IllegalStateTransition unless `target` may follow `current`."""
    if current not in VALID_PREVIOUS_STATES[target]:
        raise IllegalStateTransition(
            f"group {group_id!r}: {current} -> {target} is not allowed "
            f"(valid previous states of {target}: {sorted(map(str, VALID_PREVIOUS_STATES[target]))})"
        )


def can_rebalance(state: GroupState) -> bool:
    """Kafka's ClassicGroup.canRebalance: may the group enter PreparingRebalance now?"""
    return state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]
