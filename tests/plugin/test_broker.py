"""HerdBroker on its own: a broker that cannot start says why, with its log's last lines; one whose test
process is killed dies with it (Linux's parent-death signal), so that even an interrupted session leaves no
broker behind."""

from __future__ import annotations

import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from processes import first_line, reaped

from herd.testing import HerdBroker, HerdStartError
from herd.testing.wait import wait_until


def test_a_broker_that_cannot_start_says_why(tmp_path: Path) -> None:
    broker = HerdBroker(tmp_path, {"no.such.setting": "1"}, faults=False)
    with pytest.raises(HerdStartError, match=r"exited with code 2 before listening(.|\n)*no.such.setting"):
        broker.start()


def test_an_http_listener_set_by_override_has_its_url_without_faults(tmp_path: Path) -> None:
    with HerdBroker(tmp_path, {"herd.http.listener": "127.0.0.1:0"}, faults=False) as broker:
        assert broker.http == f"http://127.0.0.1:{broker.http_port}" and broker.http_port
        with urllib.request.urlopen(f"{broker.http}/metrics", timeout=10) as answer:
            assert answer.status == 200
    with pytest.raises(RuntimeError, match="no HTTP listener"):
        _ = HerdBroker(tmp_path, faults=False).http


LAUNCHER = """
import sys, time
from herd.testing import HerdBroker
broker = HerdBroker(sys.argv[1], faults=False).start()
print(broker.pid, flush=True)
time.sleep(120)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_the_broker_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    with reaped(subprocess.Popen([sys.executable, "-c", LAUNCHER, str(tmp_path)], stdout=subprocess.PIPE)) as launcher:
        broker_pid = int(first_line(launcher, 60, "the launcher's herd serve pid"))
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
    wait_until(
        lambda: not _running(broker_pid),
        10,
        f"herd serve {broker_pid} to exit with the process that started it",
        interval=0.02,
    )


def _running(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for its reaper does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"
