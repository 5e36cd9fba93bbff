"""ConsumerGroupHeartbeat in the pure core (herd.coordinator.consumer_heartbeat through GroupCoordinatorShard),
with a manual clock and timer: Kafka's rules as GroupMetadataManagerTest and ConsumerGroupHeartbeatRequestTest
(confluentinc/kafka branch 4.2) state them. Records are replayed as the runtime does, so every test also checks
that the group is what its records say."""

from __future__ import annotations

import uuid

import pytest

from herd.coordinator import CoordinatorConfig
from herd.coordinator import consumer_heartbeat as hb
from herd.coordinator.consumer.assignment import Assignment, assignment, size
from herd.coordinator.consumer.group import ConsumerGroupState
from herd.coordinator.consumer.member import MemberState
from herd.coordinator.consumer.topics import TopicsImage
from herd.coordinator.consumer_heartbeat import ConsumerGroupHeartbeat
from herd.coordinator.errors import ErrorCode
from herd.coordinator.records import Record
from herd.coordinator.requests import CommitPartition, CommitTopic, FetchGroup, FetchTopic, OffsetCommit, OffsetFetch
from herd.coordinator.responses import ConsumerGroupHeartbeatResponse

from .context import Ctx

FOO, BAR = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = TopicsImage.of([("foo", FOO, 6), ("bar", BAR, 3)], version=1)


class Consumer:
    """A consumer-protocol client of the test: it remembers its id, epoch and what it owns."""

    def __init__(self, ctx: Ctx, member_id: str, topics: tuple[str, ...] = ("foo",), **kw: object) -> None:
        self.ctx, self.member_id, self.topics, self.kw = ctx, member_id, topics, kw
        self.epoch = 0
        self.owned: Assignment = {}

    def heartbeat(self, full: bool = False, **kw: object) -> ConsumerGroupHeartbeatResponse:
        args: dict[str, object] = dict(
            group_id="g", member_id=self.member_id, member_epoch=self.epoch, owned=self.owned
        )
        if self.epoch == 0 or full:
            args.update(rebalance_timeout_ms=30_000, subscribed_topic_names=self.topics)
        args.update(self.kw)
        args.update(kw)
        response = answer(self.ctx, ConsumerGroupHeartbeat(**args))  # type: ignore[arg-type]
        if response.error_code == ErrorCode.none:
            self.epoch = response.member_epoch
            if response.assignment is not None:
                self.owned = response.assignment  # it revokes and takes at once
        return response


def answer(ctx: Ctx, req: ConsumerGroupHeartbeat) -> ConsumerGroupHeartbeatResponse:
    _, result = ctx.run("consumer_group_heartbeat", req)
    (reply,) = result.replies
    assert isinstance(reply.response, ConsumerGroupHeartbeatResponse)
    return reply.response


def new_ctx(**config: object) -> Ctx:
    ctx = Ctx(config=CoordinatorConfig(**config))  # type: ignore[arg-type]
    ctx.shard.set_topics(TOPICS)
    return ctx


def foo(*partitions: int) -> Assignment:
    return assignment([(FOO, partitions)])


@pytest.mark.parametrize(
    ("req", "code", "message"),
    [
        (dict(member_id="", member_epoch=1), ErrorCode.invalid_request, "MemberId can't be empty."),
        (dict(member_id="", member_epoch=0, api_version=1), ErrorCode.invalid_request, "MemberId can't be empty."),
        (dict(group_id=""), ErrorCode.invalid_request, "GroupId can't be empty."),
        (dict(instance_id=""), ErrorCode.invalid_request, "InstanceId can't be empty."),
        (dict(rack_id=""), ErrorCode.invalid_request, "RackId can't be empty."),
        (dict(rebalance_timeout_ms=-1), ErrorCode.invalid_request, "RebalanceTimeoutMs must be provided"),
        (dict(owned=None), ErrorCode.invalid_request, "TopicPartitions must be empty when (re-)joining."),
        (dict(owned=foo(1)), ErrorCode.invalid_request, "TopicPartitions must be empty when (re-)joining."),
        (dict(subscribed_topic_names=None), ErrorCode.invalid_request, "Either SubscribedTopicNames or"),
        (dict(member_epoch=-2), ErrorCode.invalid_request, "InstanceId can't be null."),
        (dict(member_epoch=-3), ErrorCode.invalid_request, "MemberEpoch is invalid."),
        (dict(server_assignor="sticky"), ErrorCode.unsupported_assignor, "ServerAssignor sticky is not supported."),
    ],
)
def test_invalid_requests_get_kafka_s_errors(req: dict, code: ErrorCode, message: str) -> None:
    ctx = new_ctx()
    args: dict[str, object] = dict(
        group_id="g",
        member_id="m",
        member_epoch=0,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=("foo",),
        owned={},
    )
    args.update(req)
    response = answer(ctx, ConsumerGroupHeartbeat(**args))  # type: ignore[arg-type]
    assert response.error_code == code and message in (response.error_message or "")
    assert ctx.log == []


