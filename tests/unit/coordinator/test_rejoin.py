"""Rejoins real clients make all the time: a follower re-sending an unchanged JoinGroup, and a leader that
does not come back to a rebalance (a joined member takes over)."""

from __future__ import annotations

from herd.coordinator import ErrorCode, GroupState

from .context import PROTOCOLS, Ctx, replies, reply


def test_follower_rejoining_a_stable_group_with_unchanged_metadata_gets_the_generation_without_a_rebalance():
    c = Ctx()
    leader, follower = c.stable_group(2)
    h, result = c.join(member_id=follower)
    response = reply(result, h)
    assert (response.error_code, response.generation_id, response.leader, response.members) == (
        ErrorCode.none,
        1,
        leader,
        (),
    )
    assert result.records == ()
    assert c.shard.group("g").state is GroupState.STABLE
    h, result = c.sync(follower, 1)
    assert reply(result, h).assignment == f"a-{follower}".encode()


def test_member_rejoining_with_new_metadata_rebalances():
    c = Ctx()
    leader, follower = c.stable_group(2)
    from herd.coordinator.member import MemberProtocol

    c.join(member_id=follower, protocols=(MemberProtocol("range", b"changed"),) + PROTOCOLS[1:])
    g = c.shard.group("g")
    assert g.state is GroupState.PREPARING_REBALANCE
    assert c.shard.rebalance_history("g")[-1].cause == "protocol-change"


def test_a_leader_that_does_not_rejoin_is_replaced_by_a_member_that_did():
    c = Ctx()
    leader, follower = c.stable_group(2)
    h, _ = c.join(member_id=follower, protocols=PROTOCOLS[::-1])  # new metadata: rebalance, leader absent
    got = replies(c.sleep(10000))  # the silent leader's session (10 s) ends first; the join phase completes
    response = got[h]
    assert response.generation_id == 2 and response.leader == follower
    assert [m.member_id for m in response.members] == [follower]
    g = c.shard.group("g")
    assert leader not in g.members and g.leader_id == follower and g.state is GroupState.COMPLETING_REBALANCE


def test_a_leader_that_heartbeats_but_never_rejoins_loses_the_lead_at_the_rebalance_timeout():
    c = Ctx()
    leader, follower = c.stable_group(2)
    h, _ = c.join(member_id=follower, protocols=PROTOCOLS[::-1])
    results = []
    for _ in range(4):  # 20 s: the rebalance timeout; the leader keeps its session alive all along
        results += c.sleep(5000)
        assert c.heartbeat(leader, 1) in (ErrorCode.rebalance_in_progress, ErrorCode.unknown_member_id)
    response = replies(results)[h]
    assert response.generation_id == 2 and response.leader == follower
    assert [m.member_id for m in response.members] == [follower]
    assert [(d.member_id, d.phase) for d in c.shard.rebalance_history("g")[-1].dropped] == [(leader, "join")]
    assert c.heartbeat(leader, 1) == ErrorCode.unknown_member_id


def test_a_member_listing_a_protocol_twice_still_completes_the_join():
    """Counted twice, the name would never be "supported by every member" and the vote would have no
    candidate: the join-phase timer raised and the group stayed in PreparingRebalance."""
    from herd.coordinator.member import MemberProtocol

    c = Ctx()
    h, _ = c.join(protocols=(MemberProtocol("range", b"first"), MemberProtocol("range", b"second")), api_version=3)
    response = replies(c.sleep(0))[h]
    assert (response.error_code, response.protocol_name) == (ErrorCode.none, "range")
    assert [m.metadata for m in response.members] == [b"first"]
    h2, result = c.join(protocols=PROTOCOLS, api_version=3)  # a second member with the name once
    assert c.shard.group("g").state is GroupState.PREPARING_REBALANCE
