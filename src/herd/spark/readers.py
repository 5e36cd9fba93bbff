"""The batch reader and the streaming reader of the herd source.

Both plan one Spark input partition per topic-partition offset range (split further by minPartitions /
maxRecordsPerPartition, see offsets.split_ranges) and read a range in a worker with fetch.read_range.

Streaming (`HerdStreamReader`): offsets are `{"topic":{"partition":next offset}}`, canonical JSON (sorted)
because Spark compares them as strings. `initialOffset` resolves startingOffsets once per run.
`latestOffset(start, limit)` asks the broker for the latest offsets of the partitions the subscription
matches now (new partitions join at their earliest offset), caps them at the Trigger.AvailableNow target
if there is one, then applies admission control: with ReadAllAvailable everything; otherwise
minOffsetsPerTrigger (skip the batch, returning `start`, until enough records wait or maxTriggerDelay
has passed since the last batch, Spark's rule) and maxOffsetsPerTrigger (offsets.rate_limit). `partitions`
and `read` depend only on (start, end), so a batch replayed after a restart reads the same records.

The driver-side reader lives in one long-lived process per query run; its broker connection and group
committer are created on first use and dropped when the reader is pickled for workers. With
`kafka.group.id` set, `start` is committed in `latestOffset` (it is the end of the batch that just
finished, including the last batch of the previous run) and `end` in `commit`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from herd.spark.broker import BrokerView, GroupCommitter
from herd.spark.errors import HerdDataLossError, HerdOptionError
from herd.spark.fetch import ReadSettings, read_range
from herd.spark.offsets import (
    OffsetRange,
    Position,
    TopicPartition,
    backlog,
    from_json,
    rate_limit,
    split_ranges,
    to_json,
)
from herd.spark.options import SourceOptions
from herd.spark.schema import arrow_schema, source_schema

log = logging.getLogger(__name__)


class _RangeReading:
    """What both readers share: options, the broker view, data-loss policy, and reading a range."""

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self.settings = ReadSettings.of(opts)
        self.arrow_schema: pa.Schema = arrow_schema(schema)
        self._view: BrokerView | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Workers get the options, never the driver's connections or counters."""
        state = dict(self.__dict__)
        state["_view"] = None
        state.pop("_committer", None)
        return state

    @property
    def view(self) -> BrokerView:
        if self._view is None:
            self._view = BrokerView(self.opts.client, f"{self.opts.group_id_prefix}-driver")
        return self._view

    def current_partitions(self) -> list[TopicPartition]:
        """The partitions the subscription matches now; missing named topics are data loss."""
        tps, missing = self.view.partitions(self.opts.subscription)
        if missing:
            self.data_loss(
                f"{', '.join(missing)} not found on {self.opts.bootstrap} ({self.opts.subscription.describe()})"
            )
        return tps

    def data_loss(self, what: str) -> None:
        """Raise with failOnDataLoss=true, else log and let the caller carry on."""
        if self.opts.fail_on_data_loss:
            raise HerdDataLossError(what)
        log.warning("herd source: %s (failOnDataLoss=false: carrying on)", what)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        rng: OffsetRange = partition.value
        if self.opts.decode == "consumer_offsets":
            return _decoded(self.settings, rng)
        return read_range(self.settings, rng, self.arrow_schema)

    def plan(self, start: Position, end: Position) -> list[InputPartition]:
        ranges = [OffsetRange(t, p, start[(t, p)], until) for (t, p), until in sorted(end.items())]
        parts = split_ranges(ranges, self.opts.min_partitions, self.opts.max_records_per_partition)
        return [InputPartition(r) for r in parts]


