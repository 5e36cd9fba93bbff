"""Real herd processes for tests: `HerdBroker` (one `herd serve`) and `HerdCluster` (PostgreSQL and N nodes).

`HerdBroker` runs `herd serve` (herd.cli's main, without hypothesis: `spawn_serve`) with the interpreter running the
tests, on free ports: the Kafka listener `PLAINTEXT://127.0.0.1:0` and, unless `faults=False`, the HTTP listener
`herd.http.listener=127.0.0.1:0` with `herd.faults.enable=true`. The process writes its log to a file next to
its data directory; `start()` reads that file until it says `herd listening on HOST:PORT` (and `herd http
listening on HOST:PORT`), which gives the addresses. A process that exits or stays silent raises
`HerdStartError` with the log's last lines. `restart()` starts it again on the same data and the same ports,
so that clients reconnect to where they were.

Processes started from the main thread are killed by Linux when the process that started them dies
(`die_with_parent`, a parent-death signal), so that an interrupted test run leaves no broker behind. Linux
ties that signal to the starting *thread*: a broker started from another thread does not ask for it, or it
would die with that thread.

`HerdCluster` does what `herd cluster up` does, on free ports and in temporary directories: a PostgreSQL
server on loopback (herd.cli.localpg: `HERD_PG_BIN`, the `herd[cluster]` extra's binaries or the machine's),
the database `herd`, and N `HerdBroker` nodes (node.id 0..N-1) sharing it. The database URL, which holds a
password, reaches each node in a properties file readable by its owner only, never on a command line.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from herd.testing.wait import WaitTimeout, wait_until

if TYPE_CHECKING:
    from herd.cli.localpg import LocalPostgres
    from herd.testing.faults import Faults

__all__ = ["HerdBroker", "HerdCluster", "HerdStartError"]

_LISTENING = re.compile(r"\bherd listening on (\S+):(\d+)")
_HTTP_LISTENING = re.compile(r"\bherd http listening on (\S+):(\d+)")
_POLL_S = 0.02
_TAIL_LINES = 25
_PG_PREFIX = "herd-testing-pg-"
OFFSETS_TOPIC = "__consumer_offsets"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0

# Every HerdBroker this process has spawned, in order: what a test harness shows the logs of when a test fails,
# and reaps at the end of a session (herd's own tests/conftest.py does both).
SPAWNED: list[HerdBroker] = []


class HerdStartError(RuntimeError):
    """A herd process did not start; the message ends with the last lines of its log."""


def _log_tail(text: str, lines: int = _TAIL_LINES) -> str:
    kept = [line for line in text.splitlines() if line.strip()][-lines:]
    return "\n".join(kept) or "(the log is empty)"


class HerdBroker:
    """One `herd serve` process. `directory` holds its data (`data/`) and its log (`herd.log`); without one, a
    temporary directory is made and removed by `close()`. `overrides` are broker properties (Kafka's names),
    applied after the defaults above, so they can change any of them. `config`: a properties file given to
    `--config` (settings that must not show on a command line)."""

    def __init__(
        self,
        directory: Path | str | None = None,
        overrides: Mapping[str, str] | None = None,
        *,
        faults: bool = True,
        config: Path | None = None,
        log_level: str = "INFO",
    ) -> None:
        self._owned = directory is None
        self.directory = Path(tempfile.mkdtemp(prefix="herd-") if directory is None else directory).absolute()
        self.data_dir = self.directory / "data"
        self.log_path = self.directory / "herd.log"
        self.faults_enabled = faults
        self.config = config
        self.log_level = log_level
        self.overrides = self._defaults() | {k: str(v) for k, v in (overrides or {}).items()}
        self.proc: subprocess.Popen[bytes] | None = None
        self.host = "127.0.0.1"
        self.port = 0
        self.http_port = 0
        self._log_offset = 0
        self._attached = False
        self._bootstrap = ""
        self._http: str | None = None
        self.spawned_at: float | None = None  # time.monotonic() of the last spawn()

    def _defaults(self) -> dict[str, str]:
        defaults = {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(self.data_dir),
            "group.initial.rebalance.delay.ms": "0",
        }
        if self.faults_enabled:
            defaults |= {"herd.http.listener": "127.0.0.1:0", "herd.faults.enable": "true"}
        return defaults

    @classmethod
    def attach(cls, bootstrap: str, http: str | None = None) -> HerdBroker:
        """A broker that runs already, elsewhere (`--herd-bootstrap`): the same attributes, no process to
        start or stop; `http` (HOST:PORT of its HTTP listener) is needed for `faults`."""
        broker = cls(tempfile.gettempdir(), faults=http is not None)
        broker._attached, broker._bootstrap, broker._http = True, bootstrap, http
        host, _, port = bootstrap.split(",")[0].rpartition(":")
        broker.host, broker.port = host, int(port)
        return broker

    # -- addresses -------------------------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """HOST:PORT of the Kafka listener, for `bootstrap.servers`."""
        if self._attached:
            return self._bootstrap
        self._require_port(self.port, "Kafka listener")
        return f"{self.host}:{self.port}"

    @property
    def http(self) -> str:
        """http://HOST:PORT of the HTTP listener (fault injection)."""
        if self._attached and self._http is not None:
            return self._http if "://" in self._http else f"http://{self._http}"
        if self._attached:
            raise RuntimeError(
                f"no HTTP listener was named for the broker at {self._bootstrap}: give "
                f"--herd-http HOST:PORT (its herd.http.listener) to inject faults"
            )
        if not self.faults_enabled and "herd.http.listener" not in self.overrides:
            raise RuntimeError("this broker has no HTTP listener (started with faults=False)")
        self._require_port(self.http_port, "HTTP listener")
        return f"http://{self.host}:{self.http_port}"

    @property
    def faults(self) -> Faults:
        """A `Faults` client of this broker's HTTP listener."""
        from herd.testing.faults import Faults

        return Faults(self.http)

    def _require_port(self, port: int, what: str) -> None:
        if not port:
            raise RuntimeError(f"the broker has not started: no {what} yet (call start())")

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    # -- the process -----------------------------------------------------------------------------------------

    def start(self, timeout: float = START_TIMEOUT_S) -> HerdBroker:
        """Start the process and return once it listens; raises HerdStartError (with the log's last lines)
        when it exits first or does not listen within `timeout`."""
        self.spawn()
        return self.wait_listening(timeout)

    def spawn(self) -> None:
        """Start the process without waiting (several nodes start in parallel); then `wait_listening()`."""
        self._refuse_attached("start")
        if self.running:
            raise RuntimeError(f"the broker runs already (pid {self.pid})")
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.spawned_at is None:
            SPAWNED.append(self)
        self.spawned_at = time.monotonic()
        self.proc, self._log_offset = spawn_serve(
            self.overrides, self.log_path, config=self.config, log_level=self.log_level, preexec_fn=self._preexec()
        )

    def _preexec(self) -> Callable[[], None] | None:
        """What the child runs before `herd serve`: the parent-death signal (see the module's docstring)."""
        return _death_signal()

    def wait_listening(self, timeout: float = START_TIMEOUT_S) -> HerdBroker:
        """Wait for the listening lines of this run's log (see `start`)."""
        assert self.proc is not None, "spawn() first"
        proc = self.proc

        def listens() -> bool:
            text = self.log()
            if self._found_ports(text):
                return True
            if proc.poll() is not None:
                raise self._exited(text)
            return False

        try:
            wait_until(listens, timeout, f"herd serve to listen (log {self.log_path})", interval=_POLL_S)
        except WaitTimeout:
            self.kill()
            raise HerdStartError(
                f"herd serve did not listen within {timeout:.0f} s (killed); the end of "
                f"{self.log_path}:\n{_log_tail(self.log())}"
            ) from None
        return self

    def _exited(self, text: str) -> Exception:
        """The error of a process that exited before it listened; `text`: what this run logged."""
        assert self.proc is not None
        return HerdStartError(
            f"herd serve exited with code {self.proc.returncode} before listening; "
            f"the end of {self.log_path}:\n{_log_tail(text)}"
        )

    def _found_ports(self, text: str) -> bool:
        found = listening(text)
        if found is None or (self.faults_enabled and not found[2]):
            return False
        self.host, self.port, self.http_port = found
        return True

    def log(self) -> str:
        """What the current (or last) run of the process has logged."""
        from herd.cli.localpg import read_log

        return read_log(self.log_path, self._log_offset)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM (herd's graceful shutdown) and wait; its exit code (None when it was not running). One that
        has not exited within `timeout` is killed, and TimeoutError is raised."""
        self._refuse_attached("stop")
        if self.proc is None:
            return None
        try:
            return stop_process(self.proc, timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(
                f"herd serve did not stop within {timeout:.0f} s of SIGTERM (killed); the "
                f"end of {self.log_path}:\n{_log_tail(self.log())}"
            ) from None

    def kill(self) -> None:
        """SIGKILL, as a crash: nothing is flushed or handed over."""
        self._refuse_attached("kill")
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self, timeout: float = START_TIMEOUT_S) -> HerdBroker:
        """Stop it if it runs, then start it again on the same data and the same ports."""
        self._refuse_attached("restart")
        self.stop()
        if self.port:
            self.overrides["listeners"] = f"PLAINTEXT://{self.host}:{self.port}"
        if self.http_port:
            self.overrides["herd.http.listener"] = f"{self.host}:{self.http_port}"
        return self.start(timeout)

    def close(self) -> None:
        """Stop the process (killing it if it does not stop) and remove the directory if it was made here."""
        if self._attached:
            return
        try:
            self.stop()
        finally:
            if self._owned:
                shutil.rmtree(self.directory, ignore_errors=True)

    def _refuse_attached(self, what: str) -> None:
        if self._attached:
            raise RuntimeError(f"cannot {what} a broker that runs outside the tests ({self._bootstrap})")

    def __enter__(self) -> HerdBroker:
        return self if self._attached or self.running else self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "attached" if self._attached else "running" if self.running else "stopped"
        return f"<{type(self).__name__} {self.bootstrap if self.port else '-'} {state}>"


def _death_signal() -> Callable[[], None] | None:
    """The preexec_fn killing a child with the process that started it, when started from the main thread."""
    from herd.cli.localpg import die_with_parent

    if threading.current_thread() is not threading.main_thread():
        return None
    return die_with_parent(signal.SIGKILL)


class HerdCluster:
    """PostgreSQL and `nodes` herd nodes sharing it, in `directory` (a temporary one, removed by `close()`,
    when None). `start()` raises `LocalPostgresError` (herd.cli.localpg) when no PostgreSQL can be had, and
    HerdStartError when a node does not start. `nodes[i]` is node i, a HerdBroker (`kill`, `restart`,
    `faults`...); `bootstrap` lists the running ones.

    `database_url`: a database that exists already (the nodes share it, and no PostgreSQL is started here).
    Node i has node.id i, its data and log in `directory/node-i/` and the database URL in
    `directory/node-i.properties`, readable by its owner only. Besides `start()` and `close()`: `add_node()`
    starts one more node; `kill(i)` is SIGKILL, `pause(i)`/`resume(i)` SIGSTOP/SIGCONT, `terminate(i)` SIGTERM
    and a wait (a controlled shutdown), `restart(i)` starts a stopped node again on its ports."""

    def __init__(
        self,
        directory: Path | str | None = None,
        nodes: int = 3,
        overrides: Mapping[str, str] | None = None,
        *,
        faults: bool = True,
        database_url: str | None = None,
    ) -> None:
        self._owned = directory is None
        self.directory = Path(tempfile.mkdtemp(prefix="herd-cluster-") if directory is None else directory).absolute()
        self.size = nodes
        self.overrides = dict(overrides or {})
        self.faults_enabled = faults
        self.database_url = database_url
        self.nodes: list[HerdBroker] = []
        self.postgres: LocalPostgres | None = None
        self._pg_dir: Path | None = None

    # -- addresses -------------------------------------------------------------------------------------------

    def address(self, i: int) -> str:
        """HOST:PORT of node i's Kafka listener."""
        return self.nodes[i].bootstrap

    @property
    def addresses(self) -> list[str]:
        """HOST:PORT of every node that runs (paused ones included)."""
        return [node.bootstrap for node in self.nodes if node.running]

    @property
    def bootstrap(self) -> str:
        return ",".join(self.addresses)

    def running(self, i: int) -> bool:
        return self.nodes[i].running

    def log(self, i: int) -> str:
        """What the current (or last) run of node i has logged."""
        return self.nodes[i].log()

    # -- starting --------------------------------------------------------------------------------------------

    def start(
        self, timeout: float = START_TIMEOUT_S, *, nodes: int | None = None, balanced: bool = True
    ) -> HerdCluster:
        """Start PostgreSQL (unless there is a `database_url`, or it runs already), then `nodes` more nodes
        (`size` when None) in parallel; return once each listens and, when `balanced`, once the nodes agree on
        balanced leaders of `__consumer_offsets` (see `wait_balanced`). On a failure, everything is closed."""
        try:
            url = self._database()
            new = [self._node(len(self.nodes), url) for _ in range(self.size if nodes is None else nodes)]
            for node in new:
                node.spawn()
            for node in new:
                node.wait_listening(timeout)
            if balanced:
                self.wait_balanced(timeout)
        except BaseException:
            self.close()
            raise
        return self

    def add_node(self, overrides: Mapping[str, str] | None = None, timeout: float = START_TIMEOUT_S) -> int:
        """Start one more node (with `overrides` on top of the cluster's) and return its index once it listens."""
        node = self._node(len(self.nodes), self._database(), overrides)
        node.start(timeout)
        return len(self.nodes) - 1

    def wait_balanced(self, timeout: float = START_TIMEOUT_S) -> None:
        """Wait until every running node names the same leaders of `__consumer_offsets`, all running, and no
        two nodes lead more than one apart: nodes that start together take partitions from each other as they
        join, and a test should not begin with its group's coordinator moving. Raises TimeoutError."""
        wait_until(
            self._balanced, timeout, f"the nodes to agree on balanced leaders of {OFFSETS_TOPIC}", interval=_POLL_S * 5
        )

    def _balanced(self) -> bool:
        from herd.client.errors import KafkaError

        running = [i for i, node in enumerate(self.nodes) if node.running]
        try:
            views = [asyncio.run(_offsets_leaders(self.nodes[i].bootstrap)) for i in running]
        except (OSError, KeyError, KafkaError):
            return False
        counts = [list(views[0].values()).count(i) for i in running]
        return (
            all(view == views[0] for view in views)
            and set(views[0].values()) <= set(running)
            and max(counts) - min(counts) <= 1
        )

    def _database(self) -> str:
        if self.database_url is None:
            self.database_url = self._start_postgres()
        return self.database_url

    def _start_postgres(self) -> str:
        """The URL of the database `herd` on a fresh local server. Its data lives in a directory of its own
        under the system's temporary directory: started as root, PostgreSQL runs as `nobody`, which must reach
        it, and a test's temporary directory is private to its user."""
        from herd.cli.localpg import LocalPostgres, find_binaries

        find_binaries()  # fail first, and in one line, when there are none
        remove_leftovers(Path(tempfile.gettempdir()), _PG_PREFIX)
        self._pg_dir = Path(tempfile.mkdtemp(prefix=f"{_PG_PREFIX}{os.getpid()}-"))
        os.chmod(self._pg_dir, 0o755)
        self.postgres = LocalPostgres(self._pg_dir / "data")
        self.postgres.start()
        return self.postgres.create_database("herd")

    def _node(self, index: int, database_url: str, overrides: Mapping[str, str] | None = None) -> HerdBroker:
        from herd.cli.localpg import write_private

        self.directory.mkdir(parents=True, exist_ok=True)
        config = self.directory / f"node-{index}.properties"
        write_private(config, f"herd.cluster.database.url={database_url}\n")
        node = HerdBroker(
            self.directory / f"node-{index}",
            {"node.id": str(index), **self.overrides, **(overrides or {})},
            faults=self.faults_enabled,
            config=config,
        )
        self.nodes.append(node)
        return node

    # -- one node --------------------------------------------------------------------------------------------

    def kill(self, i: int) -> None:
        """SIGKILL node i, as a crash."""
        self.nodes[i].kill()

    def pause(self, i: int) -> None:
        """SIGSTOP node i, returning once it is stopped."""
        self._signal(i, signal.SIGSTOP)
        self._wait_paused(i, True)

    def resume(self, i: int) -> None:
        """SIGCONT node i, returning once it runs again."""
        self._signal(i, signal.SIGCONT)
        self._wait_paused(i, False)

    def paused(self, i: int) -> bool:
        from herd.cli.localpg import process_state

        proc = self.nodes[i].proc
        return proc is not None and process_state(proc.pid) == "T"

    def _wait_paused(self, i: int, paused: bool, timeout: float = 10.0) -> None:
        wait_until(
            lambda: self.paused(i) == paused, timeout, f"node {i} to {'stop' if paused else 'continue'}", interval=0.005
        )

    def _signal(self, i: int, sig: signal.Signals) -> None:
        proc = self.nodes[i].proc
        if proc is None or proc.poll() is not None:
            raise RuntimeError(f"node {i} does not run")
        proc.send_signal(sig)

    def terminate(self, i: int, timeout: float = 30.0) -> int | None:
        """SIGTERM node i (resumed first if paused, or it could not act on it) and wait; its exit code."""
        if self.running(i):
            self.resume(i)
        return self.nodes[i].stop(timeout)

    def restart(self, i: int, timeout: float = 30.0) -> None:
        """Start node i again after a kill or a stop, on its data and ports, tried again while the node is
        refused because the lease of its earlier process still runs (up to broker.session.timeout.ms)."""
        retry_while_leased(self.nodes[i].restart, timeout)

    # -- the end ---------------------------------------------------------------------------------------------

    def close(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Stop every node (SIGTERM, SIGKILL after `timeout`), then PostgreSQL; remove what was made here."""
        try:
            self._stop_nodes(timeout)
        finally:
            if self.postgres is not None:
                self.postgres.stop()
            if self._pg_dir is not None:
                shutil.rmtree(self._pg_dir, ignore_errors=True)
            if self._owned:
                shutil.rmtree(self.directory, ignore_errors=True)

    def _stop_nodes(self, timeout: float) -> None:
        live = [node for node in self.nodes if node.running]
        for node in live:
            assert node.proc is not None
            node.proc.send_signal(signal.SIGCONT)  # a paused node could not act on SIGTERM
            node.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for node in live:
            assert node.proc is not None
            try:  # not node.stop(): a second SIGTERM makes herd exit at once, with code 1
                node.proc.wait(max(deadline - time.monotonic(), 1.0))  # the same time for all, signalled together
            except subprocess.TimeoutExpired:
                node.kill()

    def __enter__(self) -> HerdCluster:
        return self if self.nodes else self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


async def _offsets_leaders(bootstrap: str) -> dict[int, int]:
    """partition -> leader of `__consumer_offsets`, as the node at `bootstrap` names them."""
    from herd.client.connection import KafkaClient

    client = KafkaClient(bootstrap, client_id="herd-testing", request_timeout_ms=5000)
    await client.start()
    try:
        return dict((await client.metadata([OFFSETS_TOPIC])).topics[OFFSETS_TOPIC].partitions)
    finally:
        await client.close()


# -- process helpers, which herd's own tests use too (tests/brokers.py, tests/pgcluster.py) ------------------


# `python -m herd.cli`, in a process that cannot import hypothesis: kio's phantom types import it whenever it is
# installed (a development dependency, absent where herd runs), 0.12 s of the 0.7 s a node takes to import on the
# dev machine; a test suite starts hundreds of nodes.
_SERVE_WITHOUT_HYPOTHESIS = "import sys; sys.modules['hypothesis'] = None; from herd.cli import main; main()"


def spawn_serve(
    overrides: Mapping[str, str],
    log_path: Path,
    *,
    config: Path | None = None,
    log_level: str = "INFO",
    preexec_fn: Callable[[], None] | None = None,
) -> tuple[subprocess.Popen[bytes], int]:
    """Start `herd serve` (with the interpreter running this) on these broker properties, its output appended
    to `log_path`; the process and the offset in the log where this run's part starts."""
    args = [sys.executable, "-c", _SERVE_WITHOUT_HYPOTHESIS, "serve", "--log-level", log_level]
    if config is not None:
        args += ["--config", str(config)]
    for key, value in overrides.items():
        args += ["--override", f"{key}={value}"]
    with open(log_path, "ab") as log:
        offset = log.tell()
        return subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, preexec_fn=preexec_fn
        ), offset


def listening(text: str) -> tuple[str, int, int] | None:
    """(host, port, HTTP port or 0) from a `herd serve` log once it says it listens (its HTTP listener, when
    it has one, says so first); None before."""
    kafka = _LISTENING.search(text)
    if kafka is None:
        return None
    http = _HTTP_LISTENING.search(text)
    return kafka.group(1), int(kafka.group(2)), int(http.group(2)) if http else 0


def stop_process(proc: subprocess.Popen[bytes], timeout: float) -> int:
    """SIGTERM (herd's graceful shutdown) unless it has exited, and wait; its exit code. One that has not
    exited within `timeout` is killed, and subprocess.TimeoutExpired raised."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
    return proc.returncode


def retry_while_leased(restart: Callable[[], object], timeout: float, pause: float = 0.2) -> None:
    """`restart()` of a node, called again while it fails (RuntimeError) because the lease of the node's
    earlier process still runs (the node exits saying so), for up to `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            restart()
            return
        except RuntimeError as e:
            if "lease runs for" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(pause)


def remove_leftovers(root: Path, prefix: str = "") -> None:
    """Remove the directories `<prefix><pid>-*` in `root` of test sessions whose process is gone (killed
    before cleaning up; their PostgreSQL server stopped with them)."""
    for entry in root.glob(f"{prefix}*"):
        pid = entry.name[len(prefix) :].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
