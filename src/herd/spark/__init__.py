"""PySpark connector for herd topics: the `herd` data source and the `__consumer_offsets` decoder.

    from herd.spark import register
    register(spark)                      # or rely on Spark auto-registering pyspark_herd.DefaultSource
    df = (spark.readStream.format("herd")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092").option("subscribe", "events").load())

The options and columns are those of Spark's Kafka connector, so `format("kafka")` and `format("herd")`
are interchangeable; docs/spark.md is the user guide. Needs the `herd[spark]` extra (pyspark, pyarrow,
confluent-kafka) and Java 17.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from herd.spark.consumer_offsets import decode_consumer_offsets
    from herd.spark.errors import HerdBrokerError, HerdDataLossError, HerdOptionError
    from herd.spark.progress import offsets_behind
    from herd.spark.source import HerdDataSource
    from herd.spark.streams import wait_for_sources

__all__ = [
    "HerdBrokerError",
    "HerdDataLossError",
    "HerdDataSource",
    "HerdOptionError",
    "decode_consumer_offsets",
    "offsets_behind",
    "register",
    "wait_for_sources",
]

# Loaded on first use: Spark starts a Python process for every planning step, and each imports this package.
_EXPORTS = {
    "HerdBrokerError": "herd.spark.errors",
    "HerdDataLossError": "herd.spark.errors",
    "HerdOptionError": "herd.spark.errors",
    "HerdDataSource": "herd.spark.source",
    "decode_consumer_offsets": "herd.spark.consumer_offsets",
    "offsets_behind": "herd.spark.progress",
    "wait_for_sources": "herd.spark.streams",
}


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'herd.spark' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


def register(spark: SparkSession) -> None:
    """Register the `herd` format in this session (Spark also finds pyspark_herd.DefaultSource itself)."""
    from herd.spark.source import HerdDataSource

    spark.dataSource.register(HerdDataSource)
