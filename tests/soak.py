"""Soak tests: run the suite, or a part of it, N times from the current tree and report every test that failed at
least once. `./dev soak-tests N [--load K] [--report FILE] [pytest args]`:

    ./dev soak-tests 10 tests/integration/test_failover.py     # one module, ten times
    ./dev soak-tests 3 --load 2 -m "not spark"                 # with two busy processes competing for the CPU
    ./dev soak-tests 10 --fresh --load 1 --loaded 5            # ten fresh clones, five of them with a CPU hog

Each run is `./dev test` with the given pytest args and a JUnit XML report of its own; `--load K` keeps K processes
spinning on the CPU (a loaded machine is where timing assumptions break), during every run or, with `--loaded M`,
during M of them (every other run from the second, then the rest). `--fresh` runs each one as a new user would:
a `git clone` of the commit the tree was at when the soak started (so all runs test one commit), then
`CI=true ./dev test` in it (its time includes setting up the clone's virtual environment; pytest's own time is
noted beside it). The table lists each
test that failed in some run: in how many of the runs that ran it, its mean and longest duration, and the first
line of each distinct failure with how often it occurred; then how each run ended (its exit status and time, or
that it left no report because pytest itself failed). `--report FILE` also writes it to FILE, after each run as far
as the soak got, so a soak stopped early still leaves its table, and keeps each run's JUnit XML beside it
(FILE-run-N.xml: every test's duration). The exit status is 1 when anything failed, 0
otherwise.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from herd.cli.localpg import die_with_parent

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Outcome:
    """One test in one run: its id, whether it failed (a failure or an error, at any phase), the first line of why,
    and its duration."""

    test: str
    failed: bool
    first_line: str
    seconds: float


@dataclass
class Row:
    """One test over every run that ran it."""

    test: str
    runs: int = 0
    failures: int = 0
    seconds: list[float] = field(default_factory=list)
    reasons: Counter[str] = field(default_factory=Counter)


def node_id(classname: str, name: str) -> str:
    """A node id as pytest prints it, from JUnit's classname (`tests.unit.test_x` or `tests.unit.test_x.TestY`)
    and name; a classname that is not a module path is kept as it is."""
    if not classname:
        return name
    parts = classname.split(".")
    # the module is the last part that starts with test_ (a class may follow it)
    modules = [i for i, part in enumerate(parts) if part.startswith("test_") or part == "conftest"]
    if not modules:
        return f"{classname}::{name}"
    cut = modules[-1] + 1
    return "::".join(["/".join(parts[:cut]) + ".py", *parts[cut:], name])


def first_line(text: str | None) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return "(no message)"


def read_junit(xml: str) -> list[Outcome]:
    """The outcomes of one run's JUnit XML report (skipped tests are left out)."""
    outcomes = []
    for case in ElementTree.fromstring(xml).iter("testcase"):
        problems = [child for child in case if child.tag in ("failure", "error")]
        if case.find("skipped") is not None and not problems:
            continue
        reason = ""
        if problems:
            problem = problems[0]
            reason = first_line(problem.get("message") or problem.text)
        outcomes.append(
            Outcome(
                test=node_id(case.get("classname", ""), case.get("name", "")),
                failed=bool(problems),
                first_line=reason,
                seconds=float(case.get("time") or 0.0),
            )
        )
    return outcomes


def rows(runs: Iterable[Iterable[Outcome]]) -> list[Row]:
    """The tests that failed in at least one run, the most often failing first (then by id)."""
    table: dict[str, Row] = {}
    for run in runs:
        seen: dict[str, Outcome] = {}
        for outcome in run:  # a test reported twice in one run (failed, then errored at teardown) counts once
            earlier = seen.get(outcome.test)
            if earlier is None or (outcome.failed and not earlier.failed):
                seen[outcome.test] = outcome
        for outcome in seen.values():
            row = table.setdefault(outcome.test, Row(outcome.test))
            row.runs += 1
            row.seconds.append(outcome.seconds)
            if outcome.failed:
                row.failures += 1
                row.reasons[outcome.first_line] += 1
    failing = [row for row in table.values() if row.failures]
    return sorted(failing, key=lambda row: (-row.failures, row.test))


def render(table: Sequence[Row], runs: int, notes: Sequence[str] = ()) -> str:
    """The report: a Markdown table with a row for each test that failed, the first line of each distinct failure
    and its count in the last column; then `notes`, a line each (how each run went)."""
    lines = [f"## Soak: {runs} run(s); {len(table)} test(s) failed at least once"]
    if table:
        lines += [
            "",
            "| test | failed | mean s | max s | first line of each distinct failure (times) |",
            "|---|---|---|---|---|",
        ]
        for row in table:
            mean = sum(row.seconds) / len(row.seconds)
            reasons = "<br>".join(
                f"{reason.replace('|', '&#124;')} ({count})" for reason, count in row.reasons.most_common()
            )
            lines.append(
                f"| `{row.test}` | {row.failures}/{row.runs} | {mean:.2f} | {max(row.seconds):.2f} | {reasons} |"
            )
    if notes:
        lines += ["", *(f"- {note}" for note in notes)]
    return "\n".join(lines) + "\n"


def _hogs(count: int) -> list[subprocess.Popen[bytes]]:
    """`count` processes that keep a CPU busy until killed, or until the soak dies (a soak stopped with a signal
    must not leave them spinning under the next one)."""
    return [
        subprocess.Popen(
            [sys.executable, "-c", "while True: pass"],
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent(signal.SIGKILL),
        )
        for _ in range(count)
    ]


