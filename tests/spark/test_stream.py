"""Streaming reads through the herd source on a real broker and the shared local[2] SparkSession."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from sparkkit import add_partitions, create_topic, numbered, produce, source

from herd.spark import offsets_behind


def _run(spark: Any, df: Any, checkpoint: str, sink: list[tuple[int, list[tuple[int, int, bytes]]]]) -> Any:
    """One Trigger.AvailableNow run; every micro-batch's (partition, offset, value) rows go to `sink`."""

    def collect(batch: Any, batch_id: int) -> None:
        sink.append((batch_id, sorted(batch.select("partition", "offset", "value").collect())))

    query = (
        df.writeStream.foreachBatch(collect).option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    )
    assert query.awaitTermination(120), "the AvailableNow run did not finish"
    assert query.exception() is None
    return query


def _forget_last_commit(checkpoint: str, batch_id: int) -> None:
    """As if the driver died after planning `batch_id` and before committing it."""
    commits = Path(checkpoint) / "commits"
    (commits / str(batch_id)).unlink()
    (commits / f".{batch_id}.crc").unlink(missing_ok=True)


def test_every_record_once_per_micro_batch_across_restart(spark, broker, topic_name, checkpoint) -> None:
    topic = create_topic(broker.bootstrap, topic_name(), 3)
    produce(broker.bootstrap, topic, numbered(3, 180))
    ck = checkpoint()
    options = {"subscribe": topic, "startingOffsets": "earliest", "maxOffsetsPerTrigger": 90}
    runs: list[tuple[int, list[tuple[int, int, bytes]]]] = []
    _run(spark, source(spark, broker.bootstrap, stream=True, **options), ck, runs)
    assert [bid for bid, _ in runs] == [0, 1]

    _forget_last_commit(ck, 1)  # batch 1 must be replayed, reading exactly the same records
    produce(broker.bootstrap, topic, numbered(3, 90, start=180))
    _run(spark, source(spark, broker.bootstrap, stream=True, **options), ck, runs)

    executions: dict[int, list[list[tuple[int, int, bytes]]]] = defaultdict(list)
    for bid, rows in runs:
        executions[bid].append(rows)
    assert sorted(executions) == [0, 1, 2]
    assert len(executions[1]) == 2 and executions[1][0] == executions[1][1], "replayed batch 1 differs"
    assert all(len(rows) == 90 for rows, *_ in executions.values())
    values = [row[2] for rows, *_ in executions.values() for row in rows]
    assert sorted(values) == sorted(b"v%d" % i for i in range(270)), "a record is missing or duplicated"
    _assert_contiguous(executions)


def _assert_contiguous(executions: dict[int, list[list[tuple[int, int, bytes]]]]) -> None:
    """Batch after batch, each partition's offsets continue exactly where the previous batch stopped."""
    next_offset: dict[int, int] = defaultdict(int)
    for bid in sorted(executions):
        for partition, offset, _ in sorted(executions[bid][0]):
            assert offset == next_offset[partition], f"batch {bid}: partition {partition} jumps to {offset}"
            next_offset[partition] = offset + 1


def test_max_offsets_per_trigger_splits_backlog_in_proportion(spark, broker, topic_name, checkpoint) -> None:
    topic = create_topic(broker.bootstrap, topic_name(), 3)
    backlog = [(0, 60), (1, 30), (2, 10)]
    produce(broker.bootstrap, topic, [(p, None, b"x") for p, n in backlog for _ in range(n)])
    df = source(
        spark,
        broker.bootstrap,
        stream=True,
        subscribe=topic,
        startingOffsets="earliest",
        maxOffsetsPerTrigger=40,
    )
    query = _run(spark, df, checkpoint(), [])
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    assert [p["numInputRows"] for p in batches] == [40, 40, 20]
    ends = [json.loads(p["sources"][0]["endOffset"]) for p in batches]
    # floor(40 * backlog / total) per partition, Spark's rule; the last batch takes what is left
    assert ends == [
        {topic: {"0": 24, "1": 12, "2": 4}},
        {topic: {"0": 48, "1": 24, "2": 8}},
        {topic: {"0": 60, "1": 30, "2": 10}},
    ]
    # How far each batch left the source behind the latest offsets, as Spark's Kafka source's metrics say it
    assert [offsets_behind(p["sources"][0]) for p in batches] == [
        {"minOffsetsBehindLatest": 6, "maxOffsetsBehindLatest": 36, "avgOffsetsBehindLatest": 20.0},
        {"minOffsetsBehindLatest": 2, "maxOffsetsBehindLatest": 12, "avgOffsetsBehindLatest": 20 / 3},
        {"minOffsetsBehindLatest": 0, "maxOffsetsBehindLatest": 0, "avgOffsetsBehindLatest": 0.0},
    ]


