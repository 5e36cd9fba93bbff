"""Share groups (KIP-932) through GroupCoordinatorShard, with a manual clock and timer (herd.coordinator.
share_groups): the share state initialized by a timer after the heartbeat that asked for it, sessions, a reload,
ShareGroupDescribe, and what the other group APIs answer for a share group (Kafka 4.2's GroupCoordinatorService,
GroupMetadataManager and ShareGroup; docs/kip-932/share-group-rules.md). Records are replayed as the runtime does."""

from __future__ import annotations

import uuid

from herd.coordinator import CoordinatorConfig
from herd.coordinator.consumer.topics import TopicsImage
from herd.coordinator.consumer_heartbeat import ConsumerGroupHeartbeat
from herd.coordinator.errors import ErrorCode
from herd.coordinator.records import Record, record_type
from herd.coordinator.requests import (
    CommitPartition,
    CommitTopic,
    DeleteGroups,
    DescribeGroups,
    FetchGroup,
    FetchTopic,
    ListGroups,
    OffsetCommit,
    OffsetFetch,
)
from herd.coordinator.responses import ShareGroupDescribeResponse
from herd.coordinator.share.group import ShareGroupState
from herd.coordinator.share.heartbeat import ShareGroupHeartbeat, ShareHeartbeatResponse
from herd.coordinator.share_groups import ShareGroupDescribe

from .context import PROTOCOLS, Ctx

FOO, BAR = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = TopicsImage.of([("foo", FOO, 3), ("bar", BAR, 2)], version=1)


def new_ctx(**config: object) -> Ctx:
    ctx = Ctx(config=CoordinatorConfig(**config))  # type: ignore[arg-type]
    ctx.shard.set_topics(TOPICS)
    return ctx


def beat(
    ctx: Ctx, member: str, epoch: int, topics: tuple[str, ...] | None = None, group: str = "g"
) -> ShareHeartbeatResponse:
    _, result = ctx.run("share_group_heartbeat", ShareGroupHeartbeat(group, member, epoch, None, topics, "c", "/h"))
    (reply,) = result.replies
    assert isinstance(reply.response, ShareHeartbeatResponse)
    return reply.response


def types(records: list[Record]) -> list[int]:
    return [record_type(r.key) for r in records]


def joined(ctx: Ctx, *members: str) -> dict[str, int]:
    """`members` join the group subscribed to foo, its share state is initialized, and each heartbeats once more
    to take its partitions: their epochs."""
    epochs = {m: beat(ctx, m, 0, ("foo",)).member_epoch for m in members}
    ctx.sleep(0)
    for m in members:
        epochs[m] = beat(ctx, m, epochs[m]).member_epoch
    for m in members:  # the first ones see the others' share of the partitions
        epochs[m] = beat(ctx, m, epochs[m]).member_epoch
    return epochs


def test_the_share_state_is_initialized_by_a_timer_then_the_next_heartbeat_assigns_the_partitions() -> None:
    ctx = new_ctx()
    first = beat(ctx, "m1", 0, ("foo",))
    assert (first.error_code, first.member_epoch, first.assignment) == (ErrorCode.none, 1, {})
    assert types(ctx.log) == [10, 11, 13, 12, 14, 15]
    metadata = ctx.shard.share_group("g").state_metadata
    assert metadata is not None and metadata.initializing[FOO].partitions == {0, 1, 2} and not metadata.initialized
    assert ctx.timer.deadline("share-initialize:g") == ctx.clock.now_ms()
    ctx.log.clear()
    ctx.sleep(0)  # Kafka's TimerTask(0): persisterInitialize, then record 15
    assert types(ctx.log) == [15]
    metadata = ctx.shard.share_group("g").state_metadata
    assert metadata is not None and metadata.initialized[FOO].partitions == {0, 1, 2} and not metadata.initializing
    second = beat(ctx, "m1", 1)
    assert second.member_epoch == 2 and second.assignment == {FOO: frozenset({0, 1, 2})}
    assert beat(ctx, "m1", 2).assignment is None  # a steady heartbeat carries no assignment


