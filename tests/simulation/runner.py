"""Running many schedules (optionally on several processes) and replaying one with its trace."""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import random
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field

from .sim import Simulation

# Schedules per task of the pool: small enough that the last tasks end together (a worker left alone with a
# task at the end wastes the other core for its length: ~0.2 s at 50), large enough that handing them out costs
# nothing.
CHUNK = 50


def replay_command(seed: int, size: str = "ci") -> str:
    return f"./dev simulate --seed {seed}" + (" --size soak" if size != "ci" else "")


@dataclass
class Report:
    schedules: int = 0
    steps: int = 0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)

    def summary(self) -> str:
        rate = self.schedules / self.seconds if self.seconds else 0.0
        return (
            f"{self.schedules} schedules, {self.steps} steps, {len(self.failures)} failures in "
            f"{self.seconds:.1f} s ({rate:.0f} schedules/s)"
        )


def run_one(seed: int, size: str) -> tuple[int, str | None]:
    """(steps, None) or (steps, the failure with its replay command)."""
    sim = Simulation(seed, size=size)
    try:
        sim.run()
    except Exception as error:  # an invariant, or the core or a client machine raising
        kind = "" if isinstance(error, AssertionError) else f"{type(error).__name__}: "
        return sim.steps, f"{kind}{error}\n  replay: {replay_command(seed, size)}"
    return sim.steps, None


def run_chunk(args: tuple[int, int, str]) -> tuple[int, int, list[str]]:
    first, count, size = args
    steps, failures = 0, []
    with _fewer_collections():
        for seed in range(first, first + count):
            n, failure = run_one(seed, size)
            steps += n
            if failure is not None:
                failures.append(failure)
    return count, steps, failures


@contextlib.contextmanager
def _fewer_collections() -> Iterator[None]:
    """A schedule allocates objects by the hundred thousand, most of them short-lived, and Python's cyclic
    collector, at its default thresholds, ran a young collection every 700 of them and full ones over every
    module herd imports: about 4.5% of a schedule's instructions (callgrind, 100 schedules). The modules'
    objects are frozen out of the collections and young collections run every 20,000 allocations; cycles are
    still collected (a schedule's objects form cycles, so memory stays bounded)."""
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(20_000, 20, 1_000)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def run_many(schedules: int | None, minutes: float | None, jobs: int, first: int | None, size: str = "ci") -> Report:
    """Run `schedules` schedules (or until `minutes` passed) from seed `first` on `jobs` processes."""
    start = time.monotonic()
    first = random.randrange(10**9) if first is None else first
    stop_at = start + minutes * 60 if minutes is not None else None
    chunks = _chunks(first, schedules, size)
    report = Report()
    if jobs <= 1:
        results = map(run_chunk, chunks)
        _collect(report, results, stop_at)
    else:
        # spawn, not fork: the test process runs librdkafka's and psycopg's threads by the time the suite gets
        # here, and a forked child of a threaded process can crash (it did, with a segmentation fault).
        with multiprocessing.get_context("spawn").Pool(jobs) as pool:
            _collect(report, pool.imap(run_chunk, chunks), stop_at)
            pool.terminate()
    report.seconds = time.monotonic() - start
    return report


def _chunks(first: int, schedules: int | None, size: str):  # noqa: ANN202 (a generator of chunk args)
    seed = first
    while schedules is None or seed < first + schedules:
        count = CHUNK if schedules is None else min(CHUNK, first + schedules - seed)
        yield seed, count, size
        seed += count


def _collect(report: Report, results, stop_at: float | None) -> None:  # noqa: ANN001
    for count, steps, failures in results:
        report.schedules += count
        report.steps += steps
        report.failures += failures
        if stop_at is not None and time.monotonic() >= stop_at:
            break


def replay(seed: int, size: str = "ci") -> int:
    """Run one seed with its trace printed; 1 if an invariant broke."""
    sim = Simulation(seed, size=size, tracing=True)
    try:
        sim.run()
    except Exception:
        print("\n".join(sim.lines))
        traceback.print_exc()
        print(f"replay: {replay_command(seed, size)}")
        return 1
    print("\n".join(sim.lines))
    print(
        f"seed {seed}: {sim.steps} steps, {sim.loop.now()} ms simulated, {sim.checker.rebalances} rebalances, "
        f"causes {sim.checker.causes}, trace hash {sim.hash:08x}: every invariant held"
    )
    return 0
