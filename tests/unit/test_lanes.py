"""tests/lanes.py: the kinds a test is marked with, and whether a `./dev test` command line needs Chromium."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from lanes import BROWSER_DIRECTORY, TESTS, kinds, marker_expression, needs_browser


def test_a_test_is_of_its_directory_s_kind() -> None:
    assert kinds("unit", ["tmp_path"], {}, []) == {"unit"}
    assert kinds("plugin", ["herd_broker"], {}, []) == {"integration"}
    assert kinds("spark_cluster", [], {}, []) == {"spark"}
    assert kinds("simulation", [], {}, ["slow"]) == {"simulation"}


def test_a_unit_test_that_starts_postgresql_is_pg_not_unit() -> None:
    assert kinds("unit", ["pg_url", "postgres_server", "tmp_path"], {}, []) == {"pg"}
    assert kinds("unit", ["open_tmp_path"], {}, []) == {"pg"}


def test_a_cluster_backend_or_the_plugin_s_cluster_is_pg() -> None:
    assert kinds("integration", ["shared_broker"], {"shared_broker": "cluster"}, []) == {"integration", "pg"}
    assert kinds("integration", ["shared_broker"], {"shared_broker": "embedded"}, []) == {"integration"}
    assert kinds("plugin", ["herd_cluster"], {}, []) == {"integration", "pg"}


def test_a_mark_of_a_kind_counts_and_takes_a_test_out_of_the_unit_lane() -> None:
    assert kinds("integration", [], {}, ["browser"]) == {"integration", "browser"}
    assert kinds("unit", [], {}, ["browser"]) == {"browser"}


def test_a_directory_without_a_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="tests/fuzz is not a lane"):
        kinds("fuzz", [], {}, [])


def test_the_marker_expression_in_each_spelling() -> None:
    assert marker_expression(["-n", "2", "tests"]) is None
    assert marker_expression(["-m", "unit"]) == "unit"
    assert marker_expression(["-munit"]) == "unit"
    assert marker_expression(["-m", "unit", "-m", "pg"]) == "pg"


@pytest.mark.parametrize(
    "args, wanted",
    [
        ([], True),
        (["-m", "unit"], False),
        (["-m", "not browser"], False),
        (["-m", "simulation or unit"], False),
        (["-m", "integration"], True),
        (["-m", "pg"], True),
        (["-m", "integration and not pg"], True),
        (["-m", "not unit"], True),
        (["-x", "-k", "console"], True),
        (["tests/unit"], False),
        (["tests/unit/test_lanes.py::test_a_test_is_of_its_directory_s_kind", "-n", "0"], False),
        (["tests/spark", "tests/simulation"], False),
        (["tests/integration/test_console_group.py"], True),
        (["tests"], True),
        (["tests/unit", "tests/integration"], True),
        (["-m", "unit", "tests/integration"], False),
    ],
)
def test_a_command_line_needs_chromium_when_it_can_select_a_browser_test(args: list[str], wanted: bool) -> None:
    assert needs_browser(args, cwd=TESTS.parent) is wanted


def test_every_browser_test_lives_where_needs_browser_looks() -> None:
    """The modules that drive Chromium (through tests/integration/consolebrowser.py) are all in the directory
    needs_browser knows."""
    users = {path for path in TESTS.rglob("test_*.py") if re.search(r"^import consolebrowser$", path.read_text(), re.M)}
    assert users and all(BROWSER_DIRECTORY in path.parents for path in users), sorted(map(str, users))
    assert Path(BROWSER_DIRECTORY / "consolebrowser.py").exists()
