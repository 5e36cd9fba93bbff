"""The server-side assignors of consumer groups: `uniform` and `range` (Kafka's group-coordinator/.../assignor/,
branch 4.2), chosen per group from `group.consumer.assignors` and the members' ServerAssignor.

An assignor maps the group's members (each with the ids of the existing topics it subscribes to and its current
*target* assignment) and the partition counts of those topics to each member's next target assignment. Both are
deterministic functions of what they are given, in the order the members are given (Kafka iterates a hash map;
herd's group passes its members in a fixed order, so a coordinator that reloads the group computes the same
assignment).

- **uniform** (UniformAssignor.java): balanced first, then sticky. When every member subscribes to the same topics
  (homogeneous, UniformHomogeneousAssignmentBuilder.java) each member keeps what it had up to its quota (the
  partition count divided by the member count, one more for the first members that need it) and the partitions
  left go to the members under their quota. Otherwise (heterogeneous, UniformHeterogeneousAssignmentBuilder.java)
  each member keeps every partition it had of the topics it still subscribes to, the free partitions of each
  topic go to its least loaded subscribers, topics with the most partitions per subscriber first, and then
  partitions move, topic by topic, from a topic's most loaded subscribers to its least loaded ones while that
  narrows the gap (at most 16 passes over the topics).
- **range** (RangeAssignor.java): for each topic, contiguous ranges of partitions over its subscribers, sorted
  with static members first (by instance id) and then by member id; members subscribed to the same topics get
  the same partition numbers of each (co-partitioning). It is not sticky.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from herd.coordinator.consumer.assignment import EMPTY, Assignment, TopicId

UNIFORM = "uniform"
RANGE = "range"


class AssignorError(Exception):
    """The assignor could not assign (a subscribed topic missing from the metadata it was given); the heartbeat
    that triggered it fails with UNKNOWN_SERVER_ERROR, as Kafka's PartitionAssignorException does."""


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """What an assignor knows of a member: the ids of the existing topics it subscribes to and its current target
    assignment (Kafka's MemberSubscriptionAndAssignmentImpl)."""

    member_id: str
    topics: frozenset[TopicId]
    assignment: Assignment = field(default_factory=dict)
    instance_id: str | None = None
    rack_id: str | None = None


class Assignor(Protocol):
    name: str

    def assign(self, members: Sequence[MemberSpec], partitions: Mapping[TopicId, int]) -> dict[str, Assignment]:
        """Each member's new target assignment; `partitions` has the partition count of every subscribed topic."""
        ...


