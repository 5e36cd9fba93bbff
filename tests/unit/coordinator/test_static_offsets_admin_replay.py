"""Static membership, offsets, admin APIs, append failures and replay after a restart."""

from __future__ import annotations

from herd.coordinator import ErrorCode, GroupState, Record
from herd.coordinator.records import (
    OffsetValue,
    group_tombstone,
    offset_commit_record,
    offset_tombstone,
    rebalance_history_tombstone,
)
from herd.coordinator.requests import (
    CommitPartition,
    CommitTopic,
    DeleteGroups,
    DescribeGroups,
    FetchGroup,
    FetchTopic,
    JoinGroup,
    LeaveGroup,
    ListGroups,
    MemberIdentity,
    OffsetCommit,
    OffsetFetch,
)

from .context import PROTOCOLS, Ctx, reply


def _static(c: Ctx) -> list[str]:
    ids = []
    for inst in ("i1", "i2"):
        h, _ = c.join(group_instance_id=inst)
        ids.append(c.shard.group("g").static_member_id(inst))
    c.sleep(0)
    g = c.shard.group("g")
    c.sync(g.leader_id, 1, assignments={m: m.encode() for m in ids})
    for m in ids:
        if m != g.leader_id:
            c.sync(m, 1)
    return ids


def test_static_member_ids_and_replace_without_rebalance_v9_skip_assignment() -> None:
    c = Ctx()
    i1, i2 = _static(c)
    assert (i1, i2) == ("i1-uuid0", "i2-uuid1")
    h, r = c.join(group_instance_id="i1")  # leader restarts with a new (unknown) member id
    response = reply(r, h)
    assert response.member_id == "i1-uuid2" and response.skip_assignment and len(response.members) == 2
    assert response.generation_id == 1
    (record,) = r.records
    assert record.applied
    g = c.shard.group("g")
    assert g.state is GroupState.STABLE and g.member("i1-uuid2").assignment == i1.encode()
    assert c.heartbeat(i1, 1, group_instance_id="i1") == ErrorCode.fenced_instance_id


def test_static_replace_v8_old_leader_id_no_skip() -> None:
    c = Ctx()
    i1, _ = _static(c)
    h, r = c.join(group_instance_id="i1", api_version=8)
    response = reply(r, h)
    assert not response.skip_assignment and response.leader == i1 and response.members == ()


def test_static_replace_rollback_on_append_failure() -> None:
    c = Ctx()
    i1, _ = _static(c)
    result = c.shard.join_group(
        JoinGroup(group_id="g", session_timeout_ms=10000, group_instance_id="i1", protocols=PROTOCOLS), "hx"
    )
    assert result.records and result.records[0].applied
    failed = c.shard.on_append_failed(result, ErrorCode.not_leader_or_follower)
    assert reply(failed, "hx").error_code == ErrorCode.not_coordinator
    g = c.shard.group("g")
    assert g.static_member_id("i1") == i1 and g.leader_id == i1


def test_static_join_in_completing_rebalance_forces_rebalance() -> None:
    c = Ctx()
    c.join(group_instance_id="i1")
    c.join(group_instance_id="i2")
    c.sleep(0)
    assert c.shard.group("g").state is GroupState.COMPLETING_REBALANCE
    c.join(group_instance_id="i2")
    assert c.shard.group("g").state is GroupState.PREPARING_REBALANCE


def test_leave_by_instance_id_and_fenced() -> None:
    c = Ctx()
    i1, i2 = _static(c)
    h, r = c.run(
        "leave_group", LeaveGroup(group_id="g", members=(MemberIdentity("wrong", "i1"), MemberIdentity("", "i2")))
    )
    assert [m.error_code for m in reply(r, h).members] == [ErrorCode.fenced_instance_id, 0]
    assert set(c.shard.group("g").members) == {i1}


def commit(c: Ctx, gen: int = -1, member: str = "", api_version: int = 9, metadata: str | None = None, **kw):
    req = OffsetCommit(
        group_id="g",
        generation_id_or_member_epoch=gen,
        member_id=member,
        api_version=api_version,
        topics=(CommitTopic("t", (CommitPartition(0, 42, 3, -1, metadata),)),),
        **kw,
    )
    h, r = c.run("offset_commit", req)
    return reply(r, h).topics[0].partitions[0].error_code, r


def test_simple_commit_creates_group_and_fetch() -> None:
    c = Ctx()
    c.clock.set(500)
    code, r = commit(c, metadata="meta")
    assert code == 0
    assert r.records == (
        offset_commit_record(
            "g", "t", 0, OffsetValue(offset=42, leader_epoch=3, metadata="meta", commit_timestamp=500)
        ),
    )
    assert c.shard.group("g").state is GroupState.EMPTY
    h, r = c.run("offset_fetch", OffsetFetch(groups=(FetchGroup("g", (FetchTopic("t", (0, 1)),)), FetchGroup("g"))))
    groups = reply(r, h).groups
    assert [(p.committed_offset, p.committed_leader_epoch, p.metadata) for p in groups[0].topics[0].partitions] == [
        (42, 3, "meta"),
        (-1, -1, ""),
    ]
    assert groups[1].topics[0].name == "t"


