"""ShareGroupHeartbeat in the pure core (herd.coordinator.share.heartbeat) and the share-group records it writes
(herd.coordinator.share.records, replayed by herd.coordinator.share.group): Kafka 4.2's rules, with cases from
ShareGroupHeartbeatRequestTest (join with an empty assignment, assignment once the share state is initialized,
sharing, a steady heartbeat without assignment, leave and rejoin, session expiry)."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from herd.coordinator.consumer.assignment import assignment
from herd.coordinator.consumer.topics import TopicsImage
from herd.coordinator.records import Record, record_type
from herd.coordinator.share import records as rec
from herd.coordinator.share.group import ShareGroup, ShareGroupState, replay
from herd.coordinator.share.heartbeat import (
    Outcome,
    ShareGroupHeartbeat,
    ShareSettings,
    ShareView,
    fence,
    heartbeat,
    initialized,
    uninitialized,
)

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


class Shard:
    """The share groups of one shard, changed only by replaying the records a heartbeat returns."""

    def __init__(
        self, topics: TopicsImage, settings: ShareSettings | None = None, other: frozenset[str] = frozenset()
    ) -> None:
        self.groups: dict[str, ShareGroup] = {}
        self.topics, self.settings, self.other = topics, settings or ShareSettings(), other
        self.now = 0

    def view(self) -> ShareView:
        return ShareView(self.groups, lambda g: g in self.other, self.topics, self.settings)

    def apply(self, records: tuple[Record, ...] | list[Record]) -> None:
        for record in records:
            replay(self.groups, rec.decode(record_type(record.key), record.key, record.value), self.now)

    def beat(self, member: str, epoch: int, topics: tuple[str, ...] | None = None, group: str = "g") -> Outcome:
        out = heartbeat(
            self.view(), ShareGroupHeartbeat(group, member, epoch, None, topics, "cid", "/1.2.3.4"), self.now
        )
        self.apply(out.records)
        return out

    def initialize(self, out: Outcome, group: str = "g") -> None:
        """The share state the heartbeat asked for is initialized."""
        self.apply([initialized(self.groups[group], out.initialize, self.topics)])


def image(**topics: int) -> TopicsImage:
    ids = {"t1": T1, "t2": T2}
    return TopicsImage.of([(name, ids[name], count) for name, count in topics.items()], version=1)


def test_join_answers_epoch_one_an_empty_assignment_and_asks_for_the_share_state() -> None:
    shard = Shard(image(t1=3))
    out = shard.beat("m1", 0, ("t1",))
    assert out.response.error_code == 0
    assert (out.response.member_epoch, out.response.assignment) == (1, {})
    assert out.response.heartbeat_interval_ms == 5_000 and out.arm_session
    assert out.initialize == {T1: frozenset({0, 1, 2})}
    assert [record_type(r.key) for r in out.records] == [10, 11, 13, 12, 14, 15]
    group = shard.groups["g"]
    assert group.state is ShareGroupState.STABLE and group.group_epoch == 1
    assert group.state_metadata is not None and group.state_metadata.initializing[T1].partitions == {0, 1, 2}


def test_partitions_are_assigned_once_their_share_state_is_initialized() -> None:
    shard = Shard(image(t1=3))
    shard.initialize(shard.beat("m1", 0, ("t1",)))
    out = shard.beat("m1", 1)
    assert out.response.member_epoch == 2
    assert out.response.assignment == assignment([(T1, [0, 1, 2])])
    assert out.initialize == {}
    steady = shard.beat("m1", 2)
    assert (steady.response.member_epoch, steady.response.assignment, steady.records) == (2, None, ())


def test_members_outnumbering_partitions_share_them() -> None:
    shard = Shard(image(t1=1))
    shard.initialize(shard.beat("m1", 0, ("t1",)))
    shard.beat("m1", 1)
    out = shard.beat("m2", 0, ("t1",))
    assert out.response.assignment == assignment([(T1, [0])])
    assert shard.beat("m1", 2).response.assignment is None  # its own assignment did not change
    assert shard.groups["g"].targets == {"m1": assignment([(T1, [0])]), "m2": assignment([(T1, [0])])}


def test_initialization_is_asked_again_only_after_the_retry_interval_or_after_a_failure() -> None:
    shard = Shard(image(t1=2), ShareSettings(initialize_retry_interval_ms=30_000))
    first = shard.beat("m1", 0, ("t1",))
    shard.now = 29_999
    assert shard.beat("m1", 1).initialize == {}
    shard.now = 30_000
    assert shard.beat("m1", 1).initialize == {T1: frozenset({0, 1})}
    shard.apply([uninitialized(shard.groups["g"], first.initialize)])
    assert shard.groups["g"].state_metadata.initializing == {}
    assert shard.beat("m1", 1).initialize == {T1: frozenset({0, 1})}


def test_leave_writes_tombstones_and_bumps_the_group_epoch_and_a_rejoin_works() -> None:
    shard = Shard(image(t1=2))
    shard.initialize(shard.beat("m1", 0, ("t1",)))
    shard.beat("m1", 1)
    out = shard.beat("m1", -1)
    assert (out.response.member_id, out.response.member_epoch, out.response.assignment) == ("m1", -1, None)
    assert [record_type(r.key) for r in out.records] == [14, 13, 10, 11]
    assert [r.value is None for r in out.records] == [True, True, True, False]
    group = shard.groups["g"]
    assert group.state is ShareGroupState.EMPTY and group.group_epoch == 3 and "g" in shard.groups
    again = shard.beat("m1", 0, ("t1",))
    assert again.response.member_epoch == 4 and again.response.assignment == assignment([(T1, [0, 1])])


def test_a_session_expiry_fences_the_member_and_its_next_heartbeat_is_unknown() -> None:
    shard = Shard(image(t1=2))
    shard.beat("m1", 0, ("t1",))
    shard.apply(fence(shard.view(), "g", "m1"))
    assert fence(shard.view(), "g", "m1") == ()
    out = shard.beat("m1", 1)
    assert out.response.error_code == ErrorCode.unknown_member_id and out.records == ()


@pytest.mark.parametrize(
    ("member", "epoch", "topics", "message"),
    [
        ("", 0, ("t1",), "MemberId can't be empty."),
        ("m1", 0, None, "SubscribedTopicNames must be set in first request."),
        ("m1", 0, (), "SubscribedTopicNames must be set in first request."),
        ("m1", -2, None, "MemberEpoch is invalid."),
    ],
)
def test_invalid_requests(member, epoch, topics, message) -> None:
    out = Shard(image(t1=1)).beat(member, epoch, topics)
    assert (out.response.error_code, out.response.error_message) == (ErrorCode.invalid_request, message)


def test_epochs_greater_than_the_members_or_smaller_than_its_previous_are_fenced() -> None:
    shard = Shard(image(t1=2))
    shard.initialize(shard.beat("m1", 0, ("t1",)))
    shard.beat("m1", 1)  # epoch 2, previous 1
    assert shard.beat("m1", 3).response.error_code == ErrorCode.fenced_member_epoch
    assert shard.beat("m1", 1).response.error_code == 0  # its previous epoch: the answer to 1 was lost
    shard.beat("m1", 0, ("t1", "t2"))
    assert shard.beat("m1", 1).response.error_code == ErrorCode.fenced_member_epoch


def test_another_group_type_or_an_unknown_group_is_group_id_not_found() -> None:
    shard = Shard(image(t1=1), other={"classic"})
    out = shard.beat("m1", 0, ("t1",), group="classic")
    assert (out.response.error_code, out.response.error_message) == (
        ErrorCode.group_id_not_found,
        "Group classic is not a share group.",
    )
    assert shard.beat("m1", 3, group="nope").response.error_code == ErrorCode.group_id_not_found


def test_a_full_group_refuses_any_member_it_does_not_have() -> None:
    shard = Shard(image(t1=1), ShareSettings(max_size=1))
    shard.beat("m1", 0, ("t1",))
    assert shard.beat("m2", 0, ("t1",)).response.error_code == ErrorCode.group_max_size_reached
    assert shard.beat("m2", 5).response.error_code == ErrorCode.group_max_size_reached  # before the member lookup
    assert shard.beat("m1", 1).response.error_code == 0


def test_records_round_trip_and_a_deleted_group_is_gone() -> None:
    shard = Shard(image(t1=2))
    shard.initialize(shard.beat("m1", 0, ("t1",)))
    shard.beat("m1", 1)
    shard.beat("m2", 0, ("t1",))
    reloaded = Shard(shard.topics)  # a reload from the records that describe the group rebuilds the same group
    reloaded.apply(_all_records(shard))
    a, b = shard.groups["g"], reloaded.groups["g"]
    assert (a.group_epoch, a.assignment_epoch, a.members, a.targets) == (
        b.group_epoch,
        b.assignment_epoch,
        b.members,
        b.targets,
    )
    shard.apply([*rec.member_tombstones("g", "m1"), *rec.member_tombstones("g", "m2")])
    shard.apply(rec.group_tombstones("g", []))
    assert "g" not in shard.groups


def _all_records(shard: Shard) -> list[Record]:
    """The records that describe the shard's group as it is (what compaction would keep)."""
    group = shard.groups["g"]
    out = [rec.group_epoch_record("g", group.group_epoch, group.metadata_hash)]
    for m in group.members.values():
        out.append(
            rec.member_subscription_record(
                "g", m.member_id, m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names
            )
        )
        out.append(rec.current_assignment_record("g", m.member_id, m.member_epoch, m.previous_member_epoch, m.assigned))
    for mid, target in group.targets.items():
        out.append(rec.target_assignment_record("g", mid, target))
    out.append(rec.target_assignment_epoch_record("g", group.assignment_epoch))
    if group.state_metadata is not None:
        out.append(rec.state_metadata_record("g", group.state_metadata))
    return out


def test_the_metadata_hash_of_a_grown_topic_bumps_the_epoch_and_asks_for_the_new_partitions() -> None:
    shard = Shard(image(t1=1))
    shard.initialize(shard.beat("m1", 0, ("t1",)))
    shard.beat("m1", 1)
    shard.topics = image(t1=2)
    out = shard.beat("m1", 2)
    assert out.response.member_epoch == 3 and out.initialize == {T1: frozenset({1})}