def test_new_partitions_are_read_from_their_start(spark, broker, topic_name, checkpoint) -> None:
    topic = create_topic(broker.bootstrap, topic_name(), 2)
    produce(broker.bootstrap, topic, numbered(2, 20))
    ck, rows = checkpoint(), []
    options = {"subscribe": topic, "startingOffsets": "earliest"}
    _run(spark, source(spark, broker.bootstrap, stream=True, **options), ck, rows)
    assert sum(len(r) for _, r in rows) == 20

    add_partitions(broker.bootstrap, topic, 3)
    produce(broker.bootstrap, topic, [(2, None, b"new-%d" % i) for i in range(5)] + [(0, None, b"old-0")])
    rows.clear()
    _run(spark, source(spark, broker.bootstrap, stream=True, **options), ck, rows)
    read = sorted((p, o, v) for _, r in rows for p, o, v in r)
    assert read == [(0, 10, b"old-0")] + [(2, i, b"new-%d" % i) for i in range(5)]


def test_stream_offsets_are_sorted_json(spark, broker, topic_name, checkpoint) -> None:
    """Offsets in the checkpoint are canonical (sorted topics, numeric partition order) so that Spark's
    string comparison of offsets never sees the same position twice in different spellings."""
    names = sorted([topic_name("b"), topic_name("a")])
    for name in names:
        create_topic(broker.bootstrap, name, 11)
        produce(broker.bootstrap, name, numbered(11, 22))
    ck = checkpoint()
    df = source(spark, broker.bootstrap, stream=True, subscribe=",".join(reversed(names)), startingOffsets="earliest")
    query = _run(spark, df, ck, [])
    end = query.recentProgress[-1]["sources"][0]["endOffset"]
    assert list(json.loads(end)) == names
    assert list(json.loads(end)[names[0]]) == [str(p) for p in range(11)]
    log_lines = (Path(ck) / "offsets" / "0").read_text().splitlines()
    assert json.loads(log_lines[-1]) == {n: {str(p): 2 for p in range(11)} for n in names}


def test_wait_for_sources_returns_once_the_query_has_created_its_source(spark, broker, topic_name, checkpoint) -> None:
    """herd.spark.wait_for_sources: the query is past Spark's "Initializing sources" when it returns (so a second
    herd query may start), and it returns at once for a query that has stopped."""
    from herd.spark import wait_for_sources
    from herd.spark.streams import _INITIALIZING

    topic = create_topic(broker.bootstrap, topic_name(), 2)
    produce(broker.bootstrap, topic, numbered(2, 20))
    seen: list[int] = []
    query = (
        source(spark, broker.bootstrap, stream=True, subscribe=topic, startingOffsets="earliest")
        .writeStream.foreachBatch(lambda batch, _: seen.append(batch.count()))
        .option("checkpointLocation", checkpoint())
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        wait_for_sources(query, timeout=120)
        assert query.isActive, query.exception()
        assert query.status["message"] not in _INITIALIZING, query.status
    finally:
        query.stop()
    assert not query.isActive
    wait_for_sources(query, timeout=0)  # stopped: nothing to wait for
    assert query.exception() is None


def test_wait_for_sources_times_out_with_the_query_status() -> None:
    """A query stuck creating its sources: TimeoutError naming it and its status (a stand-in for Spark's
    StreamingQuery, which cannot be held in that state on purpose)."""
    from herd.spark import wait_for_sources

    class Stuck:
        isActive, name, id = True, "stuck", "q-1"
        status = {"message": "Initializing sources"}

    with pytest.raises(TimeoutError, match=r"stuck still creating its sources after 0.2 s \(status: Initializing"):
        wait_for_sources(Stuck(), timeout=0.2, interval=0.01)
