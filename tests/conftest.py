"""Shared fixtures: real broker processes (tests/brokers.py) on port 0 with real data directories, PostgreSQL
and herd clusters (tests/pgcluster.py: postgres_server, pg_url, pg_test_url, new_cluster, open_tmp_path),
the `backend` an embedded-only test names (tests/backends.py), and the Hypothesis profiles."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest
from backends import backend  # noqa: F401 (fixture)
from brokers import BrokerProcess
from hypothesis import HealthCheck, settings
from pgcluster import (  # noqa: F401 (fixtures)
    new_cluster, open_tmp_path, pg_test_url, pg_url, postgres_server)

# Property tests: no per-example deadline (the machines are shared and noisy), and in CI a fixed derandomized
# search so that a run is reproducible; locally every run explores new examples.
settings.register_profile("herd", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", parent=settings.get_profile("herd"), derandomize=True, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "herd")


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
