"""Reconciliation of consumer-protocol members (herd.coordinator.consumer.reconcile), case by case as Kafka's
group-coordinator/src/test/.../modern/consumer/CurrentAssignmentBuilderTest.java (branch 4.2) states it, and
the safety rule as a property: no partition is ever handed to a member while another one owns it."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from herd.coordinator.consumer.assignment import Assignment, assignment, partitions, union
from herd.coordinator.consumer.member import ConsumerMember, MemberState
from herd.coordinator.consumer.reconcile import reconcile
from herd.coordinator.errors import CoordinatorError, ErrorCode

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
BOTH = frozenset({T1, T2})

STABLE = MemberState.STABLE
UNREVOKED = MemberState.UNREVOKED_PARTITIONS
UNRELEASED = MemberState.UNRELEASED_PARTITIONS


def a(t1: tuple[int, ...] = (), t2: tuple[int, ...] = ()) -> Assignment:
    return assignment([(T1, t1), (T2, t2)])


def m(
    state: MemberState, epoch: int, previous: int, assigned: Assignment, pending: Assignment | None = None
) -> ConsumerMember:
    return ConsumerMember(
        "member",
        member_epoch=epoch,
        previous_member_epoch=previous,
        state=state,
        assigned=assigned,
        pending_revocation=pending or {},
    )


FREE = lambda topic_id, partition: -1  # noqa: E731  (no partition is owned by another member)
OWNED_BY_10 = lambda topic_id, partition: 10  # noqa: E731


def test_stable_to_stable() -> None:
    member = m(STABLE, 10, 10, a((1, 2, 3), (4, 5, 6)))
    got = reconcile(member, 11, a((1, 2, 3), (4, 5, 6)), None, FREE, BOTH)
    assert got == m(STABLE, 11, 10, a((1, 2, 3), (4, 5, 6)))


def test_stable_to_stable_with_new_partitions() -> None:
    member = m(STABLE, 10, 10, a((1, 2, 3), (4, 5, 6)))
    got = reconcile(member, 11, a((1, 2, 3, 4), (4, 5, 6, 7)), None, FREE, BOTH)
    assert got == m(STABLE, 11, 10, a((1, 2, 3, 4), (4, 5, 6, 7)))


def test_stable_to_unrevoked_partitions() -> None:
    member = m(STABLE, 10, 10, a((1, 2, 3), (4, 5, 6)))
    got = reconcile(member, 11, a((2, 3, 4), (5, 6, 7)), None, FREE, BOTH)
    assert got == m(UNREVOKED, 10, 10, a((2, 3), (5, 6)), a((1,), (4,)))


def test_stable_to_unreleased_partitions() -> None:
    member = m(STABLE, 10, 10, a((1, 2, 3), (4, 5, 6)))
    got = reconcile(member, 11, a((1, 2, 3, 4), (4, 5, 6, 7)), None, OWNED_BY_10, BOTH)
    assert got == m(UNRELEASED, 11, 10, a((1, 2, 3), (4, 5, 6)))


def test_stable_to_unreleased_when_the_owned_partitions_no_longer_hold_the_revoked_ones() -> None:
    member = m(STABLE, 10, 10, a((1, 2, 3), (4, 5, 6)))
    epoch = lambda topic_id, partition: 10 if topic_id == T2 else -1  # noqa: E731
    got = reconcile(member, 11, a((1, 2, 3), (4, 5, 7)), {}, epoch, BOTH)
    assert got == m(UNRELEASED, 11, 10, a((1, 2, 3), (4, 5)))


def test_unrevoked_to_stable() -> None:
    member = m(UNREVOKED, 10, 10, a((2, 3), (5, 6)), a((1,), (4,)))
    got = reconcile(member, 11, a((2, 3), (5, 6)), a((2, 3), (5, 6)), FREE, BOTH)
    assert got == m(STABLE, 11, 10, a((2, 3), (5, 6)))


@pytest.mark.parametrize("owned", [None, a((1, 2, 3), (5, 6)), a((2, 3), (4, 5, 6))])
def test_remains_in_unrevoked_partitions_while_it_owns_a_revoked_one(owned: Assignment | None) -> None:
    member = m(UNREVOKED, 10, 10, a((2, 3), (5, 6)), a((1,), (4,)))
    assert reconcile(member, 12, a((3,), (6,)), owned, FREE, BOTH) is member


def test_unrevoked_to_unrevoked_partitions() -> None:
    member = m(UNREVOKED, 10, 10, a((2, 3), (5, 6)), a((1,), (4,)))
    got = reconcile(member, 12, a((3,), (6,)), a((2, 3), (5, 6)), FREE, BOTH)
    assert got == m(UNREVOKED, 10, 10, a((3,), (6,)), a((2,), (5,)))


def test_unrevoked_to_unreleased_partitions() -> None:
    member = m(UNREVOKED, 11, 10, a((2, 3), (5, 6)))
    got = reconcile(member, 11, a((2, 3, 4), (5, 6, 7)), a((2, 3), (5, 6)), OWNED_BY_10, BOTH)
    assert got == m(UNRELEASED, 11, 11, a((2, 3), (5, 6)))


def test_unrevoked_to_stable_takes_back_its_own_partition_pending_revocation() -> None:
    """Partition 4 is pending revocation by this member and back in its target: its epoch (10) is this member's
    own, so it is not waited for."""
    member = m(UNREVOKED, 10, 10, a((2, 3), (5, 6)), a((4,)))
    owners = {(T1, 2), (T1, 3), (T1, 4), (T2, 5), (T2, 6)}
    epoch = lambda topic_id, partition: 10 if (topic_id, partition) in owners else -1  # noqa: E731
    got = reconcile(member, 12, a((2, 3, 4), (5, 6, 7)), a((2, 3), (5, 6)), epoch, BOTH)
    assert got == m(STABLE, 12, 10, a((2, 3, 4), (5, 6, 7)))


def test_unreleased_to_stable() -> None:
    member = m(UNRELEASED, 11, 11, a((2, 3), (5, 6)))
    got = reconcile(member, 12, a((2, 3), (5, 6)), None, OWNED_BY_10, BOTH)
    assert got == m(STABLE, 12, 11, a((2, 3), (5, 6)))


def test_unreleased_to_stable_with_new_partitions() -> None:
    member = m(UNRELEASED, 11, 11, a((2, 3), (5, 6)))
    got = reconcile(member, 11, a((2, 3, 4), (5, 6, 7)), None, FREE, BOTH)
    assert got == m(STABLE, 11, 11, a((2, 3, 4), (5, 6, 7)))


def test_unreleased_to_unreleased_partitions() -> None:
    member = m(UNRELEASED, 11, 11, a((2, 3), (5, 6)))
    assert reconcile(member, 11, a((2, 3, 4), (5, 6, 7)), None, OWNED_BY_10, BOTH) == member


def test_unreleased_to_unrevoked_partitions() -> None:
    member = m(UNRELEASED, 11, 11, a((2, 3), (5, 6)))
    got = reconcile(member, 12, a((3,), (6,)), None, OWNED_BY_10, BOTH)
    assert got == m(UNREVOKED, 11, 11, a((3,), (6,)), a((2,), (5,)))


def test_a_member_in_an_unknown_state_is_fenced_until_it_owns_nothing() -> None:
    member = m(MemberState.UNKNOWN, 11, 11, a((3,), (6,)), a((2,), (5,)))
    with pytest.raises(CoordinatorError) as fenced:
        reconcile(member, 12, a((3,), (6,)), None, OWNED_BY_10, BOTH)
    assert fenced.value.code == ErrorCode.fenced_member_epoch
    got = reconcile(member, 12, a((3,), (6,)), {}, lambda t, p: 11, BOTH)
    assert got == m(STABLE, 12, 11, a((3,), (6,)))
    assert MemberState.of(5) is MemberState.UNKNOWN and MemberState.of(2) is UNRELEASED


@pytest.mark.parametrize(
    ("epoch", "target_epoch", "expected_epoch", "changed"),
    [(10, 11, 11, False), (10, 11, 11, True), (10, 10, 10, True)],
)
def test_a_topic_left_and_already_revoked_leaves_the_assignment(
    epoch: int, target_epoch: int, expected_epoch: int, changed: bool
) -> None:
    member = m(STABLE, epoch, epoch, a((1, 2, 3), (4, 5, 6)))
    got = reconcile(member, target_epoch, a((1, 2, 3), (4, 5, 6)), a((), (4, 5, 6)), FREE, frozenset({T2}), changed)
    assert got == m(STABLE, expected_epoch, epoch, a((), (4, 5, 6)))


@pytest.mark.parametrize(("epoch", "target_epoch", "changed"), [(10, 11, False), (10, 11, True), (10, 10, True)])
def test_a_topic_left_and_still_owned_is_revoked(epoch: int, target_epoch: int, changed: bool) -> None:
    member = m(STABLE, epoch, epoch, a((1, 2, 3), (4, 5, 6)))
    owned = a((1, 2, 3), (4, 5, 6))
    got = reconcile(member, target_epoch, a((1, 2, 3), (4, 5, 6)), owned, FREE, frozenset({T2}), changed)
    assert got == m(UNREVOKED, epoch, epoch, a((), (4, 5, 6)), a((1, 2, 3)))


def test_a_subscription_change_while_revoking_adds_the_topics_left_to_the_revocation() -> None:
    member = m(UNREVOKED, 10, 10, a((2, 3), (5, 6)), a((1,), (4,)))
    owned = a((1, 2, 3), (4, 5, 6))
    got = reconcile(member, 12, a((1, 3, 4), (6, 7)), owned, FREE, frozenset({T2}), True)
    assert got == m(UNREVOKED, 10, 10, a((), (5, 6)), a((1, 2, 3), (4,)))


def test_an_unresolved_regular_expression_and_no_topic_names_revoke_everything() -> None:
    """Kafka treats an unresolved regex as matching nothing: with no topic names either, all is revoked."""
    member = m(STABLE, 10, 10, a((1, 2, 3), (4, 5, 6)))
    owned = a((1, 2, 3), (4, 5, 6))
    got = reconcile(member, 10, a((1, 2, 3), (4, 5, 6)), owned, FREE, frozenset(), True)
    assert got == m(UNREVOKED, 10, 10, {}, a((1, 2, 3), (4, 5, 6)))


def test_a_stable_member_at_the_target_epoch_without_a_subscription_change_is_left_as_it_is() -> None:
    member = m(STABLE, 10, 10, a((1, 2, 3), (4, 5, 6)))
    assert reconcile(member, 10, a((1,)), None, FREE, frozenset({T2})) is member


# The safety property, over random groups. Members heartbeat one at a time in a random order towards targets that
# change at random; each client applies the assignment a heartbeat answers with either at once or on a later
# heartbeat (a slow revocation), and reports what it really holds. A partition is never held by two clients at
# once, nor recorded by the coordinator as two members' (assigned or pending revocation); once the target stops
# changing and clients apply what they are told, every member reaches it.

PARTITIONS = [(t, p) for t in (T1, T2) for p in range(4)]


@st.composite
def targets(draw: st.DrawFn, names: list[str]) -> dict[str, Assignment]:
    owners = [draw(st.sampled_from(names)) for _ in PARTITIONS]
    pairs = list(zip(PARTITIONS, owners, strict=True))
    return {name: assignment([(t, [p]) for (t, p), owner in pairs if owner == name]) for name in names}


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_no_partition_is_ever_held_by_two_members(data: st.DataObject) -> None:
    names = [f"m{i}" for i in range(data.draw(st.integers(2, 4), label="members"))]
    members = {name: ConsumerMember(name, member_epoch=1, previous_member_epoch=0) for name in names}
    held: dict[str, Assignment] = {name: {} for name in names}  # what each client really holds
    told: dict[str, Assignment] = {name: {} for name in names}  # what its last answer said
    epoch, target = 1, {name: {} for name in names}

    def partition_epoch(topic_id: uuid.UUID, partition: int) -> int:
        for member in members.values():
            if partition in member.assigned.get(topic_id, ()) or partition in member.pending_revocation.get(
                topic_id, ()
            ):
                return member.member_epoch
        return -1

    def check() -> None:
        for owners in (
            {n: held[n] for n in names},
            {n: union(members[n].assigned, members[n].pending_revocation) for n in names},
        ):
            seen: dict[tuple[uuid.UUID, int], str] = {}
            for name, parts in owners.items():
                for tp in partitions(parts):
                    assert seen.setdefault(tp, name) == name, f"{tp} is {seen[tp]}'s and {name}'s"

    def heartbeat(name: str, apply: bool) -> None:
        if apply:
            held[name] = told[name]
        members[name] = reconcile(members[name], epoch, target[name], held[name], partition_epoch, BOTH)
        told[name] = members[name].assigned
        check()

    for _ in range(data.draw(st.integers(1, 40), label="steps")):
        if data.draw(st.integers(0, 4), label="new target?") == 0:
            epoch, target = epoch + 1, data.draw(targets(names), label="target")
        else:
            heartbeat(data.draw(st.sampled_from(names), label="who"), data.draw(st.booleans(), label="applies"))
    for _ in range(4):  # the target stays; every client heartbeats and applies its answers
        for name in names:
            heartbeat(name, True)
    for name, member in members.items():
        assert member.is_reconciled_to(epoch), member
        assert member.assigned == target[name]
