"""The PostgreSQL partition log on its own (no broker, no network clients): durable appends and reads.

    .venv/bin/python bench/bench_pg_store.py [--url postgresql://postgres@127.0.0.1:55432/postgres]
                                             [--seconds 5] [--partitions 1,8] [--record-bytes 1024]
                                             [--batch-records 16] [--in-flight 4]

1. produce: for each count in --partitions, that many partitions, each with --in-flight appenders in a closed
   loop: append one batch of --batch-records records of --record-bytes random bytes (as a producer's linger
   batch), wait until it is durable, repeat (acks=all). Batches/s, MB/s, commits (transactions) per second
   and batches per commit (group commit), and this process's CPU per MB.
2. commits: 64 committers over 8 partitions, each appending one coordinator-sized batch (one offset commit
   record, ~100 bytes) and waiting for it to be durable, as the coordinator runtime writes OffsetCommits.
3. fetch: the data of (1) read back with `read_async` in 1 MiB chunks by a new leader (empty tail cache, every
   byte from the database), one reader per partition.

PostgreSQL and this process share the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NODE = 1


async def partitions(url: str, count: int) -> list[int]:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        topic_id = uuid.uuid4()
        await conn.execute(
            "INSERT INTO herd_topics (topic_id, name, partitions) VALUES (%s, %s, %s)",
            (topic_id, f"bench-{topic_id}", count),
        )
        cursor = await conn.execute(
            "INSERT INTO herd_partitions (topic_id, partition, leader, leader_epoch) "
            "SELECT %s, p, %s, 0 FROM generate_series(0, %s - 1) p RETURNING pid",
            (topic_id, NODE, count),
        )
        return [row[0] for row in await cursor.fetchall()]


def make_batch(records: int, record_bytes: int) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 26,
    )
    now = int(time.time() * 1000)
    for i in range(records):
        builder.append(i, timestamp=now, key=None, value=os.urandom(record_bytes), headers=[])
    return bytes(builder.build())


async def produce(url: str, count: int, seconds: float, data: bytes, in_flight: int) -> tuple[dict[str, Any], list]:
    from herd.log.api import LogConfig
    from herd.log.postgres.db import open_pool
    from herd.log.postgres.store import PgLogStore

    pids = await partitions(url, count)
    pool = await open_pool(url, min_size=min(count, 16), max_size=16)
    store = PgLogStore(pool, NODE)
    logs = [
        store.open_partition("bench", i, LogConfig(), pid=pid, leader_epoch=0, log_start_offset=0, log_end_offset=0)
        for i, pid in enumerate(pids)
    ]
    batches = 0
    stop = time.monotonic() + seconds

    async def appender(log: Any) -> None:
        nonlocal batches
        while time.monotonic() < stop:
            result = log.append(data, int(time.time() * 1000))
            await log.wait_durable(result.last_offset + 1)
            batches += 1

    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(appender(log) for log in logs for _ in range(in_flight)))
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    commits = sum(log.commits for log in logs)
    mb = batches * len(data) / 1e6
    result = {
        "partitions": count,
        "in_flight": in_flight * count,
        "batch_bytes": len(data),
        "batches_per_s": round(batches / elapsed),
        "mb_per_s": round(mb / elapsed, 1),
        "commits_per_s": round(commits / elapsed),
        "batches_per_commit": round(batches / max(commits, 1), 2),
        "cpu_ms_per_mb": round(1000 * cpu / mb, 1),
    }
    await store.close()
    await pool.close()
    return result, [(pid, log.log_end_offset) for pid, log in zip(pids, logs)]


async def commits(url: str, seconds: float) -> dict[str, Any]:
    from herd.coordinator.records import OffsetValue, offset_commit_record
    from herd.log.api import LogConfig
    from herd.log.postgres.db import open_pool
    from herd.log.postgres.store import PgLogStore
    from herd.runtime.batches import encode_batch

    pids = await partitions(url, 8)
    pool = await open_pool(url, min_size=8, max_size=16)
    store = PgLogStore(pool, NODE)
    logs = [
        store.open_partition(
            "__consumer_offsets",
            i,
            LogConfig(cleanup_policy="compact"),
            pid=pid,
            leader_epoch=0,
            log_start_offset=0,
            log_end_offset=0,
        )
        for i, pid in enumerate(pids)
    ]
    done = 0
    latencies: list[float] = []
    stop = time.monotonic() + seconds

    async def committer(index: int) -> None:
        nonlocal done
        log = logs[index % 8]
        offset = 0
        while time.monotonic() < stop:
            offset += 1
            now = int(time.time() * 1000)
            record = offset_commit_record(f"group-{index % 8}", "topic", index, OffsetValue(offset, -1, "", now))
            began = time.perf_counter()
            result = log.append(encode_batch([record], now), now)
            await log.wait_durable(result.last_offset + 1)
            latencies.append(time.perf_counter() - began)
            done += 1

    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(committer(i) for i in range(64)))
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    transactions = sum(log.commits for log in logs)
    latencies.sort()
    await store.close()
    await pool.close()
    return {
        "committers": 64,
        "partitions": 8,
        "commits_per_s": round(done / elapsed),
        "transactions_per_s": round(transactions / elapsed),
        "commits_per_transaction": round(done / transactions, 1),
        "p50_ms": round(1000 * latencies[len(latencies) // 2], 2),
        "p99_ms": round(1000 * latencies[int(len(latencies) * 0.99)], 2),
        "cpu_us_per_commit": round(1e6 * cpu / done, 1),
    }


async def fetch(url: str, written: list[tuple[int, int]]) -> dict[str, Any]:
    from herd.log.api import LogConfig
    from herd.log.postgres.db import open_pool
    from herd.log.postgres.store import PgLogStore

    pool = await open_pool(url, min_size=4, max_size=16)
    store = PgLogStore(pool, NODE)
    logs = [
        store.open_partition("bench", i, LogConfig(), pid=pid, leader_epoch=0, log_start_offset=0, log_end_offset=end)
        for i, (pid, end) in enumerate(written)
    ]

    async def reader(log: Any) -> int:
        offset, total = 0, 0
        while offset < log.log_end_offset:
            data = await log.read_async(offset, 1 << 20)
            total += len(data)
            offset = _end_of(data)
        return total

    started, cpu = time.perf_counter(), time.process_time()
    total = sum(await asyncio.gather(*(reader(log) for log in logs)))
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    await store.close()
    await pool.close()
    mb = total / 1e6
    return {
        "partitions": len(logs),
        "mb": round(mb, 1),
        "mb_per_s": round(mb / elapsed, 1),
        "cpu_ms_per_mb": round(1000 * cpu / mb, 1),
    }


def _end_of(data: bytes) -> int:
    from herd.log.batch import iter_headers

    last = None
    for last in iter_headers(data):  # noqa: B007 (the last header is wanted)
        pass
    assert last is not None
    return last.next_offset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--url",
        default="postgresql://postgres@127.0.0.1:55432/postgres",
        help="a server where the benchmark may create a database",
    )
    parser.add_argument("--db-prefix", default="bench_pg_store_")
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--partitions", default="1,8")
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--batch-records", type=int, default=16)
    parser.add_argument("--in-flight", type=int, default=4)
    args = parser.parse_args()

    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    from herd.log.postgres import schema

    name = f"{args.db_prefix}{uuid.uuid4().hex[:10]}"
    with psycopg.connect(args.url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = urlunsplit(urlsplit(args.url)._replace(path=f"/{name}"))

    async def run() -> None:
        async with await psycopg.AsyncConnection.connect(url) as conn:
            await schema.migrate(conn, name)
        data = make_batch(args.batch_records, args.record_bytes)
        for count in (int(x) for x in args.partitions.split(",")):
            result, written = await produce(url, count, args.seconds, data, args.in_flight)
            print(json.dumps({"produce": result}), flush=True)
            print(json.dumps({"fetch": await fetch(url, written)}), flush=True)
        print(json.dumps({"commits": await commits(url, args.seconds)}), flush=True)

    try:
        asyncio.run(run())
    finally:
        with psycopg.connect(args.url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    main()
