"""The config changes of AlterConfigs and IncrementalAlterConfigs, as pure functions over string maps.

A resource's configs are the values set on it (topic configs, or a broker's dynamic configs), by Kafka name. A
change is either a whole new set (AlterConfigs, which deletes every name it does not give) or a list of
operations (IncrementalAlterConfigs, KIP-339): SET, DELETE, APPEND and SUBTRACT, the last two only on LIST
configs (cleanup.policy), splitting and joining on commas and starting from the config's default when it is not
set. The request-level checks come first, in Kafka's order and words (apache/kafka
core/src/main/scala/kafka/server/ConfigAdminManager.scala `preprocess`: duplicate keys, null values; then
metadata/src/main/java/org/apache/kafka/controller/ConfigurationControlManager.java
`incrementalAlterConfigResource` for topics and ConfigAdminManager.prepareIncrementalConfigs for brokers).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

# Kafka error codes used here.
INVALID_REQUEST = 42
INVALID_CONFIG = 40

# The values Kafka's validators allow, shared by the topic configs and the broker settings they default to.
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")  # BrokerCompressionType, in order
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("compact", "delete")


_COMMA = re.compile(r"\s*,\s*")


def parse_list(value: str) -> list[str]:
    """A LIST config's items as Kafka's ConfigDef.parseType reads them: nothing for a blank value, else the value
    trimmed and split on commas with the spaces around them (an empty item stays: "a,,b" has three)."""
    trimmed = value.strip()
    return _COMMA.split(trimmed) if trimmed else []


class FullMessage(str):
    """A config's complaint that is the whole message Kafka answers, not to be prefixed with "Invalid value V for
    configuration N: "."""


def list_message(name: str, value: str, choices: tuple[str, ...], *, empty_allowed: bool = True) -> str | None:
    """Why `value` is not a valid LIST `name`, in Kafka 4.2's words (ConfigDef.ValidList, KAFKA-19112: an empty
    list is valid unless `empty_allowed` is False, no item may be empty or given twice, each one of `choices` when
    there are any), as a FullMessage, or None."""
    items = parse_list(value)
    if not items and not empty_allowed:
        valid = f"[{', '.join(choices)}]" if choices else "any non-empty value"
        return FullMessage(f"Configuration '{name}' must not be empty. Valid values include: {valid}")
    if len(set(items)) != len(items):
        return FullMessage(f"Configuration '{name}' values must not be duplicated.")
    for item in items:
        if not item:
            return FullMessage(f"Configuration '{name}' values must not be empty.")
        if choices and item not in choices:
            return FullMessage(
                f"Invalid value {item} for configuration {name}: String must be one of: {', '.join(choices)}"
            )
    return None


def gzip_level_complaint(value: str) -> str | None:
    """CompressionType.GZIP.levelValidator's complaint: a level is 1 to 9, or -1 (Deflater.DEFAULT_COMPRESSION)."""
    level = int(value)
    return None if level == -1 or 1 <= level <= 9 else "Value must be between 1 and 9 or equal to -1"


def number_complaint(kind: str, raw: str, minimum: float | None, maximum: float | None = None) -> str | None:
    """Why `raw` is not a number of Kafka type `kind` ("short", "int", "long" or "double") within `minimum` and
    `maximum` (None: no bound), in the words of Kafka's ConfigDef ("Not a number of type INT", "Value must be at
    least 0", "Value must be no more than 1"), or None."""
    number: float
    try:
        number = float(raw) if kind == "double" else int(raw)
    except ValueError:
        return f"Not a number of type {kind.upper()}"
    if kind != "double":
        bits = {"short": 15, "int": 31}.get(kind, 63)
        if not -(2**bits) <= number < 2**bits:
            return f"Not a number of type {kind.upper()}"
    if minimum is not None and number < minimum:
        return f"Value must be at least {minimum}"
    if maximum is not None and number > maximum:
        return f"Value must be no more than {maximum}"
    return None


class ConfigChangeError(Exception):
    """A change that cannot be made; carries the Kafka error code and message to answer with."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


class OpType(enum.IntEnum):
    """AlterConfigOp.OpType (apache/kafka clients/src/main/java/org/apache/kafka/clients/admin/AlterConfigOp.java)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class ConfigOp:
    name: str
    op: int  # an OpType, or an unknown number a client sent
    value: str | None


def check_entries(names: Iterable[str], nulls: Iterable[str]) -> None:
    """The checks of one resource's entries before anything else: each name at most once, and no null value where
    one is needed (`nulls`: the names that have one). Raises ConfigChangeError(INVALID_REQUEST)."""
    listed = list(names)
    if len(set(listed)) != len(listed):
        raise ConfigChangeError(INVALID_REQUEST, "Error due to duplicate config keys")
    missing = list(nulls)
    if missing:
        raise ConfigChangeError(INVALID_REQUEST, "Null value not supported for : " + ", ".join(missing))


def check_ops(ops: Iterable[ConfigOp]) -> None:
    """`check_entries` for IncrementalAlterConfigs (DELETE needs no value) and unknown operation types."""
    ops = list(ops)
    check_entries((o.name for o in ops), (o.name for o in ops if o.op != OpType.DELETE and o.value is None))
    for o in ops:
        if o.op not in OpType.__members__.values():
            raise ConfigChangeError(INVALID_REQUEST, f"Unknown operations type {o.op}")


def apply_ops(
    current: dict[str, str],
    ops: Iterable[ConfigOp],
    *,
    is_list: Callable[[str], bool],
    default: Callable[[str], str | None],
    on_not_list: Callable[[str, OpType], str],
) -> dict[str, str]:
    """The configs after `ops` (checked with `check_ops`), starting from `current`. APPEND adds the values not
    there yet, SUBTRACT removes them, both on the value set or else the `default`; `on_not_list(name, op)` is the
    message when the config is not a LIST (the two paths of Kafka word it differently). Raises
    ConfigChangeError(INVALID_CONFIG)."""
    configs = dict(current)
    for o in ops:
        op = OpType(o.op)
        if op is OpType.SET:
            configs[o.name] = o.value or ""
        elif op is OpType.DELETE:
            configs.pop(o.name, None)
        else:
            if not is_list(o.name):
                raise ConfigChangeError(INVALID_CONFIG, on_not_list(o.name, op))
            start = configs.get(o.name, default(o.name))
            parts = parse_list(start or "")
            given = parse_list(o.value or "")
            if op is OpType.APPEND:
                parts += [v for v in dict.fromkeys(given) if v not in parts]
            else:
                parts = [p for p in parts if p not in given]
            configs[o.name] = ",".join(parts)
    return configs


def topic_not_list(name: str, op: OpType) -> str:
    """The KRaft controller's words (ConfigurationControlManager)."""
    return f"Can't {op.name} to key {name} because its type is not LIST."


def broker_not_list(name: str, op: OpType) -> str:
    """The broker's words (ConfigAdminManager.prepareIncrementalConfigs)."""
    verb = "append" if op is OpType.APPEND else "subtract"
    return f"Config value {verb} is not allowed for config key: {name}"