def test_heartbeats_of_several_members_are_initialized_together_and_share_the_partitions() -> None:
    ctx = new_ctx()
    epochs = {m: beat(ctx, m, 0, ("foo",)).member_epoch for m in ("a", "b", "c")}
    ctx.log.clear()
    ctx.sleep(0)
    assert types(ctx.log) == [15]  # one initialization for the three heartbeats' asks
    for _ in range(2):
        for m in epochs:
            epochs[m] = beat(ctx, m, epochs[m]).member_epoch
    group = ctx.shard.share_group("g")
    assert group is not None and group.state is ShareGroupState.STABLE and len(group.members) == 3
    assert sorted(len(group.members[m].assigned.get(FOO, ())) for m in group.members) == [1, 1, 1]
    assert set(epochs.values()) == {group.group_epoch}


def test_a_silent_member_is_fenced_after_its_session_and_may_rejoin() -> None:
    ctx = new_ctx(group_share_session_timeout_ms=45_000)
    epochs = joined(ctx, "a", "b")
    ctx.sleep(40_000)
    epochs["a"] = beat(ctx, "a", epochs["a"]).member_epoch  # a is heard of, b is not
    ctx.log.clear()
    ctx.sleep(5_001)
    assert types(ctx.log) == [14, 13, 10, 11]  # b's records go as on a leave, and the epoch moves
    group = ctx.shard.share_group("g")
    assert group is not None and set(group.members) == {"a"}
    assert beat(ctx, "b", epochs["b"]).error_code == ErrorCode.unknown_member_id
    again = beat(ctx, "b", 0, ("foo",))
    assert again.error_code == ErrorCode.none and again.member_epoch > epochs["b"]
    ctx.sleep(39_000)  # 84,001 ms: a's session moved to 85,000 when it heartbeat at 40,000
    assert set(group.members) == {"a", "b"}
    ctx.sleep(1_000)
    assert set(group.members) == {"b"}


def test_a_leave_cancels_the_session_and_a_refused_leave_starts_it_again() -> None:
    ctx = new_ctx()
    epochs = joined(ctx, "a")
    handle = "leave"
    result = ctx.shard.share_group_heartbeat(ShareGroupHeartbeat("g", "a", -1, None, None, "c", "/h"), handle)
    assert result.replies[0].response.member_epoch == -1 and "share-session:g:a" not in ctx.timer.keys()
    failed = ctx.shard.on_append_failed(result, ErrorCode.not_enough_replicas)  # its records were not written
    assert failed.replies[0].response.error_code != ErrorCode.none
    assert "share-session:g:a" in ctx.timer.keys() and "a" in ctx.shard.share_group("g").members
    left = beat(ctx, "a", -1)
    assert left.member_epoch == -1 and ctx.shard.share_group("g").state is ShareGroupState.EMPTY
    assert beat(ctx, "a", epochs["a"]).error_code == ErrorCode.unknown_member_id


def test_a_heartbeat_whose_records_are_not_written_initializes_nothing() -> None:
    ctx = new_ctx()
    result = ctx.shard.share_group_heartbeat(ShareGroupHeartbeat("g", "a", 0, None, ("foo",), "c", "/h"), "h")
    ctx.shard.on_append_failed(result, ErrorCode.not_enough_replicas)
    assert "share-initialize:g" not in ctx.timer.keys() and ctx.sleep(0) == []
    assert ctx.shard.share_group("g") is None


def test_a_reloaded_coordinator_has_the_same_group_and_sessions() -> None:
    ctx = new_ctx()
    epochs = joined(ctx, "a", "b")
    before = ctx.shard.share_group("g")
    moved = new_ctx()
    for record in ctx.log:
        moved.shard.replay(Record(record.key, record.value))
    moved.apply(moved.shard.on_loaded())
    after = moved.shard.share_group("g")
    assert after is not None and before is not None
    assert (after.members, after.targets, after.group_epoch, after.assignment_epoch) == (
        before.members,
        before.targets,
        before.group_epoch,
        before.assignment_epoch,
    )
    assert {"share-session:g:a", "share-session:g:b"} <= moved.timer.keys()
    for member in ("a", "b"):
        response = beat(moved, member, epochs[member])
        assert response.error_code == ErrorCode.none and response.member_epoch == epochs[member]
    assert moved.log == []  # nothing to write: the reloaded group is the same
    moved.apply(moved.shard.on_unloaded())
    assert moved.shard.share_group("g") is None and not {k for k in moved.timer.keys() if k.startswith("share")}


def test_the_group_size_limit() -> None:
    ctx = new_ctx(group_share_max_size=2)
    joined(ctx, "a", "b")
    full = beat(ctx, "c", 0, ("foo",))
    assert full.error_code == ErrorCode.group_max_size_reached
    assert beat(ctx, "a", ctx.shard.share_group("g").members["a"].member_epoch).error_code == ErrorCode.none


