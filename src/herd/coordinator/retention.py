"""Offset retention (KIP-211): expiring committed offsets and deleting empty groups.

A keyed timer (`offsets-retention`) runs `cleanup` every offsets.retention.check.interval.ms, from the
moment the partition is loaded. Like every timer operation it changes nothing itself: it returns the
tombstones to write, and `replay` applies them. For each group (ported from apache/kafka group-coordinator
OffsetMetadataManager.cleanupExpiredOffsets, ClassicGroup.offsetExpirationCondition and
GroupMetadataManager.cleanupGroupMetadata / maybeDeleteGroup):

1. The group's expiration condition says from when an offset's retention is counted, or that nothing
   of the group expires now:
   - a simple group (no protocol type, created by commits alone): from each offset's commit time;
   - an Empty group: from the moment it became Empty (its current-state timestamp);
   - a Stable "consumer" group whose subscriptions are known: from the commit time, for the topics no
     member subscribes to any more (subscriptions.py);
   - any other group (rebalancing, a Stable group of another protocol type, unknown subscriptions): never.
2. An offset of a topic the group is not subscribed to expires when `now >= expire timestamp` if its
   commit carried one (OffsetCommit v2-v4 retention time, OffsetCommitValue v1), else when
   `now - base >= offsets.retention.minutes`. Each expired offset gets a tombstone.
3. If afterwards the group has no offsets left (or never had any) and it is Empty, its GroupMetadata
   tombstone follows in the same batch (and its rebalance history's, history.py): the group is deleted.
A KIP-848 consumer group (consumer/) counts retention from each offset's commit time for the topics none of its
members subscribes to, by name or through a resolved regex (ConsumerGroup.offsetExpirationCondition and
isSubscribedToTopic), and an Empty one without offsets goes with its records' tombstones.

Pending transactional offsets (txn_offsets.py) never expire, and they hold back the committed offset of
their partition too ("we don't expire the offset yet if there is a pending transactional offset for the
partition"); a group with pending offsets is never deleted ("we don't want to remove the group if there are
ongoing transactions with undeleted offsets", OffsetMetadataManager.cleanupExpiredOffsets).

The pass walks every offset of the partition, on the coordinator's loop as in Kafka: 0.28 s of CPU for
1,000,000 offsets of which none expires (measured), once per interval.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from herd.coordinator.consumer import records as consumer_records
from herd.coordinator.consumer.group import ConsumerGroup, ConsumerGroupState
from herd.coordinator.context import ShardContext
from herd.coordinator.group import ClassicGroup
from herd.coordinator.records import (
    OffsetValue,
    Record,
    group_tombstone,
    offset_tombstone,
    rebalance_history_tombstone,
)
from herd.coordinator.result import Result
from herd.coordinator.state import GroupState
from herd.coordinator.subscriptions import is_subscribed, uses_consumer_protocol

log = logging.getLogger(__name__)

RETENTION_KEY = "offsets-retention"
NO_TIMESTAMP = -1

Base = Callable[[OffsetValue], int]


def schedule(ctx: ShardContext) -> None:
    """Arm (or re-arm) the next cleanup, one check interval from now."""
    interval = ctx.config.offsets_retention_check_interval_ms
    ctx.timer.schedule(RETENTION_KEY, ctx.now() + interval, lambda: cleanup(ctx))


def cleanup(ctx: ShardContext) -> Result:
    """Timer operation: tombstones for every expired offset and every deletable group; re-arms itself."""
    records: list[Record] = []
    now = ctx.now()
    for group_id, group in list(ctx.groups.items()):
        if expire_offsets(ctx, group, now, records) and group.is_in(GroupState.EMPTY):
            records.append(group_tombstone(group_id))
            if ctx.history.of(group_id) or not ctx.history.size:  # (size 0: a record from before may remain)
                records.append(rebalance_history_tombstone(group_id))
            log.info("group %s: every offset expired and the group is empty, deleting it", group_id)
    for group_id, consumer_group in list(ctx.consumer_groups.items()):
        if (
            expire_consumer_offsets(ctx, consumer_group, now, records)
            and consumer_group.state is ConsumerGroupState.EMPTY
        ):
            records.extend(
                consumer_records.group_tombstones(
                    group_id, tuple(consumer_group.members), tuple(consumer_group.resolved)
                )
            )
            if ctx.history.of(group_id) or not ctx.history.size:
                records.append(rebalance_history_tombstone(group_id))
            log.info("consumer group %s: every offset expired and the group is empty, deleting it", group_id)
    if records:
        log.info("generated %d tombstones while cleaning up expired offsets and groups", len(records))
    schedule(ctx)
    return Result(records=tuple(records))


def expiration_base(group: ClassicGroup) -> Base | None:
    """Kafka's offsetExpirationCondition: where retention is counted from, or None (nothing expires)."""
    if group.protocol_type is None:
        return _commit_time
    if group.is_in(GroupState.EMPTY):
        became_empty = group.state_timestamp_ms
        return lambda value: became_empty
    if uses_consumer_protocol(group) and group.subscribed_topics is not None and group.is_in(GroupState.STABLE):
        return _commit_time
    return None


def _commit_time(value: OffsetValue) -> int:
    return value.commit_timestamp


def is_expired(value: OffsetValue, base: Base, now: int, retention_ms: int) -> bool:
    if value.expire_timestamp != NO_TIMESTAMP:
        return now >= value.expire_timestamp  # an explicit retention from OffsetCommit v2-v4
    return now - base(value) >= retention_ms


def expire_offsets(ctx: ShardContext, group: ClassicGroup, now: int, records: list[Record]) -> bool:
    """Append tombstones for the group's expired offsets; True if none is left afterwards, pending transactional
    offsets included."""
    return _expire(ctx, group.group_id, expiration_base(group), lambda topic: is_subscribed(group, topic), now, records)


def expire_consumer_offsets(ctx: ShardContext, group: ConsumerGroup, now: int, records: list[Record]) -> bool:
    """`expire_offsets` of a KIP-848 consumer group: retention counted from each offset's commit time, for the
    topics none of its members subscribes to (ConsumerGroup.offsetExpirationCondition, isSubscribedToTopic)."""
    subscribed = group.subscribed_topic_names()
    return _expire(ctx, group.group_id, _commit_time, lambda topic: topic in subscribed, now, records)


def _expire(
    ctx: ShardContext,
    group_id: str,
    base: Base | None,
    is_subscribed_to: Callable[[str], bool],
    now: int,
    records: list[Record],
) -> bool:
    offsets = ctx.offsets.get(group_id)
    held = ctx.txn.holds_group(group_id)
    if not offsets:
        return not held
    if base is None:
        return False
    retention_ms = ctx.config.offsets_retention_minutes * 60_000
    subscribed: dict[str, bool] = {}
    expired = []
    for (topic, partition), value in offsets.items():
        if topic not in subscribed:
            subscribed[topic] = is_subscribed_to(topic)
        if (
            not subscribed[topic]
            and is_expired(value, base, now, retention_ms)
            and not (held and ctx.txn.holds(group_id, topic, partition))
        ):
            expired.append((topic, partition))
    for topic, partition in expired:
        records.append(offset_tombstone(group_id, topic, partition))
    if expired:
        log.info("group %s: expired offsets of %d partitions", group_id, len(expired))
    return len(expired) == len(offsets) and not held
