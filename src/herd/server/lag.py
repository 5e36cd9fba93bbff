"""Consumer lag of the groups this node coordinates: per partition, the high watermark less the committed offset.

`group_lags(broker, group_id)` answers for one group, `all_lags(broker)` for every group with committed offsets
in an active shard of this node (the Prometheus exporter, herd.server.metrics; the HTTP API and the console use
`group_lags`). A group another node coordinates, or one whose partition is loading, has no lag here (an empty
list): ask its coordinator.

The end offset is the high watermark a Fetch is answered with: a partition this node holds (every partition on
a single node; in cluster mode those it leads) gives its log's end offset at once. In cluster mode a partition
another node leads is read from `herd_partitions.log_end_offset` in PostgreSQL (the end of what is committed
there, which is its leader's high watermark), all partitions in one query (the cluster's `stored_end_offsets`)
whose answer is kept for up to `CACHE_S` and shared by concurrent callers, so a scrape every second costs one
query a second whatever the number of groups. A partition whose end offset is unknown (its topic was deleted, the
database could not be read yet) has `end_offset` and `lag` None; while the database cannot be read the last
values read are used. `lag` is not clamped: a committed offset beyond the
high watermark (the log was truncated or its records deleted) shows as a negative lag, as kafka-consumer-groups
shows it.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any, NamedTuple, Protocol

CACHE_S = 1.0  # how long end offsets read from PostgreSQL are reused


class PartitionLag(NamedTuple):
    """A NamedTuple rather than a frozen dataclass: a scrape builds one per committed offset (up to
    herd.metrics.max.series), and a tuple is built about five times faster."""

    topic: str
    partition: int
    committed: int
    end_offset: int | None  # the high watermark; None when unknown
    lag: int | None  # end_offset - committed; None when the end offset is unknown


class LagSource(Protocol):
    """What lag uses of herd.server.broker.Broker (which it does not import: the exporter that imports this
    module is imported by the broker)."""

    cluster: Any
    coordinator: Any


async def group_lags(broker: LagSource, group_id: str) -> list[PartitionLag]:
    """The lag of each partition `group_id` committed an offset for, by topic and partition; [] if the group is
    not coordinated by an active shard of this node or has committed nothing. Raises nothing."""
    committed = _committed(broker, group_id)
    if not committed:
        return []
    ends = await end_offsets(broker, committed)
    return _lags(committed, ends)


async def all_lags(broker: LagSource, limit: int | None = None) -> dict[str, list[PartitionLag]]:
    """`group_lags` of the groups holding committed offsets in an active shard of this node, by group id, with one
    read of the end offsets for all of them. With `limit`, whole groups in group-id order as long as their partitions
    add up to at most `limit` (a group that does not fit is skipped, the next ones may; what is left out is not
    looked at: a scrape stays cheap with a million offsets)."""
    by_group = _every_committed(broker, limit)
    if not by_group:
        return {}
    keys: dict[tuple[str, int], int] = {}
    for committed in by_group.values():
        keys.update(committed)
    ends = await end_offsets(broker, keys)
    return {group_id: _lags(committed, ends) for group_id, committed in sorted(by_group.items())}


def _active_shards(broker: LagSource) -> list[Any]:
    runtime = broker.coordinator
    if runtime is None:
        return []
    return [s for s in list(runtime.shards.values()) if s.state.value == "active"]


def _committed(broker: LagSource, group_id: str) -> dict[tuple[str, int], int]:
    runtime = broker.coordinator
    if runtime is None or not runtime.num_partitions:
        return {}
    shard = runtime.shards.get(runtime.partition_for(group_id))
    if shard is None or shard.state.value != "active":
        return {}
    return {key: value.offset for key, value in shard.shard.committed_offsets(group_id).items()}


def _every_committed(broker: LagSource, limit: int | None) -> dict[str, dict[tuple[str, int], int]]:
    groups = sorted(
        (group_id, shard.shard) for shard in _active_shards(broker) for group_id in shard.shard.offset_group_ids()
    )  # a group id is in one shard only
    out: dict[str, dict[tuple[str, int], int]] = {}
    taken = 0
    for group_id, core in groups:
        committed = {key: value.offset for key, value in core.committed_offsets(group_id).items()}
        if limit is not None and taken + len(committed) > limit:
            continue  # too big to fit: the groups after it that fit are still exported (one group cannot hide all)
        if committed:
            out[group_id] = committed
            taken += len(committed)
    return out


def totals(broker: LagSource) -> tuple[int, int]:
    """(groups holding committed offsets, committed offsets) in the active shards of this node: what `all_lags`
    would cover without a limit, counted without looking at the offsets."""
    groups = offsets = 0
    for shard in _active_shards(broker):
        groups += len(shard.shard.offset_group_ids())
        offsets += shard.shard.size()[1]
    return groups, offsets


def _lags(committed: dict[tuple[str, int], int], ends: dict[tuple[str, int], int]) -> list[PartitionLag]:
    out = []
    for (topic, partition), offset in sorted(committed.items()):
        end = ends.get((topic, partition))
        # a negative committed offset (a client may commit -1) means none: no lag, as kafka-consumer-groups.sh
        # prints "-" for it
        out.append(PartitionLag(topic, partition, offset, end, None if end is None or offset < 0 else end - offset))
    return out


async def end_offsets(broker: LagSource, keys: dict[tuple[str, int], Any]) -> dict[tuple[str, int], int]:
    """The high watermark of each partition of `keys` that is known: from this node's logs, and for partitions
    led by another node (cluster mode) from PostgreSQL (cached)."""
    cluster = broker.cluster
    ends: dict[tuple[str, int], int] = {}
    elsewhere = False
    for topic_name, index in keys:
        topic = cluster.get(topic_name)
        if topic is None or not 0 <= index < len(topic.partitions):
            continue
        partition = topic.partitions[index]
        if partition is not None:
            ends[(topic_name, index)] = partition.log_end_offset
        else:
            elsewhere = True
    if elsewhere:  # only in a cluster: a single node leads every partition
        stored = await _stored_end_offsets(cluster)
        for key in keys:
            if key not in ends and key in stored:
                ends[key] = stored[key]
    return ends


class _Cache:
    __slots__ = ("at", "values", "reading")

    def __init__(self) -> None:
        self.at = -1e18
        self.values: dict[tuple[str, int], int] = {}
        self.reading: asyncio.Task[dict[tuple[str, int], int] | None] | None = None


_caches: weakref.WeakKeyDictionary[Any, _Cache] = weakref.WeakKeyDictionary()


async def _stored_end_offsets(cluster: Any) -> dict[tuple[str, int], int]:
    """Every partition's end offset in PostgreSQL, read at most once per CACHE_S (concurrent callers share the
    read); the last values read when the database cannot be read now."""
    cache = _caches.get(cluster)
    if cache is None:
        cache = _caches[cluster] = _Cache()
    loop = asyncio.get_running_loop()
    if loop.time() - cache.at < CACHE_S:
        return cache.values
    if cache.reading is None:
        cache.reading = loop.create_task(cluster.stored_end_offsets())
    reading = cache.reading
    try:
        values = await asyncio.shield(reading)
    finally:
        if cache.reading is reading and reading.done():
            cache.reading = None
    if values is not None:
        cache.values, cache.at = values, loop.time()
    return cache.values
