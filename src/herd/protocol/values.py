"""Plain Python values in and out of kio objects, for both sides of the wire (broker and client).

kio's generated classes want `ErrorCode` members for error codes, `timedelta` for durations and aware
`datetime` for timestamps. Code on both sides thinks in ints and milliseconds: `make(cls, values)` builds a kio
object from ints (dropping fields the class's version does not have) and `ms()` reads one back.
`MessageBuilder` builds the nested classes of one version of a message (the server's response builder and the
client's request builder are both one).

Callers describe a message once, with the names of its newest version, so names must be dropped; but only the
names some other version has. A class or field name that no version of the message has (a misspelling, which
would otherwise vanish from every version's answer) raises `UnknownName` when it is built. The names of every
version (`schema_names`) are gathered once per message, on first use, so building costs what it did.
"""

from __future__ import annotations

import datetime
import importlib
import pkgutil
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import fields, is_dataclass
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


class UnknownName(TypeError):
    """A class or field name that no version of the message has."""


_VERSIONED = re.compile(r"(kio\.schema\.\w+)\.v\d+\.(\w+)")  # kio.schema.<api>.v<N>.<request|response|header>
_VERSION = re.compile(r"v\d+")
# A class and the fields of kio's generated source: `class Name:` at the margin, `    name: type` one level in.
_CLASS_OR_FIELD = re.compile(r"^class (\w+)\b|^    ([a-z]\w*): ", re.MULTILINE)


def _classes(module: ModuleType) -> dict[str, frozenset[str]]:
    """Class name -> field names, for the kio classes `module` defines (not those it imports)."""
    return {
        name: frozenset(field_types(obj))
        for name, obj in vars(module).items()
        if isinstance(obj, type) and is_dataclass(obj) and obj.__module__ == module.__name__
    }


def _versions(package: str) -> list[str]:
    modules = pkgutil.iter_modules(importlib.import_module(package).__path__)
    return [info.name for info in modules if _VERSION.fullmatch(info.name)]


@cache
def _imported_versions(package: str, leaf: str) -> dict[str, frozenset[str]]:
    """The exact union, from kio's classes: every version's module imported (tens of milliseconds per message)."""
    names: dict[str, frozenset[str]] = {}
    for version in _versions(package):
        try:
            module = importlib.import_module(f"{package}.{version}.{leaf}")
        except ModuleNotFoundError:
            continue
        for name, own in _classes(module).items():
            names[name] = names.get(name, frozenset()) | own
    return names


@cache
def _every_version(package: str, leaf: str) -> dict[str, frozenset[str]]:
    """The union read from the generated sources' text (a few milliseconds per message, where importing them
    would hold up the first request of each API), or imported when a source is missing. A name the reading
    misses is confirmed by the import before it is refused, so the reading can only be too lenient; the unit
    tests check it equals the import for every API herd serves or speaks."""
    names: dict[str, set[str]] = {}
    root = importlib.import_module(package).__path__[0]
    for version in _versions(package):
        try:
            with open(f"{root}/{version}/{leaf}.py", encoding="utf-8") as source:
                text = source.read()
        except FileNotFoundError:
            return _imported_versions(package, leaf)
        fields_of: set[str] = set()
        for found in _CLASS_OR_FIELD.finditer(text):
            if found[1]:
                fields_of = names.setdefault(found[1], set())
            else:
                fields_of.add(found[2])
    return {name: frozenset(own) for name, own in names.items()}


@cache
def schema_names(module: ModuleType, *, exact: bool = False) -> dict[str, frozenset[str]]:
    """Class name -> its field names in any version, over every version of the message whose one version is
    `module` (kio makes each version its own module); a module outside kio's versioned schemas stands alone.
    Gathered once per message (`exact`: from the imported classes, not the sources); callers must not change it."""
    versioned = _VERSIONED.fullmatch(module.__name__)
    if versioned is None:
        return _classes(module)
    return (_imported_versions if exact else _every_version)(versioned[1], versioned[2])


def _message(module: ModuleType) -> str:
    versioned = _VERSIONED.fullmatch(module.__name__)
    return f"{versioned[1]}.v*.{versioned[2]}" if versioned else module.__name__


def _dropped(value: Any) -> Any:  # the conversion of a field another version has: never called, `make` drops it
    raise AssertionError(value)


@cache
def _converters(cls: type) -> dict[str, Callable[[Any], Any] | None]:
    """Field name -> the conversion its Kafka type needs (None: the value goes in as it is; `_dropped`: a field
    of the class in other versions only)."""
    others = schema_names(sys.modules[cls.__module__]).get(cls.__name__, frozenset())
    own = {name: _CONVERTERS.get(kafka_type) for name, kafka_type in field_types(cls).items()}
    return {**dict.fromkeys(others, _dropped), **own}


def _unknown_field(cls: type, name: str) -> Callable[[Any], Any]:
    """`_dropped` for a field of another version that the sources' reading missed; raises UnknownName otherwise."""
    module = sys.modules[cls.__module__]
    if name in schema_names(module, exact=True).get(cls.__name__, ()):
        return _dropped
    raise UnknownName(f"{cls.__name__} has no field {name!r} in any version of {_message(module)}")


def make(cls: type, values: Mapping[str, Any]) -> Any:
    """An instance of kio class `cls` from `values`; names of fields other versions of the class have are
    dropped, names no version has raise UnknownName. Called for every response (and every member of a JoinGroup
    leader's answer), so the per-field work is a dict lookup and, for the few typed fields, one call."""
    converters = _converters(cls)
    kwargs = {}
    for name, value in values.items():
        try:
            convert = converters[name]
        except KeyError:
            convert = converters[name] = _unknown_field(cls, name)
        if convert is None:
            kwargs[name] = value
        elif convert is not _dropped:
            kwargs[name] = convert(value)
    return cls(**kwargs)


class MessageBuilder:
    """`b("JoinGroupRequestProtocol", name=..., metadata=...)` builds that class of one version of a message.

    kio makes each version of a message its own module, whose classes lack the fields that version lacks.
    A class the version does not have is built as None; the field that would hold it is absent from that
    version too, and `make` drops it. A class no version has raises UnknownName.
    """

    __slots__ = ("module",)

    def __init__(self, message_cls: type) -> None:
        self.module: ModuleType = sys.modules[message_cls.__module__]

    def __call__(self, class_name: str, /, **values: Any) -> Any:
        cls = getattr(self.module, class_name, None)
        if cls is None:
            self.check_class(class_name)
            return None
        return make(cls, values)

    def check_class(self, class_name: str) -> None:
        """Raises UnknownName unless some version of the message has a class of that name."""
        if class_name not in schema_names(self.module) and class_name not in schema_names(self.module, exact=True):
            raise UnknownName(f"no version of {_message(self.module)} has a class {class_name!r}")


def ms(value: Any) -> int:
    """A kio duration or timestamp (or plain int) in milliseconds."""
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return round((value - EPOCH).total_seconds() * 1000)
    return int(value)
