"""The `range` assignor, as Java's RangeAssignor with KIP-881 rack awareness
(apache/kafka clients/src/main/java/org/apache/kafka/clients/consumer/RangeAssignor.java).

Per topic, the members subscribing to it are put in MemberInfo order (static members by instance id,
then member id) and the partitions in numeric order; with n partitions and k members each member gets
n // k contiguous partitions and the first n % k members one more.

Rack awareness applies when some member has a rack, some partition has a replica on a member's rack, and
the partitions of a topic do not all sit on the same set of racks (Java's useRackAwareAssignment). Then,
before the plain ranges, a first pass hands each member (same order, same per-topic quotas) only the
partitions with a replica on its rack; members without a rack match anything. Topics with the same
subscribers and the same partition count stay co-partitioned: partition p of all of them goes to the
first member whose rack matches p in every one of those topics. The plain pass then places what is left,
and each member's list is sorted.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from itertools import islice

from herd.client.assignors.base import (
    Cluster,
    Member,
    PartitionAssignor,
    RawAssignment,
    member_order,
    subscribed_topics,
    use_rack_aware_assignment,
)
from herd.client.consumer_protocol import TopicPartition

MayAssign = Callable[[str, int], bool]


class _TopicState:
    """Java RangeAssignor.TopicAssignmentState: one topic's quotas and what is still unassigned."""

    def __init__(self, cluster: Cluster, topic: str, members: list[Member]) -> None:
        self.topic = topic
        self.consumers: dict[str, str | None] = {m.member_id: m.rack for m in members}
        count = cluster.partition_counts[topic]
        self.num_partitions = count
        self.unassigned: dict[int, None] = dict.fromkeys(range(count))
        self.num_assigned = dict.fromkeys(self.consumers, 0)
        self.per_consumer, self.remaining_extra = divmod(count, len(members))
        consumer_racks = {rack for rack in self.consumers.values() if rack is not None}
        self.partition_racks: dict[int, frozenset[str]] = {}
        if consumer_racks:
            self.partition_racks = {p: cluster.racks_of(TopicPartition(topic, p)) for p in range(count)}
        all_racks: set[str] = set().union(*self.partition_racks.values())
        self.needs_rack_aware = use_rack_aware_assignment(consumer_racks, all_racks, self.partition_racks)

    def racks_match(self, consumer: str, partition: int) -> bool:
        rack = self.consumers[consumer]
        return rack is None or rack in self.partition_racks.get(partition, ())

    def max_assignable(self, consumer: str) -> int:
        quota = self.per_consumer + (1 if self.remaining_extra > 0 else 0)
        return max(0, quota - self.num_assigned[consumer])

    def assign(self, consumer: str, partitions: list[int], result: RawAssignment) -> None:
        result[consumer].extend(TopicPartition(self.topic, p) for p in partitions)
        self.num_assigned[consumer] += len(partitions)
        if self.num_assigned[consumer] > self.per_consumer:
            self.remaining_extra -= 1
        for p in partitions:
            del self.unassigned[p]


def _assign_ranges(state: _TopicState, may_assign: MayAssign | None, result: RawAssignment) -> None:
    for consumer in state.consumers:
        if not state.unassigned:
            return
        candidates = iter(state.unassigned)
        if may_assign is not None:
            candidates = (p for p in candidates if may_assign(consumer, p))
        partitions = list(islice(candidates, state.max_assignable(consumer)))
        if partitions:
            state.assign(consumer, partitions, result)


def _assign_co_partitioned(states: list[_TopicState], result: RawAssignment) -> None:
    remaining = list(states[0].consumers)
    for p in range(states[0].num_partitions):
        fits = (c for c in remaining if all(s.racks_match(c, p) and s.max_assignable(c) > 0 for s in states))
        match = next(fits, None)
        if match is None:
            continue
        for state in states:
            state.assign(match, [p], result)
        if not any(s.max_assignable(match) > 0 for s in states):
            remaining.remove(match)
            if not remaining:
                return


def _assign_with_rack_matching(states: list[_TopicState], result: RawAssignment) -> None:
    groups: defaultdict[tuple[object, int], list[_TopicState]] = defaultdict(list)
    for state in states:
        groups[(tuple(state.consumers.items()), state.num_partitions)].append(state)
    for group in groups.values():
        if len(group) > 1:
            _assign_co_partitioned(group, result)
        elif group[0].needs_rack_aware:
            _assign_ranges(group[0], group[0].racks_match, result)


class RangeAssignor(PartitionAssignor):
    name = "range"

    def assign_partitions(self, cluster: Cluster, members: Mapping[str, Member]) -> RawAssignment:
        result: RawAssignment = {member_id: [] for member_id in members}
        ordered = member_order(members.values())
        states = [
            _TopicState(cluster, topic, [m for m in ordered if topic in m.topics])
            for topic in subscribed_topics(ordered)
        ]
        rack_aware = any(state.needs_rack_aware for state in states)
        if rack_aware:
            _assign_with_rack_matching(states, result)
        for state in states:
            _assign_ranges(state, None, result)
        return result
