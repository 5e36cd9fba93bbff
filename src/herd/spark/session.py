"""A quiet local SparkSession for examples, benchmarks and tests (or a quiet driver on a Spark cluster).

Sets what a local PySpark session needs on a developer machine: workers run this interpreter
(PYSPARK_PYTHON, so they have pyarrow and herd), the driver binds 127.0.0.1, no UI, no console
progress bar, few shuffle partitions, and log4j at ERROR through a generated properties file. Must be
called before anything else starts a JVM in this process.
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def _log4j_file() -> str:
    path = os.path.join(tempfile.gettempdir(), "herd-spark-log4j2.properties")
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write(_LOG4J)
    return path


def local_session(
    app_name: str = "herd", cores: int = 2, conf: dict[str, str] | None = None, master: str | None = None
) -> SparkSession:
    """local[cores] session tuned for small machines; `conf` adds or overrides Spark settings. `master` (a
    cluster's URL, spark://HOST:PORT) runs the same quiet driver on that cluster instead."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    java_opts = f"-Dlog4j2.configurationFile=file:{_log4j_file()}"
    builder = (
        SparkSession.builder.master(master or f"local[{cores}]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(cores))
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "1g")
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.sql.session.timeZone", "UTC")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
