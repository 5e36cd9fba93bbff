"""`BrokerProcess`: `herd serve` in a child process on port 0 with a real data directory, for tests that
talk to a broker over real sockets. The fixtures built on it are in tests/conftest.py. It starts, reads and
stops the process with the helpers of herd.testing.broker, whose HerdBroker is the users' version of it.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from herd.cli.localpg import die_with_parent, read_log
from herd.testing.broker import listening, spawn_serve, stop_process


class BrokerProcess:
    """`herd serve` in a child process; `kill()` is SIGKILL, `stop()` is a graceful SIGTERM. `config`: a
    properties file given to --config (settings that must not show on a command line, such as a password);
    `die_with_parent`: the process is killed when the test process dies, so that an interrupted run leaves
    no node behind; in truth when the thread that started it ends, so start such a broker from the test's own
    thread, not from a worker thread."""

    def __init__(
        self,
        data_dir: Path,
        overrides: dict[str, str] | None = None,
        *,
        config: Path | None = None,
        die_with_parent: bool = False,
        log_level: str = "INFO",
    ) -> None:
        self.data_dir = data_dir
        self.config = config
        self.log_level = log_level
        self.die_with_parent = die_with_parent
        self.overrides = {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(data_dir),
            "group.initial.rebalance.delay.ms": "0",
            **(overrides or {}),
        }
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.http_port = 0  # the HTTP listener's, when herd.http.listener is set
        self.log_path = data_dir.parent / f"{data_dir.name}-broker.log"
        self._log_offset = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def http(self) -> str:
        """HOST:PORT of the HTTP listener (herd.http.listener)."""
        return f"127.0.0.1:{self.http_port}"

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        self.spawn()
        return self.wait_listening(timeout)

    def spawn(self) -> None:
        """Start the process without waiting for it to listen (several brokers start in parallel)."""
        preexec = die_with_parent(signal.SIGKILL) if self.die_with_parent else None
        self.proc, self._log_offset = spawn_serve(
            self.overrides, self.log_path, config=self.config, log_level=self.log_level, preexec_fn=preexec
        )

    def wait_listening(self, timeout: float = 30.0) -> BrokerProcess:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log()
            found = listening(text)
            if found:
                _, self.port, self.http_port = found
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{text}")
            time.sleep(0.02)
        raise TimeoutError(f"broker did not start:\n{self.log()}")

    def log(self) -> str:
        return read_log(self.log_path, self._log_offset)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait; its exit code (killed, and subprocess.TimeoutExpired raised, after `timeout`)."""
        assert self.proc is not None
        return stop_process(self.proc, timeout)

    def restart(self) -> BrokerProcess:
        """Start again on the same data directory (and the same port, so clients reconnect)."""
        if self.port:
            self.overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{self.port}"
        return self.start()
