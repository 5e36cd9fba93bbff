"""OffsetCommit and OffsetFetch in the core: every fencing rule in Kafka's order, the exact records a commit
writes, what a failed append answers, and fetches (apache/kafka OffsetMetadataManagerTest and
ClassicGroupTest#testValidateOffsetCommit are the models)."""

from __future__ import annotations

import pytest

from herd.coordinator import ErrorCode, GroupState, Record
from herd.coordinator.records import OffsetValue, offset_commit_record
from herd.coordinator.requests import (
    CommitPartition,
    CommitTopic,
    FetchGroup,
    FetchTopic,
    LeaveGroup,
    OffsetCommit,
    OffsetFetch,
)

from .context import Ctx, reply

NOW = 1_000


def commit_req(
    group: str = "g",
    gen: int = -1,
    member: str = "",
    *,
    instance: str | None = None,
    partitions: tuple[CommitPartition, ...] = (CommitPartition(0, 42, 3),),
    v: int = 9,
    retention: int = -1,
    topic: str = "t",
) -> OffsetCommit:
    return OffsetCommit(
        group_id=group,
        generation_id_or_member_epoch=gen,
        member_id=member,
        group_instance_id=instance,
        retention_time_ms=retention,
        topics=(CommitTopic(topic, partitions),),
        api_version=v,
    )


def commit(c: Ctx, *args, **kw) -> tuple[list[int], tuple[Record, ...]]:
    """(error code per partition, records written)."""
    handle, result = c.run("offset_commit", commit_req(*args, **kw))
    return [p.error_code for t in reply(result, handle).topics for p in t.partitions], result.records


def fetch(c: Ctx, group: str = "g", partitions: tuple[int, ...] = (0,), topic: str = "t") -> dict[int, tuple]:
    handle, result = c.run("offset_fetch", OffsetFetch(groups=(FetchGroup(group, (FetchTopic(topic, partitions),)),)))
    (g,) = reply(result, handle).groups
    return {
        p.partition_index: (p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code)
        for t in g.topics
        for p in t.partitions
    }


def ctx() -> Ctx:
    c = Ctx()
    c.clock.set(NOW)
    return c


def record(
    offset: int = 42,
    epoch: int = 3,
    metadata: str = "",
    stamp: int = NOW,
    expire: int = -1,
    group: str = "g",
    partition: int = 0,
) -> Record:
    return offset_commit_record(group, "t", partition, OffsetValue(offset, epoch, metadata, stamp, expire))


# --- groups that do not exist ------------------------------------------------------------------------


def test_a_simple_commit_to_an_unknown_group_creates_an_empty_group_without_protocol_type() -> None:
    c = ctx()
    assert commit(c) == ([ErrorCode.none], (record(),))
    group = c.shard.group("g")
    assert group.state is GroupState.EMPTY and group.protocol_type is None and group.generation_id == 0
    assert fetch(c) == {0: (42, 3, "", 0)}


@pytest.mark.parametrize(
    ("version", "code"),
    [
        (2, ErrorCode.illegal_generation),
        (8, ErrorCode.illegal_generation),
        (9, ErrorCode.group_id_not_found),
        (10, ErrorCode.group_id_not_found),
    ],
)
def test_a_commit_with_a_generation_to_an_unknown_group(version: int, code: ErrorCode) -> None:
    c = ctx()
    assert commit(c, gen=0, member="m", v=version) == ([code], ())
    assert c.shard.group("g") is None


def test_the_empty_group_id_is_a_group_like_any_other() -> None:
    c = ctx()
    assert commit(c, group="") == ([ErrorCode.none], (record(group=""),))
    assert fetch(c, group="") == {0: (42, 3, "", 0)}


# --- Dead and Empty groups ---------------------------------------------------------------------------


def test_a_dead_group_answers_coordinator_not_available() -> None:
    c = ctx()
    commit(c)
    c.shard.group("g").transition_to(GroupState.DEAD, NOW)
    assert commit(c) == ([ErrorCode.coordinator_not_available], ())
    assert fetch(c) == {0: (-1, -1, "", 0)}  # Kafka: a Dead group is answered as an unknown one


