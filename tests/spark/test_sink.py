"""The herd sink (batch and streaming) round-trips keys, values, headers and partitions; batch reads."""

from __future__ import annotations

from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StructField,
    StructType,
)
from sparkkit import create_topic, numbered, produce, read_all, source

from herd.spark.schema import HEADER

ROWS = [
    (b"k0", b"v0", 0, [("h", b"0"), ("h", b"again")]),
    (None, b"no key", 1, None),
    (b"k2", None, 1, []),
    (b"\x00\xff", b"\x00binary\xff", 0, [("empty", b""), ("null", None)]),
]
SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("partition", IntegerType()),
        StructField("headers", ArrayType(HEADER)),
    ]
)


Written = list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]


def _expected() -> Written:
    return sorted(((p, k, v, h or []) for k, v, p, h in ROWS), key=repr)


def _as_written(messages: list) -> Written:
    return sorted(((m.partition(), m.key(), m.value(), m.headers() or []) for m in messages), key=repr)


def test_batch_sink_round_trips_keys_values_headers(spark, broker, topic_name) -> None:
    topic = create_topic(broker.bootstrap, topic_name(), 2)
    (
        spark.createDataFrame(ROWS, SCHEMA)
        .write.format("herd")
        .mode("append")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", topic)
        .save()
    )
    assert _as_written(read_all(broker.bootstrap, topic, 2, len(ROWS))) == _expected()

    for fetcher in ("native", "librdkafka"):
        back = source(spark, broker.bootstrap, subscribe=topic, includeHeaders="true", fetcher=fetcher).collect()
        got = sorted(
            ((r.partition, r.key, r.value, [(h.key, h.value) for h in r.headers or []]) for r in back),
            key=repr,
        )
        assert got == _expected(), fetcher
        assert {r.timestampType for r in back} == {0}


def test_stream_sink_with_topic_column_and_string_values(spark, broker, topic_name, checkpoint) -> None:
    """Read a topic as a stream, transform, and write through the streaming sink, topic per row."""
    src, even, odd = (create_topic(broker.bootstrap, topic_name(s), 1) for s in ("src", "even", "odd"))
    produce(broker.bootstrap, src, [(0, b"%d" % i, b"value %d" % i) for i in range(50)], headers=True)
    df = source(spark, broker.bootstrap, stream=True, subscribe=src, startingOffsets="earliest", includeHeaders="true")
    out = df.select(
        F.col("key").cast("string").alias("key"),
        F.upper(F.col("value").cast("string")).alias("value"),
        F.when(F.col("offset") % 2 == 0, F.lit(even)).otherwise(F.lit(odd)).alias("topic"),
        F.col("headers"),
    )
    query = (
        out.writeStream.format("herd")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("checkpointLocation", checkpoint())
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120) and query.exception() is None
    evens = read_all(broker.bootstrap, even, 1, 25)
    odds = read_all(broker.bootstrap, odd, 1, 25)
    assert sorted(m.value() for m in evens) == sorted(b"VALUE %d" % i for i in range(0, 50, 2))
    assert sorted(m.key() for m in odds) == sorted(b"%d" % i for i in range(1, 50, 2))
    assert all(m.headers() == [("n", b"%d" % (int(m.key()) + 1))] for m in evens + odds)


def test_sink_partitions_keys_like_java_clients(spark, broker, topic_name) -> None:
    """Without a partition column, a key lands where Java's murmur2 partitioner (and Spark's Kafka sink)
    puts it; the same keys produced by librdkafka with murmur2_random agree."""
    from confluent_kafka import Producer

    ours, theirs = (
        create_topic(broker.bootstrap, topic_name("ours"), 4),
        create_topic(broker.bootstrap, topic_name("java"), 4),
    )
    keys = [b"user-%d" % i for i in range(40)]
    (
        spark.createDataFrame([(k, b"x") for k in keys], "key binary, value binary")
        .write.format("herd")
        .mode("append")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", ours)
        .save()
    )
    p = Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random"})
    for k in keys:
        p.produce(theirs, b"x", k)
    assert p.flush(30) == 0
    placed = {m.key(): m.partition() for m in read_all(broker.bootstrap, ours, 4, 40)}
    expected = {m.key(): m.partition() for m in read_all(broker.bootstrap, theirs, 4, 40)}
    assert placed == expected and len(set(placed.values())) > 1


def test_batch_read_between_offsets_with_min_partitions(spark, broker, topic_name) -> None:
    topic = create_topic(broker.bootstrap, topic_name(), 2)
    produce(broker.bootstrap, topic, numbered(2, 200))  # offsets 0..99 in each partition
    df = source(
        spark,
        broker.bootstrap,
        subscribe=topic,
        minPartitions=6,
        startingOffsets=f'{{"{topic}":{{"0":10,"1":-2}}}}',
        endingOffsets=f'{{"{topic}":{{"0":-1,"1":50}}}}',
    )
    assert df.rdd.getNumPartitions() == 6
    rows = df.select("partition", "offset").collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(0, o) for o in range(10, 100)] + [
        (1, o) for o in range(50)
    ]


def test_batch_read_from_timestamp(spark, broker, topic_name) -> None:
    from confluent_kafka import Producer

    topic = create_topic(broker.bootstrap, topic_name(), 1)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        p.produce(topic, b"%d" % i, partition=0, timestamp=1_700_000_000_000 + i * 1000)
    assert p.flush(30) == 0
    df = source(spark, broker.bootstrap, subscribe=topic, startingTimestamp=1_700_000_004_500)
    rows = df.select("offset", F.unix_millis("timestamp").alias("ms")).orderBy("offset").collect()
    assert [(r.offset, r.ms) for r in rows] == [(i, 1_700_000_000_000 + i * 1000) for i in range(5, 10)]


def test_register_explicitly(spark) -> None:
    """`format("herd")` already resolves through pyspark_herd (conftest never registers); the explicit
    call is also available and may be repeated."""
    from herd.spark import register

    register(spark)
    register(spark)
