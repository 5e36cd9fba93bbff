"""OffsetDelete in the core: which groups may lose offsets, per-partition answers and the exact tombstones
(apache/kafka OffsetMetadataManagerTest#testDeleteOffsets* and ClassicGroup#validateOffsetDelete)."""

from __future__ import annotations

from herd.coordinator import ErrorCode, GroupState, Record
from herd.coordinator.records import offset_tombstone
from herd.coordinator.requests import CommitPartition, DeleteTopic, LeaveGroup, OffsetDelete

from .context import Ctx, reply
from .test_offsets_fencing import commit_req
from .test_offsets_retention import consumer_protocols


def commit(c: Ctx, topic: str, *partitions: int, group: str = "g", **kw) -> None:
    c.run(
        "offset_commit",
        commit_req(group=group, topic=topic, partitions=tuple(CommitPartition(p, 7) for p in partitions), **kw),
    )


def delete(c: Ctx, *topics: tuple[str, tuple[int, ...]], group: str = "g") -> tuple[object, tuple[Record, ...]]:
    handle, result = c.run(
        "offset_delete", OffsetDelete(group_id=group, topics=tuple(DeleteTopic(n, p) for n, p in topics))
    )
    return reply(result, handle), result.records


def answers(response) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def test_an_unknown_group_and_an_empty_group_id() -> None:
    c = Ctx()
    response, records = delete(c, ("t", (0,)), group="nobody")
    assert (response.error_code, response.topics, records) == (ErrorCode.group_id_not_found, (), ())
    response, _ = delete(c, ("t", (0,)), group="")
    assert response.error_code == ErrorCode.invalid_group_id


def test_an_empty_group_loses_the_named_offsets_and_stays() -> None:
    c = Ctx()
    commit(c, "t", 0, 1)
    commit(c, "u", 0)
    response, records = delete(c, ("t", (0, 5)), ("v", (0,)))
    assert response.error_code == 0
    assert answers(response) == {("t", 0): 0, ("t", 5): 0, ("v", 0): 0}  # every named partition is answered
    assert records == (offset_tombstone("g", "t", 0),)  # but only committed ones get a tombstone
    assert c.shard.committed_offsets("g").keys() == {("t", 1), ("u", 0)}
    delete(c, ("t", (1,)), ("u", (0,)))
    assert c.shard.committed_offsets("g") == {} and c.shard.group("g").state is GroupState.EMPTY


def test_a_live_consumer_group_keeps_the_offsets_of_topics_it_subscribes_to() -> None:
    c = Ctx()
    member, _ = c.stable_group(2, protocols=consumer_protocols("t"))
    commit(c, "t", 0, gen=1, member=member)
    commit(c, "old", 0, 1, gen=1, member=member)
    response, records = delete(c, ("t", (0,)), ("old", (0, 1)))
    assert answers(response) == {("t", 0): ErrorCode.group_subscribed_to_topic, ("old", 0): 0, ("old", 1): 0}
    assert records == (offset_tombstone("g", "old", 0), offset_tombstone("g", "old", 1))
    # While it rebalances, the topics of its last generation still count.
    c.join(member_id=member, protocols=consumer_protocols("other"))
    assert c.shard.group("g").state is GroupState.PREPARING_REBALANCE
    response, records = delete(c, ("t", (0,)))
    assert answers(response) == {("t", 0): ErrorCode.group_subscribed_to_topic} and records == ()


def test_a_consumer_group_whose_subscriptions_cannot_be_read_counts_as_subscribed_to_everything() -> None:
    c = Ctx()
    (member,) = c.stable_group(1)  # the context's protocol metadata is not the consumer protocol
    commit(c, "t", 0, gen=1, member=member)
    response, records = delete(c, ("t", (0,)))
    assert answers(response) == {("t", 0): ErrorCode.group_subscribed_to_topic} and records == ()


def test_a_live_group_of_another_protocol_type_is_non_empty() -> None:
    c = Ctx()
    (member,) = c.stable_group(1, protocol_type="connect")
    commit(c, "t", 0, gen=1, member=member)
    response, records = delete(c, ("t", (0,)))
    assert (response.error_code, response.topics, records) == (ErrorCode.non_empty_group, (), ())
    c.run("leave_group", LeaveGroup(group_id="g", member_id=member, api_version=0))
    response, records = delete(c, ("t", (0,)))
    assert response.error_code == 0 and records == (offset_tombstone("g", "t", 0),)


def test_a_failed_append_answers_the_mapped_error_at_the_top() -> None:
    c = Ctx()
    commit(c, "t", 0)
    result = c.shard.offset_delete(OffsetDelete(group_id="g", topics=(DeleteTopic("t", (0,)),)), "h")
    failed = reply(c.shard.on_append_failed(result, ErrorCode.not_leader_or_follower), "h")
    assert (failed.error_code, failed.topics) == (ErrorCode.not_coordinator, ())
    assert c.shard.committed_offsets("g").keys() == {("t", 0)}


def test_deleting_a_topic_tombstones_its_offsets_in_every_group_and_nothing_else() -> None:
    # OffsetMetadataManager#onPartitionsDeleted: every group's offsets on the deleted topics get a tombstone;
    # the groups themselves, their members and other topics' offsets are untouched.
    c = Ctx()
    member, _ = c.stable_group(2, protocols=consumer_protocols("gone"))
    commit(c, "gone", 0, 1, gen=1, member=member)
    commit(c, "kept", 0, gen=1, member=member)
    commit(c, "gone", 2, group="simple")
    records = c.apply(c.shard.on_topics_deleted(frozenset({"gone", "never-committed"}))).records
    assert sorted(records, key=lambda r: r.key) == sorted(
        (offset_tombstone("g", "gone", 0), offset_tombstone("g", "gone", 1), offset_tombstone("simple", "gone", 2)),
        key=lambda r: r.key,
    )
    assert c.shard.committed_offsets("g").keys() == {("kept", 0)}
    assert c.shard.committed_offsets("simple") == {}
    assert c.shard.group("g").state is GroupState.STABLE and len(c.shard.group("g").members) == 2
    assert c.shard.on_topics_deleted(frozenset({"gone"})).records == ()  # nothing left to delete
