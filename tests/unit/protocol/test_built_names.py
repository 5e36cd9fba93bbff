"""Every class and field name herd's code builds exists in some version of its message's schema.

`make` drops a field the negotiated version lacks, so a misspelled name used to vanish from every version's
message without a word. It now raises `UnknownName` when such a message is built (tested first, below); this
test finds the names without building anything, by reading the source of every module under src/herd: calls of
a builder (`b("ClassName", field=...)`, `b.response(...)`, `b.request(...)`, where `b` is a parameter annotated
`Builder` or `RequestBuilder` or the result of `ctx_builder`, `builder` or `request_builder`) and
`make(KioClass, {"field": ...})` with a literal dict. A builder of a handler module (one with API_KEY) is checked
against that API's schema; one whose API the source does not say (fault answers, the client's request
builders) against every API that has a class of that name. Names built dynamically (`**fields`, a computed
class name) are left to the runtime check.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import herd
from herd.client.wire import CLIENT_VERSIONS, request_builder
from herd.protocol.messages import request_class, response_class
from herd.protocol.values import UnknownName, _converters, make, schema_names
from herd.server.apis import MODULES, table
from herd.server.apis._build import builder

SRC = Path(herd.__file__).parent


# -- the runtime check --------------------------------------------------------------------------------------


def test_make_drops_fields_of_other_versions_and_refuses_fields_of_none() -> None:
    v3 = builder(0, 3)  # Produce v3 has neither log_start_offset (v5) nor error_message (v8)
    partition = v3("PartitionProduceResponse", index=0, error_code=0, base_offset=7, log_start_offset=0)
    assert partition.base_offset == 7
    with pytest.raises(UnknownName, match=r"PartitionProduceResponse has no field 'base_ofset' .*produce"):
        v3("PartitionProduceResponse", index=0, error_code=0, base_ofset=7)
    with pytest.raises(UnknownName, match="'throttle_time_ms'"):
        v3.response(responses=(), throttle_time_ms=0)


def test_builder_builds_classes_of_other_versions_as_none_and_refuses_classes_of_none() -> None:
    assert builder(0, 7)("BatchIndexAndErrorMessage", batch_index=0) is None  # v8 has it
    assert builder(0, 8)("BatchIndexAndErrorMessage", batch_index=0).batch_index == 0
    with pytest.raises(UnknownName, match="'BatchIndexAndErrorMesage'"):
        builder(0, 8)("BatchIndexAndErrorMesage", batch_index=0)
    assert not builder(0, 7).has("BatchIndexAndErrorMessage")
    with pytest.raises(UnknownName):
        builder(0, 7).has("BatchIndexAndErrorMesage")


def test_request_builder_refuses_fields_of_no_version() -> None:
    b = request_builder(1, 4)  # Fetch v4: no session id (v7)
    assert not b.has_field("session_id")
    with pytest.raises(UnknownName):
        b.has_field("sesion_id")
    with pytest.raises(UnknownName, match="FetchTopic has no field 'name'"):
        b("FetchTopic", name="t", partitions=())  # Fetch names its topics `topic`


def test_schema_names_are_the_union_over_versions() -> None:
    names = schema_names(sys.modules[response_class(0, 3).__module__])
    assert {"log_start_offset", "error_message", "record_errors"} <= names["PartitionProduceResponse"]
    assert names is schema_names(sys.modules[response_class(0, 13).__module__])  # gathered once per message


def test_a_field_the_sources_reading_missed_is_confirmed_by_kios_classes() -> None:
    cls = type(builder(0, 3)("PartitionProduceResponse", index=0, error_code=0, base_offset=7))
    converters = _converters(cls)
    del converters["log_start_offset"]  # as if the reading had missed v5's field
    partition = make(cls, {"index": 0, "error_code": 0, "base_offset": 7, "log_start_offset": 0})
    assert partition.base_offset == 7 and "log_start_offset" in converters


def test_the_sources_reading_equals_kios_classes() -> None:
    """The union is read from kio's generated sources (importing every version would hold up the first request
    of each API); it must be what importing them gives, for every message herd serves or speaks, and the
    request header."""
    messages = [request_class(k, v) for k, (_, v) in CLIENT_VERSIONS.items()]
    messages += [c(spec.key, spec.max_version) for spec in table().values() for c in (request_class, response_class)]
    modules = {sys.modules[cls.__module__] for cls in messages}
    modules |= {sys.modules[cls.__header_schema__.__module__] for cls in messages}
    for module in modules:
        assert schema_names(module) == schema_names(module, exact=True), module.__name__


# -- the static check ---------------------------------------------------------------------------------------

Schema = dict[str, frozenset[str]]  # class name -> its fields in any version


@dataclass(frozen=True)
class Target:
    """What a builder builds: a message's classes (of one API, or of any of several when the source does not say
    which) and the name of its top-level class in each."""

    schemas: tuple[Schema, ...]
    top: frozenset[str]


def _target(kind: str, key: int | None) -> Target:
    if key is None:
        keys: Any = sorted(table()) if kind == "response" else sorted(set(CLIENT_VERSIONS) | set(table()))
    else:
        keys = [key]
    load = response_class if kind == "response" else request_class
    classes = []
    for k in keys:
        spec = table().get(k)
        version = spec.max_version if spec is not None else CLIENT_VERSIONS[k][1]
        classes.append(load(k, version))
    return Target(
        tuple(schema_names(sys.modules[c.__module__]) for c in classes), frozenset(c.__name__ for c in classes)
    )


@dataclass
class Found:
    checked: int = 0
    errors: list[str] = field(default_factory=list)
    modules: set[str] = field(default_factory=set)  # modules with at least one checked name


_FACTORIES = {"ctx_builder": "response", "builder": "response", "request_builder": "request"}
_ANNOTATIONS = {"Builder": "response", "RequestBuilder": "request"}
_CLASSES = {"request_class": "request", "response_class": "response"}


class _Walker:
    def __init__(self, module: Any, path: Path, found: Found) -> None:
        self.module = module
        self.path = path
        self.found = found
        self.api_key: int | None = getattr(module, "API_KEY", None)

    def _key(self, node: ast.expr) -> int | None:
        """The API key an argument names, when the source says it plainly (API_KEY, a module constant, a literal)."""
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name) and isinstance(getattr(self.module, node.id, None), int):
            return int(getattr(self.module, node.id))
        return None

    def _factory(self, node: ast.expr) -> Target | None:
        """The target of a builder made by `node` (a call of ctx_builder, builder or request_builder), if it is one."""
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FACTORIES):
            return None
        kind = _FACTORIES[node.func.id]
        if node.func.id == "ctx_builder":
            return _target(kind, self.api_key)
        return _target(kind, self._key(node.args[0]) if node.args else None)

    def _annotated(self, annotation: ast.expr | None) -> Target | None:
        if isinstance(annotation, ast.Name):
            name = annotation.id
        elif isinstance(annotation, ast.Attribute):
            name = annotation.attr
        else:
            name = annotation.value if isinstance(annotation, ast.Constant) else None
        if name not in _ANNOTATIONS:
            return None
        kind = _ANNOTATIONS[name]
        return _target(kind, self.api_key if kind == "response" else None)

    def scope(self, body: list[Any], builders: dict[str, Target], choices: dict[str, tuple[str, ...]]) -> None:
        """Checks the builder calls of `body`: `builders` are the builders in scope by name, `choices` the local
        names bound to one of two strings (`suffix = "s" if v >= 8 else ""`), for class names computed with them."""
        builders, choices = dict(builders), dict(choices)
        for node in _own_nodes(body):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                target = self._factory(node.value)
                if target is not None:
                    builders[node.targets[0].id] = target
                value = node.value
                if isinstance(value, ast.IfExp) and all(_is_str(branch) for branch in (value.body, value.orelse)):
                    choices[node.targets[0].id] = (value.body.value, value.orelse.value)  # type: ignore[attr-defined]
        for node in _own_nodes(body):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                inner = dict(builders)
                for arg in node.args.args + node.args.kwonlyargs:
                    target = self._annotated(arg.annotation)
                    if target is not None:
                        inner[arg.arg] = target
                self.scope(node.body if isinstance(node.body, list) else [node.body], inner, choices)
            elif isinstance(node, ast.Call):
                self.call(node, builders, choices)

    def call(self, node: ast.Call, builders: dict[str, Target], choices: dict[str, tuple[str, ...]]) -> None:
        func = node.func
        fields = [k.arg for k in node.keywords if k.arg]
        if isinstance(func, ast.Name) and func.id in builders and node.args:
            for class_name in _class_names(node.args[0], choices):
                self.check(node, builders[func.id], class_name, fields)
        elif isinstance(func, ast.Attribute) and func.attr in ("response", "request"):
            receiver = func.value
            target = builders.get(receiver.id) if isinstance(receiver, ast.Name) else self._factory(receiver)
            if target is not None:
                self.check_top(node, target, fields)
        elif isinstance(func, ast.Name) and func.id == "make" and len(node.args) == 2:
            values = node.args[1]
            if not isinstance(values, ast.Dict):
                return
            names = [k.value for k in values.keys if _is_str(k)]  # type: ignore[union-attr]
            cls = getattr(self.module, node.args[0].id, None) if isinstance(node.args[0], ast.Name) else None
            of = node.args[0]  # make(request_class(KEY, version), {...})
            if isinstance(cls, type):
                schema = schema_names(sys.modules[cls.__module__])
                self.check(node, Target((schema,), frozenset()), cls.__name__, names)
            elif isinstance(of, ast.Call) and isinstance(of.func, ast.Name) and of.func.id in _CLASSES and of.args:
                key = self._key(of.args[0])
                if key is not None:
                    self.check_top(node, _target(_CLASSES[of.func.id], key), names)

    def check(self, node: ast.AST, target: Target, class_name: str, names: list[str]) -> None:
        having = [schema[class_name] for schema in target.schemas if class_name in schema]
        if not having:
            self.error(node, f"class {class_name!r} is in no version of its message")
            return
        allowed = frozenset().union(*having)
        for name in names:
            if name not in allowed:
                self.error(node, f"{class_name} has no field {name!r} in any version")
        self.found.checked += 1 + len(names)
        self.found.modules.add(self.module.__name__)

    def check_top(self, node: ast.AST, target: Target, names: list[str]) -> None:
        tops = [schema[name] for schema in target.schemas for name in target.top if name in schema]
        allowed = frozenset().union(*tops)
        for name in names:
            if name not in allowed:
                self.error(node, f"{'/'.join(sorted(target.top))[:80]} has no field {name!r} in any version")
        self.found.checked += len(names)
        self.found.modules.add(self.module.__name__)

    def error(self, node: ast.AST, message: str) -> None:
        line = getattr(node, "lineno", 0)
        self.found.errors.append(f"{self.path.relative_to(SRC.parent)}:{line}: {message}")


def _is_str(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _class_names(node: ast.expr, choices: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    """The class names a builder's first argument can be: a string, or a string plus a name of `choices`."""
    if _is_str(node):
        return (node.value,)  # type: ignore[attr-defined]
    if (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Add)
        and _is_str(node.left)
        and isinstance(node.right, ast.Name)
        and node.right.id in choices
    ):
        return tuple(node.left.value + choice for choice in choices[node.right.id])  # type: ignore[attr-defined]
    return ()


