"""How far a streaming query over herd is behind the latest offsets, per micro-batch.

Spark's Kafka source reports `minOffsetsBehindLatest`, `maxOffsetsBehindLatest` and `avgOffsetsBehindLatest`
among its source metrics (KafkaMicroBatchStream.metrics in apache/spark,
connector/kafka-0-10-sql/src/main/scala/org/apache/spark/sql/kafka010/KafkaMicroBatchStream.scala): for each
partition, the latest offset the source saw minus the offset the batch read up to. A Python data source cannot
add metrics to the query progress (pyspark.sql.datasource.DataSourceStreamReader has no such hook), but the herd
source reports its latest offsets (`reportLatestOffset`), so every batch's progress carries both ends:
`offsets_behind(source)` computes the same three figures from one entry of `progress["sources"]`.

    for source in query.lastProgress["sources"]:
        print(source["description"], offsets_behind(source))

A StreamingQueryListener's `event.progress.sources` entries work as well. Across queries and restarts, the lag of
the query's `kafka.group.id` (`herd groups describe`) says the same from the broker's side.
"""

from __future__ import annotations

import json
from typing import Any

from herd.spark.offsets import from_json


def offsets_behind(source: Any) -> dict[str, float] | None:
    """minOffsetsBehindLatest, maxOffsetsBehindLatest (ints) and avgOffsetsBehindLatest (a float) of one source
    of a micro-batch's progress (a dict of `lastProgress`/`recentProgress`, or a listener's SourceProgress); None
    when the source reported no latest offsets (not a herd source, or no batch planned yet)."""
    try:
        latest = from_json(_offsets(source, "latestOffset"))
        consumed = from_json(_offsets(source, "endOffset"))
    except (AttributeError, TypeError, ValueError):  # another source's offsets (a number, a list...)
        return None
    if not latest:
        return None
    behind = [offset - consumed.get(tp, 0) for tp, offset in latest.items()]
    return {
        "minOffsetsBehindLatest": min(behind),
        "maxOffsetsBehindLatest": max(behind),
        "avgOffsetsBehindLatest": sum(behind) / len(behind),
    }


def _offsets(source: Any, field: str) -> dict[str, dict[str, Any]] | None:
    value = source.get(field) if isinstance(source, dict) else getattr(source, field, None)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    return value if isinstance(value, dict) else None
