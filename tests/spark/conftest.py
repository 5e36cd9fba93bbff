"""Fixtures of the Spark connector tests: ONE local[2] SparkSession and ONE broker per test process (./dev test's
two xdist workers each start at most one).

Starting Spark costs seconds, so every test shares the session-scoped `spark` and `broker`; tests keep
apart by using their own topics (the `topic` fixture) and their own checkpoint directories. The session
does NOT call herd.spark.register: `format("herd")` resolves through the auto-registered
pyspark_herd.DefaultSource, which the tests thereby cover.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from brokers import BrokerProcess

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

# Imported at collection, while the process has one thread: importing it later, from a fixture, had pytest rewrite
# the module (herd ships a pytest plugin, so its modules are rewritten) while another thread was parsing source, and
# CPython 3.11's AST construction keeps a recursion counter that threads share (python/cpython#106905,
# pytest-dev/pytest#10763): "SystemError: AST constructor recursion depth mismatch" failed the session fixture and
# with it every Spark test.
from herd.spark.session import local_session  # noqa: E402

_SRC = str(Path(__file__).resolve().parents[2] / "src")
if _SRC not in os.environ.get("PYTHONPATH", "").split(os.pathsep):  # workers must import herd
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_SRC, os.environ.get("PYTHONPATH")) if p)


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    b = BrokerProcess(
        tmp_path_factory.mktemp("spark-broker") / "data",
        {"offsets.topic.num.partitions": "4", "num.partitions": "3"},
    )
    b.start()
    yield b
    from herd.spark.fetch import close_cached_clients

    close_cached_clients()  # before the broker goes, so librdkafka does not log reconnection attempts
    b.stop()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:

    session = local_session("herd-tests", conf={"spark.sql.streaming.stopTimeout": "30s"})
    yield session
    session.stop()


_names = itertools.count()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """A fresh topic name per call, readable in broker logs."""
    base = request.node.name.replace("[", "-").replace("]", "").replace("_", "-")[:60]
    return lambda suffix="": f"{base}{'-' + suffix if suffix else ''}-{next(_names)}"


@pytest.fixture
def checkpoint(tmp_path: Path) -> Callable[[str], str]:
    return lambda name="ck": str(tmp_path / name)
