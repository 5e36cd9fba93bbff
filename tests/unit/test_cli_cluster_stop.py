"""How `herd cluster up` (herd.cli.cluster) stops: a SIGTERM or Ctrl-C always ends its wait, at any moment, and each
child that does not stop is escalated to SIGKILL in bounded time, said in one line."""

from __future__ import annotations

import queue
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from herd.cli import cluster, localpg
from herd.cli.cluster import _Node, _Signals, _stop_nodes
from herd.cli.localpg import LocalPostgres

# The command's wait loop run flat out, without blocking (the moments a wait spends outside its blocking call are
# where a handler that takes a lock deadlocked), saying each signal it counted in a line.
_WAIT_LOOP = textwrap.dedent(
    """
    from herd.cli.cluster import _Signals

    signals = _Signals()
    signals.install()
    print("ready", flush=True)
    seen = 0
    while True:
        signals.wait(0.0, more_than=seen)
        if signals.received > seen:
            seen = signals.received
            print(seen, flush=True)
    """
)


def test_signals_at_any_moment_of_the_wait_loop_are_counted_and_never_hang_it() -> None:
    """The flake this catches: `herd cluster up` did not exit within 90 s of SIGTERM. Its handler called
    threading.Event.set() on the Event the main thread was waiting on; a signal landing while that thread held
    the Event's lock (inside Event.wait, between two bytecodes) blocked the handler on it forever. Against that
    handler, more than half of the single signals sent to this loop hung it."""
    proc = subprocess.Popen([sys.executable, "-c", _WAIT_LOOP], stdout=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    try:
        stdout = proc.stdout
        assert stdout is not None
        assert stdout.readline() == "ready\n"

        def read() -> None:
            for line in stdout:
                lines.put(line)

        threading.Thread(target=read, daemon=True).start()
        for sent in range(1, 201):
            time.sleep(random.uniform(0, 0.002))
            proc.send_signal(signal.SIGTERM)
            try:
                line = lines.get(timeout=10)
            except queue.Empty:
                stack = Path(f"/proc/{proc.pid}/wchan").read_text() if proc.poll() is None else ""
                raise AssertionError(
                    f"signal {sent} was not counted within 10 s: the wait loop hung on it "
                    f"({'exited with ' + str(proc.returncode) if proc.poll() is not None else 'blocked in ' + stack})"
                ) from None
            assert line == f"{sent}\n"
    finally:
        proc.kill()
        proc.wait()


def test_a_wait_ends_at_once_on_a_signal_and_otherwise_lasts_its_time() -> None:
    code = textwrap.dedent(
        """
        import os, signal, threading, time
        from herd.cli.cluster import _Signals
        signals = _Signals()
        signals.install()
        start = time.monotonic()
        assert not signals.wait(0.2)
        assert time.monotonic() - start >= 0.2
        threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGINT)).start()
        start = time.monotonic()
        assert signals.wait(30)
        assert time.monotonic() - start < 10, time.monotonic() - start
        assert signals.wait(30) and not signals.wait(0.05, more_than=1)
        print("ok", signals.received)
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (0, "ok 1\n", "")


_DEAF = textwrap.dedent(
    """
    import signal, time
    for s in {sigs}:
        signal.signal(s, signal.SIG_IGN)
    print("ready", flush=True)
    time.sleep(600)
    """
)


def _deaf(*sigs: signal.Signals) -> subprocess.Popen[bytes]:
    """A process that ignores `sigs`, once it does."""
    proc = subprocess.Popen([sys.executable, "-c", _DEAF.format(sigs=[int(s) for s in sigs])], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    return proc


def test_a_node_that_ignores_sigterm_is_killed_after_the_grace_and_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(cluster, "NODE_STOP_TIMEOUT_S", 0.5)
    deaf_proc, polite_proc = _deaf(signal.SIGTERM), subprocess.Popen(["sleep", "600"])
    deaf = _Node(0, 1, tmp_path / "node-0", tmp_path / "node-0.log", proc=deaf_proc)
    polite = _Node(1, 2, tmp_path / "node-1", tmp_path / "node-1.log", proc=polite_proc)
    start = time.monotonic()
    try:
        _stop_nodes([deaf, polite], _Signals())
    finally:
        for proc in (deaf_proc, polite_proc):
            proc.kill()
            proc.wait()
    assert time.monotonic() - start < 10
    assert deaf_proc.returncode == -signal.SIGKILL and polite_proc.returncode == -signal.SIGTERM
    out, err = capsys.readouterr()
    assert out == "herd cluster: stopping 2 nodes\n"
    assert err == (
        f"herd cluster: killing node 0 (pid {deaf_proc.pid}, no exit within 0.5 s of SIGTERM; log {deaf.log_path})\n"
    )


def test_postgres_that_ignores_its_shutdown_signals_is_killed_and_each_step_said(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(localpg, "KILL_GRACE_S", 0.3)
    postgres = LocalPostgres(tmp_path / "postgres")
    proc = postgres.proc = _deaf(signal.SIGINT, signal.SIGQUIT)
    said: list[str] = []
    start = time.monotonic()
    try:
        postgres.stop(timeout=0.3, report=said.append)
    finally:
        proc.kill()
        proc.wait()
    assert time.monotonic() - start < 10
    assert proc.returncode == -signal.SIGKILL and postgres.proc is None
    assert said == [
        f"PostgreSQL (pid {proc.pid}) did not finish its fast shutdown within 0.3 s: immediate shutdown "
        f"(log {tmp_path / 'postgres.log'})",
        f"PostgreSQL (pid {proc.pid}) did not stop within 0.3 s of SIGQUIT: killing it",
    ]
