"""Throughput of the Spark connector: rows/s read through the herd source, against the same records read
directly with confluent-kafka, and records/s written through the herd sink.

    .venv/bin/python bench/bench_spark.py                       # 2,000,000 records, 4 partitions, local[2]
    .venv/bin/python bench/bench_spark.py --only source --fetcher native --repeat 9
    .venv/bin/python bench/bench_spark.py --only source --varied-values   # values of 50 to 150 bytes

It starts its own broker (`herd serve`, segment store in a temporary directory), fills a topic with
`--records` records (key ~8 bytes, value `--value-size` bytes, or sizes spread evenly from half to one
and a half times that with --varied-values) and measures each path `--repeat` times; the run with the
median time is reported, with the slowest and fastest rates:

  confluent-kafka   one process assigns every partition, consumes every message (no conversion);
  fetch -> Arrow    herd.spark.fetch.read_range in one process, the worker code path without Spark;
  source            spark.read.format("herd") ... .write.format("noop") on local[--cores]: one task
                    per partition, every row crosses into the JVM as Arrow; with the native fetcher
                    (the default) and with fetcher=librdkafka;
  sink (batch)      spark.range(n) as key/value written with df.write.format("herd") (acks=all).

Spark's start, the first action (Python worker start) and the JVM's warm-up are excluded by `--warmup`
reads of the whole topic before the timed ones (the JIT keeps compiling Spark's code for the first
dozen queries of a session, costing up to 0.4 us a row in compiler threads). Each figure comes with
the CPU time every process of the run (broker, JVM, Python workers, this script) spent per row, read
from /proc: on a shared machine it moves much less than the wall clock.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _broker import BenchBroker
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def fill(bootstrap: str, topic: str, partitions: int, records: int, value_size: int, varied: bool) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    sizes = [value_size // 2 + i for i in range(value_size + 1)] if varied else [value_size]
    values = [b"v" * size for size in sizes]
    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, values[i * 7919 % len(values)], b"key-%d" % i, i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0
    return time.perf_counter() - start


def tree_cpu() -> dict[str, float]:
    """CPU seconds used so far by this process and its descendants (broker, JVM, Python workers), by role."""
    parents, roles, used = {}, {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        pid = int(entry)
        parents[pid] = int(fields[1])
        used[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        roles[pid] = (
            "broker"
            if "herd.cli serve" in cmd
            else "jvm"
            if "java" in cmd
            else "python workers"
            if "pyspark" in cmd
            else "this process"
        )
    me, totals = os.getpid(), {}
    for pid, seconds in used.items():
        p = pid
        while p not in (0, 1, me):
            p = parents.get(p, 0)
        if p == me:
            totals[roles[pid]] = totals.get(roles[pid], 0.0) + seconds
    return totals


def median(repeat: int, run: Callable[[], int]) -> tuple[float, int, dict[str, float], str]:
    """The median of `repeat` runs: (seconds, rows, CPU seconds by role during that run, the range of
    rates over all runs)."""
    results = []
    for _ in range(repeat):
        before = tree_cpu()
        start = time.perf_counter()
        rows = run()
        elapsed = time.perf_counter() - start
        after = tree_cpu()
        results.append((elapsed, rows, {k: v - before.get(k, 0.0) for k, v in after.items()}))
    results.sort(key=lambda r: r[0])
    seconds, rows, cpu = results[len(results) // 2]
    spread = f"{rows / results[-1][0]:,.0f} to {rows / results[0][0]:,.0f}"
    return seconds, rows, cpu, spread


def read_confluent(bootstrap: str, topic: str, partitions: int, records: int) -> int:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "max.partition.fetch.bytes": 8 * 1024 * 1024,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    n = 0
    try:
        while n < records:
            n += sum(1 for m in consumer.consume(32_768, 1.0) if m.error() is None)
    finally:
        consumer.close()
    return n


def read_fetch(bootstrap: str, topic: str, partitions: int, records: int) -> int:
    from herd.spark.fetch import ReadSettings, read_range
    from herd.spark.offsets import OffsetRange
    from herd.spark.options import SourceOptions
    from herd.spark.schema import arrow_schema, source_schema

    opts = SourceOptions.parse({"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, streaming=False)
    settings, schema = ReadSettings.of(opts), arrow_schema(source_schema(False))
    per = records // partitions
    return sum(
        b.num_rows for p in range(partitions) for b in read_range(settings, OffsetRange(topic, p, 0, per), schema)
    )


def read_spark(spark: Any, bootstrap: str, topic: str, records: int, fetcher: str = "native") -> int:
    df = (
        spark.read.format("herd")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("fetcher", fetcher)
        .load()
    )
    df.write.format("noop").mode("overwrite").save()
    return records


def write_spark(spark: Any, bootstrap: str, topic: str, records: int, value_size: int, cores: int) -> int:
    from pyspark.sql import functions as F

    df = spark.range(0, records, 1, cores).select(
        F.col("id").cast("string").cast("binary").alias("key"),
        F.expr(f"repeat('v', {value_size})").cast("binary").alias("value"),
    )
    df.write.format("herd").mode("append").option("kafka.bootstrap.servers", bootstrap).option("topic", topic).save()
    return records


def report(name: str, seconds: float, rows: int, cpu: dict[str, float], spread: str, value_size: int) -> None:
    """Wall-clock rate, then the CPU every process of the run spent per row (what a busy machine distorts
    much less) and the rate that cost would allow if two cores did nothing else and were always busy."""
    per_row = {role: t / rows * 1e9 for role, t in sorted(cpu.items()) if t > 0.005}
    total = sum(per_row.values())
    split = ", ".join(f"{role} {ns:,.0f}" for role, ns in per_row.items())
    print(
        f"  {name:<18} {rows / seconds:>10,.0f} rows/s {rows * (value_size + 10) / seconds / 1e6:>6.1f} MB/s"
        f"  ({rows:,} rows in {seconds:.2f} s; all runs {spread} rows/s)\n"
        f"  {'':<18} CPU {total:,.0f} ns/row ({split}); CPU-bound limit on 2 cores {2e9 / total:,.0f} rows/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=12, help="untimed source reads before the timed ones")
    parser.add_argument("--fetcher", choices=["native", "librdkafka"], action="append")
    parser.add_argument("--varied-values", action="store_true")
    parser.add_argument("--only", choices=["confluent", "fetch", "source", "sink"], action="append")
    args = parser.parse_args()
    only = set(args.only or ["confluent", "fetch", "source", "sink"])
    work = Path(tempfile.mkdtemp(prefix="herd-bench-spark-"))
    broker = BenchBroker(str(work / "data"))
    bootstrap = broker.bootstrap
    try:
        run(args, only, bootstrap)
    finally:
        broker.stop(30)
        shutil.rmtree(work, ignore_errors=True)  # the topic's segments: 230 MB at the defaults


def run(args: argparse.Namespace, only: set[str], bootstrap: str) -> None:
    n, parts, size = args.records, args.partitions, args.value_size
    seconds = fill(bootstrap, "bench", parts, n, size, args.varied_values)
    sizes = f"{size // 2} to {size + size // 2}" if args.varied_values else f"{size}"
    print(
        f"herd broker {bootstrap}; {n:,} records of {sizes} B in {parts} partitions "
        f"(produced in {seconds:.1f} s); {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; "
        f"median of {args.repeat}"
    )
    if "confluent" in only:
        report(
            "confluent-kafka",
            *median(args.repeat, lambda: read_confluent(bootstrap, "bench", parts, n)),
            size,
        )
    if "fetch" in only:
        report("fetch -> Arrow", *median(args.repeat, lambda: read_fetch(bootstrap, "bench", parts, n)), size)
    if not only & {"source", "sink"}:
        return
    from herd.spark.session import local_session

    spark = local_session("herd-bench", cores=args.cores)
    warm = []
    for _ in range(max(1, args.warmup)):  # Python workers, consumers, and the JVM's JIT
        start = time.perf_counter()
        read_spark(spark, bootstrap, "bench", n)
        warm.append(f"{n / (time.perf_counter() - start) / 1e6:.2f}")
    print(f"  warm-up reads (M rows/s): {' '.join(warm)}")
    if "source" in only:
        for fetcher in args.fetcher or ["native", "librdkafka"]:
            report(
                f"source {fetcher}",
                *median(args.repeat, lambda: read_spark(spark, bootstrap, "bench", n, fetcher)),  # noqa: B023
                size,
            )
    if "sink" in only:
        AdminClient({"bootstrap.servers": bootstrap}).create_topics([NewTopic("sunk", parts, 1)])
        time.sleep(1)
        report(
            f"sink local[{args.cores}]",
            *median(args.repeat, lambda: write_spark(spark, bootstrap, "sunk", n, size, args.cores)),
            size,
        )
    spark.stop()


if __name__ == "__main__":
    main()
