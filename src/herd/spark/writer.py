"""The herd sink: batch and streaming writers with Spark's Kafka sink columns and semantics.

Columns read: `value` (string or binary, required; null writes a tombstone), `key` (string or binary),
`topic` (string; required unless the `topic` option is set, which then wins, as in Spark), `partition`
(int; null or absent lets the partitioner choose) and `headers` (array<struct<key:string,value:binary>>).
Other columns are ignored. The schema is checked when the writer is created, so a bad DataFrame fails at
query start.

Each task produces its rows with a librdkafka Producer (cached per worker process, like Spark caches
its Kafka producers), then flushes and checks every delivery before returning its commit message:
a task reports success only when the broker has acknowledged all its records (acks=all), so a failed
task is retried by Spark and the sink is at-least-once. Keyed records go to the partition Java's
default partitioner picks (murmur2), as with Spark's Kafka sink, unless `kafka.partitioner` says
otherwise. Writers are Arrow writers (rows arrive as record batches).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Producer
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import ArrayType, StructType

from herd.spark.errors import HerdBrokerError, HerdOptionError
from herd.spark.options import SinkOptions
from herd.spark.schema import HEADER, SINK_COLUMNS

log = logging.getLogger(__name__)

FLUSH_TIMEOUT_S = 120.0
_PRODUCERS: dict[tuple[tuple[str, Any], ...], Producer] = {}
_FAILURES: list[KafkaError] = []  # delivery failures of the task running in this worker process


@dataclass(frozen=True, slots=True)
class HerdCommitMessage(WriterCommitMessage):
    records: int


@dataclass(frozen=True, slots=True)
class SinkPlan:
    """Which columns to read and the producer configuration: built on the driver, shipped to tasks."""

    config: tuple[tuple[str, Any], ...]
    topic: str | None
    columns: tuple[str, ...]

    @classmethod
    def of(cls, opts: SinkOptions, schema: StructType) -> SinkPlan:
        """Raises HerdOptionError when the DataFrame cannot be written (Spark's Kafka sink rules)."""
        types = {f.name: f.dataType for f in schema.fields}
        if "value" not in types:
            raise HerdOptionError(
                f"herd sink: required attribute 'value' not found in the DataFrame (columns: {', '.join(types)})"
            )
        if opts.topic is None and "topic" not in types:
            raise HerdOptionError(
                "herd sink: topic option required when no 'topic' attribute is present; "
                "set .option('topic', ...) or add a 'topic' column"
            )
        for name, allowed in SINK_COLUMNS.items():
            if name in types and not isinstance(types[name], allowed):
                raise HerdOptionError(
                    f"herd sink: {name} attribute type must be "
                    f"{' or '.join(t.typeName() for t in allowed)}, not {types[name].simpleString()}"
                )
        if (
            "headers" in types
            and types["headers"] != ArrayType(HEADER, True)
            and types["headers"] != ArrayType(HEADER, False)
        ):
            raise HerdOptionError(
                "herd sink: headers attribute type must be array<struct<key:string,value:binary>>, "
                f"not {types['headers'].simpleString()}"
            )
        config = {
            "partitioner": "murmur2_random",
            "enable.idempotence": True,
            "linger.ms": 5,
            "queue.buffering.max.messages": 500_000,
            **opts.client,
        }
        return cls(tuple(sorted(config.items())), opts.topic, tuple(n for n in SINK_COLUMNS if n in types))

    def producer(self) -> Producer:
        producer = _PRODUCERS.get(self.config)
        if producer is None:
            config = {
                **dict(self.config),
                "on_delivery": _on_delivery,
                "error_cb": _on_client_error,
                "delivery.report.only.error": True,
            }
            producer = _PRODUCERS[self.config] = Producer(config)
        return producer


def _on_delivery(error: KafkaError | None, _message: Any) -> None:
    if error is not None:
        _FAILURES.append(error)


def _on_client_error(error: KafkaError) -> None:
    if error.fatal():
        _FAILURES.append(error)
    else:
        log.info("herd sink: %s", error.str())


def write_batches(plan: SinkPlan, batches: Iterator[pa.RecordBatch]) -> HerdCommitMessage:
    """Produce every row, flush, and raise unless the broker acknowledged all of them."""
    producer = plan.producer()
    _FAILURES.clear()
    count = 0
    for batch in batches:
        count += _produce(producer, plan, batch)
        if _FAILURES:
            break
    left = producer.flush(FLUSH_TIMEOUT_S)
    if _FAILURES:
        raise HerdBrokerError(f"herd sink: {len(_FAILURES)} records were not delivered: {_FAILURES[0].str()}")
    if left:
        raise HerdBrokerError(f"herd sink: {left} records still undelivered after {FLUSH_TIMEOUT_S:.0f} s")
    return HerdCommitMessage(count)


def _produce(producer: Producer, plan: SinkPlan, batch: pa.RecordBatch) -> int:
    n = batch.num_rows
    column = {name: batch.column(name).to_pylist() for name in plan.columns if name != "headers"}
    values = column["value"]
    keys = column.get("key") or [None] * n
    topics = [plan.topic] * n if plan.topic is not None else column["topic"]
    partitions = column.get("partition") or [None] * n
    headers = _headers(batch) if "headers" in plan.columns else [None] * n
    produce = producer.produce
    for value, key, topic, partition, header in zip(values, keys, topics, partitions, headers):
        if topic is None:
            raise HerdOptionError(
                "herd sink: null topic present in the data; use the topic option to set a default topic"
            )
        args = (topic, value, key, -1 if partition is None else partition)
        try:
            produce(*args, headers=header)
        except BufferError:
            producer.poll(0.5)  # the queue is full: wait for deliveries, then retry once it has room
            _produce_when_room(producer, args, header)
    producer.poll(0)
    return n


def _produce_when_room(producer: Producer, args: tuple[Any, ...], header: Any) -> None:
    while True:
        try:
            producer.produce(*args, headers=header)
            return
        except BufferError:
            producer.poll(0.5)


def _headers(batch: pa.RecordBatch) -> list[list[tuple[str, bytes | None]] | None]:
    return [None if hs is None else [(h["key"], h["value"]) for h in hs] for hs in batch.column("headers").to_pylist()]


class HerdBatchWriter(DataSourceArrowWriter):
    """df.write.format("herd"): append only (Spark's Kafka sink has no other mode either)."""

    def __init__(self, plan: SinkPlan) -> None:
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> HerdCommitMessage:
        return write_batches(self.plan, iterator)


class HerdStreamWriter(DataSourceStreamArrowWriter):
    """writeStream.format("herd"): each micro-batch's tasks flush before they report success."""

    def __init__(self, plan: SinkPlan) -> None:
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> HerdCommitMessage:
        return write_batches(self.plan, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        written = sum(m.records for m in messages if isinstance(m, HerdCommitMessage))
        log.debug("herd sink: micro-batch %d wrote %d records", batchId, written)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("herd sink: micro-batch %d aborted; records already delivered stay (at-least-once)", batchId)


_CHECKED: set[tuple[tuple[str, Any], ...]] = set()


def check_client_config(plan: SinkPlan) -> None:
    """Create a producer once per process so a bad kafka.* option fails at query start, not in tasks."""
    if plan.config in _CHECKED:
        return
    try:
        Producer(dict(plan.config)).flush(0)
    except (KafkaException, ValueError, TypeError) as e:
        raise HerdOptionError(f"herd sink: the Kafka client refused the kafka.* options: {e}") from e
    _CHECKED.add(plan.config)
