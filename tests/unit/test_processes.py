"""tests/processes.py: what a failed test's report shows of the processes it started (show_on_failure) and of the
brokers that ran during it (broker_sections), and which are forgotten as the next test starts (issue 30 item 2)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from processes import (
    SHOWN,
    broker_sections,
    failure_sections,
    file_text,
    first_line,
    forget_ended,
    reaped,
    show_on_failure,
)

from herd.testing.broker import HerdBroker
from herd.testing.wait import WaitTimeout


@dataclass
class FakeProcess:
    """What failure_sections reads of a subprocess.Popen."""

    pid: int
    returncode: int | None = None

    def poll(self) -> int | None:
        return self.returncode


@pytest.fixture(autouse=True)
def empty() -> Iterator[None]:
    kept = SHOWN[:]
    SHOWN.clear()
    yield
    SHOWN[:] = kept


def test_a_failed_test_shows_the_tail_of_what_its_processes_printed() -> None:
    started = time.monotonic()
    running, ended = FakeProcess(11), FakeProcess(12, returncode=3)
    show_on_failure("worker", running, lambda: "\n".join(f"line {i}" for i in range(100)))  # type: ignore[arg-type]
    show_on_failure("child", ended, lambda: "only\n\n")  # type: ignore[arg-type]
    (worker, worker_text), (child, child_text) = failure_sections(started)
    assert worker == "worker (pid 11, running, last 40 lines)"
    assert worker_text.splitlines() == [f"line {i}" for i in range(60, 100)]
    assert (child, child_text) == ("child (pid 12, exited with 3, last 1 lines)", "only")


def test_an_earlier_tests_process_shows_only_while_it_runs() -> None:
    earlier, still = FakeProcess(21, returncode=0), FakeProcess(22)
    show_on_failure("earlier", earlier, lambda: "done")  # type: ignore[arg-type]
    show_on_failure("fixture", still, lambda: "serving")  # type: ignore[arg-type]
    started = time.monotonic()
    assert [name for name, _ in failure_sections(started)] == ["fixture (pid 22, running, last 1 lines)"]
    forget_ended()
    assert [shown.name for shown in SHOWN] == ["fixture"]


def test_an_output_that_cannot_be_read_does_not_hide_the_failure(tmp_path: Path) -> None:
    def broken() -> str:
        raise OSError("gone")

    show_on_failure("broken", FakeProcess(31), broken)  # type: ignore[arg-type]
    show_on_failure("log", FakeProcess(32), file_text(tmp_path / "missing.log"))  # type: ignore[arg-type]
    (_, broken_text), (_, log_text) = failure_sections(0.0)
    assert broken_text == "(reading the output failed: OSError('gone'))"
    assert log_text == f"({tmp_path / 'missing.log'} does not exist)"


def test_a_failed_test_shows_the_log_of_each_broker_that_ran_during_it(tmp_path: Path) -> None:
    """A broker the test started (even one that exited since) and one still running from before it (a module's
    fixture) show their log's tail; one that ended before the test began, and one never started, do not."""
    brokers = {name: HerdBroker(tmp_path / name, faults=False) for name in ("fixture", "earlier", "mine", "idle")}
    for name, broker in brokers.items():
        broker.log_path.parent.mkdir(parents=True, exist_ok=True)
        broker.log_path.write_text("\n".join(f"{name} {i}" for i in range(50)) + "\n")
    with reaped(subprocess.Popen(["sleep", "30"])) as serving:
        brokers["fixture"].proc, brokers["fixture"].spawned_at = serving, time.monotonic()
        brokers["earlier"].proc, brokers["earlier"].spawned_at = finished(5), time.monotonic()
        started = time.monotonic()
        brokers["mine"].proc, brokers["mine"].spawned_at = finished(0), time.monotonic()
        sections = broker_sections(brokers.values(), started)
    titles = [title for title, _ in sections]
    assert titles == [
        f"herd broker log {brokers['fixture'].log_path} (pid {serving.pid}, running, last 40 lines)",
        f"herd broker log {brokers['mine'].log_path} (pid {brokers['mine'].proc.pid}, exited with 0, last 40 lines)",
    ]
    assert sections[1][1].splitlines() == [f"mine {i}" for i in range(10, 50)]


def finished(code: int) -> subprocess.Popen[bytes]:
    """A real child process that has exited with `code`."""
    proc = subprocess.Popen(["sh", "-c", f"exit {code}"])
    proc.wait()
    return proc


def _child(script: str, text: bool = True) -> subprocess.Popen:  # type: ignore[type-arg]
    return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=text)


def test_first_line_returns_the_line_a_child_printed_stripped() -> None:
    with reaped(_child("import time; print(' 4242 ', flush=True); time.sleep(30)")) as text:
        assert first_line(text, 30, "the pid") == "4242"
    with reaped(_child("print('ready', flush=True)", text=False)) as raw:
        assert first_line(raw, 30, "ready") == b"ready"


def test_first_line_names_what_it_waited_for_when_a_child_stays_silent() -> None:
    with reaped(_child("import time; time.sleep(30)")) as silent:
        with pytest.raises(WaitTimeout, match=r"timed out after 0.3 s waiting for the node's ready .*it still runs"):
            first_line(silent, 0.3, "the node's ready")


def test_first_line_says_how_a_child_that_printed_nothing_exited() -> None:
    with reaped(_child("import sys; sys.exit(7)")) as failed:
        with pytest.raises(WaitTimeout, match=r"closed its output without writing a line; it exited with 7"):
            first_line(failed, 30, "the pid")
