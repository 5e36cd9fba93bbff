"""tests/seeds.py, run as a user of herd's suite meets it: a pytest session of its own with the plugin, whose header
names the seed, whose failed test that used `rng` reports it, and whose values come back with the same seed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent

SESSION = """
def test_draws(rng):
    assert rng.random() < 0

def test_without_rng():
    assert False
"""


def session(directory: Path, seed: str) -> str:
    """The output of `pytest -p seeds` on SESSION in `directory`, with HERD_TEST_SEED=`seed`."""
    (directory / "test_session.py").write_text(SESSION)
    env = {
        **os.environ,
        "HERD_TEST_SEED": seed,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "seeds", "-p", "no:cacheprovider", "-p", "no:xdist", "test_session.py"],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stdout + result.stderr  # both tests fail
    return result.stdout


def drawn(output: str) -> str:
    """The value test_draws drew, from its assertion's message."""
    match = re.search(r"assert (0\.\d+) < 0", output)
    assert match, output
    return match.group(1)


def test_the_seed_is_in_the_header_and_the_report_of_a_failed_test_that_drew_from_it(tmp_path: Path) -> None:
    output = session(tmp_path, "4242")
    assert "herd test seed: HERD_TEST_SEED=4242 (set it to replay the random values of a run)" in output
    sections = re.findall(r"-+ herd test seed -+\n(.*)", output)
    assert sections == ["HERD_TEST_SEED=4242 (rng: random.Random of it and the test id)"]  # test_draws's only


def test_the_same_seed_draws_the_same_values_and_another_seed_others(tmp_path: Path) -> None:
    first, again, other = (session(tmp_path, seed) for seed in ("4242", "4242", "4243"))
    assert drawn(first) == drawn(again) != drawn(other)