def empty_consumer_group(c: Ctx) -> str:
    (member,) = c.stable_group(1)
    c.run("leave_group", LeaveGroup(group_id="g", member_id=member, api_version=0))
    assert c.shard.group("g").state is GroupState.EMPTY and c.shard.group("g").generation_id == 2
    return member


def test_an_empty_group_accepts_commits_without_generation_whatever_member_they_name() -> None:
    c = ctx()
    gone = empty_consumer_group(c)
    assert commit(c)[0] == [ErrorCode.none]
    assert commit(c, member=gone)[0] == [ErrorCode.none]  # generation < 0 on an Empty group: accepted first
    assert commit(c, gen=2, member=gone)[0] == [ErrorCode.unknown_member_id]
    assert commit(c, instance="i")[0] == [ErrorCode.none]


# --- groups with members -----------------------------------------------------------------------------


def test_fencing_order_in_a_stable_group() -> None:
    c = ctx()
    a, b = c.stable_group(2)
    assert commit(c, gen=1, member=a)[0] == [ErrorCode.none]
    assert commit(c, gen=2, member=a)[0] == [ErrorCode.illegal_generation]
    assert commit(c, gen=0, member=b)[0] == [ErrorCode.illegal_generation]
    assert commit(c, gen=1, member="stranger")[0] == [ErrorCode.unknown_member_id]
    assert commit(c, gen=7, member="stranger")[0] == [ErrorCode.unknown_member_id]  # member before generation
    assert commit(c, gen=-1, member="stranger")[0] == [ErrorCode.unknown_member_id]
    assert commit(c, gen=-1, member=a)[0] == [ErrorCode.illegal_generation]
    assert commit(c)[0] == [ErrorCode.unknown_member_id]  # a simple commit to a group with members


def static_group(c: Ctx) -> tuple[str, str]:
    ids = []
    for instance in ("i1", "i2"):
        c.join(group_instance_id=instance)
        ids.append(c.shard.group("g").static_member_id(instance))
    c.sleep(0)
    group = c.shard.group("g")
    c.sync(group.leader_id, 1, assignments={m: b"" for m in ids})
    return ids[0], ids[1]


def test_static_members_are_checked_by_instance_id_first() -> None:
    c = ctx()
    i1, i2 = static_group(c)
    assert commit(c, gen=1, member=i1, instance="i1")[0] == [ErrorCode.none]
    assert commit(c, gen=1, member=i2, instance="i1")[0] == [ErrorCode.fenced_instance_id]
    assert commit(c, gen=9, member=i2, instance="i1")[0] == [ErrorCode.fenced_instance_id]  # before generation
    assert commit(c, gen=1, member=i1, instance="unknown")[0] == [ErrorCode.unknown_member_id]
    assert commit(c, gen=2, member=i1, instance="i1")[0] == [ErrorCode.illegal_generation]
    assert commit(c, instance="i1")[0] == [ErrorCode.fenced_instance_id]  # no member id, no generation


def test_completing_rebalance_answers_rebalance_in_progress_after_the_member_checks() -> None:
    c = ctx()
    member = c.join_dynamic()
    c.sleep(0)
    assert c.shard.group("g").state is GroupState.COMPLETING_REBALANCE
    assert commit(c, gen=1, member=member) == ([ErrorCode.rebalance_in_progress], ())
    assert commit(c, gen=1, member="stranger")[0] == [ErrorCode.unknown_member_id]
    assert commit(c, gen=0, member=member)[0] == [ErrorCode.illegal_generation]


def test_preparing_rebalance_accepts_commits_of_the_current_generation() -> None:
    c = ctx()
    a, b = c.stable_group(2)
    c.join(member_id=a)  # the leader rejoins: PreparingRebalance, still generation 1
    assert c.shard.group("g").state is GroupState.PREPARING_REBALANCE
    assert commit(c, gen=1, member=b) == ([ErrorCode.none], (record(),))


