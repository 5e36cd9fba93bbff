"""The two fetchers a Spark task can use (no Spark needed): the native one (Fetch on a socket, columnar
decoding) returns exactly what librdkafka returns, for every codec, nulls, headers and partial ranges."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from sparkkit import create_topic

from herd.spark.fetch import ReadSettings, read_range
from herd.spark.offsets import OffsetRange
from herd.spark.options import SourceOptions
from herd.spark.schema import arrow_schema, source_schema

N = 3000


def _produce(bootstrap: str, topic: str, codec: str) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5, "batch.num.messages": 700}
    )
    for i in range(N):
        key = None if i % 3 == 0 else b"k%d" % i
        value = None if i % 11 == 0 else (b"value-%d-" % i) * (i % 40)
        headers = [("h", b"%d" % i), ("none", None)] if i % 4 == 0 else None
        producer.produce(topic, value, key, 0, headers=headers, timestamp=1_600_000_000_000 + i)
    assert producer.flush(30) == 0


def _read(bootstrap: str, rng: OffsetRange, fetcher: str, headers: bool) -> list[dict[str, Any]]:
    opts = SourceOptions.parse(
        {
            "kafka.bootstrap.servers": bootstrap,
            "subscribe": rng.topic,
            "fetcher": fetcher,
            "includeHeaders": str(headers).lower(),
            "arrowBatchRows": "1000",
        },
        streaming=False,
    )
    schema = arrow_schema(source_schema(headers))
    batches = list(read_range(ReadSettings.of(opts), rng, schema))
    assert all(b.schema.equals(schema) and b.num_rows <= 1000 for b in batches)
    return pa.Table.from_batches(batches, schema).to_pylist()


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_native_fetcher_returns_what_librdkafka_returns(broker, topic_name, codec: str) -> None:
    topic = create_topic(broker.bootstrap, topic_name(), 1)
    _produce(broker.bootstrap, topic, codec)
    for rng in (OffsetRange(topic, 0, 0, N), OffsetRange(topic, 0, 1234, 2345)):
        native = _read(broker.bootstrap, rng, "native", headers=True)
        assert native == _read(broker.bootstrap, rng, "librdkafka", headers=True)
        assert [r["offset"] for r in native] == list(range(rng.start, rng.end))
    row = native[2]  # offset 1236: no key, two headers
    assert row["key"] is None and row["headers"] == [
        {"key": "h", "value": b"1236"},
        {"key": "none", "value": None},
    ]


def test_without_headers_and_past_the_log_end(broker, topic_name) -> None:
    topic = create_topic(broker.bootstrap, topic_name(), 1)
    _produce(broker.bootstrap, topic, "none")
    rows = _read(broker.bootstrap, OffsetRange(topic, 0, 10, 20), "native", headers=False)
    assert [r["offset"] for r in rows] == list(range(10, 20)) and "headers" not in rows[0]
    from herd.spark.errors import HerdDataLossError

    with pytest.raises(HerdDataLossError, match="out of range"):
        _read(broker.bootstrap, OffsetRange(topic, 0, N + 5, N + 10), "native", headers=False)
