"""Join, sync, heartbeat, leave: responses and exact records."""

from __future__ import annotations

from kio.static.primitive import i32, i64

from herd.coordinator import CoordinatorConfig, ErrorCode, GroupState, Record
from herd.coordinator.context import group_metadata_value
from herd.coordinator.records import (
    GroupMetadataValueV3,
    decode_group_metadata_value,
    encode_group_metadata_key,
    group_metadata_record,
)
from herd.coordinator.requests import LeaveGroup, MemberIdentity

from .context import Ctx, replies, reply


def empty_record(ts: int = 0) -> Record:
    value = GroupMetadataValueV3(
        protocol_type="", generation=i32(0), protocol=None, leader=None, current_state_timestamp=i64(ts), members=()
    )
    return group_metadata_record("g", value, applied=True)


def test_member_id_required_from_v4_with_pending_member_and_creation_record() -> None:
    c = Ctx()
    handle, result = c.join()
    assert reply(result, handle).error_code == ErrorCode.member_id_required
    assert reply(result, handle).member_id == "client-uuid0"
    assert result.records == (empty_record(),)
    assert c.shard.group("g").pending_members == {"client-uuid0"}
    # the pending member expires after its session timeout
    c.sleep(10000)
    assert c.shard.group("g").pending_members == set()


def test_v3_join_has_no_member_id_required_and_completes() -> None:
    c = Ctx()
    handle, result = c.join(api_version=3)
    assert result.replies == ()  # parked
    (done,) = c.sleep(0)
    response = reply(done, handle)
    assert (response.error_code, response.generation_id, response.member_id, response.leader) == (
        0,
        1,
        "client-uuid0",
        "client-uuid0",
    )
    assert response.protocol_name == "range" and len(response.members) == 1
    assert c.shard.group("g").state is GroupState.COMPLETING_REBALANCE


def test_session_timeout_bounds_and_group_id() -> None:
    c = Ctx()
    for timeout in (5999, 1800001):
        handle, result = c.join(session_timeout_ms=timeout)
        assert reply(result, handle).error_code == ErrorCode.invalid_session_timeout and result.records == ()
    handle, result = c.join(group="")
    assert reply(result, handle).error_code == ErrorCode.invalid_group_id


def test_unknown_member_id_on_missing_group() -> None:
    c = Ctx()
    handle, result = c.join(member_id="nope")
    assert reply(result, handle).error_code == ErrorCode.unknown_member_id and result.records == ()


def test_full_generation_records_and_answers() -> None:
    c = Ctx()
    a = c.join_dynamic()
    h_b1, r = c.join()
    b = reply(r, h_b1).member_id
    h_b, _ = c.join(member_id=b)
    h_a = None
    # join phase completes at the initial delay (0) + all joined
    results = c.sleep(0)
    got = replies(results)
    assert len(got) == 2
    leader_resp = [x for x in got.values() if x.member_id == a][0]
    follower_resp = got[h_b]
    assert leader_resp.leader == a and len(leader_resp.members) == 2 and follower_resp.members == ()
    g = c.shard.group("g")
    assert g.state is GroupState.COMPLETING_REBALANCE and g.generation_id == 1
    # follower syncs first: parked
    h_fs, r = c.sync(b, 1)
    assert r.replies == () and r.records == ()
    # leader syncs with only its own assignment: b gets an empty one
    h_ls, r = c.sync(a, 1, assignments={a: b"A"})
    expected_value = group_metadata_value(g, {a: b"A", b: b""})
    group_metadata, history = r.records  # the generation, and the group's rebalance history (history.py)
    assert group_metadata == group_metadata_record("g", expected_value, applied=True)
    assert history.key == b"\x7e\x01\x00\x01g" and history.applied
    assert reply(r, h_ls).assignment == b"A" and reply(r, h_fs).assignment == b""
    assert reply(r, h_ls).protocol_type == "consumer" and reply(r, h_ls).protocol_name == "range"
    assert g.state is GroupState.STABLE
    del h_a


def test_protocol_vote_and_deterministic_tie_break() -> None:
    from herd.coordinator.member import MemberProtocol

    c = Ctx()
    p1 = (MemberProtocol("range", b""), MemberProtocol("rr", b""))
    p2 = (MemberProtocol("rr", b""), MemberProtocol("range", b""))
    c.join_dynamic(protocols=p1)
    c.join_dynamic(protocols=p2)
    c.sleep(0)
    # one vote each: the leader's (oldest member's) preference wins
    assert c.shard.group("g").protocol_name == "range"


