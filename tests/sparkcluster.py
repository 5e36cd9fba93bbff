"""A real Spark standalone cluster for the tests (issue 20): a master and N workers as separate JVM processes,
started from the pyspark package's own launcher (`bin/spark-class` with Spark's Master and Worker classes), on
loopback, every port picked by the system (the master's REST submission server, which would take the fixed port
6066, is off). Executors are JVMs the workers start, and their Python workers run this interpreter with herd on
their PYTHONPATH, so that nothing can lean on the driver's process.

`SparkStandalone(root, workers=2).start()` waits until every worker has registered; `url` is the master's
spark://127.0.0.1:PORT; `close()` stops the workers and the master (SIGTERM, then SIGKILL) and never leaves a JVM
behind. `executor_conf()` is what a driver's SparkSession needs to run on it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from processes import file_text, show_on_failure

from herd.testing.wait import wait_until

SRC = str(Path(__file__).resolve().parents[1] / "src")
_MASTER = re.compile(r"Starting Spark master at (spark://[\d.]+:\d+)")


def spark_home() -> str:
    import pyspark

    return os.path.dirname(pyspark.__file__)


class SparkStandalone:
    def __init__(self, root: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        self.root, self.workers, self.cores, self.memory = root, workers, cores, memory
        self.url = ""
        self._procs: list[subprocess.Popen[bytes]] = []
        self._logs: list[Path] = []
        root.mkdir(parents=True, exist_ok=True)

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "SPARK_HOME": spark_home(),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            "SPARK_WORKER_OPTS": "-Dspark.worker.cleanup.enabled=false",
            "PYSPARK_PYTHON": sys.executable,
            "PYTHONPATH": os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH")) if p),
        }

    def _spawn(self, name: str, args: list[str]) -> Path:
        log = self.root / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [os.path.join(spark_home(), "bin", "spark-class"), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self._env(),
                start_new_session=True,
            )
        self._procs.append(proc)
        self._logs.append(log)
        show_on_failure(f"spark {name} ({log})", proc, file_text(log))
        return log

    def start(self, timeout: float = 90.0) -> SparkStandalone:
        try:
            master_log = self._spawn(
                "master",
                ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", "0", "--webui-port", "0"],
            )
            self.url = self._wait_for(master_log, _MASTER, timeout)
            logs = [
                self._spawn(
                    f"worker-{i}",
                    [
                        "org.apache.spark.deploy.worker.Worker",
                        "--host",
                        "127.0.0.1",
                        "--cores",
                        str(self.cores),
                        "--memory",
                        self.memory,
                        "--webui-port",
                        "0",
                        "--work-dir",
                        str(self.root / f"work-{i}"),
                        self.url,
                    ],
                )
                for i in range(self.workers)
            ]
            for log in logs:
                self._wait_for(log, re.compile(r"Successfully registered with master"), timeout)
        except BaseException:
            self.close()
            raise
        return self

    def _wait_for(self, log: Path, pattern: re.Pattern[str], timeout: float) -> str:
        def said() -> re.Match[str] | None:
            match = pattern.search(log.read_text(errors="replace"))
            if match is None and any(p.poll() is not None for p in self._procs):
                raise AssertionError(f"a Spark process exited before {log.name} said {pattern.pattern!r}:\n{tail()}")
            return match

        def tail() -> str:
            return log.read_text(errors="replace")[-3000:]

        match = wait_until(said, timeout, lambda: f"{log.name} to say {pattern.pattern!r}:\n{tail()}", interval=0.2)
        return match.group(1) if match.groups() else match.group(0)

    def executor_conf(self) -> dict[str, str]:
        """A driver's settings for running on this cluster: small executors, herd on their PYTHONPATH."""
        return {
            "spark.executor.memory": "512m",
            "spark.executor.cores": "1",
            "spark.executorEnv.PYTHONPATH": self._env()["PYTHONPATH"],
            "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
        }

    def log(self) -> str:
        return "\n".join(f"== {path.name}\n{path.read_text(errors='replace')}" for path in self._logs if path.exists())

    def close(self) -> None:
        for proc in reversed(self._procs):  # workers first: they would try to reconnect to a stopped master
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self._procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        self._procs.clear()

    def __enter__(self) -> SparkStandalone:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
