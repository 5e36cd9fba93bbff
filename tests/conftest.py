"""Shared fixtures: real broker processes (tests/brokers.py) on port 0 with real data directories, PostgreSQL
and herd clusters (tests/pgcluster.py: postgres_server, pg_url, pg_test_url, new_cluster, open_tmp_path),
the `backend` an embedded-only test names (tests/backends.py), the Hypothesis profiles, and the marks of the test
lanes (tests/lanes.py: `./dev test -m unit` and the other kinds).

What every test gets (issue 30 item 2): `rng`, a random.Random seeded from the session's seed (tests/seeds.py:
HERD_TEST_SEED, or the time; shown in the header and in the report of a failed test that used it), so that a failure
can be replayed; the last lines of the log of every broker process the test used, and of the output of every other
process it started and showed (tests/processes.py show_on_failure), in the report of a failed test; and every broker
process still running at the end of the session killed and reaped.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from backends import backend  # noqa: F401 (fixture)
from brokers import BrokerProcess
from hypothesis import HealthCheck, settings
from lanes import kinds
from pgcluster import new_cluster, open_tmp_path, pg_test_url, pg_url, postgres_server  # noqa: F401 (fixtures)
from processes import broker_sections, failure_sections, forget_ended

from herd.testing.broker import SPAWNED

pytest_plugins = ["seeds"]  # HERD_TEST_SEED and the `rng` fixture

# Property tests: no per-example deadline (the machines are shared and noisy), and in CI a fixed derandomized
# search so that a run is reproducible; locally every run explores new examples.
settings.register_profile("herd", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", parent=settings.get_profile("herd"), derandomize=True, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "herd")


# The modules that take longest (a minute or more on a loaded 2-core machine: `./dev test --durations=25`), run
# first: ./dev test hands whole modules to its two workers in collection order, and a long module left for the
# end runs alone while the other worker idles.
LONGEST_FIRST = (
    "tests/spark_cluster/test_standalone.py",
    "tests/integration/test_failover_crash.py",
    "tests/simulation/test_simulation.py",
    "tests/integration/test_offsets_crash.py",
    # one unit of work (pytest_xdist_make_scheduler), not beside test_standalone.py: their JVMs starting together
    # on two cores took 50-65 s longer each
    "tests/spark/",
    "tests/spark_cluster/test_leaders.py",
)


@pytest.hookimpl(tryfirst=True)  # before pytest's own hook deselects by -m
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    tests = Path(__file__).parent
    for item in items:
        if tests not in item.path.parents:
            continue  # not a test of this directory
        callspec = getattr(item, "callspec", None)
        marks = {mark.name for mark in item.iter_markers()}
        try:
            found = kinds(
                item.path.relative_to(tests).parts[0],
                getattr(item, "fixturenames", ()),
                callspec.params if callspec else {},
                marks,
            )
        except ValueError as error:
            raise pytest.UsageError(str(error)) from None
        for kind in sorted(found - marks):
            item.add_marker(kind)
    items.sort(key=lambda item: _rank(item.nodeid))  # stable: the rest keep their order


def _rank(nodeid: str) -> int:
    """Where LONGEST_FIRST puts a test's module (a directory entry, ending in "/", takes every module under it)."""
    module = nodeid.split("::", 1)[0]
    for i, entry in enumerate(LONGEST_FIRST):
        if module == entry or (entry.endswith("/") and module.startswith(entry)):
            return i
    return len(LONGEST_FIRST)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """./dev test's `--dist loadfile`, except that tests/spark/ is one unit of work: its modules share one worker and
    so one SparkSession (a JVM and its Python workers: 15-20 s of CPU each to start on this 2-core machine, three of
    them when the modules went to three workers)."""
    if config.getoption("dist", None) != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling  # only where xdist runs the session

    class SparkTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "tests/spark/" if nodeid.startswith("tests/spark/") else super()._split_scope(nodeid)

    return SparkTogether(config, log)  # type: ignore[arg-type]


_TEST_STARTED = pytest.StashKey[float]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_TEST_STARTED] = time.monotonic()
    forget_ended()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
    if not report.failed:
        return
    started = item.stash.get(_TEST_STARTED, 0.0)
    report.sections.extend(broker_sections(SPAWNED, started))
    report.sections.extend(failure_sections(started))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Reap every broker process a test or fixture left running (each fixture stops its own; this is the net)."""
    for broker in SPAWNED:
        if broker.running and broker.proc is not None:
            broker.proc.kill()
            broker.proc.wait()


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator:
    started: list[BrokerProcess] = []

    def make(overrides: dict[str, str] | None = None, name: str = "data") -> BrokerProcess:
        b = BrokerProcess(tmp_path / name, overrides)
        started.append(b)
        return b.start()

    yield make
    for b in started:
        if b.proc is not None and b.proc.poll() is None:
            b.proc.kill()
            b.proc.wait()


@pytest.fixture
def broker(broker_factory) -> BrokerProcess:
    return broker_factory()