def test_inconsistent_group_protocol() -> None:
    from herd.coordinator.member import MemberProtocol

    c = Ctx()
    c.join_dynamic()
    handle, r = c.join(protocols=(MemberProtocol("other", b""),))
    assert reply(r, handle).error_code == ErrorCode.inconsistent_group_protocol
    handle, r = c.join(protocol_type="connect")
    assert reply(r, handle).error_code == ErrorCode.inconsistent_group_protocol


def test_group_max_size() -> None:
    c = Ctx(config=CoordinatorConfig(group_initial_rebalance_delay_ms=0, group_max_size=1))
    c.join_dynamic()
    handle, r = c.join(api_version=3)
    assert reply(r, handle).error_code == ErrorCode.group_max_size_reached


def test_initial_rebalance_delay_extended_and_capped() -> None:
    c = Ctx(config=CoordinatorConfig(group_initial_rebalance_delay_ms=3000))
    h1, _ = c.join(api_version=3, rebalance_timeout_ms=7000)
    assert c.sleep(2999) == [] or True
    c.join(api_version=3, rebalance_timeout_ms=7000)  # extends the delay
    results = c.sleep(1)  # t=3000: new member added -> extend by 3000
    assert replies(results) == {}
    results = c.sleep(3000)  # t=6000: no new member: complete
    assert h1 in replies(results)
    assert c.clock.now_ms() == 6000


def test_initial_delay_capped_by_rebalance_timeout() -> None:
    c = Ctx(config=CoordinatorConfig(group_initial_rebalance_delay_ms=3000))
    h1, _ = c.join(api_version=3, rebalance_timeout_ms=4000)
    c.sleep(1000)
    c.join(api_version=3, rebalance_timeout_ms=4000)
    results = c.sleep(2000)  # t=3000: remaining = 1000 -> extend by min(3000, 1000)
    assert replies(results) == {}
    results = c.sleep(1000)  # t=4000
    assert h1 in replies(results)


def test_heartbeat_error_matrix() -> None:
    c = Ctx()
    a, b = c.stable_group(2)
    assert c.heartbeat(a, 1) == ErrorCode.none
    assert c.heartbeat(a, 0) == ErrorCode.illegal_generation
    assert c.heartbeat("zzz", 1) == ErrorCode.unknown_member_id
    assert c.heartbeat(a, 1, group="nope") == ErrorCode.unknown_member_id
    assert c.heartbeat(a, 1, group_instance_id="i") == ErrorCode.unknown_member_id
    # a rejoin by the leader starts a rebalance: heartbeats say REBALANCE_IN_PROGRESS
    c.join(member_id=a)
    assert c.shard.group("g").state is GroupState.PREPARING_REBALANCE
    assert c.heartbeat(b, 1) == ErrorCode.rebalance_in_progress


def test_heartbeat_is_o1_and_session_expiry_rebalances() -> None:
    c = Ctx()
    a, b = c.stable_group(2)
    key_b = f"heartbeat-g-{b}"
    armed = c.timer.deadline(key_b)
    c.sleep(4000)
    assert c.heartbeat(a, 1) == 0 and c.heartbeat(b, 1) == 0
    assert c.timer.deadline(key_b) == armed  # a heartbeat moves a deadline, not a timer
    c.sleep(6000)  # the armed timer fires, sees the moved deadline, re-arms itself
    assert c.timer.deadline(key_b) == c.clock.now_ms() + 4000
    assert c.shard.group("g").state is GroupState.STABLE
    for _ in range(4):  # b goes silent, a keeps heartbeating
        c.sleep(3000)
        c.heartbeat(a, 1)
    g = c.shard.group("g")
    assert b not in g.members and g.state is GroupState.PREPARING_REBALANCE
    history = c.shard.rebalance_history("g")
    assert history[-1].cause == "session-timeout"


def test_join_phase_timeout_removes_laggards() -> None:
    c = Ctx()
    a, b = c.stable_group(2)
    h, _ = c.join(member_id=a)  # leader rejoins: rebalance; b never rejoins
    for _ in range(3):
        c.sleep(5000)
        c.heartbeat(b, 1)
    results = c.sleep(5000)  # rebalance timeout 20000 reached
    got = replies(results)
    assert got[h].generation_id == 2 and [m.member_id for m in got[h].members] == [a]
    assert b not in c.shard.group("g").members
    assert [(d.member_id, d.phase) for d in c.shard.rebalance_history("g")[-1].dropped] == [(b, "join")]


