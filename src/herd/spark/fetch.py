"""Reading one offset range of one partition in a Spark worker, as Arrow record batches.

Two fetchers (option `fetcher`): `native` (native.py, the default: Fetch requests on a plain socket and
columnar decoding) and `librdkafka`, below, used when the connection needs TLS, SASL or read_committed.

With librdkafka, a task assigns its partition to a Consumer at the range's start offset and consumes
until the range's end: `consume(n)` is asked for at most the number of offsets left, so it never hands back
records past the end (librdkafka's prefetched surplus is dropped at `unassign`). The range is over when the
record at end-1 has been read, or when librdkafka reports the end of the partition at or past the range's
end (the last offsets of a range may hold no record: compacted away, or transaction markers).

Each chunk of messages becomes one `pyarrow.RecordBatch` in exactly the schema Spark expects (see
schema.py): columns are filled with C-level `map` over confluent-kafka's Message methods, constant
columns with `pa.repeat`, and millisecond timestamps are cast to microseconds by Arrow.

Consumers are cached per worker process and client configuration (Spark reuses its Python workers), so a
micro-batch does not pay for a new connection per task. With failOnDataLoss=true a start offset below the
log start makes librdkafka report `_AUTO_OFFSET_RESET` (auto.offset.reset=error), raised as
HerdDataLossError; with false the consumer resets to the earliest offset and reads what remains.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from herd.spark.broker import consumer_config
from herd.spark.errors import HerdBrokerError, HerdDataLossError
from herd.spark.offsets import OffsetRange
from herd.spark.options import SourceOptions

log = logging.getLogger(__name__)

_US = pa.timestamp("us", tz="UTC")
_MS = pa.timestamp("ms", tz="UTC")
_CONSUMERS: dict[tuple[tuple[str, Any], ...], Consumer] = {}
# Errors after which waiting cannot help; librdkafka retries the others (transport, leader moves) itself.
_FATAL = {
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._UNKNOWN_PARTITION,
    KafkaError._UNKNOWN_TOPIC,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.OFFSET_OUT_OF_RANGE,
}


@dataclass(frozen=True, slots=True)
class ReadSettings:
    """What a worker needs to read ranges (picklable; built on the driver from SourceOptions)."""

    config: tuple[tuple[str, Any], ...]
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_ms: int
    batch_rows: int
    fetcher: str = "native"

    @classmethod
    def of(cls, opts: SourceOptions) -> ReadSettings:
        tuning = {"max.partition.fetch.bytes": 8 * 1024 * 1024, "fetch.wait.max.ms": 100}
        config = {
            **tuning,
            **consumer_config(opts.client, f"{opts.group_id_prefix}-reader"),
            "enable.partition.eof": True,
            "auto.offset.reset": "error" if opts.fail_on_data_loss else "earliest",
        }
        return cls(
            tuple(sorted(config.items())),
            opts.fail_on_data_loss,
            opts.include_headers,
            opts.poll_timeout_ms,
            opts.batch_rows,
            opts.fetcher,
        )


def read_messages(settings: ReadSettings, rng: OffsetRange) -> Iterator[list[Message]]:
    """Lists of messages with start <= offset < end, in offset order; raises HerdDataLossError,
    HerdBrokerError, or TimeoutError after kafkaConsumer.pollTimeoutMs without progress."""
    consumer = _consumer(settings.config)
    consumer.assign([KafkaTopicPartition(rng.topic, rng.partition, rng.start)])
    try:
        yield from _consume(consumer, settings, rng)
    finally:
        consumer.unassign()


def close_cached_clients() -> None:
    """Close this process's cached consumers and native connections (tests; workers just exit)."""
    while _CONSUMERS:
        _CONSUMERS.popitem()[1].close()
    if "herd.spark.native" in sys.modules:
        sys.modules["herd.spark.native"].close_clusters()


def _consumer(config: tuple[tuple[str, Any], ...]) -> Consumer:
    consumer = _CONSUMERS.get(config)
    if consumer is None:
        consumer = _CONSUMERS[config] = Consumer(dict(config))
    return consumer


