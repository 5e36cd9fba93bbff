"""`herd cluster up`: a whole cluster on this machine in one command, for development and trying things out.

    herd cluster up [--nodes 3] [--data-dir ./herd-cluster] [--base-port 9092] [--pg-port 0]
                    [--override KEY=VALUE]... [--log-level INFO]

It starts a PostgreSQL server on loopback (herd.cli.localpg; data in <data-dir>/postgres, reused by the next
run), creates the database `herd` in it, then N `herd serve` processes: node i has node.id i, listens on
127.0.0.1:<base-port + i>, keeps its files in <data-dir>/node-<i>, its log in <data-dir>/node-<i>.log and its
settings in <data-dir>/node-<i>.properties (the database URL with its password, so readable by its owner only;
`herd serve --config` on it runs that node by hand). Once every node listens it prints the bootstrap servers
and the database URL (without its password) and waits.

Ctrl-C or SIGTERM stops the cluster in order: every node gets SIGTERM (a controlled shutdown, which hands its
partitions to the others while they last), then PostgreSQL stops, and the command exits 0; a second signal
kills the nodes at once. Each step is bounded: a node still running NODE_STOP_TIMEOUT_S after its SIGTERM (it
bounds its own shutdown by herd.server.server.shutdown_limit_s) gets SIGKILL, and PostgreSQL an immediate
shutdown and then SIGKILL (herd.cli.localpg's LocalPostgres.stop), each said in one line on stderr. Every child
runs in its own session, so Ctrl-C in the terminal reaches only this command and the order holds, and each is
asked to stop if this command dies without cleaning up. A node that exits on its own is reported in one line and
the others keep running. SIGUSR1 prints where each of this command's threads is (faulthandler), for a command
that does not stop.
"""

from __future__ import annotations

import faulthandler
import os
import re
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import click

from herd.cli.localpg import LocalPostgres, LocalPostgresError, die_with_parent, port_is_free, read_log, write_private
from herd.config import BrokerConfig, ConfigError

__all__ = ["cluster"]

DATABASE = "herd"
NODE_START_TIMEOUT_S = 60.0
NODE_STOP_TIMEOUT_S = 60.0
NODE_KILL_TIMEOUT_S = 10.0  # a process that outlives SIGKILL this long is stuck in the kernel (a dead disk)
_LISTENING = re.compile(r"herd listening on \S+:(\d+)")
# What `herd cluster up` sets on every node itself; an --override of one of them would break the cluster.
_RESERVED = {
    "node.id": "node ids are 0..N-1",
    "listeners": "use --base-port",
    "advertised.listeners": "each node advertises its own listener",
    "log.dirs": "use --data-dir",
    "log.dir": "use --data-dir",
    "herd.cluster.database.url": "the command starts its own PostgreSQL",
}


@dataclass
class _Node:
    index: int
    port: int
    data_dir: Path
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    log_offset: int = 0  # where this run's part of the log starts
    reported: bool = False

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def config_path(self) -> Path:
        return self.data_dir.parent / f"node-{self.index}.properties"

    def overrides(self, database_url: str) -> list[str]:
        return [
            f"node.id={self.index}",
            f"listeners=PLAINTEXT://{self.address}",
            f"log.dirs={self.data_dir}",
            f"herd.cluster.database.url={database_url}",
        ]

    def write_config(self, database_url: str) -> None:
        """The node's own settings as a properties file readable by its owner only: the database URL carries
        the password, which a command line would show to every user of the machine."""
        lines = ["# written by herd cluster up", *self.overrides(database_url)]
        write_private(self.config_path, "".join(f"{line}\n" for line in lines))


