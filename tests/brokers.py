"""`BrokerProcess`: `herd serve` in a child process on port 0 with a real data directory, for tests that
talk to a broker over real sockets. The fixtures built on it are in tests/conftest.py. It is herd.testing's
`HerdBroker` (the users' version: spawn, wait_listening, log, stop, kill, restart) with what herd's own tests
expect of it: the data directory they name and the log next to it, no HTTP listener unless asked for, the
start's error carrying the whole log, and the parent-death signal only when asked for.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable
from pathlib import Path

from herd.cli.localpg import die_with_parent
from herd.testing.broker import HerdBroker, HerdStartError

START_TIMEOUT_S = 30.0
_LISTENER = re.compile(r"\bherd listener (\S+) \(\S+\) on \S+:(\d+)")


class BrokerProcess(HerdBroker):
    """`herd serve` in a child process; `kill()` is SIGKILL, `stop()` is a graceful SIGTERM. `data_dir` is its
    log.dirs and its log is `<data_dir>-broker.log` beside it. `config`: a properties file given to --config
    (settings that must not show on a command line, such as a password); `die_with_parent`: the process is
    killed when the test process dies, so that an interrupted run leaves no node behind; in truth when the
    thread that started it ends, so start such a broker from the test's own thread, not from a worker thread.
    `http` is HOST:PORT of the HTTP listener, when herd.http.listener is set."""

    def __init__(
        self,
        data_dir: Path,
        overrides: dict[str, str] | None = None,
        *,
        config: Path | None = None,
        die_with_parent: bool = False,
        log_level: str = "INFO",
    ) -> None:
        self._given_data_dir = data_dir
        super().__init__(data_dir.parent, overrides, faults=False, config=config, log_level=log_level)
        self.data_dir = data_dir
        self.log_path = data_dir.parent / f"{data_dir.name}-broker.log"
        self.die_with_parent = die_with_parent

    def _defaults(self) -> dict[str, str]:
        return super()._defaults() | {"log.dirs": str(self._given_data_dir)}

    def _preexec(self) -> Callable[[], None] | None:
        return die_with_parent(signal.SIGKILL) if self.die_with_parent else None

    def _exited(self, text: str) -> Exception:
        assert self.proc is not None
        return HerdStartError(f"broker exited with {self.proc.returncode}:\n{text}")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def http(self) -> str:
        """HOST:PORT of the HTTP listener (herd.http.listener)."""
        return f"127.0.0.1:{self.http_port}"

    def listener_ports(self) -> dict[str, int]:
        """Listener name -> the port it bound (each listener of port 0 gets its own), from this run's log."""
        return {name: int(port) for name, port in _LISTENER.findall(self.log())}

    def start(self, timeout: float = START_TIMEOUT_S) -> BrokerProcess:
        super().start(timeout)
        return self

    def wait_listening(self, timeout: float = START_TIMEOUT_S) -> BrokerProcess:
        super().wait_listening(timeout)
        return self

    def restart(self, timeout: float = START_TIMEOUT_S) -> BrokerProcess:
        """Start again on the same data directory (and the same ports, so clients reconnect)."""
        super().restart(timeout)
        return self