def test_commit_fencing_order() -> None:
    c = Ctx()
    assert commit(c, gen=1)[0] == ErrorCode.group_id_not_found
    assert commit(c, gen=1, api_version=8)[0] == ErrorCode.illegal_generation
    a, b = c.stable_group(2)
    assert commit(c, gen=1, member=a)[0] == 0
    assert commit(c, gen=2, member=a)[0] == ErrorCode.illegal_generation
    assert commit(c, gen=1, member="x")[0] == ErrorCode.unknown_member_id
    assert commit(c)[0] == ErrorCode.unknown_member_id  # simple commit to a live group
    assert commit(c, gen=1, member=a, metadata="x" * 4097)[0] == ErrorCode.offset_metadata_too_large
    c.join(member_id=a)  # PreparingRebalance: commits still allowed
    assert commit(c, gen=1, member=b)[0] == 0


def test_commit_in_completing_rebalance() -> None:
    c = Ctx()
    a = c.join_dynamic()
    c.sleep(0)
    assert commit(c, gen=1, member=a)[0] == ErrorCode.rebalance_in_progress


def test_commit_with_retention_writes_v1() -> None:
    c = Ctx()
    code, r = commit(c, api_version=2, retention_time_ms=1000)
    assert r.records[0].value[:2] == b"\x00\x01"


def test_describe_list_delete() -> None:
    c = Ctx()
    a, b = c.stable_group(2)
    h, r = c.run("describe_groups", DescribeGroups(groups=("g", "nope")))
    g, nope = reply(r, h).groups
    assert (g.group_state, g.protocol_type, g.protocol_data) == ("Stable", "consumer", "range")
    assert g.members[0].member_assignment == f"a-{a}".encode() and g.members[0].member_metadata == b"sub-range"
    assert nope.group_state == "Dead"
    h, r = c.run("list_groups", ListGroups(states_filter=("stable",)))
    assert [x.group_id for x in reply(r, h).groups] == ["g"]
    h, r = c.run("list_groups", ListGroups(states_filter=("empty",)))
    assert reply(r, h).groups == ()
    h, r = c.run("delete_groups", DeleteGroups(groups_names=("g", "nope")))
    assert [x.error_code for x in reply(r, h).results] == [ErrorCode.non_empty_group, ErrorCode.group_id_not_found]
    commit(c, gen=1, member=a)
    for m in (a, b):
        c.run("leave_group", LeaveGroup(group_id="g", member_id=m, api_version=0))
    h, r = c.run("delete_groups", DeleteGroups(groups_names=("g",)))
    assert reply(r, h).results[0].error_code == 0
    assert r.records == (offset_tombstone("g", "t", 0), group_tombstone("g"), rebalance_history_tombstone("g"))
    assert c.shard.group("g") is None and c.shard.committed_offsets("g") == {}


def test_replay_after_restart() -> None:
    c = Ctx()
    a, b = c.stable_group(2)
    commit(c, gen=1, member=a)
    fresh = Ctx()
    for record in c.log:
        fresh.shard.replay(Record(record.key, record.value))  # as read back from the log
    fresh.shard.replay(Record(b"\x00\x63\x00\x00", b"junk"))  # unknown type: skipped
    loaded = fresh.shard.on_loaded()
    assert loaded.records == ()
    g = fresh.shard.group("g")
    assert g.state is GroupState.STABLE and g.generation_id == 1 and set(g.members) == {a, b}
    assert g.leader_id == a and g.member(b).assignment == f"a-{b}".encode()
    assert fresh.shard.committed_offsets("g")[("t", 0)].offset == 42
    assert fresh.timer.deadline(f"heartbeat-g-{a}") == 10000
    assert fresh.heartbeat(a, 1) == 0
    fresh.sleep(10000)  # b never heartbeats: removed, rebalance
    assert b not in fresh.shard.group("g").members


def test_own_records_replayed_are_noops() -> None:
    c = Ctx()
    c.stable_group(2)
    assert all(r.applied for r in c.log)


def test_reads_that_waited_behind_a_failed_write_answer_the_error_not_the_state():
    """A read's Result has no records; when the write it queued behind fails, the runtime fails it too."""
    c = Ctx()
    c.join_dynamic()
    c.sleep(0)
    reads = {
        "fetch": c.shard.offset_fetch(OffsetFetch(groups=(FetchGroup("g", (FetchTopic("t", (0,)),)),)), "f"),
        "describe": c.shard.describe_groups(DescribeGroups(groups=("g", "x")), "d"),
        "list": c.shard.list_groups(ListGroups(), "l"),
    }
    failed = {
        name: reply(c.shard.on_append_failed(r, ErrorCode.kafka_storage_error), h)
        for (name, r), h in zip(reads.items(), ("f", "d", "l"), strict=True)
    }
    assert [(g.group_id, g.error_code, g.topics) for g in failed["fetch"].groups] == [
        ("g", ErrorCode.not_coordinator, ())
    ]
    assert [(g.group_id, g.error_code, g.members) for g in failed["describe"].groups] == [
        ("g", ErrorCode.not_coordinator, ()),
        ("x", ErrorCode.not_coordinator, ()),
    ]
    assert (failed["list"].error_code, failed["list"].groups) == (ErrorCode.not_coordinator, ())
    assert c.shard.group("g").state is GroupState.COMPLETING_REBALANCE  # a failed read changes nothing
