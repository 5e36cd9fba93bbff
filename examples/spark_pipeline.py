"""A real pipeline on herd and Spark: page views -> windowed aggregates -> a herd topic and Parquet,
then the pipeline's offset-commit history read back from `__consumer_offsets`.

    .venv/bin/python examples/spark_pipeline.py                       # starts its own broker
    .venv/bin/python examples/spark_pipeline.py --bootstrap 127.0.0.1:9092 --seconds 30

1. A generator thread produces page views (JSON: user, page, ts in ms) to the topic `page-views`, with
   some events arriving out of order (up to 3 s late).
2. Two Structured Streaming queries read `page-views` through `format("herd")`, parse the JSON and count
   views and distinct users per page in 5-second event-time windows, with a 5-second watermark (append
   mode: a window is written once, when the watermark passes its end). One query writes the results to
   the herd topic `page-stats` (`writeStream.format("herd")`), the other to Parquet. Each commits its
   processed offsets to its own consumer group (`kafka.group.id`), so `herd groups describe` shows its lag.
3. After the generator stops and the queries catch up, `herd groups describe` shows both groups at lag 0,
   and a batch job reads `__consumer_offsets` with
   `decode=consumer_offsets` and reports each pipeline group's commit history; the results in `page-stats`
   and in Parquet are summarised.
Needs the herd[spark] extra and Java 17.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

EVENTS, STATS = "page-views", "page-stats"
GROUPS = {"topic": "pageviews-to-topic", "parquet": "pageviews-to-parquet"}
PAGES = ["/", "/pricing", "/docs", "/docs/spark", "/blog", "/signup"]


# -- the broker --------------------------------------------------------------------------------------------


def start_broker(data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`herd serve` on a free port; returns the process and its bootstrap address."""
    log_path = data_dir / "broker.log"
    args = [
        sys.executable,
        "-m",
        "herd.cli",
        "serve",
        "--override",
        "listeners=PLAINTEXT://127.0.0.1:0",
        "--override",
        f"log.dirs={data_dir / 'data'}",
        "--override",
        "group.initial.rebalance.delay.ms=0",
    ]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        match = re.search(r"herd listening on (\S+):(\d+)", log_path.read_text(errors="replace"))
        if match:
            return proc, f"127.0.0.1:{match.group(2)}"
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"herd serve did not start:\n{log_path.read_text(errors='replace')}")


