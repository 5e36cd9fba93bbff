"""Child processes a test starts itself (beside brokers, which tests/brokers.py and tests/conftest.py look
after), issue 30 item 2:

- `first_line(popen, timeout, what)` reads the line a child prints to say it is ready (its pid, "ready"), with a
  bound and a message that says what it waited for and how the child is;
- `reaped(popen)` kills the process if it still runs when the block ends, however it ends, and waits for it, so
  that a failed assertion leaves no process behind;
- `show_on_failure(name, popen, output)` puts the last lines of what the process printed (`output()`: its log
  file, the lines a reader thread kept) in the report of a test that fails while it runs, or after it was
  started during that test; tests/conftest.py adds them, and the log of each broker that ran during the test
  (`broker_sections`, over herd.testing.broker's SPAWNED).
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from herd.testing.broker import HerdBroker
from herd.testing.wait import WaitTimeout

P = TypeVar("P", bound=subprocess.Popen)  # type: ignore[type-arg]

TAIL_LINES = 40


@contextmanager
def reaped(proc: P) -> Iterator[P]:
    """`proc`, killed (SIGKILL) if it still runs when the block ends, and waited for."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def first_line(proc: subprocess.Popen, timeout: float, what: str) -> Any:  # type: ignore[type-arg]
    """The first line `proc` writes to its stdout pipe, stripped (str or bytes, as the pipe gives), read within
    `timeout` seconds; WaitTimeout naming `what` if none came by then or the process exited without one. The
    read runs in a daemon thread: a child that hangs leaves it blocked until the caller kills the child."""
    assert proc.stdout is not None, "first_line needs stdout=subprocess.PIPE"
    lines: list[Any] = []
    reader = threading.Thread(target=lambda: lines.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout)
    if lines and lines[0]:
        return lines[0].strip()
    try:  # a process that closed its stdout has most likely exited, or is about to
        proc.wait(0 if not lines else 1)
    except subprocess.TimeoutExpired:
        pass
    state = "it still runs" if proc.poll() is None else f"it exited with {proc.returncode}"
    if lines:
        raise WaitTimeout(f"{what}: the process (pid {proc.pid}) closed its output without writing a line; {state}")
    raise WaitTimeout(f"timed out after {timeout:g} s waiting for {what} (pid {proc.pid}); {state}")


@dataclass(frozen=True)
class Shown:
    name: str
    proc: Any  # a subprocess.Popen: poll(), pid, returncode
    output: Callable[[], str]
    since: float  # time.monotonic() when it was registered


SHOWN: list[Shown] = []


def show_on_failure(name: str, proc: subprocess.Popen, output: Callable[[], str]) -> None:  # type: ignore[type-arg]
    """Show the last lines of `output()` in the report of a test that fails while `proc` runs or after `proc`
    was started during it."""
    SHOWN.append(Shown(name, proc, output, time.monotonic()))


def file_text(path: Path) -> Callable[[], str]:
    """`output` for a process that writes to the file `path`."""
    return lambda: path.read_text(errors="replace") if path.exists() else f"({path} does not exist)"


def _section(name: str, proc: Any, text: str) -> tuple[str, str]:
    """A report section: the last TAIL_LINES lines of `text` that are not blank, titled with `name` and how `proc`
    (its pid, poll() and returncode) is."""
    lines = [line for line in text.splitlines() if line.strip()][-TAIL_LINES:]
    state = "running" if proc.poll() is None else f"exited with {proc.returncode}"
    return f"{name} (pid {proc.pid}, {state}, last {len(lines)} lines)", "\n".join(lines)


def failure_sections(test_started: float) -> list[tuple[str, str]]:
    """The report sections of a failed test that started at `test_started` (time.monotonic()): the tail of the
    output of every process it started or that ran while it failed."""
    sections = []
    for shown in SHOWN:
        if shown.proc.poll() is not None and shown.since < test_started:
            continue  # an earlier test's, ended before this one failed
        try:
            text = shown.output()
        except Exception as e:  # the output of a failure must not hide it
            text = f"(reading the output failed: {e!r})"
        sections.append(_section(shown.name, shown.proc, text))
    return sections


def broker_sections(brokers: Iterable[HerdBroker], test_started: float) -> list[tuple[str, str]]:
    """The report sections of a failed test that started at `test_started`: the tail of the log of every broker
    process that ran during it, started by it or running while it failed (a module's fixture)."""
    return [
        _section(f"herd broker log {broker.log_path}", broker.proc, broker.log())
        for broker in brokers
        if broker.proc is not None and (broker.running or (broker.spawned_at or 0.0) >= test_started)
    ]


def forget_ended() -> None:
    """Drop the processes that have ended (called as each test starts: their tests are over)."""
    SHOWN[:] = [shown for shown in SHOWN if shown.proc.poll() is None]
