"""Seeded random values for tests (issue 30 item 2), a pytest plugin that tests/conftest.py loads: one seed per
session, from HERD_TEST_SEED or the time, shown in the header; the `rng` fixture, a random.Random of that seed and
the test's id; and the seed in the report of a failed test that used `rng`, so that a run with the same
HERD_TEST_SEED gives every test the values it had (tests/unit/test_seeds.py runs a session to check it).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator

import pytest

SEED_ENV = "HERD_TEST_SEED"


def pytest_configure(config: pytest.Config) -> None:
    # Set before xdist starts its workers, which inherit the environment: one seed for the whole session.
    if not os.environ.get(SEED_ENV):
        os.environ[SEED_ENV] = str(time.time_ns() % (1 << 32))


def session_seed() -> str:
    return os.environ[SEED_ENV]


def pytest_report_header(config: pytest.Config) -> str:
    return f"herd test seed: {SEED_ENV}={session_seed()} (set it to replay the random values of a run)"


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> random.Random:
    """This test's random values: seeded by the session's seed and the test's id, so that a run with the same
    HERD_TEST_SEED gives every test the values it had."""
    return random.Random(f"{session_seed()}:{request.node.nodeid}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
    if report.failed and "rng" in getattr(item, "fixturenames", ()):
        report.sections.append(
            ("herd test seed", f"{SEED_ENV}={session_seed()} (rng: random.Random of it and the test id)")
        )
