"""Offsets of a query: their JSON form, admission control and the split of a batch into input partitions.

Pure functions, no Spark and no broker. A position is `{(topic, partition): next offset to read}`. Spark
keeps a stream's offsets in its checkpoint as `json.dumps(dict)` and compares them as strings, so
`to_json` always emits the same text for the same offsets: topics sorted, partitions in numeric order,
partition numbers as strings (`{"t":{"0":23,"1":7}}`, Spark's Kafka source format).

`rate_limit` is Spark's `KafkaMicroBatchStream.rateLimit` (maxOffsetsPerTrigger split over partitions in
proportion to their backlog, no partition starved) and `split_ranges` is Spark's
`KafkaOffsetRangeCalculator.getRanges` (maxRecordsPerPartition, then minPartitions), so a query plans the
same batches on herd as on Kafka; both are deterministic for a given (start, end), which is what makes a
replayed micro-batch read exactly the records it read the first time.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from herd.spark.errors import HerdOptionError

TopicPartition = tuple[str, int]
Position = dict[TopicPartition, int]

EARLIEST = -2
LATEST = -1


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where to start or end: `earliest`, `latest`, `json` (explicit offsets, -2/-1 allowed), `timestamp`
    (one timestamp for every partition) or `timestamps` (per partition)."""

    kind: str
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int | None = None
    strategy: str = "error"


@dataclass(frozen=True, slots=True, order=True)
class OffsetRange:
    """Offsets [start, end) of one partition: what one Spark task reads."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def parse_offsets_json(text: str, option: str, *, allow_negative: bool) -> Position:
    """`{"topic":{"0":23}}` to a position; raises HerdOptionError naming `option` when malformed."""
    example = f'expected JSON like {{"topicA":{{"0":23,"1":-1}}}} in {option!r}'
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as e:
        raise HerdOptionError(
            f"herd source: {option!r} is neither 'earliest', 'latest' nor valid JSON "
            f"({e.msg} at character {e.pos}): {text!r}"
        ) from e
    if not isinstance(parsed, dict) or not parsed:
        raise HerdOptionError(f"herd source: {example}, got {text!r}")
    position: Position = {}
    for topic, parts in parsed.items():
        if not isinstance(parts, dict):
            raise HerdOptionError(f"herd source: topic {topic!r}: {example}")
        for part, value in parts.items():
            position[(topic, _partition_number(part, option))] = _offset_value(value, option, allow_negative)
    return position


def _partition_number(part: Any, option: str) -> int:
    try:
        number = int(part)
    except (TypeError, ValueError):
        number = -1
    if number < 0:
        raise HerdOptionError(f"herd source: {option!r}: partition {part!r} is not a partition number")
    return number


def _offset_value(value: Any, option: str, allow_negative: bool) -> int:
    lowest = EARLIEST if allow_negative else 0
    if not isinstance(value, int) or isinstance(value, bool) or value < lowest:
        allowed = "an offset, -2 (earliest) or -1 (latest)" if allow_negative else "a timestamp in ms"
        raise HerdOptionError(f"herd source: {option!r}: {value!r} is not {allowed}")
    return value


def to_json(position: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The canonical dict Spark stores: topics sorted, partitions in numeric order, as strings."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(position.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def from_json(offsets: Mapping[str, Mapping[str, Any]] | None) -> Position:
    """Back from Spark (partition keys arrive as strings)."""
    return {(topic, int(p)): int(o) for topic, parts in (offsets or {}).items() for p, o in parts.items()}


def rate_limit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], limit: int) -> Position:
    """At most about `limit` offsets past `start`, shared in proportion to each partition's backlog.

    Spark's rule: a partition's share is floor(limit * backlog / total) but at least 1 when it has a
    backlog (ceil of a share below one), never past `latest`. Partitions missing from `start` start at 0
    here; callers put new partitions in `start` at their earliest offset first.
    """
    sizes = {tp: end - start.get(tp, 0) for tp, end in latest.items() if end - start.get(tp, 0) > 0}
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(latest)
    limited: Position = {}
    for tp, end in latest.items():
        if tp not in sizes:
            limited[tp] = end
            continue
        prorate = limit * (sizes[tp] / total)
        share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        limited[tp] = min(end, start.get(tp, 0) + share)
    return limited


def backlog(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int]) -> int:
    return sum(max(0, end - start.get(tp, 0)) for tp, end in latest.items())


def split_ranges(
    ranges: Iterable[OffsetRange], min_partitions: int | None, max_records: int | None
) -> list[OffsetRange]:
    """Empty ranges dropped; ranges above `max_records` cut in equal parts; then, if there are fewer
    ranges than `min_partitions`, the big ones split in proportion to their size (Spark's rule)."""
    nonempty = [r for r in sorted(ranges) if r.size > 0]
    if (min_partitions is None or len(nonempty) >= min_partitions) and max_records is None:
        return nonempty
    divided = nonempty
    if max_records is not None:
        divided = [part for r in nonempty for part in _divide(r, math.ceil(r.size / max_records))]
    if min_partitions is None or min_partitions <= len(divided):
        return divided
    total = sum(r.size for r in divided)
    unsplit = [r for r in divided if _part_count(r.size, total, min_partitions) == 1]
    split_total = total - sum(r.size for r in unsplit)
    split_min = max(min_partitions - len(unsplit), 1)
    return [part for r in divided for part in _divide(r, _part_count(r.size, split_total, split_min))]


def _part_count(size: int, total: int, min_parts: int) -> int:
    if total <= 0:
        return 1
    return max(_round_half_up(size / total * min_parts), 1)


def _round_half_up(x: float) -> int:
    """Scala's math.round (Python's round() rounds half to even)."""
    return math.floor(x + 0.5)


def _divide(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """`parts` contiguous pieces, the last one taking the remainder of the integer division."""
    out: list[OffsetRange] = []
    remaining, start = r.size, r.start
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        end = min(start + this, r.end)
        if end > start:
            out.append(OffsetRange(r.topic, r.partition, start, end))
        start = end
    return out
