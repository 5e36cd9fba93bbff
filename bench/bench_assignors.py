"""Median time of each assignor for M members with identical subscriptions over 10,000 partitions.

Run: .venv/bin/python bench/bench_assignors.py [--runs N]
Rows: members (10/100/1000) x layout (1 topic of 10,000 partitions, 4 topics of 2,500). Columns: the
fresh assignment, and for sticky assignors a rerun where every member reports its previous partitions.
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


def case(members: int, topics: int) -> tuple[Cluster, dict[str, Subscription]]:
    names = tuple(f"topic-{i}" for i in range(topics))
    cluster = Cluster({t: PARTITIONS // topics for t in names})
    return cluster, {f"consumer-{i:04d}-{'x' * 8}": Subscription(names) for i in range(members)}


def rerun_input(cluster: Cluster, subs: dict[str, Subscription], name: str) -> dict[str, Subscription]:
    result = ASSIGNORS[name]().assign(cluster, subs)
    return {m: Subscription(s.topics, None, result[m].partitions, 1) for m, s in subs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    print(f"{'assignor':<20}{'members':>8}{'topics':>8}{'fresh ms':>10}{'rerun ms':>10}")
    for name in ASSIGNORS:
        for members in (10, 100, 1000):
            for topics in (1, 4):
                cluster, subs = case(members, topics)
                fresh = median_seconds(lambda: ASSIGNORS[name]().assign(cluster, subs), runs)
                rerun = "-"
                if "sticky" in name:
                    owned = rerun_input(cluster, subs, name)
                    seconds = median_seconds(lambda: ASSIGNORS[name]().assign(cluster, owned), runs)
                    rerun = f"{seconds * 1000:.1f}"
                print(f"{name:<20}{members:>8}{topics:>8}{fresh * 1000:>10.1f}{rerun:>10}")


if __name__ == "__main__":
    main()