def test_share_group_describe() -> None:
    ctx = new_ctx()
    joined(ctx, "a")
    ctx.join(group="classic")
    _, result = ctx.run("share_group_describe", ShareGroupDescribe(group_ids=("g", "nope", "classic")))
    response = result.replies[0].response
    assert isinstance(response, ShareGroupDescribeResponse)
    g, nope, classic = response.groups
    assert (g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == ("Stable", 2, 2, "simple")
    (member,) = g.members
    assert (member.member_id, member.member_epoch, member.subscribed_topic_names) == ("a", 2, ("foo",))
    assert [(t.topic_name, t.partitions) for t in member.assignment] == [("foo", (0, 1, 2))]
    assert (nope.error_code, nope.error_message) == (ErrorCode.group_id_not_found, "Group nope not found.")
    assert (classic.error_code, classic.error_message) == (
        ErrorCode.group_id_not_found,
        "Group classic is not a share group.",
    )


def test_the_other_group_apis_answer_a_share_group_as_kafka_does() -> None:
    ctx = new_ctx()
    joined(ctx, "a")
    _, listed = ctx.run("list_groups", ListGroups())
    assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.replies[0].response.groups] == [
        ("g", "share", "Stable", "share")
    ]
    _, only_classic = ctx.run("list_groups", ListGroups(types_filter=("classic",)))
    assert only_classic.replies[0].response.groups == ()
    _, described = ctx.run("describe_groups", DescribeGroups(groups=("g",), api_version=6))
    (group,) = described.replies[0].response.groups
    assert (group.group_state, group.not_classic) == ("Dead", True)
    _, joined_classic = ctx.join(group="g")
    assert joined_classic.replies[0].response.error_code == ErrorCode.inconsistent_group_protocol
    _, consumer = ctx.run(
        "consumer_group_heartbeat",
        ConsumerGroupHeartbeat(
            group_id="g",
            member_id="x",
            member_epoch=0,
            rebalance_timeout_ms=1000,
            subscribed_topic_names=("foo",),
            owned={},
        ),
    )
    assert (consumer.replies[0].response.error_code, consumer.replies[0].response.error_message) == (
        ErrorCode.group_id_not_found,
        "Group g is not a consumer group.",
    )
    for epoch in (-1, 1):  # an admin's commit and a member's
        commit = OffsetCommit(
            group_id="g",
            generation_id_or_member_epoch=epoch,
            member_id="a" if epoch > 0 else "",
            topics=(CommitTopic("foo", (CommitPartition(0, 5),)),),
            api_version=9,
        )
        _, committed = ctx.run("offset_commit", commit)
        assert committed.replies[0].response.topics[0].partitions[0].error_code == ErrorCode.group_id_not_found
    _, fetched = ctx.run("offset_fetch", OffsetFetch(groups=(FetchGroup("g", (FetchTopic("foo", (0,)),)),)))
    (fetched_group,) = fetched.replies[0].response.groups
    assert fetched_group.error_code == ErrorCode.none
    assert fetched_group.topics[0].partitions[0].committed_offset == -1
    assert ctx.shard.group("g") is None  # nothing made a classic group of the share group's id
    # a classic group's id is not a share group's
    ctx.join(group="classic", protocols=PROTOCOLS)
    refused = beat(ctx, "m", 0, ("foo",), group="classic")
    assert (refused.error_code, refused.error_message) == (
        ErrorCode.group_id_not_found,
        "Group classic is not a share group.",
    )


def test_delete_groups_deletes_an_empty_share_group_only() -> None:
    ctx = new_ctx()
    epochs = joined(ctx, "a")
    _, busy = ctx.run("delete_groups", DeleteGroups(groups_names=("g",)))
    assert busy.replies[0].response.results[0].error_code == ErrorCode.non_empty_group
    beat(ctx, "a", -1)
    ctx.log.clear()
    _, deleted = ctx.run("delete_groups", DeleteGroups(groups_names=("g",)))
    assert deleted.replies[0].response.results[0].error_code == ErrorCode.none
    assert types(ctx.log) == [12, 15, 11]  # no member left: the target epoch, the share-state metadata, the group
    assert ctx.shard.share_group("g") is None
    again = beat(ctx, "a", 0, ("foo",))  # a new group of the same id starts afresh
    assert again.error_code == ErrorCode.none and again.member_epoch == 1 and epochs["a"] > 1
