"""`herd serve` in a child process on a free port, for the benchmarks (shared by bench_groups, bench_kip469 and
bench_offsets)."""

from __future__ import annotations

import re
import subprocess
import sys
import threading

_LISTENING = re.compile(rb"herd listening on \S+:(\d+)")
_LISTENER = re.compile(rb"herd listener (\w+) \(\w+\) on \S+:(\d+)")
_HTTP = re.compile(rb"herd http listening on \S+:(\d+)")


class BenchBroker:
    def __init__(self, data_dir: str, **overrides: str) -> None:
        args = [
            sys.executable,
            "-m",
            "herd.cli",
            "serve",
            "--log-level",
            "INFO",
            "--override",
            "listeners=PLAINTEXT://127.0.0.1:0",
            "--override",
            f"log.dirs={data_dir}",
        ]
        for key, value in overrides.items():
            args += ["--override", f"{key}={value}"]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert self.proc.stdout is not None
        self.ports: dict[str, int] = {}  # every listener's port, by name
        self.http_port = 0  # herd.http.listener's port, when it has one
        for line in self.proc.stdout:
            if http := _HTTP.search(line):
                self.http_port = int(http.group(1))
            if named := _LISTENER.search(line):
                self.ports[named.group(1).decode()] = int(named.group(2))
            match = _LISTENING.search(line)
            if match:
                self.port = int(match.group(1))
                break
        else:
            raise RuntimeError("the broker did not start")
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()  # keep its log from blocking it
        self.bootstrap = f"127.0.0.1:{self.port}"

    def memory_mib(self) -> tuple[float, float]:
        """(VmRSS, VmHWM) of the broker process in MiB."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            status = f.read()
        return tuple(
            int(re.search(rf"{k}:\s+(\d+)", status).group(1)) / 1024  # type: ignore[union-attr]
            for k in ("VmRSS", "VmHWM")
        )

    def stop(self, timeout: float = 60) -> None:
        self.proc.terminate()
        self.proc.wait(timeout)
