"""The herd source at cluster scale (issue 20): a Spark standalone cluster reading a three-node herd cluster.

    .venv/bin/python bench/bench_spark_cluster.py                        # 1,000,000 records; 1 worker, then 2
    .venv/bin/python bench/bench_spark_cluster.py --only stall --kills 5

It starts its own PostgreSQL and three `herd serve` nodes over it (bench_cluster.py), fills a topic of
`--partitions` partitions (their leaders spread over the nodes) with `--records` records of `--value-size`
bytes, and starts a Spark standalone master with one worker, later two (tests/sparkcluster.py: Spark's own
Master and Worker classes, each worker offering `--cores` cores and starting one executor with them). This
process is the driver.

  source   spark.read.format("herd") ... .write.format("noop"): one task per partition on the executors,
           `--repeat` times after `--warmup` reads; the median run's rows/s, the range over all runs, and the CPU
           every process spent per row (herd nodes, JVMs: master, workers, executors and this driver's; the
           executors' Python workers; this process), read from /proc.
  stall    a streaming query (processingTime `--trigger-ms`, foreachBatch that only counts) reads a topic a
           producer fills at `--rate` records/s; the leader of partition 0 is killed with SIGKILL, and started
           again once the query has read past it. Reported per kill: the longest time between two batches
           ending around the kill (the query's stall; a batch ends only when all its tasks have, so a task
           waiting for a new leader holds the whole batch), and the time from the kill to the end of the first
           batch holding records that every partition the killed node led took after the kill (from their new
           leaders, as the producer could not write them before). The nodes' leases are those of
           bench_cluster.py (broker.session.timeout.ms=3000).

The machine this ran on has 2 cores for everything, so two workers of 2 cores cannot run twice as fast here:
the CPU per row says what the work costs, whatever the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # HerdCluster, SparkStandalone

from bench_cluster import start_cluster, start_postgres, stop_all  # noqa: E402
from bench_spark import fill, median  # noqa: E402
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from sparkcluster import SparkStandalone  # noqa: E402


def session(standalone: SparkStandalone, cores: int) -> Any:
    from herd.spark.session import local_session

    spark = local_session(
        "bench-spark-cluster",
        master=standalone.url,
        conf={**standalone.executor_conf(), "spark.executor.cores": str(cores), "spark.executor.memory": "1g"},
    )
    deadline = time.monotonic() + 60  # every worker's executor registered before anything is timed
    while len(spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()) - 1 < standalone.workers:
        assert time.monotonic() < deadline, "the executors never registered"
        time.sleep(0.2)
    return spark


def read_all(spark: Any, bootstrap: str, topic: str, records: int) -> int:
    (
        spark.read.format("herd")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
        .write.format("noop")
        .mode("overwrite")
        .save()
    )
    return records


def report(workers: int, cores: int, seconds: float, rows: int, cpu: dict[str, float], spread: str) -> dict:
    per_row = {role: t / rows * 1e9 for role, t in sorted(cpu.items()) if t > 0.005}
    total = sum(per_row.values())
    split = ", ".join(f"{role} {ns:,.0f}" for role, ns in per_row.items())
    print(
        f"  {workers} worker(s) x {cores} cores: {rows / seconds:>10,.0f} rows/s ({rows:,} rows in {seconds:.2f} s;"
        f" all runs {spread} rows/s)\n    CPU {total:,.0f} ns/row ({split})",
        flush=True,
    )
    return {
        "workers": workers,
        "rows_per_s": round(rows / seconds),
        "cpu_ns_per_row": round(total),
        "cpu_by_role": {k: round(v) for k, v in per_row.items()},
        "spread": spread,
    }


# -- the stall when a herd node dies ------------------------------------------------------------------------------


class Feeder(threading.Thread):
    """An idempotent producer writing `rate` records/s to `topic` until stopped (it rides through failovers)."""

    def __init__(self, bootstrap: str, topic: str, rate: int) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
        self.topic, self.rate, self.stopped = topic, rate, threading.Event()

    def run(self) -> None:
        start, sent = time.monotonic(), 0
        while not self.stopped.is_set():
            due = int((time.monotonic() - start) * self.rate)
            for _ in range(due - sent):
                self.producer.produce(self.topic, b"x" * 100)
            sent = max(sent, due)
            self.producer.poll(0.01)
        self.producer.flush(60)


def written(bootstrap: str, topic: str, partitions: list[int]) -> dict[int, int]:
    """The partitions' high watermarks: a batch that reads past them reads records written after this call."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watermarks"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
    finally:
        consumer.close()


