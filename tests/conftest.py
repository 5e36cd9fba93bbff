"""Shared fixtures: real broker processes (tests/brokers.py) on port 0 with real data directories, PostgreSQL
and herd clusters (tests/pgcluster.py: postgres_server, pg_url, pg_test_url, new_cluster, open_tmp_path),
the `backend` an embedded-only test names (tests/backends.py), the Hypothesis profiles, and the marks of the test
lanes (tests/lanes.py: `./dev test -m unit` and the other kinds)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from backends import backend  # noqa: F401 (fixture)
from brokers import BrokerProcess
from hypothesis import HealthCheck, settings
from lanes import kinds
from pgcluster import new_cluster, open_tmp_path, pg_test_url, pg_url, postgres_server  # noqa: F401 (fixtures)

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
    "tests/integration/test_offsets_crash.py",
    "tests/simulation/test_simulation.py",
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
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable: the rest keep order


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