def create_topics(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    existing = admin.list_topics(timeout=10).topics
    wanted = [NewTopic(t, 3, 1) for t in (EVENTS, STATS) if t not in existing]
    for future in admin.create_topics(wanted).values() if wanted else []:
        future.result(30)


# -- 1. the generator ---------------------------------------------------------------------------------------


def page_views(seconds: float, rate: int) -> Iterator[dict[str, Any]]:
    """About `rate` views per second for `seconds`, stamped with event time, some of them late."""
    rng = random.Random(7)
    end = time.time() + seconds
    while time.time() < end:
        now_ms = int(time.time() * 1000)
        for _ in range(rate // 10):
            late = rng.random() < 0.1
            yield {
                "user": f"u{rng.randint(1, 500)}",
                "page": rng.choice(PAGES),
                "ts": now_ms - (rng.randint(0, 3000) if late else 0),
            }
        time.sleep(0.1)


def generate(bootstrap: str, seconds: float, rate: int, counter: list[int]) -> None:
    """Page views, then a watermark tick (its event time lands in counter[1])."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for view in page_views(seconds, rate):
        producer.produce(EVENTS, json.dumps(view).encode(), view["user"].encode())
        counter[0] += 1
        producer.poll(0)
    # A watermark tick in every partition: a view 15 s in the future moves event time past the last window
    # plus the watermark delay, so the queries write the last windows. The tick's own window stays open
    # (it would close with later traffic), so it never shows in the results.
    tick = {"user": "watermark-tick", "page": PAGES[0], "ts": int(time.time() * 1000) + 15_000}
    counter[1] = tick["ts"]
    for partition in range(3):
        producer.produce(EVENTS, json.dumps(tick).encode(), partition=partition)
    producer.flush(30)


# -- 2. the streaming jobs -----------------------------------------------------------------------------------


def windowed_counts(spark: Any, bootstrap: str, group: str) -> Any:
    from pyspark.sql import functions as F

    schema = "user string, page string, ts long"
    views = (
        spark.readStream.format("herd")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", EVENTS)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 5_000)
        .option("kafka.group.id", group)
        .load()
        .select(F.from_json(F.col("value").cast("string"), schema).alias("v"))
        .select("v.user", "v.page", F.timestamp_millis("v.ts").alias("event_time"))
    )
    return (
        views.withWatermark("event_time", "5 seconds")
        .groupBy(F.window("event_time", "5 seconds"), "page")
        .agg(F.count("*").alias("views"), F.approx_count_distinct("user").alias("users"))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "page",
            "views",
            "users",
        )
    )


def start_jobs(spark: Any, bootstrap: str, work: Path) -> list[Any]:
    from pyspark.sql import functions as F

    from herd.spark import wait_for_sources

    to_topic = (
        windowed_counts(spark, bootstrap, GROUPS["topic"])
        .select(F.col("page").alias("key"), F.to_json(F.struct("*")).alias("value"))
        .writeStream.format("herd")
        .queryName("stats-to-topic")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", STATS)
        .option("checkpointLocation", str(work / "checkpoints" / "topic"))
        .outputMode("append")
        .trigger(processingTime="1 second")
        .start()
    )
    wait_for_sources(to_topic)  # before the second herd source starts: a Spark race, herd/spark/streams.py
    to_parquet = (
        windowed_counts(spark, bootstrap, GROUPS["parquet"])
        .writeStream.format("parquet")
        .queryName("stats-to-parquet")
        .option("path", str(work / "stats.parquet"))
        .option("checkpointLocation", str(work / "checkpoints" / "parquet"))
        .outputMode("append")
        .trigger(processingTime="1 second")
        .start()
    )
    return [to_topic, to_parquet]


def lag(bootstrap: str, group: str) -> int:
    """What `herd groups describe` shows: records in the events topic not yet committed by `group`."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        parts = [TopicPartition(EVENTS, p) for p in range(3)]
        ends = [consumer.get_watermark_offsets(p, timeout=10)[1] for p in parts]
        done = [max(tp.offset, 0) for tp in consumer.committed(parts, timeout=10)]
        return sum(ends) - sum(done)
    finally:
        consumer.close()


def wait_until_drained(bootstrap: str, jobs: list[Any], tick_ms: int, timeout: float) -> None:
    """Until both groups have no lag and both queries ran the batch that writes the windows the tick
    closed (a batch without input whose watermark is the tick's event time minus the delay)."""
    closed = datetime.fromtimestamp((tick_ms - 5_000) / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for q in jobs:
            if q.exception() is not None:
                raise RuntimeError(f"query {q.name} failed") from q.exception()
        progress = [q.lastProgress or {} for q in jobs]
        evicted = all(
            p.get("numInputRows") == 0 and p.get("eventTime", {}).get("watermark", "") >= closed for p in progress
        )
        if evicted and all(lag(bootstrap, g) == 0 for g in GROUPS.values()):
            return
        time.sleep(1)
    print("warning: the queries did not drain in time; the results below are partial")


# -- 3. the reports -----------------------------------------------------------------------------------------


def report_commit_history(spark: Any, bootstrap: str) -> None:
    from pyspark.sql import functions as F

    history = (
        spark.read.format("herd")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", "__consumer_offsets")
        .option("decode", "consumer_offsets")
        .load()
        .where(F.col("group").isin(list(GROUPS.values())) & (F.col("kind") == "offset_commit"))
    )
    print("\n== commit history of the pipeline's groups (from __consumer_offsets) ==")
    (
        history.groupBy("group", "topic", "partition")
        .agg(
            F.count("*").alias("commits"),
            F.min("offset").alias("first_offset"),
            F.max("offset").alias("last_offset"),
            F.min("commit_timestamp").alias("first_commit"),
            F.max("commit_timestamp").alias("last_commit"),
        )
        .orderBy("group", "partition")
        .show(truncate=False)
    )
    print("last commits:")
    history.select("group", "partition", "offset", "commit_timestamp").orderBy(F.desc("commit_timestamp")).show(
        6, truncate=False
    )


def report_results(spark: Any, bootstrap: str, work: Path, produced: int) -> None:
    from pyspark.sql import functions as F

    schema = "window_start timestamp, window_end timestamp, page string, views long, users long"
    topic = (
        spark.read.format("herd")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", STATS)
        .load()
        .select(F.from_json(F.col("value").cast("string"), schema).alias("s"))
        .select("s.*")
    )
    parquet = spark.read.parquet(str(work / "stats.parquet"))
    counted = parquet.agg(F.sum("views")).first()[0] or 0
    print(
        f"== windows written: {topic.count()} to the topic {STATS!r}, {parquet.count()} to Parquet; they "
        f"count {counted} of the {produced} page views (events later than the watermark are dropped) =="
    )
    parquet.orderBy(F.desc("window_start"), F.desc("views")).show(8, truncate=False)


# -- main ---------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", help="a running broker (default: start one in a temporary directory)")
    parser.add_argument("--seconds", type=float, default=20, help="how long the generator runs")
    parser.add_argument("--rate", type=int, default=2000, help="page views per second")
    parser.add_argument("--work", type=Path, help="checkpoints and Parquet output (default: a temp dir)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="herd-pipeline-"))
    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        broker, bootstrap = start_broker(work)
        print(f"started herd at {bootstrap} (data in {work / 'data'})")
    try:
        run(bootstrap, args.seconds, args.rate, work)
    finally:
        if broker is not None:
            broker.terminate()
            broker.wait(30)


def run(bootstrap: str, seconds: float, rate: int, work: Path) -> None:
    from herd.spark.session import local_session

    create_topics(bootstrap)
    spark = local_session("herd-pipeline")
    jobs = start_jobs(spark, bootstrap, work)
    produced = [0, 0]
    generator = threading.Thread(target=generate, args=(bootstrap, seconds, rate, produced))
    generator.start()
    while generator.is_alive():
        generator.join(5)
        print(
            f"produced {produced[0]} page views; lag: " + ", ".join(f"{g} {lag(bootstrap, g)}" for g in GROUPS.values())
        )
    wait_until_drained(bootstrap, jobs, produced[1], timeout=180)
    for job in jobs:
        job.stop()
    print("\n== herd groups describe ==")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "herd.cli",
            "groups",
            "describe",
            "--bootstrap-server",
            bootstrap,
            *(arg for g in GROUPS.values() for arg in ("--group", g)),
        ],
        check=False,
    )
    report_commit_history(spark, bootstrap)
    report_results(spark, bootstrap, work, produced[0])
    spark.stop()


if __name__ == "__main__":
    main()
