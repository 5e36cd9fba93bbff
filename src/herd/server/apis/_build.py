"""Building kio response objects for whichever version a request came in.

Each version of a Kafka message is its own kio module with its own classes, and older versions lack fields that
newer ones have. Handlers describe an answer once, with the fields of the newest version, and `Builder` makes
the classes of the requested version from it: fields that version does not have are dropped, and plain Python
values are turned into the types kio's writer expects (error codes into `ErrorCode`, millisecond durations into
`timedelta`, millisecond timestamps into aware `datetime`).
"""

from __future__ import annotations

import datetime
import sys
from dataclasses import fields
from functools import lru_cache
from types import ModuleType
from typing import Any

from kio.schema.errors import ErrorCode

from herd.protocol.messages import response_class

_EPOCH = datetime.datetime.fromtimestamp(0, datetime.timezone.utc)


@lru_cache(maxsize=None)
def _field_types(cls: type) -> dict[str, str]:
    return {f.name: f.metadata.get("kafka_type", "") for f in fields(cls)}


def _coerce(kafka_type: str, value: Any) -> Any:
    if kafka_type == "error_code" and not isinstance(value, ErrorCode):
        return ErrorCode(value)
    if kafka_type in ("timedelta_i32", "timedelta_i64") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if kafka_type == "datetime_i64" and isinstance(value, int):
        return _EPOCH + datetime.timedelta(milliseconds=value)
    return value


def make(cls: type, values: dict[str, Any]) -> Any:
    types = _field_types(cls)
    return cls(**{k: _coerce(types[k], v) for k, v in values.items() if k in types})


class Builder:
    """`b("MetadataResponseTopic", name=..., ...)` builds that class of the response's version."""

    __slots__ = ("module", "response_cls")

    def __init__(self, api_key: int, api_version: int) -> None:
        self.response_cls = response_class(api_key, api_version)
        self.module: ModuleType = sys.modules[self.response_cls.__module__]

    def __call__(self, class_name: str, /, **values: Any) -> Any:
        """An instance of `class_name` in this version, or None when the version has no such class (then the
        field that would hold it does not exist either, and `make` drops it)."""
        cls = getattr(self.module, class_name, None)
        return None if cls is None else make(cls, values)

    def response(self, **values: Any) -> Any:
        return make(self.response_cls, values)

    def has(self, name: str) -> bool:
        return hasattr(self.module, name)


@lru_cache(maxsize=None)
def builder(api_key: int, api_version: int) -> Builder:
    return Builder(api_key, api_version)


def ms(value: Any) -> int:
    """A kio duration or timestamp (or plain int) in milliseconds."""
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return round((value - _EPOCH).total_seconds() * 1000)
    return int(value)


def ctx_builder(ctx: Any) -> Builder:
    return builder(ctx.header.api_key, ctx.header.api_version)


__all__ = ["Builder", "builder", "ctx_builder", "make", "ms"]
