"""Starting several streaming queries over format("herd") in one driver: `wait_for_sources`.

Spark 4.x has a race that any Python data source can hit. When a streaming query creates its source,
PythonStreamingSourceRunner.init() puts four environment variables (SPARK_LOCAL_DIRS, SPARK_AUTH_SOCKET_TIMEOUT,
SPARK_BUFFER_SIZE, SPARK_PYTHON_RUNTIME) into the `envVars` map of the data source's Python function. It does
so on the query's own stream thread, without a lock, and every query of that data source in the driver JVM
shares the one map (apache/spark sql/core/src/main/scala/org/apache/spark/sql/execution/python/streaming/
PythonStreamingSourceRunner.scala; PythonPlannerRunner.scala copies the map instead). If two queries create their
sources at the same moment in a fresh driver, the map can be left with a wrong size. From then on, every job that
reads the data source fails when Spark serializes its tasks: "Task serialization failed:
java.lang.IllegalStateException: Illegal size 5 of collection, expected 6". Once one query has created its source
the keys are there, and later queries only replace their values, which cannot break the map. So: start the first
query, `wait_for_sources(query)`, then start the others (in any order, at once if you like):

    first = frame.writeStream.format("parquet")...start()
    wait_for_sources(first)
    others = [...start(), ...start()]

A driver with a single herd query, or whose queries start one after another anyway, does not need it.
"""

from __future__ import annotations

import time
from typing import Any

# StreamExecution's status messages before and while it creates its sources (apache/spark
# sql/core/src/main/scala/org/apache/spark/sql/execution/streaming/StreamExecution.scala).
_INITIALIZING = frozenset({"Initializing StreamExecution", "Initializing sources"})


def wait_for_sources(query: Any, timeout: float = 120.0, interval: float = 0.05) -> None:
    """Return once `query` (a pyspark StreamingQuery) has created its sources, or has stopped (its failure is then
    the query's to report: `query.exception()`). Raises TimeoutError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while query.isActive and query.status["message"] in _INITIALIZING:
        if time.monotonic() >= deadline:
            raise TimeoutError(
                f"streaming query {query.name or query.id} still creating its sources after {timeout:g} s "
                f"(status: {query.status['message']})"
            )
        time.sleep(interval)
