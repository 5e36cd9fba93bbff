"""tests/processes.py: what a failed test's report shows of the processes it started (show_on_failure), and
which of them are forgotten as the next test starts (issue 30 item 2)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from processes import SHOWN, failure_sections, file_text, forget_ended, show_on_failure


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