@pytest.mark.parametrize("state", ["stable", "preparing"])
def test_a_commit_keeps_the_members_session_alive(state: str) -> None:
    c = ctx()
    a, b = c.stable_group(2)  # 10 s sessions
    if state == "preparing":
        c.join(member_id=a)
    c.sleep(8_000)
    c.heartbeat(a, 1)
    assert commit(c, gen=1, member=b)[0] == [ErrorCode.none]
    c.sleep(8_000)  # 16 s after b's last heartbeat, 8 s after its commit
    assert b in c.shard.group("g").members


def test_without_commits_the_same_member_expires() -> None:
    c = ctx()
    a, b = c.stable_group(2)
    c.sleep(8_000)
    c.heartbeat(a, 1)
    c.sleep(8_000)
    assert b not in c.shard.group("g").members


# --- per-partition checks and records ----------------------------------------------------------------


def test_metadata_over_the_limit_fails_only_its_partition() -> None:
    c = ctx()
    limit = c.config.offset_metadata_max_bytes
    partitions = (
        CommitPartition(0, 1, -1, -1, "x" * limit),
        CommitPartition(1, 2, -1, -1, "x" * (limit + 1)),
        CommitPartition(2, 3, -1, -1, "\U0001f600" * (limit // 2 + 1)),
        CommitPartition(3, 4, -1, -1, None),
    )
    codes, records = commit(c, partitions=partitions)
    assert codes == [
        ErrorCode.none,
        ErrorCode.offset_metadata_too_large,
        ErrorCode.offset_metadata_too_large,
        ErrorCode.none,
    ]  # an emoji is two UTF-16 units, as Java's String.length counts
    assert records == (record(1, -1, "x" * limit), record(4, -1, "", partition=3))


@pytest.mark.parametrize(
    ("version", "retention", "expire"),
    [(2, 5_000, NOW + 5_000), (4, 0, NOW), (4, -1, -1), (5, 5_000, -1), (9, 5_000, -1)],
)
def test_retention_time_of_v2_to_v4_becomes_an_expire_timestamp_in_a_v1_value(
    version: int, retention: int, expire: int
) -> None:
    c = ctx()
    _, (written,) = commit(c, v=version, retention=retention)
    assert written == record(epoch=3 if expire == -1 else -1, expire=expire)
    assert written.value[:2] == (b"\x00\x01" if expire != -1 else b"\x00\x03")


def test_a_failed_append_answers_the_mapped_error_on_every_partition() -> None:
    c = ctx()
    partitions = (CommitPartition(0, 1), CommitPartition(1, 2, -1, -1, "x" * 5000))
    result = c.shard.offset_commit(commit_req(partitions=partitions), "h")
    for log_error, seen in (
        (ErrorCode.not_leader_or_follower, ErrorCode.not_coordinator),
        (ErrorCode.message_too_large, ErrorCode.invalid_commit_offset_size),
        (ErrorCode.kafka_storage_error, ErrorCode.not_coordinator),
    ):
        failed = reply(c.shard.on_append_failed(result, log_error), "h")
        assert [p.error_code for p in failed.topics[0].partitions] == [seen, seen]
    assert c.shard.group("g") is None  # nothing was replayed


# --- fetch ---------------------------------------------------------------------------------------------


def test_fetch_named_partitions_all_offsets_and_several_groups() -> None:
    c = ctx()
    commit(c, partitions=(CommitPartition(1, 10, 2, -1, "m1"), CommitPartition(0, 5)))
    commit(c, topic="u", partitions=(CommitPartition(0, 7),))
    assert fetch(c, partitions=(0, 1, 9)) == {0: (5, -1, "", 0), 1: (10, 2, "m1", 0), 9: (-1, -1, "", 0)}
    request = OffsetFetch(groups=(FetchGroup("g"), FetchGroup("nobody"), FetchGroup("g", (FetchTopic("u", (0,)),))))
    handle, result = c.run("offset_fetch", request)
    everything, nobody, named = reply(result, handle).groups
    assert [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions]) for t in everything.topics] == [
        ("t", [(0, 5), (1, 10)]),
        ("u", [(0, 7)]),
    ]
    assert (nobody.group_id, nobody.topics, nobody.error_code) == ("nobody", (), 0)
    assert named.topics[0].partitions[0].committed_offset == 7
    assert result.records == ()