def partition_count(partitions: Mapping[TopicId, int], topic_id: TopicId) -> int:
    """The partition count of a subscribed topic; AssignorError when the metadata given has no such topic."""
    count = partitions.get(topic_id)
    if count is None:
        raise AssignorError(f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata.")
    return count


def is_homogeneous(members: Sequence[MemberSpec]) -> bool:
    """Whether every member subscribes to the same topics (Kafka's SubscriptionType.HOMOGENEOUS)."""
    return all(member.topics == members[0].topics for member in members[1:])


class UniformAssignor:
    name = UNIFORM

    def assign(self, members: Sequence[MemberSpec], partitions: Mapping[TopicId, int]) -> dict[str, Assignment]:
        if not members:
            return {}
        if is_homogeneous(members):
            return _uniform_homogeneous(members, partitions)
        return _UniformHeterogeneous(members, partitions).build()


def _uniform_homogeneous(members: Sequence[MemberSpec], partitions: Mapping[TopicId, int]) -> dict[str, Assignment]:
    topics = sorted(members[0].topics)
    if not topics:
        return {member.member_id: EMPTY for member in members}
    counts = {topic_id: partition_count(partitions, topic_id) for topic_id in topics}
    total = sum(counts.values())
    quota, extra = divmod(total, len(members))

    held = {(t, p) for member in members for t, parts in member.assignment.items() if t in counts for p in parts}
    free = [(t, p) for t in topics for p in range(counts[t]) if (t, p) not in held]

    result: dict[str, dict[TopicId, frozenset[int]]] = {}
    room: list[tuple[str, int]] = []  # members under their quota, in order, and how many they may still take
    for index, member in enumerate(members):
        allowed = quota + 1 if extra > 0 else quota
        with_extra = extra > 0
        kept: dict[TopicId, frozenset[int]] = {}
        for topic_id in sorted(member.assignment):
            if topic_id not in counts:
                continue  # no longer subscribed: the whole topic goes
            owned = sorted(p for p in member.assignment[topic_id] if p < counts[topic_id])
            keep, over = owned[:allowed], owned[allowed:]
            allowed -= len(keep)
            free.extend((topic_id, p) for p in over)
            if keep:
                kept[topic_id] = frozenset(keep)
        if allowed > 0 and with_extra and len(members) - index > extra:
            # it did not reach the extra partition: leave it for one of the members after it that must take it
            allowed -= 1
            with_extra = False
        if with_extra:
            extra -= 1
        if allowed > 0:
            room.append((member.member_id, allowed))
        result[member.member_id] = kept

    next_free = 0
    for member_id, allowed in room:
        taken = free[next_free : next_free + allowed]
        next_free += len(taken)
        if taken:
            kept = result[member_id]
            for topic_id, partition in taken:
                kept[topic_id] = kept.get(topic_id, frozenset()) | {partition}
    if next_free < len(free):
        raise AssertionError(f"uniform assignor left {len(free) - next_free} partitions unassigned")  # a bug
    return dict(result)


class _UniformHeterogeneous:
    """The heterogeneous uniform assignment: keep, fill the least loaded, then even out topic by topic."""

    MAX_PASSES = 16

    def __init__(self, members: Sequence[MemberSpec], partitions: Mapping[TopicId, int]) -> None:
        self.members = members
        self.sizes = [0] * len(members)
        self.subscribers: dict[TopicId, list[int]] = {}
        for index, member in enumerate(members):
            for topic_id in sorted(member.topics):
                self.subscribers.setdefault(topic_id, []).append(index)
        self.counts = {topic_id: partition_count(partitions, topic_id) for topic_id in self.subscribers}
        self.owners = {topic_id: [-1] * count for topic_id, count in self.counts.items()}
        self.targets: list[dict[TopicId, set[int]]] = [{} for _ in members]

    def build(self) -> dict[str, Assignment]:
        for index, member in enumerate(self.members):  # keep what is still subscribed
            for topic_id, parts in member.assignment.items():
                if topic_id in member.topics:
                    for partition in parts:
                        if partition < self.counts[topic_id]:
                            self._give(topic_id, partition, index)
        for topic_id in self._by_load(self.subscribers):
            free = [p for p, owner in enumerate(self.owners[topic_id]) if owner == -1]
            if free:
                self._fill(topic_id, free)
        movable = [topic_id for topic_id, subscribers in self.subscribers.items() if len(subscribers) >= 2]
        if movable:
            self._even_out(self._by_load(movable))
        return {
            member.member_id: {t: frozenset(parts) for t, parts in target.items() if parts}
            for member, target in zip(self.members, self.targets, strict=True)
        }

    def _by_load(self, topic_ids: object) -> list[TopicId]:
        """Topics with the most partitions per subscriber first, then the fewest subscribers, then by id."""

        def key(topic_id: TopicId) -> tuple[float, int, TopicId]:
            subscribers = len(self.subscribers[topic_id])
            return (-self.counts[topic_id] / subscribers, subscribers, topic_id)

        return sorted(topic_ids, key=key)  # type: ignore[call-overload,no-any-return]

    def _give(self, topic_id: TopicId, partition: int, index: int) -> None:
        previous = self.owners[topic_id][partition]
        if previous != -1:
            self.targets[previous][topic_id].discard(partition)
            self.sizes[previous] -= 1
        self.targets[index].setdefault(topic_id, set()).add(partition)
        self.owners[topic_id][partition] = index
        self.sizes[index] += 1

    def _fill(self, topic_id: TopicId, free: list[int]) -> None:
        """Each free partition to the least loaded subscriber: ties go round the members loaded alike, in the
        order of their load before this topic and then their position (Kafka's MemberAssignmentBalancer)."""
        heap = [(self.sizes[i], self.sizes[i], i) for i in self.subscribers[topic_id]]
        heapq.heapify(heap)
        for partition in free:
            size, before, index = heapq.heappop(heap)
            self._give(topic_id, partition, index)
            heapq.heappush(heap, (size + 1, before, index))

    def _even_out(self, topic_ids: list[TopicId]) -> None:
        last_moved = -1  # the index of the last topic that moved a partition (or the first topic)
        for _ in range(self.MAX_PASSES):
            for position, topic_id in enumerate(topic_ids):
                if position == last_moved:
                    return  # a whole round of the topics since it moved nothing
                if self._even_out_topic(topic_id) or last_moved == -1:
                    last_moved = position

    def _even_out_topic(self, topic_id: TopicId) -> int:
        """Move partitions of `topic_id` from its most loaded subscribers (their highest partition first) to its
        least loaded ones until the two differ by at most one, or the most loaded have none of it left."""
        subscribers = self.subscribers[topic_id]
        if max(self.sizes[i] for i in subscribers) - min(self.sizes[i] for i in subscribers) <= 1:
            return 0
        moved = 0
        # lazy heaps: an entry whose size is out of date is refreshed when it reaches the top
        least = [(self.sizes[i], i) for i in subscribers]
        most = [(-self.sizes[i], -i) for i in subscribers if self.targets[i].get(topic_id)]
        heapq.heapify(least)
        heapq.heapify(most)
        while most:
            size, giver = -most[0][0], -most[0][1]
            if not self.targets[giver].get(topic_id):
                heapq.heappop(most)  # nothing of this topic left to give
                continue
            if size != self.sizes[giver]:
                heapq.heapreplace(most, (-self.sizes[giver], -giver))
                continue
            while least[0][0] != self.sizes[least[0][1]]:
                heapq.heapreplace(least, (self.sizes[least[0][1]], least[0][1]))
            taker = least[0][1]
            if size - self.sizes[taker] <= 1:
                break  # the most and the least loaded differ by one at most: balanced
            self._give(topic_id, max(self.targets[giver][topic_id]), taker)
            moved += 1
            heapq.heapreplace(least, (self.sizes[taker], taker))
            heapq.heappush(least, (self.sizes[giver], giver))
            heapq.heapreplace(most, (-self.sizes[giver], -giver))
            heapq.heappush(most, (-self.sizes[taker], -taker))
        return moved


class RangeAssignor:
    name = RANGE

    def assign(self, members: Sequence[MemberSpec], partitions: Mapping[TopicId, int]) -> dict[str, Assignment]:
        ordered = sorted(members, key=_range_order)
        subscribers: dict[TopicId, int] = {}
        for member in ordered:
            for topic_id in member.topics:
                subscribers[topic_id] = subscribers.get(topic_id, 0) + 1
        counts = {topic_id: partition_count(partitions, topic_id) for topic_id in subscribers}
        quota = {topic_id: divmod(counts[topic_id], n) for topic_id, n in subscribers.items()}
        taken = dict.fromkeys(subscribers, 0)  # the next partition of each topic
        handed_extra = dict.fromkeys(subscribers, 0)
        result: dict[str, Assignment] = {}
        for member in ordered:
            assignment: dict[TopicId, frozenset[int]] = {}
            for topic_id in sorted(member.topics):
                base, extra = quota[topic_id]
                share = base
                if handed_extra[topic_id] < extra:
                    share += 1
                    handed_extra[topic_id] += 1
                start = taken[topic_id]
                end = min(start + share, counts[topic_id])
                taken[topic_id] = end
                if start < end:
                    assignment[topic_id] = frozenset(range(start, end))
            result[member.member_id] = assignment
        return result


def _range_order(member: MemberSpec) -> tuple[int, str]:
    """Static members first, by instance id, then the others by member id (RangeAssignor.sortMemberIds)."""
    if member.instance_id is not None:
        return (0, member.instance_id)
    return (1, member.member_id)


ASSIGNORS: dict[str, Assignor] = {UNIFORM: UniformAssignor(), RANGE: RangeAssignor()}
