"""The `simple` assignor of share groups (herd.coordinator.share.assignor): cases worked out from Kafka's
SimpleHomogeneousAssignmentBuilder / SimpleHeterogeneousAssignmentBuilder (confluentinc/kafka, branch 4.2), and
their principles (balance first, then stickiness; a partition shared when members outnumber partitions) as
hypothesis properties."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from herd.coordinator.consumer.assignment import Assignment, assignment, size
from herd.coordinator.consumer.assignors import AssignorError, MemberSpec
from herd.coordinator.share.assignor import SimpleAssignor

T1, T2, T3 = (uuid.UUID(int=i) for i in range(1, 4))
simple = SimpleAssignor()


def member(member_id: str, topics: set[uuid.UUID], owned: Assignment | None = None) -> MemberSpec:
    return MemberSpec(member_id, frozenset(topics), owned or {})


def holders(result: dict[str, Assignment]) -> dict[tuple[uuid.UUID, int], set[str]]:
    """Partition -> the members it is assigned to."""
    out: dict[tuple[uuid.UUID, int], set[str]] = {}
    for member_id, of in result.items():
        for topic_id, parts in of.items():
            for p in parts:
                out.setdefault((topic_id, p), set()).add(member_id)
    return out


def test_no_members_and_no_topics() -> None:
    assert simple.assign([], {T1: 3}) == {}
    assert simple.assign([member("A", set()), member("B", set())], {T1: 3}) == {"A": {}, "B": {}}


def test_a_topic_missing_from_the_metadata_is_an_error() -> None:
    with pytest.raises(AssignorError, match="doesn't exist in the topic metadata"):
        simple.assign([member("A", {T1})], {})


def test_more_partitions_than_members_each_partition_once_counts_differ_by_one() -> None:
    """2 members, topics of 3 and 2 partitions: desired counts [3, 2] (ceil(2.5 * (i + 1)) - ceil(2.5 * i)), the
    partitions dealt in turn."""
    result = simple.assign([member("A", {T1, T3}), member("B", {T1, T3})], {T1: 3, T3: 2})
    assert result == {"A": assignment([(T1, [0, 2]), (T3, [1])]), "B": assignment([(T1, [1]), (T3, [0])])}


def test_more_members_than_partitions_shares_each_partition() -> None:
    """5 members, 2 partitions: desired sharing ceil(5 / 2) = 3, desired counts [2, 1, 1, 1, 1]."""
    members = [member(m, {T1}) for m in "ABCDE"]
    result = simple.assign(members, {T1: 2})
    assert [size(result[m]) for m in "ABCDE"] == [2, 1, 1, 1, 1]
    assert {key: len(ids) for key, ids in holders(result).items()} == {(T1, 0): 3, (T1, 1): 3}


def test_one_partition_is_shared_by_every_member() -> None:
    result = simple.assign([member(m, {T1}) for m in "ABC"], {T1: 1})
    assert result == {m: assignment([(T1, [0])]) for m in "ABC"}


def test_a_balanced_assignment_is_kept() -> None:
    members = [
        member("A", {T1}, assignment([(T1, [1, 3])])),
        member("B", {T1}, assignment([(T1, [0])])),
        member("C", {T1}, assignment([(T1, [2])])),
    ]
    assert simple.assign(members, {T1: 4}) == {m.member_id: m.assignment for m in members}


def test_a_new_member_takes_from_the_overfilled_only() -> None:
    members = [member("A", {T1}, assignment([(T1, [0, 1])])), member("B", {T1}, assignment([(T1, [2, 3])]))]
    result = simple.assign([*members, member("C", {T1})], {T1: 4})
    assert result["A"] == assignment([(T1, [0, 1])])  # desired counts [2, 1, 1]: A keeps both
    assert result["B"] == assignment([(T1, [2])])  # B gives up its highest partition
    assert result["C"] == assignment([(T1, [3])])


def test_partitions_of_a_topic_no_longer_subscribed_or_not_assignable_go() -> None:
    members = [member("A", {T1}, assignment([(T1, [0]), (T2, [0, 1])])), member("B", {T1}, assignment([(T1, [1])]))]
    result = simple.assign(members, {T1: 3}, assignable=lambda topic_id, p: p != 1)
    assert result == {"A": assignment([(T1, [0])]), "B": assignment([(T1, [2])])}


def test_fewer_members_than_before_a_partition_is_shared_by_fewer() -> None:
    """Sharing falls from 2 to 1 when partitions outnumber members again: the extra holders give it up."""
    members = [
        member("A", {T1}, assignment([(T1, [0])])),
        member("B", {T1}, assignment([(T1, [0])])),
        member("C", {T1}, assignment([(T1, [1])])),
    ]
    result = simple.assign(members[:2], {T1: 2})
    assert sorted(holders(result)) == [(T1, 0), (T1, 1)]
    assert all(len(ids) == 1 for ids in holders(result).values())
    assert result["A"] == assignment([(T1, [0])])  # the first holder keeps it
    assert sorted(result) == ["A", "B"]


def test_heterogeneous_balances_each_topic_over_its_subscribers() -> None:
    """Kafka's example: M1 on T1, M2 on T2, M3 on both: M3 gets half of each topic."""
    members = [member("M1", {T1}), member("M2", {T2}), member("M3", {T1, T2})]
    result = simple.assign(members, {T1: 4, T2: 4})
    assert size(result["M1"]) == 2 and set(result["M1"]) == {T1}
    assert size(result["M2"]) == 2 and set(result["M2"]) == {T2}
    assert len(result["M3"][T1]) == 2 and len(result["M3"][T2]) == 2
    assert all(len(ids) == 1 for ids in holders(result).values()) and len(holders(result)) == 8


