"""`BrokerProcess`: `herd serve` in a child process on port 0 with a real data directory, for tests that
talk to a broker over real sockets. The fixtures built on it are in tests/conftest.py.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

_LISTENING = re.compile(r"herd listening on (\S+):(\d+)")


class BrokerProcess:
    """`herd serve` in a child process; `kill()` is SIGKILL, `stop()` is a graceful SIGTERM."""

    def __init__(self, data_dir: Path, overrides: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.overrides = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(data_dir),
                          "group.initial.rebalance.delay.ms": "0", **(overrides or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.log_path = data_dir.parent / f"{data_dir.name}-broker.log"
        self._log_offset = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> "BrokerProcess":
        args = [sys.executable, "-m", "herd.cli", "serve", "--log-level", "INFO"]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        log = open(self.log_path, "ab")
        self._log_offset = log.tell()
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log_path.read_bytes()[self._log_offset:].decode(errors="replace")
            match = _LISTENING.search(text)
            if match:
                self.port = int(match.group(2))
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{text}")
            time.sleep(0.02)
        raise TimeoutError(f"broker did not start:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_bytes()[self._log_offset:].decode(errors="replace")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, timeout: float = 20.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise
        return self.proc.returncode

    def restart(self) -> "BrokerProcess":
        """Start again on the same data directory (and the same port, so clients reconnect)."""
        if self.port:
            self.overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{self.port}"
        return self.start()
