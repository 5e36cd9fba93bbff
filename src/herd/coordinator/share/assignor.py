"""The `simple` assignor of share groups (KIP-932): balanced first, then sticky, and a partition is shared by
several members when the members outnumber the partitions.

As Kafka's (confluentinc/kafka, branch 4.2: group-coordinator/src/main/java/org/apache/kafka/coordinator/group/
assignor/SimpleAssignor.java, SimpleHomogeneousAssignmentBuilder.java, SimpleHeterogeneousAssignmentBuilder.java):

- every partition should have `desired sharing` = ceil(members / partitions) members (1 while partitions are at
  least as many as members), and member i of n should have ceil(q * (i + 1)) - ceil(q * i) partitions, where
  q = desired sharing * partitions / members: the counts differ by at most one;
- a member keeps what it had (of topics still subscribed and partitions still assignable) up to its count; a
  partition shared by more members than desired loses the extra ones; then every partition short of members is
  offered to the members short of partitions, in turn, skipping a member that already has it (when none can take
  it, the partition stays short: Kafka accepts that slight imbalance);
- when every member subscribes to the same topics (homogeneous) this runs once over all their partitions; otherwise
  once per topic over that topic's subscribers (balanced per topic, then combined).

Kafka iterates hash sets, so which of a member's extra partitions it gives up and which member takes a free one
follow hash order. herd uses a fixed order instead (members as given, partitions by topic id and number, the
highest partitions given up first), so the same group always gets the same assignment, as herd's other assignors.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from herd.coordinator.consumer.assignment import Assignment, TopicId
from herd.coordinator.consumer.assignors import MemberSpec, is_homogeneous, partition_count

SIMPLE = "simple"

Key = tuple[TopicId, int]
Assignable = Callable[[TopicId, int], bool]


class SimpleAssignor:
    name = SIMPLE

    def assign(
        self,
        members: Sequence[MemberSpec],
        partitions: Mapping[TopicId, int],
        assignable: Assignable | None = None,
    ) -> dict[str, Assignment]:
        """Each member's new target assignment. `partitions` has the partition count of every subscribed topic;
        `assignable(topic_id, partition)` says whether a partition may be assigned (Kafka's
        GroupSpec.isPartitionAssignable: a share partition whose state is not initialized yet may not), all by
        default. Raises AssignorError when a subscribed topic is missing from `partitions`."""
        if not members:
            return {}
        held: list[dict[TopicId, set[int]]] = [  # a member keeps nothing of a topic it no longer subscribes to
            {topic_id: set(parts) for topic_id, parts in member.assignment.items() if topic_id in member.topics}
            for member in members
        ]
        if is_homogeneous(members):
            topics = sorted(members[0].topics)
            targets = [key for topic_id in topics for key in _targets(topic_id, partitions, assignable)]
            _balance(held, targets, list(range(len(members))), set(topics))
        else:
            subscribed = set().union(*(member.topics for member in members))
            for topic_id in sorted(subscribed):
                subscribers = [i for i, member in enumerate(members) if topic_id in member.topics]
                _balance(held, _targets(topic_id, partitions, assignable), subscribers, {topic_id})
        return {
            member.member_id: {topic_id: frozenset(parts) for topic_id, parts in sorted(held[i].items()) if parts}
            for i, member in enumerate(members)
        }


def _targets(topic_id: TopicId, partitions: Mapping[TopicId, int], assignable: Assignable | None) -> list[Key]:
    count = partition_count(partitions, topic_id)
    return [(topic_id, p) for p in range(count) if assignable is None or assignable(topic_id, p)]


def _desired_counts(sharing: int, targets: int, members: int) -> list[int]:
    """How many partitions each of `members` members should have: the same float arithmetic as Kafka's, so that
    the counts agree with it exactly."""
    precise = sharing * targets / members
    return [math.ceil(precise * (i + 1)) - math.ceil(precise * i) for i in range(members)]


def _balance(
    held: list[dict[TopicId, set[int]]], targets: list[Key], subscribers: list[int], topics: set[TopicId]
) -> None:
    """One builder pass over `targets` (the assignable partitions of `topics`) and the members at the indices
    `subscribers` (those subscribed to `topics`): replaces what `held` (every member's partitions, by topic) says of
    `topics` with the pass's result."""
    sharing = -(-len(subscribers) // len(targets)) if targets else 0
    desired = dict(zip(subscribers, _desired_counts(sharing, len(targets), len(subscribers)), strict=True))
    target_set = set(targets)

    # What each member keeps: its partitions of `topics` that are still targets, the highest given up first when it
    # has more than its count.
    by_member: dict[int, list[Key]] = {}
    for index in subscribers:
        kept = [
            (topic_id, p)
            for topic_id in sorted(topics & held[index].keys())
            for p in sorted(held[index][topic_id])
            if (topic_id, p) in target_set
        ]
        by_member[index] = kept[: desired[index]]
    by_partition: dict[Key, list[int]] = {key: [] for key in targets}
    for index in subscribers:
        for key in by_member[index]:
            by_partition[key].append(index)

    # Partitions shared by more members than desired lose the extra ones (the last members first).
    for key, assigned in by_partition.items():
        while len(assigned) > sharing:
            by_member[assigned.pop()].remove(key)

    # Partitions short of members go to the members short of partitions, in turn.
    unfilled = [index for index in subscribers if len(by_member[index]) < desired[index]]
    turn = 0
    for key, assigned in by_partition.items():
        if not unfilled:
            break
        wanted = sharing - len(assigned)
        skipped = 0  # members passed over in a row because they already have the partition
        while wanted > 0 and unfilled and skipped < len(unfilled):
            turn %= len(unfilled)
            index = unfilled[turn]
            if index in assigned:
                turn += 1
                skipped += 1
                continue
            assigned.append(index)
            by_member[index].append(key)
            wanted -= 1
            skipped = 0
            if len(by_member[index]) >= desired[index]:
                unfilled.pop(turn)
            else:
                turn += 1

    for index in subscribers:
        member_held = held[index]
        for topic_id in topics:
            member_held.pop(topic_id, None)
        for topic_id, partition in by_member[index]:
            member_held.setdefault(topic_id, set()).add(partition)