def test_the_first_member_gets_every_partition_at_epoch_1() -> None:
    ctx = new_ctx()
    a = Consumer(ctx, "a")
    response = a.heartbeat()
    assert (response.member_id, response.member_epoch, response.heartbeat_interval_ms) == ("a", 1, 5000)
    assert response.assignment == foo(0, 1, 2, 3, 4, 5)
    group = ctx.shard.consumer_group("g")
    assert group is not None and group.state is ConsumerGroupState.STABLE
    assert (group.group_epoch, group.assignment_epoch) == (1, 1)
    assert group.members["a"].client_id == "" and group.members["a"].rebalance_timeout_ms == 30_000
    kinds = [int.from_bytes(r.key[:2], "big") for r in ctx.log]
    # subscription, group epoch, target, target epoch, current assignment; the rebalance history (it is reconciled)
    assert kinds == [5, 3, 7, 6, 8, 0x7E01]


def test_a_v0_member_without_an_id_is_given_one() -> None:
    ctx = new_ctx()
    response = Consumer(ctx, "", api_version=0).heartbeat()
    assert response.member_id == "uuid0" and response.member_epoch == 1


def test_a_second_member_gets_partitions_only_once_the_first_revoked_them() -> None:
    ctx = new_ctx()
    a, b = Consumer(ctx, "a"), Consumer(ctx, "b")
    a.heartbeat()
    joined = b.heartbeat()
    assert joined.member_epoch == 2 and joined.assignment == {}  # its target is held by a
    group = ctx.shard.consumer_group("g")
    assert group is not None and group.state is ConsumerGroupState.RECONCILING
    assert size(group.target("a")) == 3 and size(group.target("b")) == 3
    told = a.heartbeat()  # a must revoke: it stays at epoch 1 with its kept half
    assert told.member_epoch == 1 and told.assignment == group.target("a")
    assert group.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    assert b.heartbeat().assignment is None  # still unreleased: nothing new to say
    moved = a.heartbeat()  # it no longer owns them: on to epoch 2
    assert moved.member_epoch == 2 and moved.assignment is None
    got = b.heartbeat()
    assert got.assignment == group.target("b") and group.members["b"].state is MemberState.STABLE
    assert group.state is ConsumerGroupState.STABLE and a.owned.keys() == b.owned.keys() == {FOO}
    assert not a.owned[FOO] & b.owned[FOO]


def test_epochs_ahead_or_behind_are_fenced_except_the_previous_one() -> None:
    ctx = new_ctx()
    a = Consumer(ctx, "a")
    a.heartbeat()
    assert a.heartbeat(member_epoch=2).error_code == ErrorCode.fenced_member_epoch
    b = Consumer(ctx, "b")
    b.heartbeat()
    a.heartbeat()
    a.heartbeat()  # a at epoch 2 (previous 1)
    member = ctx.shard.consumer_group("g").members["a"]
    assert (member.member_epoch, member.previous_member_epoch) == (2, 1)
    # the previous epoch (the answer that moved it on may have been lost), owning no more than its assignment
    assert a.heartbeat(member_epoch=1, owned=a.owned).error_code == ErrorCode.none
    assert a.heartbeat(member_epoch=1, owned=foo(0, 1, 2, 3, 4, 5)).error_code == ErrorCode.fenced_member_epoch


