"""Leader election and work distribution among processes (examples/), against a real broker.

The leader-election workers are started one by one as separate processes; when the leader is killed
with SIGKILL (no LeaveGroup), another worker leads within the session timeout plus a rebalance. Both
example launchers also run end to end, as a user runs them: one command each.
"""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

import pytest
from brokers import BrokerProcess
from processes import show_on_failure

from herd.testing.wait import wait_until

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SESSION_MS = 1500
SLACK_S = 3.0  # the survivors learn of the rebalance from a heartbeat, then rejoin and sync
OVERRIDES = {
    "group.min.session.timeout.ms": "500",
    "offsets.topic.num.partitions": "5",
    "group.initial.rebalance.delay.ms": "0",
}


@pytest.fixture(scope="module")
def election_broker(tmp_path_factory) -> Iterable[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("client-election") / "data", OVERRIDES).start()
    yield broker
    broker.stop()


class Worker:
    """One leader_election.py worker process; its lines are queued with the time they arrived."""

    def __init__(self, name: str, bootstrap: str, group: str, lines: queue.Queue[tuple[float, str, str]]) -> None:
        self.name = name
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(EXAMPLES / "leader_election.py"),
                "--worker",
                name,
                "--group",
                group,
                "--bootstrap-server",
                bootstrap,
                "--session-timeout-ms",
                str(SESSION_MS),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        self.output: list[str] = []  # every line it printed, for the report of a failed test
        show_on_failure(f"leader_election.py worker {name}", self.proc, lambda: "\n".join(self.output))
        threading.Thread(target=self._pump, args=(lines,), daemon=True).start()

    def _pump(self, lines: queue.Queue[tuple[float, str, str]]) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line.rstrip())
            lines.put((time.monotonic(), self.name, line.rstrip()))


def next_leader(
    lines: queue.Queue[tuple[float, str, str]], members: int, exclude: str | None = None, timeout: float = 30.0
) -> tuple[float, str]:
    """The first LEADER line naming `members` members, from a worker other than `exclude`."""

    def leader() -> tuple[float, str] | None:
        try:
            at, name, line = lines.get(timeout=0.1)  # the time is when the line arrived, not when it is taken
        except queue.Empty:
            return None
        return (at, name) if name != exclude and ": LEADER " in line and line.count(",") == members - 1 else None

    what = f"a LEADER line naming {members} members" + (f" from a worker other than {exclude}" if exclude else "")
    return wait_until(leader, timeout, what, interval=0)


def test_killing_the_leader_elects_another_within_the_session_timeout(election_broker):
    lines: queue.Queue[tuple[float, str, str]] = queue.Queue()
    group = f"election-{uuid.uuid4().hex[:8]}"
    workers = {}
    try:
        workers["w0"] = Worker("w0", election_broker.bootstrap, group, lines)
        assert next_leader(lines, 1)[1] == "w0"
        for name in ("w1", "w2"):
            workers[name] = Worker(name, election_broker.bootstrap, group, lines)
        _, leader = next_leader(lines, 3)
        assert leader == "w0"  # leadership is sticky: newcomers do not take it over
        workers[leader].proc.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        at, successor = next_leader(lines, 2, exclude=leader)
        assert successor != leader
        assert at - killed_at < SESSION_MS / 1000 + SLACK_S, f"new leader after {at - killed_at:.1f}s"
        assert at - killed_at >= SESSION_MS / 1000 * 0.8  # it took the coordinator's session expiry
    finally:
        for w in workers.values():
            if w.proc.poll() is None:
                w.proc.send_signal(signal.SIGTERM)
        deaf = []
        for w in workers.values():
            try:
                w.proc.wait(15)
            except subprocess.TimeoutExpired:  # killed, so that none is left behind, and the test fails as before
                deaf.append(w.name)
                w.proc.kill()
                w.proc.wait()
        assert not deaf, f"still running 15 s after SIGTERM: {deaf}"


@pytest.mark.parametrize(
    "script,expected",
    [
        ("leader_election.py", "leads now"),
        ("work_distribution.py", "took over"),
    ],
)
def test_example_runs_with_one_command(election_broker, script, expected):
    result = subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / script),
            "--bootstrap-server",
            election_broker.bootstrap,
            "--session-timeout-ms",
            str(SESSION_MS),
            "--group",
            f"demo-{uuid.uuid4().hex[:8]}",
            "--timeout",
            "40",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert expected in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
