"""Plain Python values in and out of kio objects, for both sides of the wire (broker and client).

kio's generated classes want `ErrorCode` members for error codes, `timedelta` for durations and aware
`datetime` for timestamps. Code on both sides thinks in ints and milliseconds: `make(cls, values)` builds a kio
object from ints (dropping fields the class's version does not have) and `ms()` reads one back.
`MessageBuilder` builds the nested classes of one version of a message (the server's response builder and the
client's request builder are both one).
"""

from __future__ import annotations

import datetime
import sys
from collections.abc import Callable, Mapping
from dataclasses import fields
from functools import cache
from types import ModuleType
from typing import Any

from kio.schema.errors import ErrorCode

EPOCH = datetime.datetime.fromtimestamp(0, datetime.UTC)


@cache
def field_types(cls: type) -> dict[str, str]:
    """Field name -> Kafka type of a kio class."""
    return {f.name: f.metadata.get("kafka_type", "") for f in fields(cls)}


def _error_code(value: Any) -> Any:
    return value if isinstance(value, ErrorCode) else ErrorCode(value)


def _duration(value: Any) -> Any:
    return datetime.timedelta(milliseconds=value) if isinstance(value, int) else value


def _timestamp(value: Any) -> Any:
    return EPOCH + datetime.timedelta(milliseconds=value) if isinstance(value, int) else value


_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "error_code": _error_code,
    "timedelta_i32": _duration,
    "timedelta_i64": _duration,
    "datetime_i64": _timestamp,
}


@cache
def _converters(cls: type) -> dict[str, Callable[[Any], Any] | None]:
    """Field name -> the conversion its Kafka type needs (None: the value goes in as it is)."""
    return {name: _CONVERTERS.get(kafka_type) for name, kafka_type in field_types(cls).items()}


def make(cls: type, values: Mapping[str, Any]) -> Any:
    """An instance of kio class `cls` from `values`; names the class does not have are dropped. Called for
    every response (and every member of a JoinGroup leader's answer), so the per-field work is a dict lookup
    and, for the few typed fields, one call."""
    converters = _converters(cls)
    kwargs = {}
    for name, value in values.items():
        if name in converters:
            convert = converters[name]
            kwargs[name] = value if convert is None else convert(value)
    return cls(**kwargs)


class MessageBuilder:
    """`b("JoinGroupRequestProtocol", name=..., metadata=...)` builds that class of one version of a message.

    kio makes each version of a message its own module, whose classes lack the fields that version lacks.
    A class the version does not have is built as None; the field that would hold it is absent from that
    version too, and `make` drops it.
    """

    __slots__ = ("module",)

    def __init__(self, message_cls: type) -> None:
        self.module: ModuleType = sys.modules[message_cls.__module__]

    def __call__(self, class_name: str, /, **values: Any) -> Any:
        cls = getattr(self.module, class_name, None)
        return None if cls is None else make(cls, values)


def ms(value: Any) -> int:
    """A kio duration or timestamp (or plain int) in milliseconds."""
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return round((value - EPOCH).total_seconds() * 1000)
    return int(value)
