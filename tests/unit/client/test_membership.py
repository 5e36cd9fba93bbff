"""The membership machine without sockets: events in, actions out, a manual clock.

Every error path of JoinGroup, SyncGroup and Heartbeat (as Java's AbstractCoordinator handles them), the
heartbeat schedule and the session's end, closing, static members, and the state table itself.
"""

from __future__ import annotations

import itertools

import pytest
from kio.schema.errors import ErrorCode as E

from herd.client.group_protocol import GroupAssignment, JoinedMember, SimpleProtocol
from herd.client.heartbeat import HeartbeatTimer, ManualClock
from herd.client.membership import (
    _ALLOWED_PREVIOUS,
    Assigned,
    Closed,
    ComputeAssignment,
    CoordinatorDead,
    Failed,
    IllegalTransition,
    Lost,
    MembershipConfig,
    MembershipMachine,
    MemberState,
    Revoked,
    Send,
)
from herd.client.membership_messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

S = MemberState
SESSION, INTERVAL, BACKOFF = 10_000, 3_000, 100


class Member:
    """A machine, its clock, and helpers to answer whatever it sent last."""

    def __init__(self, instance_id: str | None = None, protocol=None) -> None:
        self.clock = ManualClock()
        config = MembershipConfig(
            "g",
            session_timeout_ms=SESSION,
            heartbeat_interval_ms=INTERVAL,
            retry_backoff_ms=BACKOFF,
            retry_backoff_max_ms=1000,
            group_instance_id=instance_id,
        )
        self.m = MembershipMachine(config, protocol or SimpleProtocol("election", "v1"), self.clock)
        self.last: object = None

    def sent(self, actions, kind=None):
        """The one request among `actions` (of type `kind` if given); remembers it."""
        sends = [a.request for a in actions if isinstance(a, Send)]
        assert len(sends) == 1, actions
        if kind is not None:
            assert isinstance(sends[0], kind), sends[0]
        self.last = sends[0]
        return sends[0]

    def answer(self, response, request=None):
        return self.m.receive(request or self.last, response)

    def join(self, member_id="m1", generation=1, leader="m0", **kw) -> list:
        """Start and answer the JoinGroup with success (as a follower unless leader == member_id)."""
        if self.m.state is S.UNJOINED:
            self.sent(self.m.start(), JoinGroupRequest)
        return self.answer(JoinGroupResponse(0, generation, "election", "v1", leader, member_id, **kw))

    def stable(self, data=b"mine", **kw) -> GroupAssignment:
        """Join as a follower and sync; returns what it holds."""
        self.sent(self.join(**kw), SyncGroupRequest)
        actions = self.answer(SyncGroupResponse(0, data, "election", "v1"))
        assert self.m.state is S.STABLE
        assert actions == [Assigned(self.m.held)]
        return self.m.held

    def heartbeat(self) -> HeartbeatRequest:
        self.clock.advance(INTERVAL)
        return self.sent(self.m.tick(), HeartbeatRequest)


def kinds(actions) -> list[type]:
    return [type(a) for a in actions]


# -- the happy path ------------------------------------------------------------------------------------------


def test_join_with_member_id_required_then_sync_as_follower():
    member = Member()
    first = member.sent(member.m.start(), JoinGroupRequest)
    assert member.m.state is S.JOINING
    assert first.member_id == "" and first.protocol_type == "election" and first.protocols == (("v1", b""),)
    again = member.sent(member.answer(JoinGroupResponse(E.member_id_required, member_id="m1")), JoinGroupRequest)
    assert again.member_id == "m1"
    sync = member.sent(member.answer(JoinGroupResponse(0, 1, "election", "v1", "m0", "m1")), SyncGroupRequest)
    assert (sync.generation_id, sync.member_id, sync.assignments, member.m.state) == (1, "m1", (), S.SYNCING)
    actions = member.answer(SyncGroupResponse(0, b"work", "election", "v1"))
    expected = GroupAssignment(1, "m1", "m0", "v1", b"work")
    assert actions == [Assigned(expected)] and member.m.held == expected and not expected.is_leader
    assert member.m.state is S.STABLE


def test_leader_computes_the_assignment_and_syncs_it():
    member = Member()
    members = (JoinedMember("m1", None, b"a"), JoinedMember("m2", None, b"b"))
    actions = member.join(leader="m1", members=members)
    assert actions == [ComputeAssignment(1, "v1", "m1", members)] and member.m.state is S.ASSIGNING
    assert member.m.assignment_ready(0, {"m1": b"x"}) == []  # a stale generation is ignored
    sync = member.sent(member.m.assignment_ready(1, {"m2": b"y", "m1": b"x"}), SyncGroupRequest)
    assert sync.assignments == (("m1", b"x"), ("m2", b"y"))
    assert member.answer(SyncGroupResponse(0, b"x"))[0].assignment.is_leader


