"""What ACLs cost: the authorizer's decision alone, and heartbeats through a broker with and without one.

    PYTHONPATH=<a checkout's src> .venv/bin/python bench/bench_authorizer.py [--acls 10000] [--checks 200000]
                                                                             [--repeats 5] [--batches 1000]

1. `Authorizer.authorize` (herd.security.acls) with --acls ACLs: half LITERAL topic ACLs over 100 principals, a
   quarter PREFIXED topic ACLs (prefixes of 3 to 12 characters, so a name has several candidate prefixes), the
   rest group ACLs, a few "*" and User:* ones, and DENY among them. --checks decisions over 1,000 distinct
   (principal, operation, topic) triples, timed (a) uncached: every decision made afresh (the cache is cleared
   before each), and (b) as a broker sees them, repeating: answered from the decision cache. Nanoseconds per
   check, the minimum of --repeats runs (the machine only ever adds time) and the median.
2. bench_heartbeat_path's measurement (a Server in this process, 10 members, batches of 100 pipelined Heartbeat
   v4 frames into one Connection, CPU time), the broker's authorizer (holding the same --acls ACLs plus an ALLOW
   READ on the group for User:ANONYMOUS) switched off (None: what a broker without authorizer.class.name runs)
   and on between runs of --batches batches, --heartbeat-repeats pairs: medians of CPU nanoseconds per heartbeat,
   heartbeats per second of one core, and the median and quartiles of the paired ratios (on/off), which the
   machine's drift (5-10 us per heartbeat from one minute to the next on a shared 2-core VM) cancels out of.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import statistics
import tempfile
import time

from bench_groups import stop_members
from bench_heartbeat_path import Sink, _error_code, ns_per_heartbeat, stable_group, warmed_connection

from herd.config import BrokerConfig
from herd.security.acls import Acl, Authorizer, Operation, PatternType, Permission, ResourceType
from herd.server.server import Server

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
T, G = int(ResourceType.TOPIC), int(ResourceType.GROUP)  # plain ints, as the handlers pass them
OPS = tuple(int(op) for op in (Operation.READ, Operation.WRITE, Operation.DESCRIBE, Operation.ALL))


def make_acls(n: int, seed: int = 7) -> list[Acl]:
    rnd = random.Random(seed)
    acls: set[Acl] = set()
    while len(acls) < n:
        principal = f"User:u{rnd.randrange(100)}" if rnd.random() > 0.02 else "User:*"
        permission = Permission.DENY if rnd.random() < 0.1 else Permission.ALLOW
        op = rnd.choice(OPS)
        kind = rnd.random()
        if kind < 0.5:
            acl = Acl(T, f"topic-{rnd.randrange(5000)}", PatternType.LITERAL, principal, "*", op, permission)
        elif kind < 0.75:
            acl = Acl(
                T,
                f"topic-{rnd.randrange(5000)}"[: rnd.randrange(3, 13)],
                PatternType.PREFIXED,
                principal,
                "*",
                op,
                permission,
            )
        elif kind < 0.995:
            acl = Acl(
                G, f"group-{rnd.randrange(2000)}", PatternType.LITERAL, principal, "*", Operation.READ, permission
            )
        else:
            acl = Acl(T, "*", PatternType.LITERAL, principal, "*", Operation.DESCRIBE, Permission.ALLOW)
        acls.add(acl)
    return sorted(acls)


def bench_decisions(acls: list[Acl], checks: int, repeats: int) -> dict[str, object]:
    authorizer = Authorizer(acls)
    rnd = random.Random(11)
    triples = [
        (f"User:u{rnd.randrange(100)}", rnd.choice(OPS[:3]), f"topic-{rnd.randrange(5000)}") for _ in range(1000)
    ]
    work = [triples[i % len(triples)] for i in range(checks)]

    def run(cached: bool) -> float:
        authorize, cache = authorizer.authorize, authorizer._cache
        gc.collect()
        started = time.perf_counter_ns()
        for principal, op, name in work:
            if not cached:
                cache.clear()
            authorize(principal, "10.0.0.1", op, T, name)
        return (time.perf_counter_ns() - started) / checks

    out: dict[str, object] = {"acls": len(acls), "checks": checks}
    for label, cached in (("uncached", False), ("cached", True)):
        runs = [run(cached) for _ in range(repeats)]
        out[f"{label}_min_ns"] = round(min(runs))
        out[f"{label}_median_ns"] = round(statistics.median(runs))
    return out


async def _paired_heartbeats(acls: list[Acl], repeats: int, batches: int) -> dict[str, object]:
    """One Server with an authorizer holding `acls`, one group of 10 members, one Connection fed batches of 100
    pipelined heartbeats; between runs the broker's authorizer is switched off (None) and on again, so the pairs
    see the same machine, process and group."""
    with tempfile.TemporaryDirectory(prefix="herd-bench-acl-") as data:
        config = BrokerConfig.from_properties(
            {
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "log.dirs": data,
                "group.initial.rebalance.delay.ms": "0",
                "authorizer.class.name": AUTHORIZER,
            }
        )
        server = Server(config)
        await server.start()
        authorizer = server.broker.authorizer
        authorizer.add(
            [*acls, Acl(G, "hb", PatternType.PREFIXED, "User:ANONYMOUS", "*", Operation.READ, Permission.ALLOW)]
        )
        try:
            members, tasks, frames = await stable_group(server)
            sink = Sink()
            conn = warmed_connection(server, sink, frames, batches // 4)

            def run(on: bool) -> float:
                server.broker.authorizer = authorizer if on else None
                gc.collect()
                return ns_per_heartbeat(conn, frames, batches)

            pairs = []
            for i in range(repeats):
                if i % 2:
                    on = run(True)
                    off = run(False)
                else:
                    off = run(False)
                    on = run(True)
                pairs.append((off, on))
            server.broker.authorizer = authorizer
            assert _error_code(sink.last) == 0
            conn.connection_lost(None)
            await stop_members(members, tasks)
        finally:
            await server.shutdown()
    ratios = [on / off for off, on in pairs]
    off_ns = statistics.median(p[0] for p in pairs)
    on_ns = statistics.median(p[1] for p in pairs)
    quartiles = statistics.quantiles(ratios, n=4)
    return {
        "without_ns": round(off_ns),
        "with_ns": round(on_ns),
        "without_per_s": round(1e9 / off_ns),
        "with_per_s": round(1e9 / on_ns),
        "ratio_median": round(statistics.median(ratios), 4),
        "ratio_quartiles": [round(quartiles[0], 4), round(quartiles[2], 4)],
        "without_min_ns": round(min(p[0] for p in pairs)),
        "with_min_ns": round(min(p[1] for p in pairs)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--acls", type=int, default=10_000)
    parser.add_argument("--checks", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batches", type=int, default=500)
    parser.add_argument("--heartbeat-repeats", type=int, default=21)
    parser.add_argument("--no-heartbeats", action="store_true")
    args = parser.parse_args()
    acls = make_acls(args.acls)
    print(json.dumps({"authorize": bench_decisions(acls, args.checks, args.repeats)}), flush=True)
    if not args.no_heartbeats:
        result = asyncio.run(_paired_heartbeats(acls, args.heartbeat_repeats, args.batches))
        print(json.dumps({"heartbeats": result}), flush=True)


if __name__ == "__main__":
    main()