def test_unknown_members_and_groups() -> None:
    ctx = new_ctx()
    unknown = ConsumerGroupHeartbeat(group_id="g", member_id="x", member_epoch=1)
    assert answer(ctx, unknown).error_code == ErrorCode.group_id_not_found
    Consumer(ctx, "a").heartbeat()
    assert answer(ctx, unknown).error_code == ErrorCode.unknown_member_id


def test_a_member_that_leaves_is_removed_and_the_others_take_its_partitions() -> None:
    ctx = new_ctx()
    a, b = Consumer(ctx, "a"), Consumer(ctx, "b")
    a.heartbeat(), b.heartbeat(), a.heartbeat(), a.heartbeat(), b.heartbeat()
    left = b.heartbeat(member_epoch=-1)
    assert (left.error_code, left.member_id, left.member_epoch) == (ErrorCode.none, "b", -1)
    group = ctx.shard.consumer_group("g")
    assert set(group.members) == {"a"} and group.group_epoch == 3
    assert a.heartbeat().assignment == foo(0, 1, 2, 3, 4, 5) and a.epoch == 3


def test_a_static_member_leaves_for_a_while_and_takes_its_partitions_back_without_a_rebalance() -> None:
    ctx = new_ctx()
    a, b = Consumer(ctx, "a", instance_id="i-a"), Consumer(ctx, "b")
    a.heartbeat(), b.heartbeat(), a.heartbeat(), a.heartbeat(), b.heartbeat()
    group = ctx.shard.consumer_group("g")
    epoch, kept = group.group_epoch, dict(group.members["a"].assigned)
    assert a.heartbeat(member_epoch=-2).member_epoch == -2
    assert group.members["a"].member_epoch == -2 and group.members["a"].assigned == kept
    # while it is away, another process with the same instance id is refused until... it is not: it left
    again = Consumer(ctx, "a2", instance_id="i-a")
    back = again.heartbeat()
    assert back.error_code == ErrorCode.none and back.assignment == kept
    assert group.group_epoch == epoch and set(group.members) == {"a2", "b"}  # no rebalance of anyone
    assert b.heartbeat().assignment is None and group.state is ConsumerGroupState.STABLE


def test_static_member_errors() -> None:
    ctx = new_ctx()
    Consumer(ctx, "a", instance_id="i").heartbeat()
    assert Consumer(ctx, "b", instance_id="i").heartbeat().error_code == ErrorCode.unreleased_instance_id
    fenced = answer(ctx, ConsumerGroupHeartbeat(group_id="g", member_id="b", member_epoch=1, instance_id="i"))
    assert fenced.error_code == ErrorCode.fenced_instance_id
    unknown = answer(ctx, ConsumerGroupHeartbeat(group_id="g", member_id="a", member_epoch=1, instance_id="j"))
    assert unknown.error_code == ErrorCode.unknown_member_id


def test_a_silent_member_is_fenced_after_the_session_timeout() -> None:
    ctx = new_ctx()
    a, b = Consumer(ctx, "a"), Consumer(ctx, "b")
    a.heartbeat(), b.heartbeat()
    ctx.sleep(44_000)
    a.heartbeat()
    ctx.sleep(2_000)  # b's 45 s are over; a heartbeat 2 s ago
    group = ctx.shard.consumer_group("g")
    assert set(group.members) == {"a"} and group.state is ConsumerGroupState.ASSIGNING
    ctx.sleep(45_000)
    assert group.members == {} and group.state is ConsumerGroupState.EMPTY


def test_a_member_that_does_not_revoke_in_time_is_fenced() -> None:
    ctx = new_ctx()
    a, b = Consumer(ctx, "a", rebalance_timeout_ms=1_000), Consumer(ctx, "b")
    a.heartbeat(), b.heartbeat()
    told = a.heartbeat(full=True, rebalance_timeout_ms=1_000, owned=a.owned)
    assert (
        told.member_epoch == 1 and ctx.shard.consumer_group("g").members["a"].state is MemberState.UNREVOKED_PARTITIONS
    )
    a.owned = foo(0, 1, 2, 3, 4, 5)  # it keeps everything: a bad client
    ctx.sleep(1_001)
    group = ctx.shard.consumer_group("g")
    assert set(group.members) == {"b"}
    assert b.heartbeat().assignment == foo(0, 1, 2, 3, 4, 5)


