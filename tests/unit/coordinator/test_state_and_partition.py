from __future__ import annotations

import pytest

from herd.coordinator import IllegalStateTransition, coordinator_partition
from herd.coordinator.group import ClassicGroup
from herd.coordinator.partition import java_string_hash
from herd.coordinator.state import VALID_PREVIOUS_STATES, GroupState

ALLOWED = {
    (GroupState.PREPARING_REBALANCE, GroupState.EMPTY),
    (GroupState.STABLE, GroupState.PREPARING_REBALANCE),
    (GroupState.COMPLETING_REBALANCE, GroupState.PREPARING_REBALANCE),
    (GroupState.EMPTY, GroupState.PREPARING_REBALANCE),
    (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE),
    (GroupState.COMPLETING_REBALANCE, GroupState.STABLE),
} | {(s, GroupState.DEAD) for s in GroupState}

PAIRS = [(a, b) for a in GroupState for b in GroupState]


def test_table_is_kafkas() -> None:
    assert {(p, t) for t, ps in VALID_PREVIOUS_STATES.items() for p in ps} == ALLOWED


@pytest.mark.parametrize(("current", "target"), [p for p in PAIRS if p in ALLOWED])
def test_valid_transitions_happen(current: GroupState, target: GroupState) -> None:
    group = ClassicGroup("g", current, 0)
    group.transition_to(target, 5)
    assert (group.state, group.previous_state, group.state_timestamp_ms) == (target, current, 5)


@pytest.mark.parametrize(("current", "target"), [p for p in PAIRS if p not in ALLOWED])
def test_invalid_transitions_raise_and_change_nothing(current: GroupState, target: GroupState) -> None:
    group = ClassicGroup("g", current, 0)
    with pytest.raises(IllegalStateTransition):
        group.transition_to(target, 5)
    assert (group.state, group.previous_state, group.state_timestamp_ms) == (current, current, 0)


def test_java_hash_code_known_values() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("hello world") == 1794106052
    assert java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert java_string_hash("\U0001f600") == 31 * 0xD83D + 0xDE00  # surrogate pair: two code units


def test_coordinator_partition() -> None:
    assert coordinator_partition("hello", 50) == 99162322 % 50
    assert coordinator_partition("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) == 0
    negative = "my-group-12"
    h = java_string_hash(negative)
    assert coordinator_partition(negative, 50) == (h & 0x7FFFFFFF) % 50