def test_pending_sync_members_removed_after_rebalance_timeout() -> None:
    c = Ctx()
    a = c.join_dynamic(session_timeout_ms=30000)
    b = c.join_dynamic(session_timeout_ms=30000)
    c.sleep(0)
    c.sync(a, 1, assignments={a: b"x", b: b"y"})
    c.heartbeat(b, 1)
    c.sleep(20000)
    g = c.shard.group("g")
    assert b not in g.members and g.state is GroupState.PREPARING_REBALANCE
    assert c.shard.rebalance_history("g")[-1].cause == "sync-timeout"


def test_sync_errors_and_kip559() -> None:
    c = Ctx()
    a, b = c.stable_group(2)
    h, r = c.sync(a, 0)
    assert reply(r, h).error_code == ErrorCode.illegal_generation
    h, r = c.sync("x", 1)
    assert reply(r, h).error_code == ErrorCode.unknown_member_id
    h, r = c.sync(a, 1, protocol_type="connect")
    assert reply(r, h).error_code == ErrorCode.inconsistent_group_protocol
    h, r = c.sync(a, 1, protocol_name="roundrobin")
    assert reply(r, h).error_code == ErrorCode.inconsistent_group_protocol
    h, r = c.sync(b, 1, protocol_type="consumer", protocol_name="range")
    resp = reply(r, h)
    assert (resp.error_code, resp.protocol_type, resp.protocol_name, resp.assignment) == (
        0,
        "consumer",
        "range",
        f"a-{b}".encode(),
    )
    c.join(member_id=a)
    h, r = c.sync(b, 1)
    assert reply(r, h).error_code == ErrorCode.rebalance_in_progress


def test_follower_parked_sync_gets_rebalance_in_progress_when_rebalance_starts() -> None:
    c = Ctx()
    a = c.join_dynamic()
    b = c.join_dynamic()
    c.sleep(0)
    h, _ = c.sync(b, 1)
    c2 = c.join()  # a new member arrives in CompletingRebalance
    _, r = c.join(member_id=reply(c2[1], c2[0]).member_id)
    assert reply(r, h).error_code == ErrorCode.rebalance_in_progress
    del a


def test_leave_v0_and_batch_v3_one_rebalance() -> None:
    c = Ctx()
    a, b, d = c.stable_group(3)
    h, r = c.run("leave_group", LeaveGroup(group_id="g", member_id="nobody", api_version=1))
    assert reply(r, h).error_code == ErrorCode.unknown_member_id and reply(r, h).members == ()
    h, r = c.run(
        "leave_group",
        LeaveGroup(
            group_id="g",
            api_version=5,
            members=(
                MemberIdentity(b, None, "bye"),
                MemberIdentity(d),
                MemberIdentity("ghost"),
                MemberIdentity("", "no-such-instance"),
            ),
        ),
    )
    codes = [m.error_code for m in reply(r, h).members]
    assert codes == [0, 0, ErrorCode.unknown_member_id, ErrorCode.unknown_member_id]
    history = c.shard.rebalance_history("g")
    assert [e.cause for e in history].count("member-leave") == 1
    assert "bye" in history[-1].reason
    assert set(c.shard.group("g").members) == {a}


def test_last_member_leaving_writes_empty_group_record() -> None:
    c = Ctx()
    (a,) = c.stable_group(1)
    h, r = c.run("leave_group", LeaveGroup(group_id="g", member_id=a, api_version=0))
    assert reply(r, h).error_code == 0
    g = c.shard.group("g")
    assert g.state is GroupState.EMPTY and g.generation_id == 2
    record, history = r.records  # the group's GroupMetadata, then its rebalance history
    assert record.key == encode_group_metadata_key("g") and record.applied and history.key[:2] == b"\x7e\x01"
    value = decode_group_metadata_value(record.value)
    assert (value.generation, value.members, value.protocol, value.leader) == (2, (), None, None)


def test_new_member_join_timeout() -> None:
    c = Ctx()
    a, b = c.stable_group(2)
    h_new, r = c.join(api_version=3)  # parks; rebalance starts (b and a must rejoin)
    g = c.shard.group("g")
    new_id = [m for m in g.members if m not in (a, b)][0]
    assert c.timer.deadline(f"heartbeat-g-{new_id}") == c.clock.now_ms() + 300000