def test_the_group_size_limit() -> None:
    ctx = new_ctx(group_consumer_max_size=1)
    Consumer(ctx, "a").heartbeat()
    full = Consumer(ctx, "b").heartbeat()
    assert full.error_code == ErrorCode.group_max_size_reached and "maximum capacity of 1" in full.error_message


def test_the_assignor_most_members_name_is_used() -> None:
    ctx = new_ctx()
    a, b = Consumer(ctx, "a", server_assignor="range"), Consumer(ctx, "b", server_assignor="range")
    a.heartbeat(), b.heartbeat()
    group = ctx.shard.consumer_group("g")
    assert group.target("a") == foo(0, 1, 2) and group.target("b") == foo(3, 4, 5)  # ranges


def test_partitions_added_to_a_subscribed_topic_bump_the_epoch_on_the_next_heartbeat() -> None:
    ctx = new_ctx()
    a = Consumer(ctx, "a")
    a.heartbeat()
    a.heartbeat()
    assert ctx.shard.consumer_group("g").group_epoch == 1  # nothing changed: no bump
    ctx.shard.set_topics(TopicsImage.of([("foo", FOO, 8), ("bar", BAR, 3)], version=2))
    assert a.heartbeat().assignment == foo(*range(8)) and a.epoch == 2


def test_a_subscription_change_bumps_the_epoch_and_drops_the_topic_left_at_once() -> None:
    ctx = new_ctx()
    a = Consumer(ctx, "a", topics=("foo", "bar"))
    a.heartbeat()
    assert size(a.owned) == 9
    changed = a.heartbeat(subscribed_topic_names=("bar",))
    assert changed.member_epoch == 1 and changed.assignment == assignment([(BAR, [0, 1, 2])])  # foo to revoke
    assert a.heartbeat().member_epoch == 2 and ctx.shard.consumer_group("g").state is ConsumerGroupState.STABLE


def test_an_empty_classic_group_gives_way_and_one_whose_protocol_cannot_be_read_is_not_upgraded() -> None:
    ctx = new_ctx(group_initial_rebalance_delay_ms=0)
    ctx.join("empty")  # MEMBER_ID_REQUIRED: a pending member only, the group has none
    _, joined = ctx.join("busy")
    member_id = joined.replies[0].response.member_id
    ctx.join("busy", member_id=member_id)
    assert ctx.shard.group("empty").members == {} and member_id in ctx.shard.group("busy").members

    assert Consumer(ctx, "a").heartbeat(group_id="empty").error_code == ErrorCode.none
    assert ctx.shard.group("empty") is None and ctx.shard.consumer_group("empty") is not None
    refused = Consumer(ctx, "a").heartbeat(group_id="busy")
    assert (refused.error_code, refused.error_message) == (  # its members' metadata is no consumer protocol
        ErrorCode.group_id_not_found,
        "Cannot upgrade classic group busy to consumer group because the embedded consumer protocol is malformed.",
    )
    assert ctx.shard.group("busy") is not None and ctx.shard.consumer_group("busy") is None


def test_a_reloaded_coordinator_has_the_same_group_and_bumps_no_epoch() -> None:
    ctx = new_ctx()
    a, b = Consumer(ctx, "a"), Consumer(ctx, "b", instance_id="i")
    a.heartbeat(), b.heartbeat(), a.heartbeat(), a.heartbeat(), b.heartbeat()
    before = ctx.shard.consumer_group("g")
    moved = new_ctx()  # another coordinator replays the partition
    for record in ctx.log:
        moved.shard.replay(Record(record.key, record.value))
    moved.apply(moved.shard.on_loaded())
    after = moved.shard.consumer_group("g")
    assert after is not None and after.members == before.members and after.targets == before.targets
    assert (after.group_epoch, after.assignment_epoch, after.state) == (2, 2, ConsumerGroupState.STABLE)
    assert after.static_members == {"i": "b"} and after.metadata_hash == before.metadata_hash
    for consumer in (a, b):
        consumer.ctx = moved
        response = consumer.heartbeat()
        assert response.error_code == ErrorCode.none and response.member_epoch == 2 and response.assignment is None
    assert after.group_epoch == 2 and len(moved.log) == 0  # nothing written: no epoch bumped
    assert {k.split(":")[0] for k in moved.timer.keys()} >= {"consumer-session-timeout"}


