"""The consumer protocol through the membership machine: eager revocation, and KIP-429's two phases.

Two machines, A and B, are driven by hand through the rebalances a coordinator would run; the leader's
assignment is computed by the real ConsumerGroupProtocol with the real assignors. At every step no
partition is held by both members.
"""

from __future__ import annotations

import asyncio

from herd.client.assignors import Cluster
from herd.client.consumer import ConsumerGroupProtocol, partitions_of
from herd.client.consumer_protocol import TopicPartition, decode_subscription
from herd.client.heartbeat import ManualClock
from herd.client.membership import (
    Assigned,
    ComputeAssignment,
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
from herd.client.group_protocol import JoinedMember

PARTITIONS = frozenset(TopicPartition("t", p) for p in range(4))
REBALANCING = 27


class Consumer:
    def __init__(self, member_id: str, assignor: str, clock: ManualClock) -> None:
        self.id = member_id
        self.protocol = ConsumerGroupProtocol(["t"], [assignor], lambda topics: Cluster({"t": 4}))
        config = MembershipConfig("g", session_timeout_ms=10_000, heartbeat_interval_ms=1_000)
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
        answer = JoinGroupResponse(0, generation, "consumer", name, leader.id, c.id,
                                   members if c is leader else ())
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
