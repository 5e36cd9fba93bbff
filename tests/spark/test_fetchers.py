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


FIXED = 20_000


def _produce_fixed_size(bootstrap: str, topic: str, codec: str) -> None:
    """Records of one size in batches of up to 9,000 (offset deltas of 1, 2 and 3 bytes), except: no key
    for the first 1,000 and a longer key for offsets 5,000 to 5,004 (the first batch's sizes change)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": codec,
            "linger.ms": 200,
            "batch.size": 1_000_000,
            "batch.num.messages": 9_000,
        }
    )
    for i in range(FIXED):
        key = None if i < 1000 else b"k%05d" % i if 5000 <= i < 5005 else b"%05d" % i
        producer.produce(topic, b"value-%05d" % i, key, 0, timestamp=1_600_000_000_000)
    assert producer.flush(30) == 0


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_fixed_size_records_are_found_without_walking_them(
    broker, topic_name, codec: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from herd.spark import columnar

    topic = create_topic(broker.bootstrap, topic_name(), 1)
    _produce_fixed_size(broker.bootstrap, topic, codec)
    walked = []
    walk = columnar._walk
    monkeypatch.setattr(columnar, "_walk", lambda buf, pos, n, out: (walked.append(n), walk(buf, pos, n, out)))
    for rng in (OffsetRange(topic, 0, 0, FIXED), OffsetRange(topic, 0, 4321, 17_654)):
        walked.clear()
        native = _read(broker.bootstrap, rng, "native", headers=False)
        assert 0 < sum(walked) < rng.end - rng.start  # the batch around offsets 1,000 and 5,000 only
        assert native == _read(broker.bootstrap, rng, "librdkafka", headers=False)
        assert [r["offset"] for r in native] == list(range(rng.start, rng.end))
    assert native[5000 - 4321]["key"] == b"k05000" and native[0]["value"] == b"value-04321"
