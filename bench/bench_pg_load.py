"""Coordinator load from PostgreSQL: 1,000,000 committed offsets replayed by the shard runtime from the database.

    .venv/bin/python bench/bench_pg_load.py [--url postgresql://postgres@127.0.0.1:55432/postgres]
                                            [--groups 10000] [--partitions 100] [--history 3]
                                            [--offsets-partitions 50] [--keep]

The same data as bench_offsets.py's load: --groups groups of --partitions committed offsets, written as consumers
commit them (one batch per group commit, all of a group's partitions), --history times each, into the
`__consumer_offsets` partitions (--offsets-partitions of them) of a fresh database created on the server at
--url, through `PgPartitionLog` (appends group-committed as a leader commits them). Then, each in a fresh
process:

1. load: a `ShardRuntime` per partition over a `PgPartitionLog` opened as a new leader opens it (empty tail
   cache: everything comes from the database), all loaded at once as the coordinator runtime does on a
   takeover; the time until every partition is active, its CPU time, and the offsets and groups loaded;
2. compaction of every partition (`PgPartitionLog.compact`, forced), timed;
3. load again.

PostgreSQL, the writer and the loader share the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
NODE = 1
TOPIC = "__consumer_offsets"


def _database_url(server_url: str, name: str) -> str:
    return urlunsplit(urlsplit(server_url)._replace(path=f"/{name}"))


def create_database(server_url: str, prefix: str, partitions: int) -> str:
    import psycopg

    from herd.log.postgres import schema

    name = f"{prefix}{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = _database_url(server_url, name)

    async def setup() -> None:
        async with await psycopg.AsyncConnection.connect(url) as conn:
            await schema.migrate(conn, name)
            async with conn.transaction():
                topic_id = uuid.uuid4()
                await conn.execute(
                    "INSERT INTO herd_topics (topic_id, name, partitions) VALUES (%s, %s, %s)",
                    (topic_id, TOPIC, partitions),
                )
                for p in range(partitions):
                    await conn.execute(
                        "INSERT INTO herd_partitions (topic_id, partition, leader, leader_epoch) "
                        "VALUES (%s, %s, %s, 1)",
                        (topic_id, p, NODE),
                    )

    asyncio.run(setup())
    return url


async def open_logs(url: str) -> tuple[Any, Any, list[Any]]:
    """The pool, the store and every partition's log, opened as a new leader does."""
    from herd.log.api import LogConfig
    from herd.log.postgres.db import open_pool
    from herd.log.postgres.store import PgLogStore

    pool = await open_pool(url, min_size=4, max_size=16)
    store = PgLogStore(pool, NODE)
    async with pool.connection() as conn:
        rows = await (
            await conn.execute(
                "SELECT p.partition, p.pid, p.leader_epoch, p.log_start_offset, p.log_end_offset FROM "
                "herd_partitions p "
                "JOIN herd_topics t USING (topic_id) WHERE t.name = %s ORDER BY p.partition",
                (TOPIC,),
            )
        ).fetchall()
    config = LogConfig(cleanup_policy="compact")
    logs = [
        store.open_partition(TOPIC, p, config, pid=pid, leader_epoch=epoch, log_start_offset=start, log_end_offset=end)
        for p, pid, epoch, start, end in rows
    ]
    return pool, store, logs


def write_history(url: str, groups: int, partitions: int, history: int) -> int:
    from herd.coordinator.partition import coordinator_partition
    from herd.coordinator.records import OffsetValue, offset_commit_record
    from herd.runtime.batches import encode_batch

    async def run() -> int:
        pool, store, logs = await open_logs(url)
        now = int(time.time() * 1000)
        written = 0
        for round_ in range(history):
            ends: dict[int, int] = {}
            for g in range(groups):
                group = f"group-{g:05d}"
                records = [
                    offset_commit_record(
                        group, f"topic-{p // 10}", p % 10, OffsetValue(1000 * round_ + p, -1, "", now + round_)
                    )
                    for p in range(partitions)
                ]
                partition = coordinator_partition(group, len(logs))
                result = logs[partition].append(encode_batch(records, now + round_), now)
                ends[partition] = result.last_offset + 1
                written += len(records)
                if g % 500 == 499:
                    await asyncio.sleep(0)  # let the commit tasks run
            await asyncio.gather(*(logs[p].wait_durable(end) for p, end in ends.items()))
        await store.close()
        await pool.close()
        return written

    return asyncio.run(run())


