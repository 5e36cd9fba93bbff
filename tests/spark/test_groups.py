"""Lag visibility (kafka.group.id) and the coordinator's history read back from `__consumer_offsets`."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest
from confluent_kafka import Consumer
from sparkkit import committed, create_topic, numbered, produce, source

from herd.spark import decode_consumer_offsets
from herd.testing.wait import wait_until


@pytest.fixture(scope="module")
def pipeline(spark, broker, tmp_path_factory) -> dict[str, Any]:
    """A stream with kafka.group.id run to the end (AvailableNow) in batches of 30 over 3 partitions."""
    topic = create_topic(broker.bootstrap, f"lag-{time.monotonic_ns()}", 3)
    group = f"pipeline-{time.monotonic_ns()}"
    produce(broker.bootstrap, topic, numbered(3, 90))
    df = source(
        spark,
        broker.bootstrap,
        stream=True,
        subscribe=topic,
        startingOffsets="earliest",
        maxOffsetsPerTrigger=30,
        kafka_group_id=group,
    )
    query = (
        df.writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path_factory.mktemp("lag")))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120) and query.exception() is None
    return {"topic": topic, "group": group}


def test_group_shows_the_processed_offsets(broker, pipeline) -> None:
    """Every record was processed, so the group's committed offsets are the ends of the partitions: the
    last batch's end is committed when the AvailableNow run checks for more data, so lag is zero, and
    `herd groups describe` says so."""
    assert committed(broker.bootstrap, pipeline["group"], pipeline["topic"], 3) == {0: 30, 1: 30, 2: 30}
    described = subprocess.run(
        [
            sys.executable,
            "-m",
            "herd.cli",
            "groups",
            "describe",
            "--bootstrap-server",
            broker.bootstrap,
            "--group",
            pipeline["group"],
            "--output",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert described.returncode == 0, described.stderr
    rows = json.loads(described.stdout)
    assert [(r["partition"], r["current_offset"], r["lag"]) for r in rows] == [(p, 30, 0) for p in range(3)]


def test_decoder_returns_the_commits_of_the_run(spark, broker, pipeline) -> None:
    df = source(spark, broker.bootstrap, subscribe="__consumer_offsets", decode="consumer_offsets")
    rows = (
        df.where((df.group == pipeline["group"]) & (df.kind == "offset_commit"))
        .orderBy("log_partition", "log_offset")
        .collect()
    )
    history: dict[int, list[int]] = {}
    for row in rows:
        assert row.topic == pipeline["topic"] and not row.tombstone and row.commit_timestamp is not None
        history.setdefault(row.partition, []).append(row.offset)
    # the start, then the end of each of the three batches (10 records per partition per batch)
    assert history == {p: [0, 10, 20, 30] for p in range(3)}


def test_decoder_function_matches_the_option(spark, broker, pipeline) -> None:
    options = {"subscribe": "__consumer_offsets"}
    by_option = source(spark, broker.bootstrap, decode="consumer_offsets", **options)
    by_function = decode_consumer_offsets(source(spark, broker.bootstrap, **options))
    wanted = by_option.group == pipeline["group"]
    assert sorted(by_function.where(by_function.group == pipeline["group"]).collect()) == sorted(
        by_option.where(wanted).collect()
    )


def test_decoder_returns_group_generations_and_members(spark, broker, topic_name) -> None:
    topic = create_topic(broker.bootstrap, topic_name(), 2)
    group = topic_name("group")
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "client.id": "spark-test",
            "partition.assignment.strategy": "range",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])

        def joined() -> bool:
            if not consumer.assignment():
                consumer.poll(0.2)
            return bool(consumer.assignment())

        wait_until(joined, 30, "the consumer to join its group (an assignment)", interval=0)
    finally:
        consumer.close()
    df = source(spark, broker.bootstrap, subscribe="__consumer_offsets", decode="consumer_offsets")
    rows = df.where((df.group == group) & (df.kind == "group_metadata")).orderBy("log_offset").collect()
    joined = [r for r in rows if not r.tombstone and r.members]
    assert joined, f"no GroupMetadata record with members for {group}: {rows}"
    first = joined[0]
    assert (first.protocol_type, first.protocol, first.generation) == ("consumer", "range", 1)
    member = first.members[0]
    assert member.member_id == first.leader and member.client_id == "spark-test"
    assert member.subscribed_topics == [topic]
    assert sorted((a.topic, a.partition) for a in member.assignment) == [(topic, 0), (topic, 1)]
    assert rows[-1].members == [] or rows[-1].tombstone, "the group did not end empty after the close"
