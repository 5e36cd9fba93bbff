"""`python -m tests.simulation` (or `./dev simulate`): run seeded schedules of the coordinator simulator.

    ./dev simulate --seed 123456              replay one schedule with its step-by-step trace
    ./dev simulate --schedules 100000         run that many schedules (seeds from --first, default random)
    ./dev simulate --minutes 30 --jobs 2      soak: run schedules until the time is up, on 2 processes
    --size soak                               larger schedules (up to 10 members per group, 40 faults, 2 min)

A broken invariant prints the seed's replay command and exits 1.
"""

from __future__ import annotations

import argparse
import sys

from .runner import replay, run_many


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="./dev simulate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, help="replay one seed with its trace")
    parser.add_argument("--schedules", type=int, default=None, help="how many schedules to run")
    parser.add_argument("--minutes", type=float, default=None, help="run until this much wall time passed")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--first", type=int, default=None, help="first seed (default: a random one)")
    parser.add_argument("--size", choices=("ci", "soak"), default="ci", help="schedule sizes")
    args = parser.parse_args(argv)
    if args.seed is not None:
        return replay(args.seed, args.size)
    if args.schedules is None and args.minutes is None:
        args.schedules = 10_000
    report = run_many(args.schedules, args.minutes, args.jobs, args.first, args.size)
    print(report.summary())
    for failure in report.failures[:5]:
        print(failure)
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
