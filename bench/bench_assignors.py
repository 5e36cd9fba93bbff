"""Median time of each assignor for M members over 10,000 partitions.

Run: .venv/bin/python bench/bench_assignors.py [--runs N] [--assignor NAME ...] [--layout NAME ...]
Rows: members (10/100/1000) x layout: `1x10000` and `4x2500` (identical subscriptions: 1 topic of 10,000
partitions, 4 topics of 2,500), and `20x500/5` (differing subscriptions, the sticky assignors' general
path: 20 topics of 500 partitions, member i subscribes to topics i..i+4 mod 20). Columns: the fresh
assignment, and for sticky assignors a rerun where every member reports its previous partitions.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from herd.client.assignors import ASSIGNORS, Cluster
from herd.client.consumer_protocol import Subscription

PARTITIONS = 10_000


def median_seconds(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


LAYOUTS = {"1x10000": (1, 1), "4x2500": (4, 4), "20x500/5": (20, 5)}  # topics, topics per member


def case(members: int, layout: str) -> tuple[Cluster, dict[str, Subscription]]:
    topics, width = LAYOUTS[layout]
    names = [f"topic-{i}" for i in range(topics)]
    cluster = Cluster({t: PARTITIONS // topics for t in names})
    return cluster, {
        f"consumer-{i:04d}-{'x' * 8}": Subscription(tuple(names[(i + k) % topics] for k in range(width)))
        for i in range(members)
    }


def rerun_input(cluster: Cluster, subs: dict[str, Subscription], name: str) -> dict[str, Subscription]:
    result = ASSIGNORS[name]().assign(cluster, subs)
    return {m: Subscription(s.topics, None, result[m].partitions, 1) for m, s in subs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--assignor", action="append", choices=sorted(ASSIGNORS))
    parser.add_argument("--layout", action="append", choices=list(LAYOUTS))
    args = parser.parse_args()
    runs = args.runs
    print(f"{'assignor':<20}{'members':>8}{'layout':>10}{'fresh ms':>10}{'rerun ms':>10}")
    for name in args.assignor or ASSIGNORS:
        for members in (10, 100, 1000):
            for layout in args.layout or LAYOUTS:
                cluster, subs = case(members, layout)
                fresh = median_seconds(lambda: ASSIGNORS[name]().assign(cluster, subs), runs)
                rerun = "-"
                if "sticky" in name:
                    owned = rerun_input(cluster, subs, name)
                    seconds = median_seconds(lambda: ASSIGNORS[name]().assign(cluster, owned), runs)
                    rerun = f"{seconds * 1000:.1f}"
                print(f"{name:<20}{members:>8}{layout:>10}{fresh * 1000:>10.1f}{rerun:>10}")


if __name__ == "__main__":
    main()