def _decoded(settings: ReadSettings, rng: OffsetRange) -> Iterator[pa.RecordBatch]:
    """`__consumer_offsets` records decoded into schema.CONSUMER_OFFSETS."""
    from herd.spark import consumer_offsets

    raw = replace(settings, include_headers=False)
    for batch in read_range(raw, rng, arrow_schema(source_schema(False))):
        ms = batch.column("timestamp").cast(pa.int64()).to_pylist()
        rows = zip(
            batch.column("key").to_pylist(),
            batch.column("value").to_pylist(),
            [rng.partition] * batch.num_rows,
            batch.column("offset").to_pylist(),
            (t // 1000 for t in ms),
        )
        yield consumer_offsets.to_record_batch(consumer_offsets.decode_rows(rows))


class HerdBatchReader(_RangeReading, DataSourceReader):
    """spark.read: every record from startingOffsets (default earliest) to endingOffsets (default latest)."""

    def partitions(self) -> Sequence[InputPartition]:
        try:
            tps = self.current_partitions()
            start = self.view.resolve(self.opts.starting, tps, "startingOffsets")
            assert self.opts.ending is not None
            end = self.view.resolve(self.opts.ending, tps, "endingOffsets")
        finally:
            self.view.close()
        backwards = sorted(tp for tp in tps if start[tp] > end[tp])
        if backwards:
            t, p = backwards[0]
            raise HerdOptionError(
                f"herd source: startingOffsets {start[(t, p)]} of {t}-{p} is after its endingOffsets {end[(t, p)]}"
            )
        return self.plan(start, end)


class HerdStreamReader(_RangeReading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """spark.readStream: micro-batches of offset ranges, with admission control and AvailableNow."""

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        super().__init__(opts, schema)
        self._initial: Position | None = None
        self._target: Position | None = None
        self._latest: Position | None = None
        self._last_trigger_ms = 0.0
        self._committer = GroupCommitter(opts.client, opts.group_id) if opts.group_id else None

    # -- offsets ------------------------------------------------------------------------------------------

    def initialOffset(self) -> dict:
        if self._initial is None:
            tps = self.current_partitions()
            self._initial = self.view.resolve(self.opts.starting, tps, "startingOffsets")
        return to_json(self._initial)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.view.latest(self.current_partitions())

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_json(start)
        self._publish(begin)
        latest = self._latest_offsets(begin)
        self._latest = latest
        begin = self._with_new_partitions(begin, latest)
        if isinstance(limit, ReadAllAvailable):
            return to_json(latest)
        if self._delay(begin, latest, limit):
            return start
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else self.opts.max_offsets_per_trigger
        return to_json(rate_limit(begin, latest, max_rows) if max_rows else latest)

    def reportLatestOffset(self) -> dict | None:
        return to_json(self._latest) if self._latest is not None else None

    def _latest_offsets(self, begin: Position) -> Position:
        current = self.view.latest(self.view.partitions(self.opts.subscription)[0])
        gone = sorted(tp for tp in begin if tp not in current)
        if gone:
            self.data_loss(f"partitions {_names(gone)} no longer exist")
        shrunk = sorted(tp for tp, o in current.items() if tp in begin and o < begin[tp])
        if shrunk:
            t, p = shrunk[0]
            self.data_loss(f"the latest offset of {t}-{p} went back from {begin[(t, p)]} to {current[(t, p)]}")
        if self._target is None:
            return current
        return {tp: min(o, self._target[tp]) for tp, o in current.items() if tp in self._target}

    def _with_new_partitions(self, begin: Position, latest: Position) -> Position:
        new = [tp for tp in latest if tp not in begin]
        return {**{tp: o for tp, o in begin.items() if tp in latest}, **self.view.earliest(new)}

    def _delay(self, begin: Position, latest: Position, limit: ReadLimit) -> bool:
        """Spark's delayBatch: wait for minOffsetsPerTrigger records, at most maxTriggerDelay."""
        min_rows = limit.min_rows if isinstance(limit, ReadMinRows) else self.opts.min_offsets_per_trigger
        if min_rows is None or self._target is not None:
            return False
        now = time.time() * 1000
        if now - self._last_trigger_ms >= self.opts.max_trigger_delay_ms or backlog(begin, latest) >= min_rows:
            self._last_trigger_ms = now
            return False
        return True

    # -- planning and reading -------------------------------------------------------------------------------

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, until = from_json(start), from_json(end)
        return self.plan(self._range_starts(begin, until), until)

    def _range_starts(self, begin: Position, until: Position) -> Position:
        """Where each range starts: `begin`, or the earliest offset for a partition new in this batch."""
        new = [tp for tp in until if tp not in begin]
        earliest = self.view.earliest(new)
        starts = {tp: begin.get(tp, earliest.get(tp, 0)) for tp in until}
        for tp in new:
            if earliest[tp] != 0:
                self.data_loss(f"added partition {tp[0]}-{tp[1]} starts from {earliest[tp]} instead of 0")
        for tp, offset in starts.items():
            if offset > until[tp]:
                self.data_loss(f"the offset of {tp[0]}-{tp[1]} went back from {offset} to {until[tp]}")
                starts[tp] = min(self.view.earliest([tp])[tp], until[tp])
        return starts

    def commit(self, end: dict) -> None:
        self._publish(from_json(end))

    def _publish(self, position: Position) -> None:
        if self._committer is not None:
            self._committer.commit(position)

    def stop(self) -> None:
        """Close the broker connections (Spark calls this only when a query fails or is killed)."""
        if self._view is not None:
            self._view.close()
        if self._committer is not None:
            self._committer.close()


def _names(tps: list[TopicPartition]) -> str:
    return ", ".join(f"{t}-{p}" for t, p in tps)
