"""The server-side assignors of consumer groups (herd.coordinator.consumer.assignors): Kafka's cases from
group-coordinator/src/test/.../assignor/ (branch 4.2), and Kafka's definitions of a valid, balanced and sticky
assignment (OptimizedUniformAssignmentBuilderTest.checkValidityAndBalance) as hypothesis properties."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from herd.coordinator.consumer.assignment import Assignment, assignment, size
from herd.coordinator.consumer.assignors import (
    ASSIGNORS,
    AssignorError,
    MemberSpec,
    RangeAssignor,
    UniformAssignor,
)

T1, T2, T3, T4 = (uuid.UUID(int=i) for i in range(1, 5))
uniform, range_ = UniformAssignor(), RangeAssignor()


def member(member_id: str, topics: set[uuid.UUID], owned: Assignment | None = None, instance: str | None = None):
    return MemberSpec(member_id, frozenset(topics), owned or {}, instance_id=instance)


def test_both_are_registered_by_kafka_s_names() -> None:
    assert sorted(ASSIGNORS) == ["range", "uniform"]
    assert ASSIGNORS["uniform"].name == "uniform" and ASSIGNORS["range"].name == "range"


@pytest.mark.parametrize("assignor", [uniform, range_])
def test_no_members_no_assignment_and_no_topics_nothing_assigned(assignor) -> None:
    assert assignor.assign([], {T1: 3}) == {}
    assert assignor.assign([member("A", set()), member("B", set())], {T1: 3}) == {"A": {}, "B": {}}


@pytest.mark.parametrize("assignor", [uniform, range_])
def test_a_topic_missing_from_the_metadata_is_an_error(assignor) -> None:
    with pytest.raises(AssignorError, match="doesn't exist in the topic metadata"):
        assignor.assign([member("A", {T1})], {})


def test_uniform_homogeneous_keeps_an_assignment_that_is_already_balanced() -> None:
    """OptimizedUniformAssignmentBuilderTest.testReassignmentStickinessWhenAlreadyBalanced: two of three members
    hold the extra partitions; they keep them."""
    members = [
        member("A", {T1}, assignment([(T1, [0, 3])])),
        member("B", {T1}, assignment([(T1, [1])])),
        member("C", {T1}, assignment([(T1, [2, 4])])),
    ]
    assert uniform.assign(members, {T1: 5}) == {
        "A": assignment([(T1, [0, 3])]),
        "B": assignment([(T1, [1])]),
        "C": assignment([(T1, [2, 4])]),
    }


def test_uniform_homogeneous_a_member_over_its_quota_gives_its_last_partitions_to_a_new_one() -> None:
    members = [member("A", {T1}, assignment([(T1, range(6))])), member("B", {T1})]
    got = uniform.assign(members, {T1: 6})
    assert got == {"A": assignment([(T1, [0, 1, 2])]), "B": assignment([(T1, [3, 4, 5])])}


def test_uniform_heterogeneous_rebalances_an_unbalanced_assignment_as_kafka_does() -> None:
    """UniformHeterogeneousAssignmentBuilderTest.testReassignmentForTwoMembersThreeTopicsGivenUnbalancedPrevAssignment."""
    members = [
        member("A", {T1}, assignment([(T1, [0, 1, 2])])),
        member("B", {T1, T2}, assignment([(T1, [3]), (T2, [0])])),
        member("C", {T1, T2, T3}, assignment([(T1, [4, 5]), (T2, [1, 2, 3]), (T3, [0, 1, 2, 3])])),
    ]
    assert uniform.assign(members, {T1: 6, T2: 4, T3: 4}) == {
        "A": assignment([(T1, [0, 1, 2, 5])]),
        "B": assignment([(T1, [3]), (T2, [0, 1, 2, 3])]),
        "C": assignment([(T1, [4]), (T3, [0, 1, 2, 3])]),
    }


def test_uniform_heterogeneous_drops_a_topic_a_member_left() -> None:
    members = [
        member("A", {T1}, assignment([(T1, [0, 1]), (T2, [0, 1])])),
        member("B", {T1, T2}, assignment([(T1, [2])])),
    ]
    got = uniform.assign(members, {T1: 3, T2: 2})
    assert got["A"].keys() == {T1} and got["B"][T2] == frozenset({0, 1})
    assert size(got["A"]) + size(got["B"]) == 5


def test_range_gives_contiguous_ranges_static_members_first() -> None:
    """RangeAssignor.sortMemberIds: instance ids first (by instance id), then member ids."""
    members = [member("a", {T1}), member("b", {T1}, instance="z"), member("c", {T1}, instance="y")]
    assert range_.assign(members, {T1: 7}) == {
        "c": assignment([(T1, [0, 1, 2])]),
        "b": assignment([(T1, [3, 4])]),
        "a": assignment([(T1, [5, 6])]),
    }


def test_range_co_partitions_members_subscribed_to_the_same_topics() -> None:
    members = [member("A", {T1, T2}), member("B", {T1, T2}), member("C", {T1})]
    got = range_.assign(members, {T1: 6, T2: 6})
    assert got["A"] == assignment([(T1, [0, 1]), (T2, [0, 1, 2])])
    assert got["B"] == assignment([(T1, [2, 3]), (T2, [3, 4, 5])])
    assert got["C"] == assignment([(T1, [4, 5])])


def test_range_with_more_members_than_partitions_leaves_the_last_ones_empty() -> None:
    got = range_.assign([member(m, {T1}) for m in "ABC"], {T1: 2})
    assert got == {"A": assignment([(T1, [0])]), "B": assignment([(T1, [1])]), "C": {}}


# Properties over random groups: topics with random partition counts, members with random subscriptions and a
# random previous target assignment (no partition in two members', as a group's target never has).

TOPICS = [T1, T2, T3, T4]


@st.composite
def groups(draw: st.DrawFn, homogeneous: bool | None = None) -> tuple[list[MemberSpec], dict[uuid.UUID, int]]:
    counts = {t: draw(st.integers(1, 12)) for t in TOPICS}
    names = [f"m{i:02d}" for i in range(draw(st.integers(1, 9)))]
    if homogeneous is None:
        homogeneous = draw(st.booleans())
    common = draw(st.sets(st.sampled_from(TOPICS), min_size=1))
    subscriptions = {
        n: common if homogeneous else draw(st.sets(st.sampled_from(TOPICS), min_size=draw(st.integers(0, 1))))
        for n in names
    }
    previous: dict[str, list[tuple[uuid.UUID, int]]] = {n: [] for n in names}
    for t, count in counts.items():
        for p in range(count):
            owner = draw(st.sampled_from([*names, None]))
            if owner is not None:
                previous[owner].append((t, p))
    return [
        MemberSpec(n, frozenset(subscriptions[n]), assignment((t, [p]) for t, p in previous[n])) for n in names
    ], counts


def check_valid(members: list[MemberSpec], counts: dict[uuid.UUID, int], got: dict[str, Assignment]) -> None:
    """Every partition of a subscribed topic is assigned once, to a member subscribed to its topic."""
    assert got.keys() == {m.member_id for m in members}
    subscribed = {m.member_id: m.topics for m in members}
    seen: dict[tuple[uuid.UUID, int], str] = {}
    for member_id, target in got.items():
        for topic_id, parts in target.items():
            assert parts, "an empty set of partitions"
            assert topic_id in subscribed[member_id], f"{member_id} got {topic_id} it does not subscribe to"
            for p in parts:
                assert 0 <= p < counts[topic_id]
                assert seen.setdefault((topic_id, p), member_id) == member_id, f"{(topic_id, p)} assigned twice"
    wanted = {(t, p) for m in members for t in m.topics for p in range(counts[t])}
    assert set(seen) == wanted, f"unassigned: {sorted(wanted - set(seen))[:5]}"


def check_balanced(members: list[MemberSpec], got: dict[str, Assignment]) -> None:
    """Kafka's balance: no partition could move from its member to one subscribed to its topic with 2+ fewer."""
    sizes = {member_id: size(target) for member_id, target in got.items()}
    for giver, target in got.items():
        for topic_id in target:
            for taker in members:
                if topic_id in taker.topics:
                    assert sizes[giver] - sizes[taker.member_id] <= 1, (giver, taker.member_id, sizes)


