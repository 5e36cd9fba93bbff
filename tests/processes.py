"""Child processes a test starts itself (beside brokers, which tests/brokers.py and tests/conftest.py look
after): `reaped(popen)` kills the process if it still runs when the block ends, however it ends, and waits for
it, so that a failed assertion leaves no process behind (issue 30 item 2).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

P = TypeVar("P", bound=subprocess.Popen)  # type: ignore[type-arg]


@contextmanager
def reaped(proc: P) -> Iterator[P]:
    """`proc`, killed (SIGKILL) if it still runs when the block ends, and waited for."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