def stall(spark: Any, cluster: Any, bootstrap: str, args: argparse.Namespace) -> list[dict]:
    topic = "stall"
    from bench_produce_fetch import create_topic

    create_topic(bootstrap, topic, args.partitions)
    ends: list[tuple[float, dict[int, int]]] = []  # (when a batch ended, its end offsets)

    def counted(frame: Any, batch_id: int) -> None:
        frame.count()

    feeder = Feeder(bootstrap, topic, args.rate)
    feeder.start()
    query = (
        spark.readStream.format("herd")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .writeStream.foreachBatch(counted)
        .trigger(processingTime=f"{args.trigger_ms} milliseconds")
        .start()
    )
    last = -1

    def poll() -> None:
        """Record the batches that ended since the last call: when (the trigger's start plus its duration)
        and where they read up to."""
        nonlocal last
        for progress in query.recentProgress:
            if progress["batchId"] > last and progress["numInputRows"]:
                last = progress["batchId"]
                started = datetime.fromisoformat(progress["timestamp"]).timestamp()
                end = json.loads(progress["sources"][0]["endOffset"])[topic]
                ends.append(
                    (started + progress["durationMs"]["triggerExecution"] / 1000, {int(p): o for p, o in end.items()})
                )
        time.sleep(0.05)

    results = []
    try:
        deadline = time.monotonic() + 120  # the first batches start the executors' Python workers
        while len(ends) < 10:
            assert query.exception() is None, query.exception()
            assert time.monotonic() < deadline, "the query read nothing for two minutes"
            poll()
        for kill in range(args.kills):
            until = time.monotonic() + 5  # steady batches before the kill
            while time.monotonic() < until:
                poll()
            now = cluster.leaders(topic)
            victim = now[0]
            led = [p for p, node in now.items() if node == victim]
            offsets = written(bootstrap, topic, led)
            at = time.time()
            cluster.kill(victim)
            deadline = time.monotonic() + 120
            while not ends or ends[-1][0] < at or any(ends[-1][1][p] <= offsets[p] for p in led):  # after the kill
                assert query.exception() is None, query.exception()
                assert time.monotonic() < deadline, "the query never read past the killed node's partitions"
                poll()
            resumed = ends[-1][0] - at
            until = time.monotonic() + 3
            while time.monotonic() < until:
                poll()
            around = [t for t, _ in ends if at - 5 <= t]
            gaps = [b - a for a, b in zip(around, around[1:])]
            steady = [
                b - a
                for a, b in zip([t for t, _ in ends if t < at - 0.5][-10:], [t for t, _ in ends if t < at - 0.5][-9:])
            ]
            result = {
                "kill": kill,
                "node": victim,
                "partitions": led,
                "stall_s": round(max(gaps), 2),
                "kill_to_read_s": round(resumed, 2),
                "steady_gap_s": round(statistics.median(steady), 2) if steady else None,
            }
            print(
                f"  kill {kill}: node {victim} (partitions {led}): longest gap between batches "
                f"{result['stall_s']:.2f} s (steady {result['steady_gap_s']} s); kill to the end of the first batch "
                f"with records its partitions took after the kill {resumed:.2f} s",
                flush=True,
            )
            results.append(result)
            cluster.restart_when_allowed(victim)
            time.sleep(3)  # the restarted node takes its share of leaders back before the next kill
    finally:
        query.stop()
        feeder.stopped.set()
        feeder.join(60)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--workers", default="1,2", help="worker counts to measure, in order")
    parser.add_argument("--cores", type=int, default=2, help="cores each worker offers")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--only", choices=("source", "stall"))
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--rate", type=int, default=2000, help="records/s written during the stall part")
    parser.add_argument("--trigger-ms", type=int, default=200)
    parser.add_argument("--json", action="store_true", help="print the results as one JSON line at the end")
    args = parser.parse_args()
    pg, base = start_postgres()
    cluster = None
    out: dict[str, Any] = {"load_before": os.getloadavg(), "args": vars(args)}
    try:
        cluster, _ = start_cluster(pg, base, 3)
        bootstrap = cluster.bootstrap
        counts = [int(n) for n in args.workers.split(",")]
        if args.only != "stall":
            fill(bootstrap, "source", args.partitions, args.records, args.value_size, False)
            print(
                f"source: {args.records:,} records of {args.value_size} B in {args.partitions} partitions, "
                f"leaders on nodes {sorted(set(cluster.leaders('source').values()))}",
                flush=True,
            )
            out["source"] = []
            for workers in counts:
                with SparkStandalone(
                    Path(base) / f"spark-{workers}", workers=workers, cores=args.cores, memory="2g"
                ) as standalone:
                    spark = session(standalone, args.cores)
                    try:
                        for _ in range(args.warmup):
                            read_all(spark, bootstrap, "source", args.records)
                        seconds, rows, cpu, spread = median(
                            args.repeat, lambda: read_all(spark, bootstrap, "source", args.records)
                        )
                        out["source"].append(report(workers, args.cores, seconds, rows, cpu, spread))
                    finally:
                        spark.stop()
        if args.only != "source":
            print(
                f"stall: a streaming query over {args.partitions} partitions fed {args.rate} records/s, "
                f"trigger {args.trigger_ms} ms, {counts[-1]} worker(s)",
                flush=True,
            )
            with SparkStandalone(
                Path(base) / "spark-stall", workers=counts[-1], cores=args.cores, memory="2g"
            ) as standalone:
                spark = session(standalone, args.cores)
                try:
                    out["stall"] = stall(spark, cluster, bootstrap, args)
                finally:
                    spark.stop()
            stalls = [r["stall_s"] for r in out["stall"]]
            print(
                f"  stall: median {statistics.median(stalls):.2f} s, max {max(stalls):.2f} s over {len(stalls)} kills",
                flush=True,
            )
    finally:
        stop_all(cluster, pg, base, keep_logs=False)
    if args.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
