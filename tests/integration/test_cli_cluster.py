"""`herd cluster up` as a user runs it: PostgreSQL and N nodes in one command, the bootstrap servers printed,
Ctrl-C or SIGTERM stops everything in order and leaves no process behind, bad arguments get one line."""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from processes import file_text, show_on_failure

from herd.cli.localpg import free_port, process_state
from herd.testing.wait import collect_until, wait_until


def _up(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "herd.cli", "cluster", "up", *args], capture_output=True, text=True, timeout=60
    )


def _processes_under(directory: Path) -> list[int]:
    """Live processes whose command line names `directory` (the nodes' configs, PostgreSQL's -D)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if str(directory) in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def _wait_gone(directory: Path, timeout: float = 15.0) -> None:
    """Wait until no process runs under `directory`; a failure names those still running (each with its state and
    command line, and for a node the end of its log, so that it says which and where it is stuck)."""

    wait_until(
        lambda: not _processes_under(directory),
        timeout,
        lambda: f"no process left under {directory}; these run:\n{_children(directory)}",
        interval=0.05,
    )


def _log_tail(command_line: str, lines: int = 30) -> str:
    """The last lines of the log of the node `command_line` runs (its config's name with .log), or ""."""
    config = next((word for word in command_line.split() if word.endswith(".properties")), None)
    if config is None:
        return ""
    try:
        return "\n  " + "\n  ".join(Path(config).with_suffix(".log").read_text().splitlines()[-lines:])
    except OSError:
        return ""


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "(gone)"


def _how(pid: int) -> str:
    """A process's state letter (R, S, D, T, Z) and the kernel function it sleeps in, from /proc."""
    try:
        wchan = Path(f"/proc/{pid}/wchan").read_text().strip() or "-"
    except OSError:
        wchan = "?"
    return f"state {process_state(pid) or 'gone'}, waiting in {wchan}"


def _children(directory: Path) -> str:
    """Each process running under `directory`, one a line: pid, state, command line, and a node's log tail."""
    lines = [
        f"{pid} ({_how(pid)}): {line}{_log_tail(line, 15)}"
        for pid in _processes_under(directory)
        for line in [_command_line(pid)]
    ]
    return "\n".join(lines) or "(none)"


class Launcher:
    """`herd cluster up` in a child process, its output read line by line."""

    def __init__(self, data_dir: Path, nodes: int, *extra: str) -> None:
        self.data_dir = data_dir
        self.base_port = free_port(nodes)
        args = [
            sys.executable,
            "-m",
            "herd.cli",
            "cluster",
            "up",
            "--nodes",
            str(nodes),
            "--data-dir",
            str(data_dir),
            "--base-port",
            str(self.base_port),
            *extra,
        ]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue[tuple[str, str]] = queue.Queue()
        self.seen: list[tuple[str, str]] = []
        show_on_failure("herd cluster up", self.proc, self._output)
        for node in range(nodes):
            show_on_failure(f"its node {node}", self.proc, file_text(data_dir / f"node-{node}.log"))
        show_on_failure("its PostgreSQL", self.proc, file_text(data_dir / "postgres.log"))
        for name, stream in (("out", self.proc.stdout), ("err", self.proc.stderr)):
            threading.Thread(target=self._read, args=(name, stream), daemon=True).start()

    def _read(self, name: str, stream) -> None:
        for line in stream:
            self.lines.put((name, line.rstrip("\n")))

    def expect(self, text: str, stream: str = "out", timeout: float = 90.0) -> str:
        def line() -> tuple[str, str] | None:
            try:
                item = self.lines.get(timeout=0.1)
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    raise AssertionError(
                        f"no {text!r} on std{stream}: it exited with {self.proc.returncode}; saw {self.seen}"
                    ) from None
                return None
            self.seen.append(item)
            return item if item[0] == stream and text in item[1] else None

        return wait_until(line, timeout, lambda: f"{text!r} on std{stream}; saw {self.seen}", interval=0)[1]

    def _output(self) -> str:
        """Every line it printed so far: those `expect` has read, then those still queued."""
        return "\n".join(f"std{name}: {line}" for name, line in [*self.seen, *list(self.lines.queue)])

    def bootstrap(self) -> list[str]:
        return self.expect("bootstrap servers: ").split(": ", 1)[1].split(",")

    def stop(self, sig: int = signal.SIGINT, timeout: float = 90.0) -> int:
        """Send `sig` and wait for the command to exit; its exit code. If it does not exit in time, an
        AssertionError saying where its threads are (it prints them on SIGUSR1) and how each child is."""
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        how, children = _how(self.proc.pid), _children(self.data_dir)
        self.proc.send_signal(signal.SIGUSR1)  # faulthandler: every thread's stack on its stderr
        time.sleep(1.0)
        raise AssertionError(
            f"herd cluster up (pid {self.proc.pid}, {how}) did not exit within {timeout:g} s of "
            f"{signal.Signals(sig).name}; its output:\n{self._output()}\nits children:\n{children}"
        )

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pid in _processes_under(self.data_dir):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def launchers(open_tmp_path):
    started: list[Launcher] = []

    def make(nodes: int, *extra: str, data_dir: Path | None = None) -> Launcher:
        launcher = Launcher(data_dir or open_tmp_path / "cluster", nodes, *extra)
        started.append(launcher)
        return launcher

    yield make
    for launcher in started:
        launcher.close()


@pytest.mark.parametrize(
    "args,message",
    [
        (["--nodes", "0"], "Invalid value for '--nodes'"),
        (["--override", "node.id=5"], "node.id is set by herd cluster up (node ids are 0..N-1)"),
        (["--override", "listeners=PLAINTEXT://127.0.0.1:1"], "listeners is set by herd cluster up (use --base-port)"),
        (["--override", "bogus.key=1"], "unknown setting 'bogus.key'"),
        (["--override", "num.partitions=x"], "num.partitions: 'x' is not a whole number"),
        (["--override", "novalue"], "'novalue' is not KEY=VALUE"),
        (["--base-port", "65535", "--nodes", "2"], "--base-port 65535 leaves no room for 2 nodes"),
    ],
)
def test_bad_arguments_get_one_line_and_exit_2(args, message, tmp_path):
    result = _up("--data-dir", str(tmp_path / "c"), *args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert result.stderr.startswith("herd: error: ") and result.stderr.count("\n") == 1
    assert not (tmp_path / "c").exists()  # nothing was started


def test_a_taken_port_is_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _up("--data-dir", str(tmp_path / "c"), "--base-port", str(port - 1), "--nodes", "2")
    assert result.returncode == 2
    # The second node's port is the one held here; the first (port - 1) is usually free, but another process on
    # the machine may hold it by chance, and then the error names it instead.
    assert result.stderr in {
        f"herd: error: port {p} on 127.0.0.1 is in use (--base-port chooses others)\n" for p in (port, port - 1)
    }


def test_sigterm_stops_nodes_then_postgres_and_a_second_run_reuses_the_data(launchers, open_tmp_path):
    data_dir = open_tmp_path / "cluster"
    for _run in range(2):
        launcher = launchers(2, data_dir=data_dir)
        servers = launcher.bootstrap()
        assert servers == [f"127.0.0.1:{launcher.base_port}", f"127.0.0.1:{launcher.base_port + 1}"]
        database = launcher.expect("database: ")
        assert database.startswith("database: postgresql://postgres@127.0.0.1:")
        assert "/herd (password in" in database
        launcher.expect("Ctrl-C stops the cluster.")
        assert len(_processes_under(data_dir)) >= 3  # two nodes and the postmaster (and its workers)
        for node in range(2):
            settings = (data_dir / f"node-{node}.properties").read_text()
            assert f"node.id={node}" in settings
            assert "herd.cluster.database.url=postgresql://postgres:" in settings
        assert launcher.stop(signal.SIGTERM) == 0
        launcher.expect("herd cluster: stopping 2 nodes")
        launcher.expect("herd cluster: stopped")
        _wait_gone(data_dir)
        for node in range(2):
            text = (data_dir / f"node-{node}.log").read_text().rstrip()
            assert text.endswith("herd stopped"), text[-2000:]  # graceful
    assert (data_dir / "postgres" / "PG_VERSION").exists()


def test_a_node_that_dies_is_reported_and_the_others_keep_running(launchers, open_tmp_path):
    launcher = launchers(2)
    servers = launcher.bootstrap()
    launcher.expect("Ctrl-C stops the cluster.")
    config = str(open_tmp_path / "cluster" / "node-1.properties")
    (victim,) = [
        pid for pid in _processes_under(open_tmp_path / "cluster") if config in Path(f"/proc/{pid}/cmdline").read_text()
    ]
    os.kill(victim, signal.SIGKILL)
    line = launcher.expect("herd cluster: node 1 exited", stream="err")
    assert line.startswith("herd cluster: node 1 exited with code -9 (log ")
    assert line.endswith("the others keep running")
    with socket.create_connection(("127.0.0.1", int(servers[0].rsplit(":", 1)[1])), timeout=5):
        pass  # node 0 still answers
    assert launcher.proc.poll() is None
    assert launcher.stop(signal.SIGINT) == 0
    _wait_gone(open_tmp_path / "cluster")


def test_a_killed_launcher_leaves_nothing_running(launchers, open_tmp_path):
    """SIGKILL gives `herd cluster up` no chance to clean up: its nodes and PostgreSQL are asked to stop by
    the kernel when it dies."""
    launcher = launchers(2)
    launcher.expect("Ctrl-C stops the cluster.")
    assert _processes_under(open_tmp_path / "cluster")
    launcher.proc.kill()
    launcher.proc.wait()
    # PostgreSQL goes at once; a node's graceful shutdown then waits on it, bounded by shutdown_limit_s (23 s)
    _wait_gone(open_tmp_path / "cluster", timeout=40)


def test_three_nodes_serve_one_cluster_to_confluent_kafka_and_ctrl_c_stops_it(launchers, open_tmp_path):
    """The whole story: three nodes over one PostgreSQL; a topic created through node 0 is served by all of
    them, records produced through node 0 are consumed through node 2, and Ctrl-C leaves nothing running."""
    launcher = launchers(3, "--override", "group.initial.rebalance.delay.ms=0")
    servers = launcher.bootstrap()
    launcher.expect("Ctrl-C stops the cluster.")

    admin = AdminClient({"bootstrap.servers": servers[0]})
    # a node learns of one that registered just after it within milliseconds (NOTIFY), not at once
    wait_until(lambda: sorted(admin.list_topics(timeout=10).brokers) == [0, 1, 2], 10, "node 0 to list brokers 0, 1, 2")
    admin.create_topics([NewTopic("spread", num_partitions=6, replication_factor=1)])["spread"].result(30)
    deadline = time.monotonic() + 30
    # not a wait_until: at the bound the test goes on with the last views (only the last is asserted on)
    while True:  # every node learns of the topic
        views = [
            AdminClient({"bootstrap.servers": s}).list_topics("spread", timeout=10).topics["spread"] for s in servers
        ]
        if all(v.error is None and len(v.partitions) == 6 for v in views) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    leaders = {p.leader for p in views[-1].partitions.values()}
    assert len(leaders) == 3, leaders  # spread over the nodes

    producer = Producer({"bootstrap.servers": servers[0], "acks": "all", "enable.idempotence": True})
    failures: list[str] = []
    for i in range(600):
        producer.produce(
            "spread",
            key=str(i % 60).encode(),
            value=str(i).encode(),
            on_delivery=lambda err, msg: failures.append(str(err)) if err else None,
        )
    assert producer.flush(30) == 0 and failures == []

    consumer = Consumer(
        {
            "bootstrap.servers": servers[2],
            "group.id": "across",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["spread"])
    got: dict[int, list[int]] = {}

    def poll() -> list[tuple[int, int]]:
        msg = consumer.poll(1.0)
        if msg is None:
            return []
        if msg.error():
            raise KafkaException(msg.error())
        return [(msg.partition(), int(msg.value()))]

    try:
        for partition, value in collect_until(poll, lambda read: len(read) >= 600, 60):
            got.setdefault(partition, []).append(value)
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert sorted(v for values in got.values() for v in values) == list(range(600))
    assert all(values == sorted(values) for values in got.values())  # order kept per partition

    assert launcher.stop(signal.SIGINT) == 0
    launcher.expect("herd cluster: stopped")
    _wait_gone(open_tmp_path / "cluster")


@pytest.mark.pg  # herd cluster up starts initdb
def test_a_data_dir_postgres_cannot_use_is_one_line_and_exit_1(tmp_path):
    """pytest's tmp_path is private to root: started as root, PostgreSQL (run as nobody) cannot reach it."""
    if os.geteuid() != 0:
        pytest.skip("only root hands PostgreSQL to another user")
    result = _up("--data-dir", str(tmp_path / "c"), "--base-port", str(free_port(1)), "--nodes", "1")
    assert result.returncode == 1
    assert result.stderr.startswith("herd: error: PostgreSQL runs as nobody (it refuses root) and cannot reach")
    assert result.stderr.count("\n") == 1