class _Signals:
    """SIGINT and SIGTERM counted instead of raised, so that stopping is one ordered path.

    The Python handler only counts, and takes no lock: it runs in the main thread between two bytecodes, also
    while that thread holds a lock. (It used to call threading.Event.set(), which takes the Event's lock; a signal
    landing while the main thread was inside Event.wait() holding that same lock left the handler blocked on it
    forever, and `herd cluster up` never stopped.) A wait is a select() on a pipe that the interpreter's C-level
    handler writes a byte to (signal.set_wakeup_fd), so a signal ends a wait at once, also one that arrives just
    before the wait blocks."""

    def __init__(self) -> None:
        self.received = 0
        self._wakeup_r, self._wakeup_w = os.pipe()
        for fd in (self._wakeup_r, self._wakeup_w):
            os.set_blocking(fd, False)

    def install(self) -> None:
        """Handle SIGINT and SIGTERM from now on (main thread only)."""
        signal.set_wakeup_fd(self._wakeup_w, warn_on_full_buffer=False)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, frame: object) -> None:
        self.received += 1

    def wait(self, seconds: float, more_than: int = 0) -> bool:
        """Until more than `more_than` signals have been received in all (True) or `seconds` pass (False)."""
        deadline = time.monotonic() + seconds
        while self.received <= more_than:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            readable, _, _ = select.select([self._wakeup_r], [], [], remaining)
            if readable:
                self._drain()
        return True

    def _drain(self) -> None:
        try:
            while os.read(self._wakeup_r, 512):
                pass
        except BlockingIOError:
            pass


def _parse_overrides(overrides: tuple[str, ...]) -> list[str]:
    items = []
    for item in overrides:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="'--override'")
        if key in _RESERVED:
            raise click.BadParameter(f"{key} is set by herd cluster up ({_RESERVED[key]})", param_hint="'--override'")
        items.append(f"{key}={value}")
    return items


def _check_settings(overrides: list[str], nodes: list[_Node]) -> None:
    """Every node's settings valid before anything starts, or a one-line UsageError."""
    try:
        BrokerConfig.load(None, [*overrides, *nodes[-1].overrides("postgresql://localhost/herd")])
    except ConfigError as e:
        raise click.UsageError(str(e)) from None
    for node in nodes:
        if not port_is_free(node.port):
            raise click.UsageError(f"port {node.port} on 127.0.0.1 is in use (--base-port chooses others)")


@click.group("cluster")
def cluster() -> None:
    """A local cluster: PostgreSQL and several herd nodes on this machine."""


@cluster.command("up")
@click.option(
    "--nodes",
    "count",
    type=click.IntRange(min=1, max=64),
    default=3,
    show_default=True,
    help="How many herd nodes to run.",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("herd-cluster"),
    show_default=True,
    help="Holds PostgreSQL's data (postgres/) and each node's (node-<i>).",
)
@click.option(
    "--base-port",
    type=click.IntRange(min=1, max=65535),
    default=9092,
    show_default=True,
    help="Node i listens on 127.0.0.1:<base-port + i>.",
)
@click.option(
    "--pg-port",
    type=click.IntRange(min=0, max=65535),
    default=0,
    show_default=True,
    help="PostgreSQL's port on 127.0.0.1 (0: a free one).",
)
@click.option(
    "--override",
    "overrides",
    metavar="KEY=VALUE",
    multiple=True,
    help="A broker property for every node (repeatable), as herd serve --override.",
)
@click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    help="The nodes' log level.",
)
def up(count: int, data_dir: Path, base_port: int, pg_port: int, overrides: tuple[str, ...], log_level: str) -> None:
    """Start PostgreSQL and the nodes, print the bootstrap servers; Ctrl-C stops them all."""
    if base_port + count - 1 > 65535:
        raise click.UsageError(f"--base-port {base_port} leaves no room for {count} nodes below port 65536")
    data_dir = data_dir.absolute()
    nodes = [_Node(i, base_port + i, data_dir / f"node-{i}", data_dir / f"node-{i}.log") for i in range(count)]
    settings = _parse_overrides(overrides)
    _check_settings(settings, nodes)
    signals = _Signals()
    signals.install()
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    postgres = LocalPostgres(data_dir / "postgres", pg_port)
    try:
        postgres.start()
        database_url = postgres.create_database(DATABASE)
    except LocalPostgresError as e:
        postgres.stop(report=_say)
        raise click.ClickException(str(e)) from None
    if signals.received:  # stopped while PostgreSQL was starting
        postgres.stop(report=_say)
        click.echo("herd cluster: stopped")
        return
    try:
        failure = _start_nodes(nodes, settings, database_url, log_level, signals)
        if failure is None and not signals.received:
            _announce(nodes, postgres)
            failure = _watch(nodes, postgres, signals)
    finally:
        _stop_nodes(nodes, signals)
        postgres.stop(report=_say)
    if failure:
        raise click.ClickException(failure)
    click.echo("herd cluster: stopped")


