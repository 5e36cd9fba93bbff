"""PySpark connector for herd topics: the `herd` data source (issue 7) and the `__consumer_offsets` decoder.

    from herd.spark import register
    register(spark)                      # or rely on Spark auto-registering pyspark_herd.DefaultSource
    df = (spark.readStream.format("herd")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092").option("subscribe", "events").load())

The options and columns are those of Spark's Kafka connector, so `format("kafka")` and `format("herd")`
are interchangeable; docs/spark.md is the user guide. Needs the `herd[spark]` extra (pyspark, pyarrow,
confluent-kafka) and Java 17.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from herd.spark.consumer_offsets import decode_consumer_offsets
from herd.spark.errors import HerdBrokerError, HerdDataLossError, HerdOptionError
from herd.spark.source import HerdDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "HerdBrokerError",
    "HerdDataLossError",
    "HerdDataSource",
    "HerdOptionError",
    "decode_consumer_offsets",
    "register",
]


def register(spark: SparkSession) -> None:
    """Register the `herd` format in this session (Spark also finds pyspark_herd.DefaultSource itself)."""
    spark.dataSource.register(HerdDataSource)
