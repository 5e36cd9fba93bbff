"""The columns of the herd source and sink: Spark's Kafka connector's, as Spark and as Arrow types.

The Arrow schemas are derived from the Spark ones with pyspark's own `to_arrow_schema(..., timezone="UTC")`,
which is the exact schema Spark checks the first record batch of a Python data source against (binary,
not large_binary; timestamp[us, tz=UTC]; a list's item field named "element").
"""

from __future__ import annotations

from functools import lru_cache

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

HEADER = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
HEADERS = ArrayType(HEADER)

_SOURCE_FIELDS = [
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
]


def source_schema(include_headers: bool) -> StructType:
    """key, value, topic, partition, offset, timestamp, timestampType (+ headers), as Spark's Kafka source."""
    fields = list(_SOURCE_FIELDS)
    if include_headers:
        fields.append(StructField("headers", HEADERS))
    return StructType(fields)


@lru_cache(maxsize=8)
def arrow_schema(spark_schema: StructType) -> pa.Schema:
    return to_arrow_schema(spark_schema, timezone="UTC")


# `decode=consumer_offsets` (consumer_offsets.py): one row per `__consumer_offsets` record.
_ASSIGNED = ArrayType(StructType([StructField("topic", StringType()), StructField("partition", IntegerType())]))
MEMBER = StructType(
    [
        StructField("member_id", StringType()),
        StructField("group_instance_id", StringType()),
        StructField("client_id", StringType()),
        StructField("client_host", StringType()),
        StructField("rebalance_timeout_ms", IntegerType()),
        StructField("session_timeout_ms", IntegerType()),
        StructField("subscribed_topics", ArrayType(StringType())),
        StructField("assignment", _ASSIGNED),
    ]
)
RECORD = StructType(
    [
        StructField("kind", StringType()),
        StructField("group", StringType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("leader_epoch", IntegerType()),
        StructField("metadata", StringType()),
        StructField("commit_timestamp", TimestampType()),
        StructField("expire_timestamp", TimestampType()),
        StructField("protocol_type", StringType()),
        StructField("generation", IntegerType()),
        StructField("protocol", StringType()),
        StructField("leader", StringType()),
        StructField("state_timestamp", TimestampType()),
        StructField("members", ArrayType(MEMBER)),
        StructField("tombstone", BooleanType()),
    ]
)
CONSUMER_OFFSETS = StructType(
    RECORD.fields
    + [
        StructField("log_partition", IntegerType()),
        StructField("log_offset", LongType()),
        StructField("log_timestamp", TimestampType()),
    ]
)


# The sink: which columns it reads, and the Spark types each may have (Spark's Kafka sink rules).
SINK_COLUMNS: dict[str, tuple[type[DataType], ...]] = {
    "key": (StringType, BinaryType),
    "value": (StringType, BinaryType),
    "topic": (StringType,),
    "partition": (IntegerType,),
    "headers": (ArrayType,),
}
