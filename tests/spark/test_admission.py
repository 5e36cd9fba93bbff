"""The driver side of the streaming reader, called as Spark calls it (no Spark needed): minOffsetsPerTrigger
with maxTriggerDelay, read limits, Trigger.AvailableNow and data loss."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows
from sparkkit import create_topic, produce

from herd.spark.errors import HerdDataLossError
from herd.spark.options import SourceOptions
from herd.spark.readers import HerdStreamReader
from herd.spark.schema import source_schema


def _reader(bootstrap: str, topic: str, **options: str) -> HerdStreamReader:
    opts = SourceOptions.parse(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "startingOffsets": "earliest", **options},
        streaming=True,
    )
    return HerdStreamReader(opts, source_schema(False))


def _fill(bootstrap: str, topic: str, n: int) -> None:
    produce(bootstrap, topic, [(0, None, b"x")] * n)


def _at(topic: str, offset: int) -> dict[str, Any]:
    return {topic: {"0": offset}}


def test_min_offsets_wait_for_enough_records_or_the_delay(broker, topic_name) -> None:
    topic = create_topic(broker.bootstrap, topic_name(), 1)
    reader = _reader(broker.bootstrap, topic, minOffsetsPerTrigger="50", maxTriggerDelay="1500ms")
    limit = reader.getDefaultReadLimit()
    assert limit == ReadMinRows(50)
    start = reader.initialOffset()
    _fill(broker.bootstrap, topic, 10)
    assert reader.latestOffset(start, limit) == _at(topic, 10)  # Spark's rule: the first trigger never waits
    _fill(broker.bootstrap, topic, 20)
    assert reader.latestOffset(_at(topic, 10), limit) == _at(topic, 10)  # 20 < 50: wait
    _fill(broker.bootstrap, topic, 30)
    assert reader.latestOffset(_at(topic, 10), limit) == _at(topic, 60)  # 50 waiting: go
    _fill(broker.bootstrap, topic, 5)
    assert reader.latestOffset(_at(topic, 60), limit) == _at(topic, 60)
    time.sleep(1.6)
    assert reader.latestOffset(_at(topic, 60), limit) == _at(topic, 65)  # maxTriggerDelay passed
    assert reader.reportLatestOffset() == _at(topic, 65)
    reader.stop()


def test_max_and_min_together_and_read_all_available(broker, topic_name) -> None:
    topic = create_topic(broker.bootstrap, topic_name(), 1)
    reader = _reader(broker.bootstrap, topic, minOffsetsPerTrigger="5", maxOffsetsPerTrigger="8")
    assert reader.getDefaultReadLimit() == ReadMaxRows(8)
    start = reader.initialOffset()
    _fill(broker.bootstrap, topic, 3)
    assert reader.latestOffset(start, ReadMaxRows(8)) == _at(topic, 3)  # first trigger
    _fill(broker.bootstrap, topic, 3)
    assert reader.latestOffset(_at(topic, 3), ReadMaxRows(8)) == _at(topic, 3)  # 3 < min 5
    _fill(broker.bootstrap, topic, 20)
    assert reader.latestOffset(_at(topic, 3), ReadMaxRows(8)) == _at(topic, 11)  # capped at max 8
    assert reader.latestOffset(_at(topic, 11), ReadAllAvailable()) == _at(topic, 26)  # the engine's limit wins
    reader.stop()


def test_available_now_stops_at_the_target_and_ignores_min(broker, topic_name) -> None:
    topic = create_topic(broker.bootstrap, topic_name(), 1)
    _fill(broker.bootstrap, topic, 7)
    reader = _reader(broker.bootstrap, topic, minOffsetsPerTrigger="100", maxOffsetsPerTrigger="4")
    reader.prepareForTriggerAvailableNow()
    start = reader.initialOffset()
    _fill(broker.bootstrap, topic, 10)  # after the target: not part of this run
    limit = reader.getDefaultReadLimit()
    assert reader.latestOffset(start, limit) == _at(topic, 4)
    assert reader.latestOffset(_at(topic, 4), limit) == _at(topic, 7)
    assert reader.latestOffset(_at(topic, 7), limit) == _at(topic, 7)
    reader.stop()


def test_a_deleted_topic_is_data_loss_unless_allowed(broker, topic_name) -> None:
    kept, doomed = (create_topic(broker.bootstrap, topic_name(s), 1) for s in ("kept", "doomed"))
    for t in (kept, doomed):
        _fill(broker.bootstrap, t, 3)
    strict = _reader(broker.bootstrap, f"{kept},{doomed}")
    lenient = _reader(broker.bootstrap, f"{kept},{doomed}", failOnDataLoss="false")
    start = strict.initialOffset()
    assert start == {kept: {"0": 0}, doomed: {"0": 0}}
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.delete_topics([doomed]).values():
        future.result(30)
    with pytest.raises(HerdDataLossError, match=f"partitions {doomed}-0 no longer exist.*failOnDataLoss"):
        strict.latestOffset(start, ReadAllAvailable())
    assert lenient.latestOffset(start, ReadAllAvailable()) == _at(kept, 3)
    strict.stop()
    lenient.stop()