def test_a_static_leader_told_to_skip_assignment_syncs_without_assigning():
    member = Member(instance_id="i1")
    actions = member.join(leader="m1", skip_assignment=True)
    assert member.sent(actions, SyncGroupRequest).assignments == ()


def test_heartbeats_every_interval_and_not_while_one_is_in_flight():
    member = Member()
    member.stable()
    member.clock.advance(INTERVAL - 1)
    assert member.m.tick() == []
    request = member.heartbeat()
    assert (request.generation_id, request.member_id) == (1, "m1")
    member.clock.advance(INTERVAL)
    assert member.m.tick() == []  # the first is still unanswered
    assert member.answer(HeartbeatResponse(0)) == []
    assert member.m.next_deadline() == member.clock.now_ms()  # the next one is due already
    member.sent(member.m.tick(), HeartbeatRequest)


def test_heartbeats_also_while_syncing_and_only_fatal_errors_count_then():
    member = Member()
    member.sent(member.join(), SyncGroupRequest)
    sync = member.last
    heartbeat = member.heartbeat()
    for code in (E.rebalance_in_progress, E.unknown_member_id, E.illegal_generation):
        assert member.m.receive(heartbeat, HeartbeatResponse(code)) == []
        heartbeat = member.heartbeat()
    assert member.m.state is S.SYNCING
    assert kinds(member.m.receive(heartbeat, HeartbeatResponse(E.fenced_instance_id))) == [Failed]
    assert member.m.receive(sync, SyncGroupResponse(0, b"late")) == []  # ignored once failed


# -- JoinGroup errors ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [E.unknown_member_id, E.illegal_generation])
def test_join_unknown_member_or_illegal_generation_joins_again_at_once(code):
    member = Member()
    member.sent(member.m.start())
    member.sent(member.answer(JoinGroupResponse(E.member_id_required, member_id="m1")))
    again = member.sent(member.answer(JoinGroupResponse(code)), JoinGroupRequest)
    assert again.member_id == ("" if code == E.unknown_member_id else "m1")


@pytest.mark.parametrize(
    "code,forgets",
    [
        (E.not_coordinator, True),
        (E.coordinator_not_available, True),
        (E.coordinator_load_in_progress, False),
        (E.rebalance_in_progress, False),
    ],
)
def test_join_retriable_errors_retry_after_an_exponential_backoff(code, forgets):
    member = Member()
    member.sent(member.m.start())
    actions = member.answer(JoinGroupResponse(code))
    assert kinds(actions) == ([CoordinatorDead] if forgets else [])
    assert member.m.next_deadline() == member.clock.now_ms() + BACKOFF
    member.clock.advance(BACKOFF - 1)
    assert member.m.tick() == []
    member.clock.advance(1)
    member.sent(member.m.tick(), JoinGroupRequest)
    member.answer(JoinGroupResponse(code))
    assert member.m.next_deadline() == member.clock.now_ms() + 2 * BACKOFF
    assert member.m.state is S.JOINING


@pytest.mark.parametrize(
    "code",
    [
        E.fenced_instance_id,
        E.inconsistent_group_protocol,
        E.invalid_session_timeout,
        E.group_max_size_reached,
        E.invalid_group_id,
        E.group_authorization_failed,
        E.unsupported_version,
        E.unreleased_instance_id,
    ],
)
def test_join_fatal_errors_stop_the_member(code):
    member = Member()
    member.sent(member.m.start())
    actions = member.answer(JoinGroupResponse(code))
    assert kinds(actions) == [Failed] and actions[0].error.code == code
    assert member.m.state is S.FAILED and member.m.error.code == code
    assert member.m.tick() == [] and member.m.close() == [] and member.m.next_deadline() is None


def test_join_answer_of_another_protocol_type_is_inconsistent():
    member = Member()
    member.sent(member.m.start())
    actions = member.answer(JoinGroupResponse(0, 1, "consumer", "range", "m0", "m1"))
    assert actions[0].error.code == E.inconsistent_group_protocol


def test_lost_join_request_forgets_the_coordinator_and_retries_later():
    member = Member()
    join = member.sent(member.m.start())
    actions = member.m.request_failed(join, "connection reset")
    assert actions == [CoordinatorDead("connection reset")]
    assert member.m.receive(join, JoinGroupResponse(0, 1, "election", "v1", "m0", "m1")) == []  # stale
    member.clock.advance(BACKOFF)
    assert member.sent(member.m.tick(), JoinGroupRequest) is not join