def commit(ctx: Ctx, member_id: str, epoch: int, api_version: int = 9) -> int:
    req = OffsetCommit(
        group_id="g",
        generation_id_or_member_epoch=epoch,
        member_id=member_id,
        topics=(CommitTopic("foo", (CommitPartition(0, 42),)),),
        api_version=api_version,
    )
    _, result = ctx.run("offset_commit", req)
    return result.replies[0].response.topics[0].partitions[0].error_code


def fetch(ctx: Ctx, member_id: str | None, epoch: int) -> object:
    req = OffsetFetch(groups=(FetchGroup("g", (FetchTopic("foo", (0,)),), member_id, epoch),))
    _, result = ctx.run("offset_fetch", req)
    return result.replies[0].response.groups[0]


def test_offsets_of_a_consumer_group_are_checked_against_the_member_s_epoch() -> None:
    """ConsumerGroup.validateOffsetCommit and validateOffsetFetch."""
    ctx = new_ctx()
    a = Consumer(ctx, "a")
    a.heartbeat()
    assert commit(ctx, "a", 1) == ErrorCode.none
    assert ctx.shard.group("g") is None  # the commit's replay makes no simple classic group beside it
    assert commit(ctx, "a", 0) == ErrorCode.stale_member_epoch
    assert commit(ctx, "b", 1) == ErrorCode.unknown_member_id
    assert commit(ctx, "a", 1, api_version=8) == ErrorCode.unsupported_version
    assert commit(ctx, "", -1) == ErrorCode.unknown_member_id  # an admin's commit while the group has members
    got = fetch(ctx, "a", 1)
    assert got.error_code == ErrorCode.none and got.topics[0].partitions[0].committed_offset == 42
    assert fetch(ctx, "a", 2).error_code == ErrorCode.stale_member_epoch
    assert fetch(ctx, "x", 1).error_code == ErrorCode.unknown_member_id
    assert fetch(ctx, None, -1).error_code == ErrorCode.none  # an admin's fetch
    a.heartbeat(member_epoch=-1)
    assert commit(ctx, "", -1) == ErrorCode.none  # an admin's commit to the empty group


REGEX_TOPICS = TopicsImage.of([("foo", FOO, 6), ("bar", BAR, 3), ("food", uuid.UUID(int=3), 2)], version=1)


def test_a_regex_subscription_is_resolved_by_a_refresh_and_assigned_on_the_next_heartbeat() -> None:
    ctx = new_ctx()
    ctx.shard.set_topics(REGEX_TOPICS)
    a = Consumer(ctx, "a", topics=(), subscribed_topic_regex="foo.*")
    first = a.heartbeat(subscribed_topic_names=None)
    assert first.error_code == ErrorCode.none and first.assignment == {}  # not resolved yet
    ctx.sleep(0)  # the refresh runs (Kafka's executor)
    group = ctx.shard.consumer_group("g")
    assert group.resolved["foo.*"].topics == {"foo", "food"}  # full match: not "bar"
    got = a.heartbeat()
    assert size(got.assignment) == 8 and got.assignment.keys() == {FOO, uuid.UUID(int=3)}
    assert group.member_topic_names(group.members["a"]) == {"foo", "food"}


def test_an_invalid_regex_is_refused_with_kafka_s_error() -> None:
    ctx = new_ctx()
    bad = Consumer(ctx, "a", topics=(), subscribed_topic_regex="foo(").heartbeat(subscribed_topic_names=None)
    assert bad.error_code == ErrorCode.invalid_regular_expression
    assert bad.error_message.startswith("SubscribedTopicRegex `foo(` is not a valid regular expression: ")
    assert ctx.log == []


