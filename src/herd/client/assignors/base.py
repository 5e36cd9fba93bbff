"""The assignor interface, the cluster view assignors read, and what all of them share.

An assignor is pure: `assign` reads the partitions of the cluster and each member's decoded
Subscription and returns each member's Assignment; it touches no sockets, clocks or globals. The only
state an assignor keeps is its own member's last assignment (`on_assignment`), which sticky assignors
send back in their next `metadata`. The shape follows kafka-python's AbstractPartitionAssignor
(kafka/coordinator/assignors/abstract.py) and Java's ConsumerPartitionAssignor.

`assign` first narrows the input the way Java's AbstractPartitionAssignor.assign does: only topics that
some member subscribes to and that exist with at least one partition take part, and a member's rack is
its subscription's rack id unless empty. Members are ordered as Java's MemberInfo orders them: static
members (with a group.instance.id) first by instance id, then dynamic members by member id.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from herd.client.consumer_protocol import Assignment, Subscription, TopicPartition

__all__ = [
    "Cluster",
    "Member",
    "PartitionAssignor",
    "RebalanceProtocol",
    "RawAssignment",
    "build_members",
    "member_order",
    "subscribed_topics",
    "use_rack_aware_assignment",
]

RawAssignment = dict[str, list[TopicPartition]]


class RebalanceProtocol(enum.IntEnum):
    """KIP-429 rebalance protocols, with the ids Java's ConsumerPartitionAssignor.RebalanceProtocol uses."""

    EAGER = 0
    COOPERATIVE = 1


@dataclass(frozen=True, slots=True)
class Cluster:
    """Partition counts per topic and, for rack-aware assignment, the racks of each partition's replicas."""

    partition_counts: Mapping[str, int]
    replica_racks: Mapping[TopicPartition, frozenset[str]] = field(default_factory=dict)

    def racks_of(self, tp: TopicPartition) -> frozenset[str]:
        return self.replica_racks.get(tp, frozenset())


@dataclass(frozen=True, slots=True)
class Member:
    """A member as the algorithms see it: its subscribed topics that exist, its rack and its order key."""

    member_id: str
    topics: frozenset[str]
    subscription: Subscription
    group_instance_id: str | None
    rack: str | None

    @property
    def order_key(self) -> tuple[int, str]:
        """Java MemberInfo.compareTo: static members first by instance id, then by member id."""
        if self.group_instance_id is not None:
            return (0, self.group_instance_id)
        return (1, self.member_id)


def member_order(members: Iterable[Member]) -> list[Member]:
    return sorted(members, key=lambda m: m.order_key)


def build_members(
    cluster: Cluster, subscriptions: Mapping[str, Subscription], group_instance_ids: Mapping[str, str]
) -> dict[str, Member]:
    """Members keyed by id, topics narrowed to those that exist with at least one partition."""
    live = {t for t, n in cluster.partition_counts.items() if n > 0}
    return {
        member_id: Member(
            member_id=member_id,
            topics=frozenset(sub.topics) & live,
            subscription=sub,
            group_instance_id=group_instance_ids.get(member_id),
            rack=sub.rack_id or None,
        )
        for member_id, sub in subscriptions.items()
    }


def subscribed_topics(members: Iterable[Member]) -> list[str]:
    """Every topic some member subscribes to, sorted."""
    topics: set[str] = set()
    for member in members:
        topics |= member.topics
    return sorted(topics)


def use_rack_aware_assignment(
    consumer_racks: set[str], partition_racks: set[str], racks_per_partition: Mapping[Any, frozenset[str]]
) -> bool:
    """Java AbstractPartitionAssignor.useRackAwareAssignment (without the test-only preference flag)."""
    if not consumer_racks or consumer_racks.isdisjoint(partition_racks):
        return False
    return not all(racks == partition_racks for racks in racks_per_partition.values())


class PartitionAssignor(ABC):
    """A consumer-group partition assignor: a name, the metadata a member joins with, and `assign`."""

    name: ClassVar[str]
    supported_protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)

    def __init__(self, rack_id: str | None = None) -> None:
        self.rack_id = rack_id

    def metadata(self, topics: Iterable[str]) -> Subscription:
        """The Subscription this member sends in JoinGroup for `topics`."""
        topics = tuple(sorted(set(topics)))
        return Subscription(topics=topics, user_data=self.user_data(), rack_id=self.rack_id)

    def user_data(self) -> bytes | None:
        """Assignor-specific user data for the next subscription (none by default)."""
        return None

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        """Called with this member's assignment after each SyncGroup; stateless assignors ignore it."""

    def assign(
        self,
        cluster: Cluster,
        subscriptions: Mapping[str, Subscription],
        group_instance_ids: Mapping[str, str] | None = None,
    ) -> dict[str, Assignment]:
        """Each member's assignment (partitions sorted); every member gets an entry, maybe empty."""
        members = build_members(cluster, subscriptions, group_instance_ids or {})
        raw = self.assign_partitions(cluster, members)
        return {member_id: Assignment(tuple(sorted(raw[member_id]))) for member_id in subscriptions}

    @abstractmethod
    def assign_partitions(self, cluster: Cluster, members: Mapping[str, Member]) -> RawAssignment:
        """The algorithm proper: partitions per member id, for every member."""