@settings(max_examples=300, deadline=None)
@given(groups())
def test_uniform_is_valid_and_balanced(group: tuple[list[MemberSpec], dict[uuid.UUID, int]]) -> None:
    members, counts = group
    got = uniform.assign(members, counts)
    check_valid(members, counts, got)
    check_balanced(members, got)


@settings(max_examples=300, deadline=None)
@given(groups(homogeneous=True))
def test_uniform_homogeneous_sizes_differ_by_one_at_most(group) -> None:
    members, counts = group
    sizes = [size(target) for target in uniform.assign(members, counts).values()]
    assert max(sizes) - min(sizes) <= 1


@settings(max_examples=300, deadline=None)
@given(groups())
def test_uniform_is_sticky(group) -> None:
    """Stickiness: a valid and balanced assignment is kept as it is, and in a homogeneous group each member keeps
    its previous partitions up to the smallest quota (the partitions divided by the members)."""
    members, counts = group
    got = uniform.assign(members, counts)
    again = [MemberSpec(m.member_id, m.topics, got[m.member_id]) for m in members]
    assert uniform.assign(again, counts) == got
    if len({m.topics for m in members}) == 1:
        quota = sum(counts[t] for t in members[0].topics) // len(members)
        for m in members:
            before = {(t, p) for t, parts in m.assignment.items() if t in m.topics for p in parts}
            after = {(t, p) for t, parts in got[m.member_id].items() for p in parts}
            assert len(before & after) >= min(len(before), quota), m.member_id


@settings(max_examples=300, deadline=None)
@given(groups())
def test_range_is_valid_co_partitioned_and_even_per_topic(group) -> None:
    members, counts = group
    got = range_.assign(members, counts)
    check_valid(members, counts, got)
    for topic_id in TOPICS:
        subscribers = [m.member_id for m in members if topic_id in m.topics]
        shares = [len(got[s].get(topic_id, ())) for s in subscribers]
        if shares:
            assert max(shares) - min(shares) <= 1
        for s in subscribers:  # each member's share of a topic is one range
            parts = sorted(got[s].get(topic_id, ()))
            assert parts == list(range(parts[0], parts[0] + len(parts))) if parts else True
    by_subscription: dict[frozenset[uuid.UUID], list[str]] = {}
    for m in members:
        by_subscription.setdefault(m.topics, []).append(m.member_id)
    for topics, member_ids in by_subscription.items():
        if len(by_subscription) == 1:  # homogeneous: the same partition numbers of topics of equal size
            for s in member_ids:
                numbers = [got[s].get(t, frozenset()) for t in topics if counts[t] == counts[min(topics)]]
                assert all(n == numbers[0] for n in numbers)
