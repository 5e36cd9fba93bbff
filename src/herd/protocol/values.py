"""Plain Python values in and out of kio objects, for both sides of the wire (broker and client).

kio's generated classes want `ErrorCode` members for error codes, `timedelta` for durations and aware
`datetime` for timestamps. Code on both sides thinks in ints and milliseconds: `make(cls, values)` builds a kio
object from ints (dropping fields the class's version does not have) and `ms()` reads one back.
"""

from __future__ import annotations

import datetime
from dataclasses import fields
from functools import lru_cache
from typing import Any, Mapping

from kio.schema.errors import ErrorCode

EPOCH = datetime.datetime.fromtimestamp(0, datetime.timezone.utc)


@lru_cache(maxsize=None)
def field_types(cls: type) -> dict[str, str]:
    """Field name -> Kafka type of a kio class."""
    return {f.name: f.metadata.get("kafka_type", "") for f in fields(cls)}


def coerce(kafka_type: str, value: Any) -> Any:
    if kafka_type == "error_code" and not isinstance(value, ErrorCode):
        return ErrorCode(value)
    if kafka_type in ("timedelta_i32", "timedelta_i64") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if kafka_type == "datetime_i64" and isinstance(value, int):
        return EPOCH + datetime.timedelta(milliseconds=value)
    return value


def make(cls: type, values: Mapping[str, Any]) -> Any:
    """An instance of kio class `cls` from `values`; names the class does not have are dropped."""
    types = field_types(cls)
    return cls(**{k: coerce(types[k], v) for k, v in values.items() if k in types})


def ms(value: Any) -> int:
    """A kio duration or timestamp (or plain int) in milliseconds."""
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return round((value - EPOCH).total_seconds() * 1000)
    return int(value)
