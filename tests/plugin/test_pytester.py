"""A user's test session, run by pytest in a process of its own (pytester): the example of docs/testing.md,
taken from the page as written, passes with nothing but the installed plugin; a broker crashed by one test is
back for the next; the options point the fixtures at a broker that runs already; and when the session is over
no process it started is left."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from herd.testing import Faults, HerdBroker

HERE = Path(__file__).parent
DOCS = HERE.parent.parent / "docs" / "testing.md"


def docs_example() -> str:
    """The first Python block of docs/testing.md."""
    match = re.search(r"```python\n(.*?)```", DOCS.read_text(), re.S)
    assert match, f"no example in {DOCS}"
    return match.group(1)


def without_docstring(source: str) -> str:
    module = ast.parse(source)
    if ast.get_docstring(module) is not None:
        module.body = module.body[1:]
    return ast.unparse(module)


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


def test_the_docs_example_is_test_example() -> None:
    assert without_docstring(docs_example()) == without_docstring((HERE / "test_example.py").read_text())


SESSION = """
def test_crash(herd_broker):
    herd_broker.kill()
    assert not herd_broker.running

def test_restarted_after_the_crash(herd_broker, herd_faults):
    assert herd_broker.running and herd_broker.overrides["num.partitions"] == "2"
    herd_faults.add(action="delay", api="Metadata", delay_ms=1)

def test_faults_removed(herd_broker):
    assert herd_broker.faults.list() == []
"""


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="lists processes through /proc")
def test_a_users_session_passes_and_leaves_no_process(pytester: pytest.Pytester) -> None:
    # The docs' example, then a test that crashes the broker: the next one finds it running again (with the
    # session's --herd-override), and the rule that one adds is gone for the last.
    pytester.makepyfile(test_app=docs_example(), test_session=SESSION)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "--herd-override", "num.partitions=2")
    result.assert_outcomes(passed=4)
    (log,) = pytester.path.glob("runpytest-[0-9]*/herd-broker[0-9]*/herd.log")
    assert "herd listening on" in log.read_text()
    assert processes_mentioning(str(pytester.path)) == []


ATTACHED = """
def test_attached(herd_broker, herd_faults):
    assert herd_broker.bootstrap == "{bootstrap}" and herd_broker.pid is None
    herd_faults.add(action="delay", api="Metadata", delay_ms=1, client_id="nobody")
"""


def test_options_point_the_fixtures_at_a_running_broker(
    pytester: pytest.Pytester, herd_broker: HerdBroker, herd_faults: Faults
) -> None:
    pytester.makepyfile(test_attached=ATTACHED.format(bootstrap=herd_broker.bootstrap))
    http = herd_broker.http.removeprefix("http://")
    pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-q", f"--herd-bootstrap={herd_broker.bootstrap}", f"--herd-http={http}"
    ).assert_outcomes(passed=1)
    assert herd_faults.list() == []  # the other session removed its rule when its test ended
