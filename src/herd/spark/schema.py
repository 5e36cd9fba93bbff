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


# The sink: which columns it reads, and the Spark types each may have (Spark's Kafka sink rules).
SINK_COLUMNS: dict[str, tuple[type[DataType], ...]] = {
    "key": (StringType, BinaryType),
    "value": (StringType, BinaryType),
    "topic": (StringType,),
    "partition": (IntegerType,),
    "headers": (ArrayType,),
}
