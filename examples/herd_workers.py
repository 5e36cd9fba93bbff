"""Shared plumbing of the membership examples (leader_election.py, work_distribution.py).

`run_worker(make_member)` runs one worker process: it builds a GroupMember, keeps it in the group until
SIGTERM or SIGINT, then closes it cleanly. `Workers` is the launcher side: it starts N copies of the calling
script in worker mode, echoes their output prefixed by name, and lets the demo wait for a line from any
worker that matches a condition, or kill one of them with SIGKILL (a crash: no LeaveGroup, the coordinator
notices only when the session times out).
"""

from __future__ import annotations

import argparse
import asyncio
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def common_arguments(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT")
    parser.add_argument("--group", default=None, help="group id (default: one per example)")
    parser.add_argument("--workers", type=int, default=3, help="how many worker processes to start")
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--timeout", type=float, default=60.0, help="give up after this many seconds")
    parser.add_argument("--worker", metavar="NAME", help="run one worker with this name (used by the launcher)")
    return parser


def say(text: str) -> None:
    print(text, flush=True)


def run_worker(make_member: Callable[[], Any]) -> None:
    """Run one GroupMember until SIGTERM/SIGINT, then close it (revoke, leave)."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        member = make_member()
        async with member:
            waiter = asyncio.create_task(stop.wait())
            done = asyncio.create_task(member.wait_done())
            await asyncio.wait([waiter, done], return_when=asyncio.FIRST_COMPLETED)
            if member.error is not None:
                say(f"{member.client.client_id}: stopped by {member.error}")
        waiter.cancel()
        done.cancel()

    asyncio.run(main())


class Workers:
    """N worker processes of `script`, their output echoed and queued as (name, line)."""

    def __init__(self, script: str, args: argparse.Namespace, group: str) -> None:
        self.lines: queue.Queue[tuple[str, str]] = queue.Queue()
        self.procs: dict[str, subprocess.Popen[str]] = {}
        self.deadline = time.monotonic() + args.timeout
        for i in range(1, args.workers + 1):
            name = f"worker-{i}"
            cmd = [
                sys.executable,
                script,
                "--worker",
                name,
                "--group",
                group,
                "--bootstrap-server",
                args.bootstrap_server,
                "--session-timeout-ms",
                str(args.session_timeout_ms),
            ]
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
            self.procs[name] = proc
            threading.Thread(target=self._pump, args=(name, proc), daemon=True).start()

    def _pump(self, name: str, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip()
            say(f"  [{name}] {line}")
            self.lines.put((name, line))

    def wait_for(self, condition: Callable[[str, str], Any], what: str) -> Any:
        """Read lines until `condition(name, line)` returns something truthy; exit 1 at the deadline."""
        while True:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                say(f"== gave up waiting for {what} ==")
                self.stop()
                sys.exit(1)
            try:
                name, line = self.lines.get(timeout=remaining)
            except queue.Empty:
                continue
            result = condition(name, line)
            if result:
                return result

    def kill(self, name: str) -> None:
        self.procs[name].send_signal(signal.SIGKILL)
        self.procs[name].wait()

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