# -- properties ----------------------------------------------------------------------------------------------------

TOPICS = (T1, T2, T3)


@st.composite
def groups(draw: st.DrawFn, homogeneous: bool) -> tuple[list[MemberSpec], dict[uuid.UUID, int]]:
    counts = {t: draw(st.integers(1, 12)) for t in TOPICS}
    n = draw(st.integers(1, 14))
    common = frozenset(draw(st.sets(st.sampled_from(TOPICS), min_size=1)))
    members = []
    for i in range(n):
        topics = common if homogeneous else frozenset(draw(st.sets(st.sampled_from(TOPICS), min_size=1)))
        members.append(MemberSpec(f"m{i:02d}", topics))
    return members, counts


def _check_valid(members: list[MemberSpec], counts: dict[uuid.UUID, int], result: dict[str, Assignment]) -> None:
    assert sorted(result) == sorted(m.member_id for m in members)
    for m in members:
        for topic_id, parts in result[m.member_id].items():
            assert topic_id in m.topics, f"{m.member_id} got {topic_id} it does not subscribe to"
            assert parts and all(0 <= p < counts[topic_id] for p in parts)


@settings(max_examples=100, deadline=None)
@given(groups(homogeneous=True))
def test_homogeneous_from_scratch_is_valid_complete_and_balanced(group) -> None:
    members, counts = group
    result = simple.assign(members, counts)
    _check_valid(members, counts, result)
    total = sum(counts[t] for t in members[0].topics)
    sharing = -(-len(members) // total)
    shared = holders(result)
    assert len(shared) == total, "a partition was left unassigned"
    assert all(1 <= len(ids) <= sharing for ids in shared.values())
    if len(members) <= total:
        assert all(len(ids) == 1 for ids in shared.values())
    sizes = [size(result[m.member_id]) for m in members]
    assert max(sizes) - min(sizes) <= 1, sizes


@settings(max_examples=100, deadline=None)
@given(groups(homogeneous=False))
def test_heterogeneous_from_scratch_is_valid_and_balanced_per_topic(group) -> None:
    members, counts = group
    result = simple.assign(members, counts)
    _check_valid(members, counts, result)
    for topic_id in TOPICS:
        subscribers = [m.member_id for m in members if topic_id in m.topics]
        if not subscribers:
            continue
        sizes = [len(result[s].get(topic_id, ())) for s in subscribers]
        assert max(sizes) - min(sizes) <= 1, (topic_id, sizes)
        assert {p for s in subscribers for p in result[s].get(topic_id, ())} == set(range(counts[topic_id]))


@settings(max_examples=100, deadline=None)
@given(st.booleans().flatmap(lambda homogeneous: groups(homogeneous)))
def test_assigning_again_changes_nothing(group) -> None:
    """Stickiness at rest: the assignor's own result, given back as the current assignment, is kept."""
    members, counts = group
    first = simple.assign(members, counts)
    again = simple.assign([MemberSpec(m.member_id, m.topics, first[m.member_id]) for m in members], counts)
    assert again == first


@settings(max_examples=100, deadline=None)
@given(groups(homogeneous=True), st.integers(1, 3))
def test_members_joining_keep_what_they_can(group, joining) -> None:
    """Kafka's stickiness: an existing member keeps min(what it had, what it has now) of its old partitions."""
    members, counts = group
    first = simple.assign(members, counts)
    grown = [MemberSpec(m.member_id, m.topics, first[m.member_id]) for m in members] + [
        MemberSpec(f"new{i}", members[0].topics) for i in range(joining)
    ]
    result = simple.assign(grown, counts)
    _check_valid(grown, counts, result)
    for m in members:
        old, new = first[m.member_id], result[m.member_id]
        kept = sum(len(parts & new.get(t, frozenset())) for t, parts in old.items())
        assert kept >= min(size(old), size(new)), (m.member_id, old, new)