def test_a_topic_created_later_joins_the_regex_subscription() -> None:
    ctx = new_ctx()
    a = Consumer(ctx, "a", topics=(), subscribed_topic_regex="foo.*")
    a.heartbeat(subscribed_topic_names=None)
    ctx.sleep(0)
    assert a.heartbeat().assignment.keys() == {FOO}
    ctx.shard.set_topics(REGEX_TOPICS.__class__(REGEX_TOPICS.by_name, version=2))  # "food" is created
    a.heartbeat()
    ctx.sleep(0)
    assert ctx.shard.consumer_group("g").resolved["foo.*"].topics == {"foo"}  # within 10 s of the last refresh
    ctx.sleep(10_001)
    a.heartbeat()
    ctx.sleep(0)
    assert ctx.shard.consumer_group("g").resolved["foo.*"].topics == {"foo", "food"}
    assert a.heartbeat().assignment.keys() == {FOO, uuid.UUID(int=3)}


def test_the_last_member_of_a_regex_takes_its_resolution_with_it() -> None:
    ctx = new_ctx()
    a = Consumer(ctx, "a", topics=(), subscribed_topic_regex="foo.*")
    b = Consumer(ctx, "b")
    a.heartbeat(subscribed_topic_names=None), b.heartbeat()
    ctx.sleep(0)
    assert "foo.*" in ctx.shard.consumer_group("g").resolved
    a.heartbeat(member_epoch=-1)
    assert ctx.shard.consumer_group("g").resolved == {}


def test_a_regex_matches_only_the_topics_the_member_may_describe() -> None:
    ctx = new_ctx()
    ctx.shard.set_topics(REGEX_TOPICS)
    a = Consumer(ctx, "a", topics=(), subscribed_topic_regex="foo.*", describable=lambda name: name != "food")
    a.heartbeat(subscribed_topic_names=None)
    ctx.sleep(0)
    assert ctx.shard.consumer_group("g").resolved["foo.*"].topics == {"foo"}


def test_retention_expires_offsets_of_topics_no_member_subscribes_to_and_deletes_the_empty_group() -> None:
    """ConsumerGroup.offsetExpirationCondition (commit time) and isSubscribedToTopic; then maybeDeleteGroup."""
    ctx = new_ctx(offsets_retention_minutes=1, offsets_retention_check_interval_ms=1_000)
    ctx.apply(ctx.shard.on_loaded())  # starts the retention timer
    a = Consumer(ctx, "a")
    a.heartbeat()
    for topic in ("foo", "bar"):
        req = OffsetCommit(
            group_id="g",
            generation_id_or_member_epoch=1,
            member_id="a",
            topics=(CommitTopic(topic, (CommitPartition(0, 7),)),),
        )
        ctx.run("offset_commit", req)
    ctx.sleep(40_000)
    a.heartbeat()
    ctx.sleep(21_000)  # a minute after the commits: bar's offset expires, foo is subscribed
    assert set(ctx.shard.committed_offsets("g")) == {("foo", 0)}
    a.heartbeat(member_epoch=-1)
    assert ctx.shard.consumer_group("g").state is ConsumerGroupState.EMPTY
    ctx.sleep(2_000)
    assert ctx.shard.committed_offsets("g") == {} and ctx.shard.consumer_group("g") is None


def test_the_keep_alive_fast_path_answers_as_the_full_path_and_only_when_it_may() -> None:
    ctx = new_ctx()
    a, b = Consumer(ctx, "a"), Consumer(ctx, "b")
    a.heartbeat(), b.heartbeat()

    def fast(member_id: str = "a", epoch: int | None = None, client_id: str = "") -> tuple[str, int, int] | None:
        return ctx.shard.consumer_group_keep_alive("g", member_id, a.epoch if epoch is None else epoch, client_id, "")

    assert fast() is None  # a is not reconciled to the new target: the full path runs
    a.heartbeat(), a.heartbeat(), b.heartbeat()
    full = answer(ctx, ConsumerGroupHeartbeat(group_id="g", member_id="a", member_epoch=a.epoch))
    assert fast() == (full.member_id, full.member_epoch, full.heartbeat_interval_ms) == ("a", 2, 5000)
    assert full.assignment is None and full.error_code == ErrorCode.none
    for refused in (fast(epoch=1), fast(member_id="x"), fast(client_id="other"), fast(epoch=0)):
        assert refused is None
    # its session moves: keep-alives every 20 s keep a alive past the 45 s after which silent b is fenced
    for _ in range(2):
        ctx.sleep(20_000)
        assert fast() is not None
    ctx.sleep(10_000)
    assert set(ctx.shard.consumer_group("g").members) == {"a"}
    assert fast() is None  # b's departure bumped the epoch: a must heartbeat in full again
    ctx.sleep(30_000)
    assert set(ctx.shard.consumer_group("g").members) == {"a"}  # at 80 s: its last keep-alive was at 40 s
    ctx.sleep(6_000)
    assert ctx.shard.consumer_group("g").members == {}  # at 86 s, 46 s after it: fenced