# -- SyncGroup errors ------------------------------------------------------------------------------------------


def test_sync_rebalance_in_progress_joins_again_keeping_id_and_generation():
    member = Member()
    member.sent(member.join())
    again = member.sent(member.answer(SyncGroupResponse(E.rebalance_in_progress)), JoinGroupRequest)
    assert again.member_id == "m1" and member.m.generation_id == 1 and member.m.state is S.JOINING


@pytest.mark.parametrize("code,member_id", [(E.unknown_member_id, ""), (E.illegal_generation, "m1")])
def test_sync_unknown_member_or_illegal_generation_resets(code, member_id):
    member = Member()
    member.sent(member.join())
    again = member.sent(member.answer(SyncGroupResponse(code)), JoinGroupRequest)
    assert again.member_id == member_id and member.m.generation_id == -1


@pytest.mark.parametrize("code", [E.not_coordinator, E.coordinator_not_available])
def test_sync_coordinator_errors_rejoin_after_backoff(code):
    member = Member()
    member.sent(member.join())
    assert kinds(member.answer(SyncGroupResponse(code))) == [CoordinatorDead]
    assert member.m.state is S.JOINING
    member.clock.advance(BACKOFF)
    member.sent(member.m.tick(), JoinGroupRequest)


@pytest.mark.parametrize("code", [E.fenced_instance_id, E.group_authorization_failed, E.inconsistent_group_protocol])
def test_sync_fatal_errors(code):
    member = Member(instance_id="i1")
    member.sent(member.join())
    assert kinds(member.answer(SyncGroupResponse(code))) == [Failed]
    assert member.m.state is S.FAILED


def test_sync_answer_naming_another_protocol_is_inconsistent():
    member = Member()
    member.sent(member.join())
    actions = member.answer(SyncGroupResponse(0, b"", "election", "v2"))
    assert actions[0].error.code == E.inconsistent_group_protocol


# -- Heartbeat errors ------------------------------------------------------------------------------------------


def test_heartbeat_rebalance_in_progress_revokes_then_joins_again():
    member = Member()
    held = member.stable()
    member.heartbeat()
    actions = member.answer(HeartbeatResponse(E.rebalance_in_progress))
    assert kinds(actions) == [Revoked, Send] and actions[0].assignment == held
    assert actions[1].request.member_id == "m1" and member.m.held is None and member.m.state is S.JOINING


@pytest.mark.parametrize("code,member_id", [(E.unknown_member_id, ""), (E.illegal_generation, "m1")])
def test_heartbeat_unknown_member_or_illegal_generation_loses_the_assignment(code, member_id):
    member = Member()
    held = member.stable()
    member.heartbeat()
    actions = member.answer(HeartbeatResponse(code))
    assert kinds(actions) == [Lost, Send] and actions[0].assignment == held
    assert actions[1].request.member_id == member_id and member.m.generation_id == -1


def test_heartbeat_fenced_instance_id_is_fatal():
    member = Member(instance_id="i1")
    held = member.stable()
    member.heartbeat()
    actions = member.answer(HeartbeatResponse(E.fenced_instance_id))
    assert actions[0] == Lost(held) and actions[1].error.code == E.fenced_instance_id
    assert member.m.state is S.FAILED and member.m.held is None


@pytest.mark.parametrize("code", [E.not_coordinator, E.coordinator_not_available])
def test_heartbeat_coordinator_errors_forget_it_and_retry_after_backoff(code):
    member = Member()
    member.stable()
    member.heartbeat()
    assert kinds(member.answer(HeartbeatResponse(code))) == [CoordinatorDead]
    member.clock.advance(BACKOFF)
    member.sent(member.m.tick(), HeartbeatRequest)
    assert member.m.state is S.STABLE


def test_heartbeat_of_a_past_generation_is_ignored():
    member = Member()
    member.stable()
    old = member.heartbeat()
    member.sent(member.answer(HeartbeatResponse(E.rebalance_in_progress)), JoinGroupRequest)
    member.sent(member.answer(JoinGroupResponse(0, 2, "election", "v1", "m0", "m1")))
    assert member.m.receive(old, HeartbeatResponse(E.illegal_generation)) == []
    assert member.m.state is S.SYNCING


def test_lost_heartbeat_forgets_the_coordinator_and_retries():
    member = Member()
    member.stable()
    request = member.heartbeat()
    assert kinds(member.m.request_failed(request, "reset")) == [CoordinatorDead]
    member.clock.advance(BACKOFF)
    member.sent(member.m.tick(), HeartbeatRequest)