def measure_load(url: str) -> dict[str, Any]:
    """In this (fresh) process: a shard runtime per partition, all loaded from the database at once."""
    from herd.coordinator import CoordinatorConfig
    from herd.runtime.flusher import Flusher
    from herd.runtime.shard import ShardRuntime, ShardState
    from herd.runtime.timer import WallClock

    async def run() -> dict[str, Any]:
        pool, store, logs = await open_logs(url)
        loop = asyncio.get_running_loop()
        flusher = Flusher(loop)
        clock = WallClock()
        shards = [
            ShardRuntime(
                log.partition,
                log,
                config=CoordinatorConfig(),
                clock=clock,
                loop=loop,
                max_batch_bytes=1 << 20,
                flusher=flusher,
            )
            for log in logs
        ]
        started, cpu_started = time.perf_counter(), time.process_time()
        await asyncio.gather(*(shard.load() for shard in shards))
        seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
        assert all(shard.state is ShardState.ACTIVE for shard in shards), [s.state for s in shards]
        offsets = sum(len(o) for s in shards for o in s.shard._ctx.offsets.values())
        groups = sum(len(s.shard._ctx.groups) for s in shards)
        records = sum(s.records for s in shards)
        for shard in shards:
            await shard.unload()
        flusher.close()
        await store.close()
        await pool.close()
        return {
            "seconds": round(seconds, 2),
            "cpu_seconds": round(cpu_seconds, 2),
            "groups": groups,
            "offsets": offsets,
            "offset_range": records,
        }

    return asyncio.run(run())


def compact_all(url: str) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        pool, store, logs = await open_logs(url)
        read = kept = before = after = 0
        now = int(time.time() * 1000)
        for log in logs:
            stats = await log.compact(86_400_000, now, force=True)
            if stats is not None:
                read, kept = read + stats.records_read, kept + stats.records_kept
                before, after = before + stats.bytes_before, after + stats.bytes_after
        await store.close()
        await pool.close()
        return {
            "records_read": read,
            "records_kept": kept,
            "mib_before": round(before / 2**20, 1),
            "mib_after": round(after / 2**20, 1),
        }

    return asyncio.run(run())


def _in_fresh_process(phase: str, url: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--phase", phase, "--url", url], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--url",
        default="postgresql://postgres@127.0.0.1:55432/postgres",
        help="a server where the benchmark may create a database",
    )
    parser.add_argument("--db-prefix", default="bench_pg_load_")
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--history", type=int, default=3)
    parser.add_argument("--offsets-partitions", type=int, default=50)
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument("--phase", choices=("measure-load", "compact"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase == "measure-load":
        print(json.dumps(measure_load(args.url)))
        return
    if args.phase == "compact":
        print(json.dumps(compact_all(args.url)))
        return
    import psycopg

    url = create_database(args.url, args.db_prefix, args.offsets_partitions)
    try:
        started = time.perf_counter()
        written = write_history(url, args.groups, args.partitions, args.history)
        print(f"wrote {written:,} commit records in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        before = _in_fresh_process("measure-load", url)
        print(json.dumps({"before_compaction": before}), file=sys.stderr)
        started = time.perf_counter()
        compacted = _in_fresh_process("compact", url)
        compacted["seconds"] = round(time.perf_counter() - started, 1)
        after = _in_fresh_process("measure-load", url)
        print(
            json.dumps(
                {
                    "load": {
                        "records_written": written,
                        "before_compaction": before,
                        "compaction": compacted,
                        "after_compaction": after,
                    }
                }
            ),
            flush=True,
        )
    finally:
        if not args.keep:
            with psycopg.connect(args.url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{urlsplit(url).path[1:]}" WITH (FORCE)')


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    main()