def test_a_classic_join_is_refused_by_a_consumer_group_with_members_and_replaces_an_empty_one() -> None:
    """Kafka's classicGroupJoin: a non-empty consumer group takes classic joins through the online migration
    (test_consumer_migration.py) unless group.consumer.migration.policy is disabled (INCONSISTENT_GROUP_PROTOCOL,
    KAFKA-20640); an empty one is deleted and the classic group created in its place
    (maybeDeleteEmptyConsumerGroup)."""
    ctx = new_ctx(group_initial_rebalance_delay_ms=0, group_consumer_migration_policy="disabled")
    a = Consumer(ctx, "a")
    a.heartbeat()
    _, refused = ctx.join("g")
    assert refused.replies[0].response.error_code == ErrorCode.inconsistent_group_protocol
    assert ctx.shard.group("g") is None
    a.heartbeat(member_epoch=-1)
    _, joined = ctx.join("g")
    assert joined.replies[0].response.error_code == ErrorCode.member_id_required
    assert ctx.shard.consumer_group("g") is None and ctx.shard.group("g") is not None


@pytest.mark.parametrize(
    ("error", "answered"),
    [
        (ErrorCode.message_too_large, ErrorCode.unknown_server_error),
        (ErrorCode.kafka_storage_error, ErrorCode.not_coordinator),
    ],
)
def test_a_heartbeat_whose_records_are_not_written_is_answered_with_the_error(error, answered) -> None:
    """A join's records refused by the log: the member gets the mapped error, not the epoch and assignment those
    records would have made durable (found by the simulator, seed 16: the answer went out as if written, and a
    reload brought the group epoch back below the member's)."""
    ctx = new_ctx()
    req = ConsumerGroupHeartbeat(
        group_id="g",
        member_id="a",
        member_epoch=0,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=("foo",),
        owned={},
    )
    result = ctx.shard.consumer_group_heartbeat(req, "h")
    assert result.records
    (reply,) = ctx.shard.on_append_failed(result, error).replies
    assert reply.response == ConsumerGroupHeartbeatResponse(error_code=answered)


def test_a_leave_whose_records_are_refused_leaves_the_member_its_session() -> None:
    """`fence` cancels the member's timers when it runs; if the leave's records are refused, its rollback arms the
    session again, so the member still goes when its session ends (simulator seeds 138, 214)."""
    ctx = new_ctx()
    a = Consumer(ctx, "a")
    a.heartbeat()
    leave = ConsumerGroupHeartbeat(group_id="g", member_id="a", member_epoch=-1)
    ctx.shard.on_append_failed(ctx.shard.consumer_group_heartbeat(leave, "h"), ErrorCode.message_too_large)
    assert ctx.timer.deadline(hb.session_key("g", "a")) == ctx.clock.now_ms() + 45_000
    ctx.sleep(45_000)
    assert ctx.shard.consumer_group("g").state is ConsumerGroupState.EMPTY


def test_a_session_expiry_whose_records_are_refused_is_tried_again_500_ms_later() -> None:
    """As Kafka's coordinator timer retries a failed operation (simulator seed 346645848)."""
    ctx = new_ctx()
    a = Consumer(ctx, "a")
    a.heartbeat()
    (expired,) = ctx.timer.advance(45_000)
    assert expired.records
    ctx.shard.on_append_failed(expired, ErrorCode.message_too_large)
    assert ctx.timer.deadline(hb.session_key("g", "a")) == ctx.clock.now_ms() + 500
    ctx.sleep(500)
    assert ctx.shard.consumer_group("g").state is ConsumerGroupState.EMPTY
