"""A consumer group rebuilt from its records (herd.coordinator.consumer.group): Kafka's replay rules
(GroupMetadataManager.replay for types 3-8 and 16, branch 4.2), the group states, partition owner epochs and
static members, and the order checks a corrupted log trips."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

import pytest

from herd.coordinator.consumer import records as r
from herd.coordinator.consumer.assignment import assignment
from herd.coordinator.consumer.group import ConsumerGroup, ConsumerGroupState, NotAConsumerGroup, replay
from herd.coordinator.consumer.member import ConsumerMember, MemberState
from herd.coordinator.records import Record, record_type

T1 = uuid.UUID(int=1)


def apply(groups: dict[str, ConsumerGroup], records: Iterable[Record], **kwargs) -> list[str | None]:
    return [replay(groups, r.decode(record_type(x.key), x.key, x.value), **kwargs) for x in records]


def joined(member_id: str, epoch: int, parts: Iterable[int], instance: str | None = None, **kw) -> list[Record]:
    member = ConsumerMember(
        member_id,
        member_epoch=epoch,
        previous_member_epoch=epoch - 1,
        instance_id=instance,
        subscribed_topic_names=frozenset({"t"}),
        assigned=assignment([(T1, parts)]),
        **kw,
    )
    return [
        r.member_subscription_record("g", member),
        r.target_assignment_record("g", member_id, member.assigned),
        r.current_assignment_record("g", member),
    ]


def stable_group() -> dict[str, ConsumerGroup]:
    groups: dict[str, ConsumerGroup] = {}
    apply(groups, [r.group_epoch_record("g", 2), *joined("a", 2, [0, 1]), *joined("b", 2, [2, 3], instance="i")])
    apply(groups, [r.target_assignment_epoch_record("g", 2)])
    return groups


def test_a_group_replayed_from_its_records_is_stable_at_its_epoch() -> None:
    group = stable_group()["g"]
    assert (group.group_epoch, group.assignment_epoch, group.state) == (2, 2, ConsumerGroupState.STABLE)
    assert group.members["a"].assigned == assignment([(T1, [0, 1])])
    assert group.target("b") == assignment([(T1, [2, 3])])
    assert [group.partition_epoch(T1, p) for p in range(5)] == [2, 2, 2, 2, -1]
    assert group.static_member("i") is group.members["b"] and group.static_member(None) is None
    assert group.subscribed_topic_names() == {"t": 2}


def test_the_states_follow_the_epochs_and_the_members() -> None:
    groups: dict[str, ConsumerGroup] = {}
    apply(groups, [r.group_epoch_record("g", 1)])
    assert groups["g"].state is ConsumerGroupState.EMPTY
    apply(groups, joined("a", 0, []))  # a new member, epoch 0: the target is behind the group's epoch
    assert groups["g"].state is ConsumerGroupState.ASSIGNING
    apply(groups, [r.target_assignment_epoch_record("g", 1)])
    assert groups["g"].state is ConsumerGroupState.RECONCILING  # a is at epoch 0, the target at 1
    apply(groups, [r.current_assignment_record("g", ConsumerMember("a", member_epoch=1, previous_member_epoch=0))])
    assert groups["g"].state is ConsumerGroupState.STABLE
    unrevoked = ConsumerMember("a", member_epoch=1, previous_member_epoch=1, state=MemberState.UNREVOKED_PARTITIONS)
    apply(groups, [r.current_assignment_record("g", unrevoked)])
    assert groups["g"].state is ConsumerGroupState.RECONCILING


def test_a_member_leaves_through_its_tombstones_and_its_partitions_are_free() -> None:
    groups = stable_group()
    apply(groups, [r.group_epoch_record("g", 3), *r.member_tombstones("g", "b")])
    group = groups["g"]
    assert set(group.members) == {"a"} and "b" not in group.targets and group.static_member("i") is None
    assert [group.partition_epoch(T1, p) for p in range(4)] == [2, 2, -1, -1]
    assert group.state is ConsumerGroupState.ASSIGNING


def test_the_whole_group_goes_with_its_tombstones() -> None:
    groups = stable_group()
    assert apply(groups, r.group_tombstones("g", ("a", "b"), ()))[-1] == "g"
    assert groups == {}
    assert apply(groups, r.group_tombstones("g", ("a",), ())) == [None] * 6  # tombstones for nothing: ignored


def test_a_partition_is_never_owned_at_an_older_epoch_than_its_owner_s() -> None:
    groups = stable_group()
    thief = ConsumerMember("c", member_epoch=1, previous_member_epoch=0, assigned=assignment([(T1, [0])]))
    with pytest.raises(ValueError, match=r"still owned at epoch 2"):
        apply(groups, [r.current_assignment_record("g", thief)])


@pytest.mark.parametrize(
    ("records", "message"),
    [
        (lambda: r.member_tombstones("g", "a")[2:], "before its current assignment's tombstone"),
        (lambda: r.member_tombstones("g", "a")[:1] + r.member_tombstones("g", "a")[2:], "target assignment's"),
        (lambda: [r.group_tombstones("g", ("a", "b"))[-1]], "still has 2 members"),
        (lambda: [r.group_tombstones("g", ())[0]], "target assignment of g, which still has members"),
    ],
)
def test_tombstones_out_of_kafka_s_order_are_refused(records, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        apply(stable_group(), records())


def test_a_classic_group_with_members_is_not_turned_into_a_consumer_group() -> None:
    with pytest.raises(NotAConsumerGroup, match="Group g is not a consumer group"):
        apply({}, [r.group_epoch_record("g", 1)], is_classic=lambda group_id: group_id == "g")


def test_regular_expressions_resolve_into_the_subscribed_names() -> None:
    groups = stable_group()
    regex_member = ConsumerMember("c", subscribed_topic_regex="x.*", subscribed_topic_names=frozenset({"t"}))
    apply(groups, [r.member_subscription_record("g", regex_member)])
    group = groups["g"]
    assert group.member_topic_names(group.members["c"]) == {"t"}  # unresolved: its names only
    apply(groups, [r.regular_expression_record("g", "x.*", frozenset({"x1", "x2"}), 7, 1000)])
    assert group.member_topic_names(group.members["c"]) == {"t", "x1", "x2"}
    assert group.subscribed_topic_names() == {"t": 3, "x1": 1, "x2": 1}
    assert group.resolved["x.*"].version == 7 and group.subscribed_regexes() == {"x.*": 1}
    apply(groups, [r.regular_expression_tombstone("g", "x.*")])
    assert group.resolved == {}


def test_the_preferred_assignor_is_the_one_most_members_name() -> None:
    group = ConsumerGroup("g")
    assert group.preferred_assignor("uniform") == "uniform"
    for name, assignor in (("a", "range"), ("b", "range"), ("c", "uniform")):
        group.update_member(ConsumerMember(name, server_assignor=assignor))
    assert group.preferred_assignor("uniform") == "range"


def test_a_kafka_4_0_partition_metadata_record_is_noted_to_be_tombstoned() -> None:
    groups = stable_group()
    key = r.group_epoch_record("g", 1).key.replace(b"\x00\x03", b"\x00\x04", 1)
    apply(groups, [Record(key, b"\x00\x00\x01\x00")])
    assert groups["g"].has_partition_metadata_record
    apply(groups, [Record(key, None)])
    assert not groups["g"].has_partition_metadata_record
