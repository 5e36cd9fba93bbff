"""tests/soak.py: reading each run's JUnit XML and the table of the tests that failed at least once."""

from __future__ import annotations

from pathlib import Path

import pytest
from soak import Options, Outcome, junit_copy, node_id, parse, pytest_seconds, read_junit, render, rows

RUN_1 = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="1" failures="1" skipped="1" tests="5">
  <testcase classname="tests.unit.test_a" name="test_ok" time="0.010"/>
  <testcase classname="tests.unit.test_a" name="test_flaky[cluster]" time="2.500">
    <failure message="AssertionError: assert 1 == 2&#10; +  where 1 = f()">long traceback</failure>
  </testcase>
  <testcase classname="tests.unit.test_a.TestGroup" name="test_in_a_class" time="0.100"/>
  <testcase classname="tests.unit.test_a" name="test_skipped" time="0.000">
    <skipped type="pytest.skip" message="not here">skip</skipped>
  </testcase>
  <testcase classname="tests.integration.test_b" name="test_teardown" time="1.000">
    <error message="failed on teardown with &quot;TimeoutError: no answer&quot;">trace</error>
  </testcase>
</testsuite></testsuites>
"""

RUN_2 = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="1" skipped="0" tests="3">
  <testcase classname="tests.unit.test_a" name="test_ok" time="0.020"/>
  <testcase classname="tests.unit.test_a" name="test_flaky[cluster]" time="3.500">
    <failure message="TimeoutError: the group never settled">long traceback</failure>
  </testcase>
  <testcase classname="tests.integration.test_b" name="test_teardown" time="1.000"/>
</testsuite></testsuites>
"""

RUN_3 = RUN_1.replace("TimeoutError: no answer", "something else")


def test_junit_names_become_node_ids() -> None:
    assert node_id("tests.unit.test_a", "test_x[p]") == "tests/unit/test_a.py::test_x[p]"
    assert node_id("tests.unit.test_a.TestGroup", "test_y") == "tests/unit/test_a.py::TestGroup::test_y"
    assert node_id("", "tests.unit.test_broken") == "tests.unit.test_broken"  # a module that failed to collect


def test_a_run_s_outcomes_leave_skipped_tests_out_and_keep_the_first_line_of_why() -> None:
    outcomes = read_junit(RUN_1)
    assert [o.test for o in outcomes] == [
        "tests/unit/test_a.py::test_ok",
        "tests/unit/test_a.py::test_flaky[cluster]",
        "tests/unit/test_a.py::TestGroup::test_in_a_class",
        "tests/integration/test_b.py::test_teardown",
    ]
    flaky = outcomes[1]
    assert flaky.failed and flaky.first_line == "AssertionError: assert 1 == 2" and flaky.seconds == 2.5
    assert outcomes[3].failed and outcomes[3].first_line == 'failed on teardown with "TimeoutError: no answer"'
    assert not outcomes[0].failed and outcomes[0].first_line == ""


def test_the_table_counts_failures_among_the_runs_of_each_test_and_its_distinct_reasons() -> None:
    table = rows([read_junit(RUN_1), read_junit(RUN_2), read_junit(RUN_3)])
    assert [(r.test, r.failures, r.runs) for r in table] == [
        ("tests/unit/test_a.py::test_flaky[cluster]", 3, 3),  # the most often failing first
        ("tests/integration/test_b.py::test_teardown", 2, 3),
    ]
    flaky, teardown = table
    assert flaky.seconds == [2.5, 3.5, 2.5]
    assert flaky.reasons == {"AssertionError: assert 1 == 2": 2, "TimeoutError: the group never settled": 1}
    assert teardown.reasons == {
        'failed on teardown with "TimeoutError: no answer"': 1,
        'failed on teardown with "something else"': 1,
    }


def test_a_test_reported_twice_in_one_run_counts_once_as_failed() -> None:
    twice = [Outcome("t", False, "", 1.0), Outcome("t", True, "ValueError: at teardown", 0.5)]
    (row,) = rows([twice, [Outcome("t", False, "", 1.0)]])
    assert (row.failures, row.runs, dict(row.reasons)) == (1, 2, {"ValueError: at teardown": 1})


def test_the_report_is_a_markdown_table_with_every_reason_and_how_each_run_ended() -> None:
    report = render(rows([read_junit(RUN_1), read_junit(RUN_2)]), 2, ["run 1: exit 1, 10 s", "run 2: exit 1, 9 s"])
    lines = report.splitlines()
    assert lines[0] == "## Soak: 2 run(s); 2 test(s) failed at least once"
    assert lines[2].startswith("| test | failed | mean s | max s |")
    assert lines[4] == (
        "| `tests/unit/test_a.py::test_flaky[cluster]` | 2/2 | 3.00 | 3.50 | "
        "AssertionError: assert 1 == 2 (1)<br>TimeoutError: the group never settled (1) |"
    )
    assert lines[5].startswith("| `tests/integration/test_b.py::test_teardown` | 1/2 | 1.00 | 1.00 | failed on")
    assert lines[-2:] == ["- run 1: exit 1, 10 s", "- run 2: exit 1, 9 s"]
    assert render([], 3, ["run 1: exit 0, 5 s"]).splitlines() == [
        "## Soak: 3 run(s); 0 test(s) failed at least once",
        "",
        "- run 1: exit 0, 5 s",
    ]


def test_soak_options_come_after_n_and_the_rest_is_pytest_s() -> None:
    assert parse(["2", "tests/unit"]) == Options(2, pytest_args=("tests/unit",))
    assert parse(["3", "--load", "2", "--report", "r.md", "-m", "not spark"]) == Options(
        3, load=2, loaded=3, report=Path("r.md"), pytest_args=("-m", "not spark")
    )
    assert parse(["10", "--fresh", "--load", "1", "--loaded", "5"]) == Options(10, load=1, loaded=5, fresh=True)
    # after a pytest arg, everything is pytest's
    assert parse(["1", "-x", "--load", "2"]) == Options(1, pytest_args=("-x", "--load", "2"))
    for bad in ([], ["0"], ["two"], ["2", "--load"], ["2", "--load", "many"], ["2", "--loaded", "1"]):
        with pytest.raises(SystemExit, match="usage: ./dev soak-tests N"):
            parse(bad)
    with pytest.raises(SystemExit, match="--loaded 3: needs --load K, and at most N"):
        parse(["2", "--load", "1", "--loaded", "3"])


def test_the_loaded_runs_alternate_with_the_unloaded_ones() -> None:
    def loaded(runs: int, count: int) -> list[int]:
        options = Options(runs, load=1, loaded=count)
        return [run for run in range(1, runs + 1) if options.under_load(run)]

    assert loaded(10, 5) == [2, 4, 6, 8, 10]
    assert loaded(10, 7) == [2, 4, 6, 7, 8, 9, 10]
    assert loaded(5, 3) == [2, 4, 5]
    assert loaded(3, 3) == [1, 2, 3]
    assert loaded(4, 0) == [] and not Options(4).under_load(2)  # no --load: no run is loaded


def test_pytest_s_own_time_is_read_from_the_report() -> None:
    assert pytest_seconds('<testsuites><testsuite name="pytest" time="601.5"/></testsuites>') == 601.5
    assert pytest_seconds("<testsuites/>") is None


def test_each_run_s_junit_report_is_kept_beside_the_soak_s_report() -> None:
    assert junit_copy(Path("/tmp/soak.md"), 3) == Path("/tmp/soak-run-3.xml")
