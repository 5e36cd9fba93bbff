"""The consumer protocol through the membership machine: eager revocation, and KIP-429's two phases.

Two machines, A and B, are driven by hand through the rebalances a coordinator would run; the leader's
assignment is computed by the real ConsumerGroupProtocol with the real assignors. At every step no
partition is held by both members. The last tests cover a second phase that never comes (the owner of the
withheld partitions replaced statically before it could revoke): the leader rejoins after the rebalance
timeout.
"""

from __future__ import annotations

import asyncio

import pytest

from herd.client.assignors import Cluster
from herd.client.consumer import ConsumerGroupProtocol, partitions_of
from herd.client.consumer_protocol import (
    Assignment,
    Subscription,
    TopicPartition,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from herd.client.group_protocol import JoinedMember
from herd.client.heartbeat import ManualClock
from herd.client.membership import (
    Assigned,
    ComputeAssignment,
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
    SyncGroupResponse,
)

PARTITIONS = frozenset(TopicPartition("t", p) for p in range(4))
REBALANCING = 27
REBALANCE_TIMEOUT = 30_000


class Consumer:
    def __init__(self, member_id: str, assignor: str, clock: ManualClock, instance_id: str | None = None) -> None:
        self.id = member_id
        self.protocol = ConsumerGroupProtocol(["t"], [assignor], lambda topics: Cluster({"t": 4}))
        config = MembershipConfig(
            "g",
            session_timeout_ms=10_000,
            heartbeat_interval_ms=1_000,
            rebalance_timeout_ms=REBALANCE_TIMEOUT,
            group_instance_id=instance_id,
        )
        self.m = MembershipMachine(config, self.protocol, clock)
        self.join: JoinGroupRequest | None = None
        self.sync = None

    def take(self, actions):
        for action in actions:
            if isinstance(action, Send) and isinstance(action.request, JoinGroupRequest):
                self.join = action.request
            elif isinstance(action, Send):
                self.sync = action.request
        return actions

    @property
    def held(self) -> frozenset[TopicPartition]:
        return partitions_of(self.m.held.data) if self.m.held is not None else frozenset()

    def joined_member(self) -> JoinedMember:
        assert self.join is not None
        return JoinedMember(self.id, None, self.join.protocols[0][1])

    def subscription(self):
        return decode_subscription(self.join.protocols[0][1])


def rebalance(generation: int, leader: Consumer, followers: list[Consumer]) -> dict[str, list]:
    """Answer every pending JoinGroup, let the leader assign, answer every SyncGroup; actions per member."""
    everyone = [leader, *followers]
    members = tuple(c.joined_member() for c in everyone)
    name = leader.join.protocols[0][0]
    out = {}
    for c in everyone:
        answer = JoinGroupResponse(0, generation, "consumer", name, leader.id, c.id, members if c is leader else ())
        out[c.id] = c.take(c.m.receive(c.join, answer))
    compute = out[leader.id][0]
    assert isinstance(compute, ComputeAssignment)
    assignments = asyncio.run(leader.protocol.assign(name, compute.members))
    leader.take(leader.m.assignment_ready(generation, assignments))
    for c in everyone:
        out[c.id] = c.take(c.m.receive(c.sync, SyncGroupResponse(0, assignments[c.id], "consumer", name)))
    return out


def heartbeat_rebalancing(c: Consumer, clock: ManualClock) -> list:
    clock.advance(1_000)
    request = next(a.request for a in c.m.tick() if isinstance(a, Send))
    assert isinstance(request, HeartbeatRequest)
    return c.take(c.m.receive(request, HeartbeatResponse(REBALANCING)))


def disjoint(*consumers: Consumer) -> bool:
    seen: set[TopicPartition] = set()
    for c in consumers:
        if seen & c.held:
            return False
        seen |= c.held
    return True


def test_cooperative_sticky_hands_partitions_over_in_two_phases():
    clock = ManualClock()
    a, b = Consumer("a", "cooperative-sticky", clock), Consumer("b", "cooperative-sticky", clock)
    a.take(a.m.start())
    rebalance(1, a, [])
    assert a.held == PARTITIONS and a.m.state is MemberState.STABLE

    b.take(b.m.start())
    actions = heartbeat_rebalancing(a, clock)
    assert [type(x) for x in actions] == [Send]  # nothing revoked before joining
    assert set(a.subscription().owned_partitions) == PARTITIONS and a.subscription().generation_id == 1

    # Phase one: A keeps two partitions, gives up the other two, and rejoins at once; B gets nothing yet.
    out = rebalance(2, a, [b])
    kinds = [type(x) for x in out["a"]]
    assert kinds == [Revoked, Assigned, Send], out["a"]
    revoked = partitions_of(out["a"][0].assignment.data)
    assert len(revoked) == 2 and a.held == PARTITIONS - revoked and b.held == frozenset()
    assert a.m.state is MemberState.JOINING and set(a.subscription().owned_partitions) == a.held
    assert disjoint(a, b)

    # Phase two: B rejoins too, and the freed partitions move to it; A revokes nothing more.
    assert [type(x) for x in heartbeat_rebalancing(b, clock)] == [Send]
    out = rebalance(3, a, [b])
    assert [type(x) for x in out["a"]] == [Assigned] and [type(x) for x in out["b"]] == [Assigned]
    assert b.held == revoked and a.held | b.held == PARTITIONS and disjoint(a, b)
    assert a.m.state is b.m.state is MemberState.STABLE


def test_eager_assignors_revoke_everything_before_joining():
    clock = ManualClock()
    a, b = Consumer("a", "range", clock), Consumer("b", "range", clock)
    a.take(a.m.start())
    rebalance(1, a, [])
    held = a.held
    b.take(b.m.start())
    actions = heartbeat_rebalancing(a, clock)
    assert [type(x) for x in actions] == [Revoked, Send]
    assert partitions_of(actions[0].assignment.data) == held and a.held == frozenset()
    assert a.subscription().owned_partitions == ()
    out = rebalance(2, a, [b])
    assert [type(x) for x in out["a"]] == [Assigned]
    assert len(a.held) == len(b.held) == 2 and disjoint(a, b)


def test_the_protocol_joins_with_every_assignor_by_kafka_name():
    protocol = ConsumerGroupProtocol(["t"], ["cooperative-sticky", "range"])
    names = [name for name, _ in protocol.metadata(None)]
    assert names == ["cooperative-sticky", "range"]
    assert not protocol.is_cooperative("range")  # not every assignor is cooperative: eager, as in Java
    assert ConsumerGroupProtocol(["t"], ["cooperative-sticky"]).is_cooperative("cooperative-sticky")


# -- a second phase that never comes ----------------------------------------------------------------------


def idle(consumers: list[Consumer], clock: ManualClock, until_ms: int) -> list:
    """Run the consumers' ticks until `until_ms`, every heartbeat answered OK; the other actions taken."""
    other = []
    while True:
        due = [(d, c) for c in consumers if (d := c.m.next_deadline()) is not None and d <= until_ms]
        if not due:
            break
        deadline, c = min(due, key=lambda pair: pair[0])
        clock.advance(max(0, deadline - clock.now_ms()))
        for action in c.take(c.m.tick()):
            if isinstance(action, Send) and isinstance(action.request, HeartbeatRequest):
                c.m.receive(action.request, HeartbeatResponse(0))
            else:
                other.append(action)
    clock.advance(max(0, until_ms - clock.now_ms()))
    return other


def first_phase_led_by_a(clock: ManualClock) -> tuple[Consumer, Consumer, frozenset[TopicPartition]]:
    """B (static) owns every partition; A joins and leads generation 2, which withholds B's surplus."""
    a = Consumer("a", "cooperative-sticky", clock)
    b = Consumer("b", "cooperative-sticky", clock, instance_id="b-iid")
    b.take(b.m.start())
    rebalance(1, b, [])
    a.take(a.m.start())
    heartbeat_rebalancing(b, clock)
    out = rebalance(2, a, [b])
    withheld = partitions_of(out["b"][0].assignment.data)
    assert a.held == frozenset() and len(withheld) == 2 and b.m.state is MemberState.JOINING
    return a, b, withheld


def test_the_leader_rejoins_when_the_withheld_partitions_are_not_handed_over():
    clock = ManualClock()
    a, b, withheld = first_phase_led_by_a(clock)
    stable_at = clock.now_ms()
    assert a.m.state is MemberState.STABLE and a.m.next_deadline() <= stable_at + REBALANCE_TIMEOUT

    # B's process restarts before its JoinGroup arrives; the coordinator replaces it in Stable (KIP-345)
    # and hands the new process the stored assignment, which lacks what was withheld: it revokes nothing.
    b = Consumer("b2", "cooperative-sticky", clock, instance_id="b-iid")
    b.take(b.m.start())
    b.take(b.m.receive(b.join, JoinGroupResponse(0, 2, "consumer", "cooperative-sticky", "a", "b2")))
    stored = encode_assignment(Assignment(tuple(sorted(PARTITIONS - withheld))))
    actions = b.take(b.m.receive(b.sync, SyncGroupResponse(0, stored, "consumer", "cooperative-sticky")))
    assert [type(x) for x in actions] == [Assigned] and b.m.state is MemberState.STABLE

    assert idle([a, b], clock, stable_at + REBALANCE_TIMEOUT - 1) == []
    actions = idle([a, b], clock, stable_at + REBALANCE_TIMEOUT)
    assert [type(x) for x in actions] == [Send] and a.m.state is MemberState.JOINING
    assert "cooperative handover of generation 2" in a.join.reason

    # The rebalance the leader started hands the withheld partitions over.
    heartbeat_rebalancing(b, clock)
    rebalance(3, a, [b])
    assert a.held == withheld and a.held | b.held == PARTITIONS and disjoint(a, b)
    assert a.m.next_deadline() == clock.now_ms() + 1_000  # the next heartbeat, no handover pending


def test_no_extra_rebalance_when_the_owner_hands_over_in_time():
    clock = ManualClock()
    a, b, withheld = first_phase_led_by_a(clock)
    assert [type(x) for x in heartbeat_rebalancing(a, clock)] == [Send]  # B's rejoin started the second phase
    rebalance(3, a, [b])
    assert a.held == withheld and disjoint(a, b)
    assert [type(x) for x in idle([a], clock, clock.now_ms() + 2 * REBALANCE_TIMEOUT)] == []
    assert a.m.state is MemberState.STABLE


def test_a_leader_owner_put_back_into_the_same_generation_rejoins_after_the_timeout():
    """The leader withholds from itself, revokes and rejoins, but an admin removes it (static) and its
    JoinGroup comes back as a replacement into the same generation (the rebalance was lost)."""
    clock = ManualClock()
    a = Consumer("a", "cooperative-sticky", clock, instance_id="a-iid")
    b = Consumer("b", "cooperative-sticky", clock)
    a.take(a.m.start())
    rebalance(1, a, [])
    b.take(b.m.start())
    heartbeat_rebalancing(a, clock)
    out = rebalance(2, a, [b])
    kept = a.held
    assert [type(x) for x in out["a"]] == [Revoked, Assigned, Send] and b.held == frozenset()

    lost = a.take(a.m.receive(a.join, JoinGroupResponse(25)))  # UNKNOWN_MEMBER_ID: removed by an admin
    assert [type(x) for x in lost] == [Lost, Send]
    a.take(
        a.m.receive(
            a.join,
            JoinGroupResponse(
                0, 2, "consumer", "cooperative-sticky", "a2", "a2", (b.joined_member(),), skip_assignment=True
            ),
        )
    )
    stored = encode_assignment(Assignment(tuple(sorted(kept))))
    a.take(a.m.receive(a.sync, SyncGroupResponse(0, stored, "consumer", "cooperative-sticky")))
    stable_at = clock.now_ms()
    assert a.m.state is MemberState.STABLE and a.m.generation_id == 2

    assert idle([a], clock, stable_at + REBALANCE_TIMEOUT - 1) == []
    assert [type(x) for x in idle([a], clock, stable_at + REBALANCE_TIMEOUT)] == [Send]
    assert a.m.state is MemberState.JOINING


@pytest.mark.parametrize("assignor", ["cooperative-sticky", "range"])
def test_a_complete_assignment_arms_no_handover(assignor):
    clock = ManualClock()
    a, b = Consumer("a", assignor, clock), Consumer("b", assignor, clock)
    a.take(a.m.start())
    b.take(b.m.start())
    rebalance(1, a, [b])
    assert a.held | b.held == PARTITIONS
    assert [type(x) for x in idle([a], clock, clock.now_ms() + 2 * REBALANCE_TIMEOUT)] == []


def test_handover_pending_means_some_owner_loses_a_partition():
    protocol = ConsumerGroupProtocol(["t"], ["cooperative-sticky"])
    owned = Subscription(("t",), owned_partitions=(TopicPartition("t", 0), TopicPartition("t", 1)))
    members = (
        JoinedMember("x", None, encode_subscription(owned)),
        JoinedMember("y", None, encode_subscription(Subscription(("t",)))),
    )
    keep = encode_assignment(Assignment((TopicPartition("t", 0), TopicPartition("t", 1))))
    take = encode_assignment(Assignment((TopicPartition("t", 0),)))
    assert not protocol.handover_pending("cooperative-sticky", members, {"x": keep, "y": b""})
    assert protocol.handover_pending("cooperative-sticky", members, {"x": take, "y": b""})
    assert protocol.handover_pending("cooperative-sticky", members, {"y": keep})  # x left out entirely
    eager = ConsumerGroupProtocol(["t"], ["range"])
    assert not eager.handover_pending("range", members, {"x": take, "y": b""})


@pytest.mark.parametrize(("assignor", "rejoins"), [("cooperative-sticky", True), ("range", False)])
def test_a_new_static_leader_process_put_back_with_skip_assignment(assignor, rejoins):
    """A restarted static leader cannot know whether the assignment it did not compute left a handover
    pending (its previous process may have been the owner): under a cooperative protocol it rejoins once,
    one rebalance timeout later, if the group is still at that generation."""
    clock = ManualClock()
    b = Consumer("b", assignor, clock)
    a = Consumer("a2", assignor, clock, instance_id="a-iid")
    b.take(b.m.start())
    a.take(a.m.start())
    a.take(
        a.m.receive(
            a.join,
            JoinGroupResponse(0, 2, "consumer", assignor, "a2", "a2", (b.joined_member(),), skip_assignment=True),
        )
    )
    stored = encode_assignment(Assignment((TopicPartition("t", 0), TopicPartition("t", 1))))
    a.take(a.m.receive(a.sync, SyncGroupResponse(0, stored, "consumer", assignor)))
    stable_at = clock.now_ms()
    assert a.m.state is MemberState.STABLE
    assert idle([a], clock, stable_at + REBALANCE_TIMEOUT - 1) == []
    actions = idle([a], clock, stable_at + REBALANCE_TIMEOUT)
    assert [type(x) for x in actions] == ([Send] if rejoins else [])