def test_no_heartbeat_answer_for_a_session_loses_the_assignment():
    member = Member()
    held = member.stable()
    member.heartbeat()  # never answered
    member.clock.advance(SESSION - INTERVAL - 1)
    assert member.m.tick() == []
    member.clock.advance(1)
    actions = member.m.tick()
    assert kinds(actions) == [CoordinatorDead, Lost] and actions[1].assignment == held
    assert member.m.state is S.JOINING and member.m.held is None
    member.clock.advance(BACKOFF)
    assert member.sent(member.m.tick(), JoinGroupRequest).member_id == "m1"


# -- rejoin, close ---------------------------------------------------------------------------------------------


def test_rejoin_asked_while_syncing_happens_after_the_assignment():
    member = Member()
    member.sent(member.join())
    assert member.m.rejoin("subscription changed") == []
    actions = member.answer(SyncGroupResponse(0, b"x"))
    assert kinds(actions) == [Assigned, Revoked, Send]
    assert actions[2].request.reason == "subscription changed"


def test_close_revokes_and_a_dynamic_member_leaves():
    member = Member()
    held = member.stable()
    actions = member.m.close()
    assert actions[0] == Revoked(held)
    leave = member.sent(actions, LeaveGroupRequest)
    assert (leave.member_id, leave.group_instance_id, member.m.state) == ("m1", None, S.LEAVING)
    assert member.m.tick() == [] and member.m.close() == []
    assert member.answer(LeaveGroupResponse(0)) == [Closed()] and member.m.state is S.CLOSED


def test_close_completes_when_the_leave_request_is_lost():
    member = Member()
    member.stable()
    leave = member.sent(member.m.close())
    assert member.m.request_failed(leave, "gone") == [Closed()]


def test_a_static_member_closes_without_leaving():
    member = Member(instance_id="i1")
    held = member.stable()
    assert member.m.close() == [Revoked(held), Closed()]
    assert member.m.state is S.CLOSED


def test_closing_before_start_or_before_a_member_id_sends_nothing():
    assert Member().m.close() == [Closed()]
    member = Member()
    member.sent(member.m.start())
    assert member.m.close() == [Closed()]


def test_static_member_sends_its_instance_id_everywhere():
    member = Member(instance_id="i1")
    join = member.sent(member.m.start())
    assert join.group_instance_id == "i1"
    sync = member.sent(member.answer(JoinGroupResponse(0, 1, "election", "v1", "m0", "m1")))
    assert sync.group_instance_id == "i1"
    member.answer(SyncGroupResponse(0, b""))
    assert member.heartbeat().group_instance_id == "i1"


# -- the state table -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("source,target", [(a, b) for a, b in itertools.product(S, S) if a not in _ALLOWED_PREVIOUS[b]])
def test_an_illegal_transition_raises_and_changes_nothing(source, target):
    machine = Member().m
    machine.state = source
    with pytest.raises(IllegalTransition):
        machine._to(target)
    assert machine.state is source


def test_every_state_is_reachable_through_the_table():
    reachable, frontier = {S.UNJOINED}, [S.UNJOINED]
    while frontier:
        state = frontier.pop()
        for target, sources in _ALLOWED_PREVIOUS.items():
            if state in sources and target not in reachable:
                reachable.add(target)
                frontier.append(target)
    assert reachable == set(S)


def test_config_refuses_nonsense():
    with pytest.raises(ValueError):
        MembershipConfig("")
    with pytest.raises(ValueError):
        MembershipConfig("g", session_timeout_ms=1000, heartbeat_interval_ms=1000)
    with pytest.raises(ValueError):
        MembershipConfig("g", group_instance_id="")


# -- the heartbeat timer ---------------------------------------------------------------------------------------


def test_heartbeat_timer_schedule():
    clock = ManualClock(0)
    timer = HeartbeatTimer(clock, session_timeout_ms=1000, interval_ms=300, retry_backoff_ms=50)
    assert not timer.should_heartbeat() and timer.next_at() == 300
    clock.advance(300)
    assert timer.should_heartbeat()
    timer.sent()
    assert timer.in_flight and not timer.should_heartbeat() and timer.next_at() == 600
    timer.failed()
    assert timer.next_at() == 350 and not timer.in_flight
    clock.advance(50)
    timer.sent()
    timer.received()
    assert timer.session_deadline() == 1350 and not timer.session_expired()
    clock.advance(1000)
    assert timer.session_expired()
    timer.reset()
    assert not timer.session_expired() and timer.next_at() == clock.now_ms() + 300