USAGE = "usage: ./dev soak-tests N [--load K] [--loaded M] [--fresh] [--report FILE] [pytest args]"


@dataclass(frozen=True)
class Options:
    """The soak's own options: `runs` runs, `load` busy processes during `loaded` of them, each run in a fresh
    clone or not, the report also written to `report`; `pytest_args` go to every run."""

    runs: int
    load: int = 0
    loaded: int = 0
    fresh: bool = False
    report: Path | None = None
    pytest_args: tuple[str, ...] = ()

    def under_load(self, run: int) -> bool:
        """Whether run `run` (from 1) has the busy processes beside it: the even runs first, then the odd ones from
        the last, until `loaded` runs have them (five of ten: runs 2, 4, 6, 8, 10)."""
        if not self.load:
            return False
        evens = list(range(2, self.runs + 1, 2))
        odds = list(range(self.runs - (self.runs % 2 == 0), 0, -2))
        return run in (evens + odds)[: self.loaded]


def parse(argv: list[str]) -> Options:
    """The options; soak's own come right after N, everything from the first other argument on is pytest's."""
    if not argv or not argv[0].isdigit() or int(argv[0]) < 1:
        raise SystemExit(USAGE)
    runs, rest = int(argv[0]), argv[1:]
    load, loaded, fresh, report = 0, None, False, None
    while rest[:1] in (["--load"], ["--loaded"], ["--report"], ["--fresh"]):
        if rest[0] == "--fresh":
            fresh, rest = True, rest[1:]
            continue
        if len(rest) < 2:
            raise SystemExit(USAGE)
        if rest[0] in ("--load", "--loaded"):
            if not rest[1].isdigit():
                raise SystemExit(USAGE)
            if rest[0] == "--load":
                load = int(rest[1])
            else:
                loaded = int(rest[1])
        else:
            report = Path(rest[1])
        rest = rest[2:]
    if loaded is not None and (not load or loaded > runs):
        raise SystemExit(f"--loaded {loaded}: needs --load K, and at most N ({runs}) runs\n{USAGE}")
    if loaded is None:
        loaded = runs if load else 0
    return Options(runs, load, loaded, fresh, report, tuple(rest))


def junit_copy(report: Path, run: int) -> Path:
    """Where run `run`'s JUnit XML is kept, beside the report."""
    return report.with_name(f"{report.stem}-run-{run}.xml")


def pytest_seconds(xml: str) -> float | None:
    """pytest's own time for a run, from its JUnit XML report."""
    suite = ElementTree.fromstring(xml).find("testsuite")
    return None if suite is None or suite.get("time") is None else float(suite.get("time") or 0.0)


def _head() -> str:
    """The commit the tree is at: every fresh clone of a soak is of this one, even if the tree moves meanwhile."""
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


def _clone(commit: str, into: Path) -> Path:
    """A fresh clone of `commit` of this tree (what a new user gets), checked out in `into`."""
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(into)], check=True)
    subprocess.run(["git", "checkout", "--quiet", commit], cwd=into, check=True)
    return into


def main(argv: list[str]) -> int:
    options = parse(argv)
    outcomes: list[list[Outcome]] = []
    notes: list[str] = []
    crashed = False
    commit = _head() if options.fresh else ""
    if commit:
        notes.append(f"every run a fresh clone of {commit[:12]}")
    with tempfile.TemporaryDirectory(prefix="herd-soak-") as scratch:
        # PostgreSQL runs as nobody when the tests run as root (herd.cli.localpg): it must reach the binaries in
        # a clone's virtual environment, under this directory (mkdtemp makes it 0700)
        os.chmod(scratch, 0o755)
        for run in range(1, options.runs + 1):
            xml = Path(scratch) / f"run-{run}.xml"
            loaded = options.under_load(run)
            started = time.monotonic()
            tree = _clone(commit, Path(scratch) / f"clone-{run}") if options.fresh else ROOT
            how = "a fresh clone, " if options.fresh else ""
            how += f"{options.load} busy process(es) beside it" if loaded else "no load"
            args = " ".join(options.pytest_args)
            print(f"soak: run {run}/{options.runs} ({how}): ./dev test {args}", file=sys.stderr, flush=True)
            hogs = _hogs(options.load if loaded else 0)
            try:
                env = {**os.environ, "CI": "true"} if options.fresh else None
                command = [str(tree / "dev"), "test", f"--junitxml={xml}", *options.pytest_args]
                code = subprocess.run(command, cwd=tree, env=env).returncode
            finally:
                for hog in hogs:
                    hog.kill()
                    hog.wait()
            took = time.monotonic() - started
            if options.fresh:
                shutil.rmtree(tree, ignore_errors=True)
            print(f"soak: run {run} exited {code} after {took:.0f} s", file=sys.stderr, flush=True)
            if xml.exists():
                text = xml.read_text()
                outcomes.append(read_junit(text))
                inside = pytest_seconds(text)
                pytest_took = "" if inside is None else f" (pytest {inside:.0f} s)"
                notes.append(f"run {run} ({how}): exit {code}, {took:.0f} s{pytest_took}")
            else:
                crashed = True
                notes.append(f"run {run} ({how}): exit {code}, {took:.0f} s, no report (pytest itself failed)")
            if options.report is not None:  # so far, in case the soak is stopped before its end
                options.report.write_text(render(rows(outcomes), run, notes))
                if xml.exists():  # every test's duration, for finding where the suite's time goes
                    shutil.copy(xml, junit_copy(options.report, run))

    table = rows(outcomes)
    report = render(table, options.runs, notes)
    print(report)
    if options.report is not None:
        options.report.write_text(report)
    return 1 if table or crashed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