def _start_nodes(
    nodes: list[_Node], settings: list[str], database_url: str, log_level: str, signals: _Signals
) -> str | None:
    """Start every node and wait until each listens; a line saying why not, or None."""
    for node in nodes:
        node.data_dir.mkdir(parents=True, exist_ok=True)
        node.write_config(database_url)
        args = [sys.executable, "-m", "herd.cli", "serve", "--config", str(node.config_path), "--log-level", log_level]
        for item in settings:
            args += ["--override", item]
        with open(node.log_path, "ab") as log:
            node.log_offset = log.tell()
            node.proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent(signal.SIGTERM),
            )
    deadline = time.monotonic() + NODE_START_TIMEOUT_S
    waiting = list(nodes)
    while waiting:
        for node in list(waiting):
            text = read_log(node.log_path, node.log_offset)
            assert node.proc is not None
            if _LISTENING.search(text):
                waiting.remove(node)
            elif node.proc.poll() is not None:
                return f"node {node.index} exited at start with code {node.proc.returncode}: {_last_line(text)}"
        if not waiting:
            break
        if time.monotonic() > deadline:
            late = waiting[0]
            return f"node {late.index} did not start within {NODE_START_TIMEOUT_S:.0f} s (log {late.log_path})"
        if signals.wait(0.05):
            return None
    return None


def _announce(nodes: list[_Node], postgres: LocalPostgres) -> None:
    click.echo(f"herd cluster: {len(nodes)} node{'s' if len(nodes) > 1 else ''} up")
    click.echo(f"bootstrap servers: {','.join(node.address for node in nodes)}")
    click.echo(f"database: {postgres.display_url(DATABASE)} (password in {postgres.password_file})")
    click.echo(f"logs: {nodes[0].log_path.parent}/node-<i>.log, {postgres.log_path}")
    click.echo("Ctrl-C stops the cluster.")


def _watch(nodes: list[_Node], postgres: LocalPostgres, signals: _Signals) -> str | None:
    """Until a signal: report each node that exits on its own; a line when nothing is left to run."""
    postgres_reported = False
    while not signals.wait(0.2):
        for node in nodes:
            assert node.proc is not None
            code = node.proc.poll()
            if code is not None and not node.reported:
                node.reported = True
                click.echo(
                    f"herd cluster: node {node.index} exited with code {code} (log {node.log_path}); "
                    f"the others keep running",
                    err=True,
                )
        if not postgres.running and not postgres_reported:
            postgres_reported = True
            click.echo(f"herd cluster: PostgreSQL exited (log {postgres.log_path})", err=True)
        if all(node.reported for node in nodes):
            return "every node has exited"
    return None


def _stop_nodes(nodes: list[_Node], signals: _Signals) -> None:
    """SIGTERM to every running node (a controlled shutdown) and wait; SIGKILL on a second signal or when the
    wait runs out (said on stderr, naming the node and its log)."""
    running = [n for n in nodes if n.proc is not None and n.proc.poll() is None]
    if not running:
        return
    click.echo(f"herd cluster: stopping {len(running)} node{'s' if len(running) > 1 else ''}")
    first = signals.received
    for node in running:
        assert node.proc is not None
        node.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + NODE_STOP_TIMEOUT_S
    while True:
        left = [n for n in running if n.proc is not None and n.proc.poll() is None]
        if not left:
            return
        if signals.received > first:
            why = "a second signal"
            break
        if time.monotonic() > deadline:
            why = f"no exit within {NODE_STOP_TIMEOUT_S:g} s of SIGTERM"
            break
        signals.wait(0.05, more_than=first)
    for node in left:
        assert node.proc is not None
        click.echo(
            f"herd cluster: killing node {node.index} (pid {node.proc.pid}, {why}; log {node.log_path})", err=True
        )
        node.proc.kill()
    for node in left:
        assert node.proc is not None
        try:
            node.proc.wait(NODE_KILL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            click.echo(
                f"herd cluster: node {node.index} (pid {node.proc.pid}) still runs {NODE_KILL_TIMEOUT_S:g} s "
                f"after SIGKILL (stuck in the kernel?); leaving it",
                err=True,
            )


def _say(line: str) -> None:
    click.echo(f"herd cluster: {line}", err=True)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"
