"""The cost of the metrics on the heartbeat and commit paths: two source trees benchmarked alternately.

    .venv/bin/python bench/bench_metrics_overhead.py --before /tmp/herd-before/src --after src [--rounds 4]
                                                     [--hb-seconds 5] [--commit-seconds 5] [--committers 64]
                                                     [--path-pairs 40] [--path-batches 300]

`--before` and `--after` are the `src` directories of two checkouts (e.g. `git archive <commit> | tar -x -C
/tmp/herd-before`). Each round runs the closed-loop heartbeat benchmark (bench_groups.py: 1,000 members over 10
connections, every member always with one heartbeat in flight) and the commit benchmark (bench_offsets.py:
--committers committers, each with one durable OffsetCommit in flight) once with each tree, in the order
before-after in even rounds and after-before in odd ones (ABBA), so that a drift of the machine during the run
weighs on both alike. Each benchmark's broker runs the tree's code (PYTHONPATH); the clients are this checkout's.
Prints every run, then per figure the median of each tree and the ratio after/before.

Then the heartbeat path without sockets (bench_heartbeat_path.py --serve: the broker's CPU per heartbeat, from
the bytes of a socket read to the answers queued), one process per tree, measured in turns of --path-batches
batches of 100 heartbeats, --path-pairs times each in ABBA order: the medians, and the median of the ratios of
the two measurements of each pair (taken a fraction of a second apart, so on the same machine). Last, the same
path in one process with the two trees' connection.py side by side (bench_heartbeat_path.py
--baseline-connection), alternating every 50 batches: what the change to the connection costs, isolated.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
_HEARTBEATS = re.compile(r"heartbeats, .*closed loop\s+([\d,]+)/s .*broker ([\d.]+) us/hb")


def heartbeats(src: str, seconds: float) -> dict[str, float]:
    out = _run(src, [str(BENCH / "bench_groups.py"), "--sizes", "10", "--delays", "0", "--hb-seconds", str(seconds)])
    match = _HEARTBEATS.search(out)
    if match is None:
        raise RuntimeError(f"no heartbeat figure in:\n{out}")
    return {
        "heartbeats_per_s": float(match.group(1).replace(",", "")),
        "broker_us_per_heartbeat": float(match.group(2)),
    }


def commits(src: str, seconds: float, committers: int) -> dict[str, float]:
    out = _run(
        src,
        [str(BENCH / "bench_offsets.py"), "--committers", str(committers), "--seconds", str(seconds), "--skip-load"],
    )
    result = json.loads(out.strip().splitlines()[-1])["commits"]
    return {
        "commits_per_s": float(result["per_second"]),
        "broker_us_per_commit": float(result["broker_us"]),
        "commit_p50_ms": float(result["p50_ms"]),
    }


def heartbeat_path(before: str, after: str, pairs: int, batches: int) -> None:
    workers = {tree: _worker(src, batches) for tree, src in (("before", before), ("after", after))}
    figures: dict[str, list[float]] = {"before": [], "after": []}
    try:
        for i in range(pairs):
            for tree in ("before", "after") if i % 2 == 0 else ("after", "before"):
                worker = workers[tree]
                assert worker.stdin is not None and worker.stdout is not None
                worker.stdin.write("\n")
                worker.stdin.flush()
                figures[tree].append(float(worker.stdout.readline()))
    finally:
        for worker in workers.values():
            assert worker.stdin is not None
            worker.stdin.close()
            worker.wait(60)
    ratios = [a / b for a, b in zip(figures["after"], figures["before"], strict=True)]
    for tree, values in figures.items():
        print(
            f"heartbeat path, {tree:<6} ns/heartbeat: min {min(values):,.0f}  median {statistics.median(values):,.0f}"
        )
    print(
        f"heartbeat path, after/before: median of {pairs} paired ratios {statistics.median(ratios):.3f} "
        f"(quartiles {statistics.quantiles(ratios, n=4)[0]:.3f}-{statistics.quantiles(ratios, n=4)[2]:.3f}); "
        f"ratio of the minima {min(figures['after']) / min(figures['before']):.3f}"
    )


def _worker(src: str, batches: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(src).resolve()), "PYTHONDONTWRITEBYTECODE": "1"}
    worker = subprocess.Popen(
        [sys.executable, str(BENCH / "bench_heartbeat_path.py"), "--serve", "--batches", str(batches)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert worker.stdout is not None
    if worker.stdout.readline().strip() != "ready":
        raise RuntimeError(f"the heartbeat path benchmark did not start with {src}")
    return worker


def _run(src: str, args: list[str]) -> str:
    env = {**os.environ, "PYTHONPATH": str(Path(src).resolve()), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, *args], env=env, check=True, capture_output=True, text=True).stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True)
    parser.add_argument("--after", required=True)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--hb-seconds", type=float, default=5)
    parser.add_argument("--commit-seconds", type=float, default=5)
    parser.add_argument("--committers", type=int, default=64)
    parser.add_argument("--path-pairs", type=int, default=40)
    parser.add_argument("--path-batches", type=int, default=300)
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    for i in range(args.rounds):
        for tree in ("before", "after") if i % 2 == 0 else ("after", "before"):
            src = getattr(args, tree)
            figures = {**heartbeats(src, args.hb_seconds), **commits(src, args.commit_seconds, args.committers)}
            runs[tree].append(figures)
            print(f"round {i} {tree:<6} " + "  ".join(f"{k} {v:,.1f}" for k, v in figures.items()), flush=True)
    print()
    for key in runs["before"][0] if runs["before"] else ():
        before = statistics.median(r[key] for r in runs["before"])
        after = statistics.median(r[key] for r in runs["after"])
        print(f"{key:<26} before {before:>12,.1f}  after {after:>12,.1f}  after/before {after / before:.3f}")
    print()
    heartbeat_path(args.before, args.after, args.path_pairs, args.path_batches)
    baseline = str(Path(args.before) / "herd" / "server" / "connection.py")
    out = _run(
        args.after,
        [
            str(BENCH / "bench_heartbeat_path.py"),
            "--baseline-connection",
            baseline,
            "--repeats",
            str(2 * args.path_pairs + 1),
            "--batches",
            "50",
        ],
    )
    print(f"connection.py alone, after vs before in one process: {out.strip().splitlines()[-1]}")


if __name__ == "__main__":
    main()
