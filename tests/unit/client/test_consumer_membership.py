"""herd's client on the consumer protocol (herd.client.consumer_membership), its machines driven against herd's own
coordinator core (GroupCoordinatorShard) with one manual clock: members join, share, hand partitions over,
leave, are fenced and fail as the Java client would (ConsumerMembershipManager), and at no step does a partition
belong to two members as the members themselves see it."""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from herd.client.consumer_membership import (
    Assigned,
    Closed,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerMembership,
    CoordinatorDead,
    Failed,
    Lost,
    Revoked,
    Send,
    State,
)
from herd.coordinator import CoordinatorConfig, GroupCoordinatorShard, ManualClock, ManualTimer
from herd.coordinator.consumer.topics import TopicsImage
from herd.coordinator.consumer_heartbeat import ConsumerGroupHeartbeat

FOO = uuid.UUID(int=1)
TOPICS = TopicsImage.of([("foo", FOO, 6)], version=1)


class Group:
    """A coordinator shard and the members of the test, on one clock; every step checks the members' own view."""

    def __init__(self, **config: object) -> None:
        self.clock = ManualClock(1_000_000)
        self.timer = ManualTimer(self.clock)
        self.shard = GroupCoordinatorShard(
            clock=self.clock,
            timer=self.timer,
            config=CoordinatorConfig(group_consumer_heartbeat_interval_ms=1000, **config),  # type: ignore[arg-type]
        )
        self.shard.set_topics(TOPICS)
        self.members: dict[str, ConsumerMembership] = {}
        self.held: dict[str, set[int]] = {}
        self.seen: list[object] = []
        self.epochs: dict[str, list[int]] = {}
        self.silent: set[str] = set()  # cut off: a zombie's view is not checked (it can no longer commit)

    def add(self, name: str, **kw: object) -> ConsumerMembership:
        member = ConsumerMembership("g", ("foo",), self.clock, member_id=name, **kw)  # type: ignore[arg-type]
        self.members[name], self.held[name], self.epochs[name] = member, set(), []
        self.perform(name, member.start())
        return member

    def perform(self, name: str, actions: list[object]) -> None:
        while actions:
            action = actions.pop(0)
            self.seen.append((name, action))
            if isinstance(action, Send):
                actions += self.members[name].receive(action.request, self.answer(action.request))
            elif isinstance(action, Revoked):
                self.held[name] -= set(action.partitions.get(FOO, ()))
            elif isinstance(action, Lost):
                self.held[name] -= set(action.partitions.get(FOO, ()))
            elif isinstance(action, Assigned):
                self.held[name] |= set(action.partitions.get(FOO, ()))
            self.no_partition_held_twice()
        self.epochs[name].append(self.members[name].epoch)

    def answer(self, request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
        req = ConsumerGroupHeartbeat(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            instance_id=request.instance_id,
            rack_id=request.rack_id,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            subscribed_topic_names=request.subscribed_topic_names,
            server_assignor=request.server_assignor,
            owned=request.owned,
            subscribed_topic_regex=request.subscribed_topic_regex,
        )
        result = self.shard.consumer_group_heartbeat(req, "h")
        for record in result.records:
            self.shard.replay(record)
        (reply,) = result.replies
        r = reply.response
        return ConsumerGroupHeartbeatResponse(
            r.error_code, r.error_message, r.member_id, r.member_epoch, r.heartbeat_interval_ms, r.assignment
        )

    def no_partition_held_twice(self) -> None:
        owners: dict[int, str] = {}
        for name, partitions in self.held.items():
            if name in self.silent:
                continue
            for partition in partitions:
                assert partition not in owners, f"partition {partition} held by {owners[partition]} and {name}"
                owners[partition] = name

    def run(self, ms: int, step: int = 100, skip: tuple[str, ...] = ()) -> None:
        """Let `ms` pass in steps: the coordinator's timers fire, every member (but `skip`, cut off) sends what is
        due."""
        self.silent |= set(skip)
        for _ in range(ms // step):
            for result in self.timer.advance(step):
                for record in result.records:
                    self.shard.replay(record)
            for name, member in self.members.items():
                if name not in skip:
                    self.perform(name, member.tick())

    def balanced(self) -> bool:
        live = [self.held[n] for n, m in self.members.items() if m.state is State.STABLE]
        union = set().union(*live) if live else set()
        return union == set(range(6)) and max(map(len, live)) - min(map(len, live)) <= 1


def test_members_join_share_and_hand_partitions_over_without_overlap() -> None:
    group = Group()
    a = group.add("a")
    assert a.state is State.STABLE and group.held["a"] == set(range(6)) and a.interval_ms == 1000
    group.add("b")
    group.run(3000)
    assert group.balanced() and len(group.held["b"]) == 3
    group.add("c")
    group.run(3000)
    assert group.balanced() and all(len(group.held[n]) == 2 for n in "abc")
    revoked_then_assigned = [
        type(action).__name__ for name, action in group.seen if name == "a" and isinstance(action, (Revoked, Assigned))
    ]
    assert revoked_then_assigned == ["Assigned", "Revoked", "Revoked"]  # a only gave up, in two steps
    for epochs in group.epochs.values():
        assert epochs == sorted(epochs)  # epochs only grow


def test_a_member_that_closes_revokes_leaves_and_its_partitions_move() -> None:
    group = Group()
    group.add("a")
    b = group.add("b")
    group.run(3000)
    group.perform("b", b.close())
    assert b.state is State.CLOSED and group.held["b"] == set()
    assert isinstance(group.seen[-1][1], Closed)
    group.run(2000)
    assert group.held["a"] == set(range(6))


def test_a_silent_member_is_fenced_loses_its_partitions_and_rejoins_with_its_id() -> None:
    group = Group()
    group.add("a")
    b = group.add("b")
    group.run(3000)
    group.run(46_000, step=1000, skip=("b",))  # b says nothing for longer than the session timeout
    assert group.held["a"] == set(range(6)) and len(group.held["b"]) == 3  # b, cut off, does not know yet
    group.perform("b", b.tick())  # its next heartbeat: UNKNOWN_MEMBER_ID, and it loses them
    group.silent.discard("b")
    lost = [action for name, action in group.seen if name == "b" and isinstance(action, Lost)]
    assert len(lost) == 1 and b.member_id == "b"
    group.run(3000)
    assert group.balanced() and len(group.held["b"]) == 3


def test_a_fatal_error_stops_the_member() -> None:
    group = Group()
    member = group.add("a", server_assignor="sticky")
    assert member.state is State.FAILED and member.error is not None
    assert member.error.code is ErrorCode.unsupported_assignor
    assert isinstance(group.seen[-1][1], Failed) and member.next_deadline() is None


def test_after_a_lost_answer_the_next_heartbeat_carries_everything_again() -> None:
    group = Group()
    a = group.add("a")
    group.run(1000)
    (send,) = group_advance_and_take(group, a)
    assert send.request.subscribed_topic_names is None and send.request.owned is None  # nothing changed
    assert isinstance(a.request_failed(send.request, "connection lost")[0], CoordinatorDead)
    group.clock.set(group.clock.now_ms() + 100)
    (again,) = a.tick()
    assert again.request.subscribed_topic_names == ("foo",) and again.request.rebalance_timeout_ms == 300_000
    assert again.request.owned == {FOO: frozenset(range(6))}


def group_advance_and_take(group: Group, member: ConsumerMembership) -> list[Send]:
    """Move the clock to the member's next heartbeat and take it without answering it."""
    deadline = member.next_deadline()
    assert deadline is not None
    group.clock.set(max(deadline, group.clock.now_ms()))
    actions = member.tick()
    assert all(isinstance(action, Send) for action in actions)
    return actions  # type: ignore[return-value]


def test_the_server_assignor_goes_when_joining_and_after_a_failure_only() -> None:
    """Java's HeartbeatState: ServerAssignor "sent when joining or if it has changed since the last heartbeat"; a
    keep-alive without it can take the coordinator's fast path."""
    group = Group()
    a = group.add("a", server_assignor="uniform")
    first = next(action for name, action in group.seen if isinstance(action, Send))
    assert first.request.server_assignor == "uniform"
    group.run(1000)
    (send,) = group_advance_and_take(group, a)
    assert send.request.server_assignor is None and send.request.instance_id is None
    a.request_failed(send.request, "connection lost")
    group.clock.set(group.clock.now_ms() + 100)
    (again,) = a.tick()
    assert again.request.server_assignor == "uniform"


def test_a_regular_expression_goes_when_joining_when_it_changes_and_empty_when_taken_back() -> None:
    """Java's HeartbeatState: SubscribedTopicRegex when joining (if there is one) and when it changed since the last
    heartbeat, "" when the pattern was removed."""
    group = Group()
    a = group.add("a", topic_regex="fo+")
    first = next(action for name, action in group.seen if isinstance(action, Send))
    assert first.request.subscribed_topic_regex == "fo+"
    group.run(1000)
    (keep_alive,) = group_advance_and_take(group, a)
    assert keep_alive.request.subscribed_topic_regex is None
    a.receive(keep_alive.request, group.answer(keep_alive.request))
    (changed,) = a.subscribe(("foo",), topic_regex=None)
    assert changed.request.subscribed_topic_regex == "" and changed.request.subscribed_topic_names is None