def _consume(consumer: Consumer, settings: ReadSettings, rng: OffsetRange) -> Iterator[list[Message]]:
    position = rng.start
    patience = settings.poll_timeout_ms / 1000
    deadline = time.monotonic() + patience
    while position < rng.end:
        messages = consumer.consume(min(settings.batch_rows, rng.end - position), 0.2)
        if messages and any(map(Message.error, messages)):
            messages, position = _without_errors(messages, settings, rng, position)
        if messages:
            first, last = messages[0].offset(), messages[-1].offset()
            if first < rng.start or last >= rng.end:
                messages = [m for m in messages if rng.start <= m.offset() < rng.end]
        if messages:
            position = max(position, messages[-1].offset() + 1)
            deadline = time.monotonic() + patience
            yield messages
        elif position < rng.end and time.monotonic() > deadline:
            raise TimeoutError(
                f"herd source: no record of {_name(rng)} after offset {position} within "
                f"kafkaConsumer.pollTimeoutMs={settings.poll_timeout_ms}"
            )


def _without_errors(
    messages: list[Message], settings: ReadSettings, rng: OffsetRange, position: int
) -> tuple[list[Message], int]:
    """The messages that are records; an end-of-partition event at or past the end closes the range."""
    records = []
    for m in messages:
        error = m.error()
        if error is None:
            records.append(m)
        elif error.code() == KafkaError._PARTITION_EOF:
            position = _at_partition_end(m.offset(), settings, rng, position)
        elif error.code() == KafkaError._AUTO_OFFSET_RESET:
            raise HerdDataLossError(f"offset {rng.start} of {_name(rng)} is no longer available ({error.str()})")
        elif error.fatal() or error.code() in _FATAL:
            raise HerdBrokerError(f"herd source: reading {_name(rng)} failed: {error.str()}")
        else:
            log.warning("herd source: reading %s: %s (retrying)", _name(rng), error.str())
    return records, position


def _at_partition_end(high_watermark: int, settings: ReadSettings, rng: OffsetRange, position: int) -> int:
    """librdkafka delivered everything below `high_watermark`: the range is read if it ends there."""
    if high_watermark >= rng.end:
        return rng.end
    if settings.fail_on_data_loss:
        raise HerdDataLossError(
            f"{_name(rng)} ends at offset {high_watermark}, before the end {rng.end} of the range this batch must read"
        )
    log.warning(
        "herd source: %s ends at %d before %d; skipping the missing offsets",
        _name(rng),
        high_watermark,
        rng.end,
    )
    return rng.end


def _name(rng: OffsetRange) -> str:
    return f"{rng.topic}-{rng.partition} [{rng.start}, {rng.end})"


def to_record_batch(
    messages: list[Message], rng: OffsetRange, include_headers: bool, schema: pa.Schema
) -> pa.RecordBatch:
    """One Arrow batch in Spark's Kafka source schema."""
    n = len(messages)
    stamps = list(map(Message.timestamp, messages))
    types = {s[0] for s in stamps}
    columns = [
        pa.array(list(map(Message.key, messages)), pa.binary()),
        pa.array(list(map(Message.value, messages)), pa.binary()),
        pa.repeat(pa.scalar(rng.topic, pa.string()), n),
        pa.repeat(pa.scalar(rng.partition, pa.int32()), n),
        pa.array(list(map(Message.offset, messages)), pa.int64()),
        pa.array([s[1] for s in stamps], _MS).cast(_US),
        pa.repeat(pa.scalar(types.pop() - 1, pa.int32()), n)
        if len(types) == 1
        else pa.array([s[0] - 1 for s in stamps], pa.int32()),
    ]
    if include_headers:
        columns.append(pa.array(list(map(Message.headers, messages)), schema.field("headers").type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def read_range(settings: ReadSettings, rng: OffsetRange, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The records of `rng` as Arrow batches of `schema`, through the configured fetcher."""
    if settings.fetcher == "native":
        from herd.spark import native  # kio and the log's codecs: loaded in the worker that reads

        for columns in native.read_columns(
            native.NativeSettings.of(dict(settings.config)),
            rng,
            fail_on_data_loss=settings.fail_on_data_loss,
            with_headers=settings.include_headers,
            poll_timeout_ms=settings.poll_timeout_ms,
        ):
            yield from native.to_record_batches(columns, rng, schema, settings.batch_rows)
        return
    for messages in read_messages(settings, rng):
        yield to_record_batch(messages, rng, settings.include_headers, schema)
