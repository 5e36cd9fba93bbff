"""The test lanes. Every test is marked with the kinds it is of, from its directory and from what it uses, so
that `./dev test -m KIND` runs one lane (tests/conftest.py applies the marks; pyproject.toml registers them):

    unit         tests/unit: in the test's process, no root, no Chromium, no PostgreSQL (the lane to run while
                 working: `./dev test -m unit`)
    integration  tests/integration and tests/plugin: broker processes and real Kafka clients
    pg           starts PostgreSQL: a fixture of tests/pgcluster.py, a broker fixture of tests/backends.py on its
                 cluster backend, or the plugin's herd_cluster; wherever it lives, so a test of tests/unit that
                 starts PostgreSQL is pg and not unit
    spark        tests/spark and tests/spark_cluster: a SparkSession (Java 17)
    browser      drives Chromium; said where it happens, with @pytest.mark.browser
    simulation   tests/simulation: the coordinator simulator's schedules

A test can be of more than one kind (a cluster test of tests/integration is integration and pg).

`./dev test` installs Chromium only for a command line that can select a browser test (`python tests/lanes.py
needs-browser ARGS...` says whether it can).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

TESTS = Path(__file__).resolve().parent

# The kind of each directory below tests/ that holds tests.
DIRECTORIES = {
    "unit": "unit",
    "integration": "integration",
    "plugin": "integration",
    "spark": "spark",
    "spark_cluster": "spark",
    "simulation": "simulation",
}
KINDS = ("unit", "integration", "pg", "spark", "browser", "simulation")
# Fixtures that start PostgreSQL (pg_url, pg_test_url and new_cluster all request postgres_server; open_tmp_path is
# the directory of a LocalPostgres a test starts itself).
PG_FIXTURES = frozenset({"postgres_server", "open_tmp_path", "herd_cluster"})
# A broker fixture of tests/backends.py on the cluster backend (the test id ends in [cluster]).
CLUSTER_BACKEND = "cluster"
# What the unit lane promises not to need.
NOT_UNIT = frozenset({"pg", "spark", "browser"})
# The directory whose tests may drive Chromium.
BROWSER_DIRECTORY = TESTS / "integration"


def kinds(directory: str, fixtures: Iterable[str], params: Mapping[str, object], marks: Iterable[str]) -> set[str]:
    """The kinds of a test of tests/`directory` that requests `fixtures` (all of them, with those they request),
    is parametrized with `params` and is already marked with `marks`."""
    if directory not in DIRECTORIES:
        raise ValueError(
            f"tests/{directory} is not a lane: give it a kind in tests/lanes.py's DIRECTORIES (see its docstring)"
        )
    found = {DIRECTORIES[directory]} | {mark for mark in marks if mark in KINDS}
    if PG_FIXTURES.intersection(fixtures) or CLUSTER_BACKEND in params.values():
        found.add("pg")
    if found & NOT_UNIT:
        found.discard("unit")
    return found


def marker_expression(args: list[str]) -> str | None:
    """The `-m` expression of a pytest command line (the last one wins, as in pytest), or None."""
    expression = None
    for i, arg in enumerate(args):
        if arg == "-m" and i + 1 < len(args):
            expression = args[i + 1]
        elif arg.startswith("-m") and not arg.startswith("--") and len(arg) > 2:
            expression = arg[2:].lstrip("=")
    return expression


def needs_browser(args: list[str], cwd: Path | None = None) -> bool:
    """Whether a pytest command line can select a test that drives Chromium. No, when its `-m` expression is false
    for every kind a browser test has, or when it names paths (existing files or directories, with or without
    ::test) and none of them holds tests/integration or lies inside it. Yes otherwise: in doubt, Chromium is
    wanted."""
    expression = marker_expression(args)
    if expression is not None and not _selects_browser(expression):
        return False
    cwd = cwd or Path.cwd()
    paths = [(cwd / arg.split("::", 1)[0]).resolve() for arg in args if not arg.startswith("-")]
    paths = [path for path in paths if path.exists()]
    if not paths:
        return True
    return any(path == BROWSER_DIRECTORY or path in BROWSER_DIRECTORY.parents or BROWSER_DIRECTORY in path.parents
               for path in paths)  # fmt: skip


def _selects_browser(expression: str) -> bool:
    try:
        from _pytest.mark.expression import Expression  # pytest's own parser of -m
    except ImportError:
        return True
    try:
        compiled = Expression.compile(expression)
    except Exception:
        return True  # pytest will say what is wrong with it
    browser_tests = ({"integration", "browser"}, {"integration", "browser", "pg"})
    return any(compiled.evaluate(lambda name, /, **kwargs: name in marks) for marks in browser_tests)


if __name__ == "__main__":
    # python tests/lanes.py needs-browser [pytest args]: exit 0 when the run can select a browser test.
    if sys.argv[1:2] != ["needs-browser"]:
        sys.exit("usage: python tests/lanes.py needs-browser [pytest args]")
    sys.exit(0 if needs_browser(sys.argv[2:]) else 1)