def _own_nodes(body: list[Any]) -> Iterator[ast.AST]:
    """The nodes of `body`, descending into everything but nested functions (which are yielded, not entered)."""
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _walk_tree() -> Found:
    found = Found()
    for path in sorted(SRC.rglob("*.py")):
        source = path.read_text()
        if "make(" not in source and "uilder" not in source:
            continue
        name = ".".join(path.relative_to(SRC.parent).with_suffix("").parts).removesuffix(".__init__")
        module = importlib.import_module(name)
        _Walker(module, path, found).scope(ast.parse(source).body, {}, {})
    return found


def test_every_name_built_exists_in_some_version_of_its_schema() -> None:
    found = _walk_tree()
    assert not found.errors, "\n".join(found.errors)
    # The walker sees the builders of every handler module and of the client, so it cannot go blind unnoticed.
    assert {m.__name__ for m in MODULES if "uilder" in Path(str(m.__file__)).read_text()} <= found.modules
    assert {"herd.client.admin", "herd.client.connection", "herd.server.fault_answers"} <= found.modules
    assert found.checked > 900


def test_the_static_check_finds_a_misspelling(tmp_path: Path) -> None:
    source = (
        "def handle(ctx, request):\n"
        "    b = ctx_builder(ctx)\n"
        "    return b.response(throttle_time=0, error_code=0, topics=(b('DeleteRecordsTopicResult', nme='t'),))\n"
    )
    module = type(sys)("fake_handler")
    module.API_KEY = 21  # type: ignore[attr-defined]
    found = Found()
    _Walker(module, SRC / "server/apis/fake_handler.py", found).scope(ast.parse(source).body, {}, {})
    assert found.errors == [
        "herd/server/apis/fake_handler.py:3: DeleteRecordsResponse has no field 'error_code' in any version",
        "herd/server/apis/fake_handler.py:3: DeleteRecordsTopicResult has no field 'nme' in any version",
    ]


def test_the_static_check_follows_a_computed_class_name() -> None:
    """The misspelling it found in offset_fetch.py: v0-v7's OffsetFetchResponseTopic was given v10's topic id."""
    source = (
        "def _topic(b: Builder, version: int) -> Any:\n"
        "    suffix = 's' if version >= 8 else ''\n"
        "    return b('OffsetFetchResponseTopic' + suffix, name='t', topic_id=None, partitions=())\n"
    )
    module = type(sys)("fake_handler")
    module.API_KEY = 9  # type: ignore[attr-defined]
    found = Found()
    _Walker(module, SRC / "server/apis/fake_handler.py", found).scope(ast.parse(source).body, {}, {})
    assert found.errors == [
        "herd/server/apis/fake_handler.py:3: OffsetFetchResponseTopic has no field 'topic_id' in any version"
    ]
