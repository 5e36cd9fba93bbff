"""A user's test session, run by pytest in a process of its own (pytester): docs/testing.md's example file
passes with nothing but the installed plugin, and when the session is over no process of it is left."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).with_name("test_example.py")


def processes_mentioning(text: str) -> list[str]:
    """The command lines of this machine's processes that contain `text`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{entry.name}: {cmdline}")
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="lists processes through /proc")
def test_a_users_test_file_passes_and_leaves_no_process(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_app=EXAMPLE.read_text())
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=1)
    assert processes_mentioning(str(pytester.path)) == []
