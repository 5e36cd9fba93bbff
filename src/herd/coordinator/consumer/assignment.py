"""Assignments of the consumer protocol: which partitions of which topics a member has, by topic id.

An `Assignment` maps a topic id to the frozenset of its partitions and never holds an empty set; it is treated
as immutable (Kafka's `Assignment`, group-coordinator/.../modern/Assignment.java, whose maps the assignors rely
on not being changed). Topic ids are `uuid.UUID`, as herd's log keeps them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from types import MappingProxyType

TopicId = uuid.UUID
Assignment = Mapping[TopicId, frozenset[int]]

EMPTY: Assignment = MappingProxyType({})  # read-only: safe as a default


def assignment(pairs: Iterable[tuple[TopicId, Iterable[int]]]) -> dict[TopicId, frozenset[int]]:
    """An Assignment from (topic id, partitions) pairs, merging repeated topics and dropping empty ones."""
    merged: dict[TopicId, set[int]] = {}
    for topic_id, partitions in pairs:
        merged.setdefault(topic_id, set()).update(partitions)
    return {topic_id: frozenset(parts) for topic_id, parts in merged.items() if parts}


def size(of: Assignment) -> int:
    """How many partitions `of` holds."""
    return sum(len(parts) for parts in of.values())


def intersects(a: Assignment, b: Assignment) -> bool:
    """Whether a partition is in both."""
    return any(not parts.isdisjoint(b.get(topic_id, ())) for topic_id, parts in a.items())


def union(a: Assignment, b: Assignment) -> dict[TopicId, frozenset[int]]:
    """Every partition of either."""
    merged = dict(a)
    for topic_id, parts in b.items():
        merged[topic_id] = merged.get(topic_id, frozenset()) | parts
    return merged


def partitions(of: Assignment) -> Iterable[tuple[TopicId, int]]:
    """Each (topic id, partition) of `of`."""
    for topic_id, parts in of.items():
        for partition in parts:
            yield topic_id, partition
