"""docs/architecture.md names files, functions and classes; a rename that breaks its map fails here.

What is checked, with the source read as text (ast), nothing imported:
- every repository path the page mentions (`src/...`, `tests/...`, `bench/...`, `docs/...`) exists;
- in a table whose header has a "function or class" column (the walks), every backticked name in that column
  (`Connection._on_frame`, `table`, `COMMIT`) is defined in one of the files of the row's "file" column: the
  first part at the top level of the module, each further part in the class body before it;
- in prose, a backticked name written just before its file, as "`Name` in `path`" or "`Name` (`path`", is
  defined in that file;
- a backticked dotted reference from the package down (`herd.server.broker.Broker`) names a module of src/herd and
  names defined in it; broker setting names that happen to start with "herd." are not references.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

from herd.config import SETTINGS_BY_NAME

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"

_PATH = re.compile(r"(?<![\w./-])((?:src|tests|bench|docs)/(?:[\w-]+/)*(?:[\w-]+(?:\.\w+)+|[\w-]+/?)?)")
_TICKED = re.compile(r"`([^`]+)`")
_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_NAME_BEFORE_PATH = re.compile(r"`([A-Za-z_][\w.]*)`\s+(?:in\s+|\()`((?:src|tests|bench|docs)/[^`]+\.py)`")
_DOTTED = re.compile(r"herd(?:\.[A-Za-z_]\w*)+")


@cache
def _definitions(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _defined_in(body: list[ast.stmt], name: str) -> ast.stmt | None:
    """The statement of `body` that defines `name` (a function, a class, or an assignment to it), if any."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return node
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return node
    return None


def defines(path: Path, dotted: str) -> bool:
    """Whether the module at `path` defines `dotted` ("Class.method", "function", "CONSTANT")."""
    body = _definitions(path).body
    node: ast.stmt | None = None
    for part in dotted.split("."):
        node = _defined_in(body, part)
        if node is None:
            return False
        body = node.body if isinstance(node, ast.ClassDef) else []
    return True


def module_file(parts: list[str]) -> Path | None:
    """The file of module `herd.<parts>` (a module, or a package's __init__.py), if there is one."""
    base = ROOT / "src" / Path(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _table_rows(text: str) -> list[tuple[list[str], list[str]]]:
    """(files, names) of every row of the tables that have a "file" and a "function or class" column."""
    rows = []
    columns: tuple[int, int] | None = None
    for line in text.splitlines():
        if not line.startswith("|"):
            columns = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if columns is None:
            if "file" in cells and "function or class" in cells:
                columns = cells.index("file"), cells.index("function or class")
            else:
                columns = (-1, -1)
            continue
        if columns == (-1, -1) or set(line) <= set("|-: "):
            continue
        files = _PATH.findall(cells[columns[0]])
        names = [n for n in _TICKED.findall(cells[columns[1]]) if _NAME.fullmatch(n)]
        rows.append((files, names))
    return rows


def broken_references(text: str) -> list[str]:
    """What the page names that does not exist, one line each."""
    broken = []
    paths = _PATH.findall(text)
    broken += [f"{p}: no such file or directory" for p in sorted(set(paths)) if not (ROOT / p).exists()]
    for files, names in _table_rows(text):
        existing = [ROOT / f for f in files if f.endswith(".py") and (ROOT / f).is_file()]
        for name in names:
            if not any(defines(f, name) for f in existing):
                broken.append(f"{name}: defined in none of {', '.join(files) or '(no file in its row)'}")
    for name, path in _NAME_BEFORE_PATH.findall(text):
        if (ROOT / path).is_file() and not defines(ROOT / path, name):
            broken.append(f"{name}: not defined in {path}")
    for ticked in _TICKED.findall(text):
        if _DOTTED.fullmatch(ticked) and ticked not in SETTINGS_BY_NAME:
            broken += _broken_dotted(ticked)
    return broken


def _broken_dotted(reference: str) -> list[str]:
    parts = reference.split(".")
    for split in range(len(parts), 0, -1):
        path = module_file(parts[:split])
        if path is not None:
            rest = ".".join(parts[split:])
            if rest and not defines(path, rest):
                return [f"{reference}: {rest} is not defined in {path.relative_to(ROOT)}"]
            return []
    return [f"{reference}: no module of src/herd by that name"]


def test_every_file_and_name_the_architecture_page_mentions_exists() -> None:
    text = DOC.read_text(encoding="utf-8")
    broken = broken_references(text)
    assert not broken, "docs/architecture.md names what does not exist (renamed or moved?):\n" + "\n".join(broken)


def test_the_page_is_really_checked() -> None:
    """The extraction finds the walks' tables and references: a change of the page's format cannot make the check
    above pass by finding nothing."""
    text = DOC.read_text(encoding="utf-8")
    rows = _table_rows(text)
    assert len(rows) >= 40
    assert sum(len(names) for _, names in rows) >= 80
    assert len(set(_PATH.findall(text))) >= 50
    assert len(_NAME_BEFORE_PATH.findall(text)) >= 5
    assert sum(1 for t in _TICKED.findall(text) if _DOTTED.fullmatch(t)) >= 15


def test_the_check_catches_a_renamed_function_a_missing_file_and_a_wrong_module() -> None:
    table = (
        "| # | file | function or class | what happens |\n|---|---|---|---|\n"
        "| 1 | `src/herd/server/connection.py` | `Connection._on_frame`, `Connection._on_frames` | x |\n"
    )
    prose = (
        "`validate_join` in `src/herd/coordinator/joining.py`; `validate_joins` in "
        "`src/herd/coordinator/joining.py`; `tests/unit/no_such_test.py`; `herd.server.broker.Broker`, "
        "`herd.server.broker.Brokers`, `herd.nosuch.Thing`, `herd.log.recovery.backoff.ms`."
    )
    assert broken_references(table + "\n" + prose) == [
        "tests/unit/no_such_test.py: no such file or directory",
        "Connection._on_frames: defined in none of src/herd/server/connection.py",
        "validate_joins: not defined in src/herd/coordinator/joining.py",
        "herd.server.broker.Brokers: Brokers is not defined in src/herd/server/broker.py",
        "herd.nosuch.Thing: nosuch.Thing is not defined in src/herd/__init__.py",
    ]
