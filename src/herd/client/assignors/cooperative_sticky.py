"""The `cooperative-sticky` assignor (KIP-429), after Java's CooperativeStickyAssignor
(apache/kafka clients/src/main/java/org/apache/kafka/clients/consumer/CooperativeStickyAssignor.java).

It computes the sticky assignment (herd.client.assignors.sticky) from the owned partitions members report
in their subscriptions, then withholds every partition that would move from a member that still claims it
to another member: in this generation the new owner does not get it and the old owner, seeing it missing
from its assignment, revokes it and rejoins; the next rebalance hands it over. So no partition is ever
assigned to one member while another still owns it. If membership and subscriptions stay the same, that
next rebalance completes the handover: what members then own is part of a balanced sticky result, which
the sticky algorithm completes without moving anything else (the sticky module docstring says why;
otherwise it would withhold again, leaving partitions unassigned meanwhile). Java derives the moving
partitions the same way (computePartitionsTransferringOwnership) when it cannot take them from the
algorithm; herd always derives them from the claims, which also covers claims from stale generations.

Generation: a v2+ subscription carries it; older ones carry it as the user data this assignor writes (an
int32, Java's COOPERATIVE_STICKY_ASSIGNOR_USER_DATA_V0), which unreadable user data turns into -1.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from kio.serial.readers import read_int32

from herd.client.assignors.base import Cluster, Member, RawAssignment, RebalanceProtocol
from herd.client.assignors.sticky import AbstractStickyAssignor, MemberData
from herd.client.consumer_protocol import NO_GENERATION, Assignment, Subscription, TopicPartition

__all__ = ["CooperativeStickyAssignor", "withhold_transfers"]


def withhold_transfers(result: RawAssignment, subscriptions: Mapping[str, Subscription]) -> RawAssignment:
    """Drop from each member's assignment the partitions some other member still claims to own."""
    claimants: defaultdict[TopicPartition, set[str]] = defaultdict(set)
    for member_id, subscription in subscriptions.items():
        for tp in subscription.owned_partitions:
            claimants[tp].add(member_id)
    return {
        member_id: [tp for tp in parts if not claimants.get(tp, set()) - {member_id}]
        for member_id, parts in result.items()
    }


class CooperativeStickyAssignor(AbstractStickyAssignor):
    name = "cooperative-sticky"
    supported_protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def __init__(self, rack_id: str | None = None) -> None:
        super().__init__(rack_id)
        self._owned: tuple[TopicPartition, ...] = ()
        self._generation = NO_GENERATION

    def metadata(self, topics: Iterable[str]) -> Subscription:
        return Subscription(
            topics=tuple(sorted(set(topics))),
            user_data=self.user_data(),
            owned_partitions=self._owned,
            generation_id=self._generation,
            rack_id=self.rack_id,
        )

    def user_data(self) -> bytes:
        return self._generation.to_bytes(4, "big", signed=True)

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        self._owned = assignment.partitions
        self._generation = generation

    def member_data(self, subscription: Subscription) -> MemberData:
        if subscription.generation_id >= 0:
            return MemberData(subscription.owned_partitions, subscription.generation_id)
        if subscription.user_data is None:
            return MemberData(subscription.owned_partitions, None)
        try:
            generation = int(read_int32(subscription.user_data, 0)[0])
        except Exception:  # Java: unreadable user data means the default generation
            generation = NO_GENERATION
        return MemberData(subscription.owned_partitions, generation)

    def assign_partitions(self, cluster: Cluster, members: Mapping[str, Member]) -> RawAssignment:
        result = super().assign_partitions(cluster, members)
        return withhold_transfers(result, {m: member.subscription for m, member in members.items()})
