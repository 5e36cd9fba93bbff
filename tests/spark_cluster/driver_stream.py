"""A streaming Spark driver, run as its own process by test_standalone.py (argv[1]: a JSON file of settings).

Three queries read the herd topic `topic` on the standalone cluster with format("herd"), each with its own
checkpoint under `dir`, so that a driver killed with SIGKILL and started again resumes all three:

- `parquet`: the value, partition and offset of each record to a Parquet file sink (`dir`/parquet);
- `foreach`: foreachBatch, each batch written as `dir`/foreach/batch=<batch id> with mode overwrite, so a batch
  that runs again replaces its own earlier output;
- `copy`: key and value to the herd topic `sink_topic` with writeStream.format("herd").

Every micro-batch's progress goes to `progress` as one JSON line (query name, batch id, rows, the source's end
offsets, and how far behind the latest offsets it is, from herd.spark.offsets_behind). Once every
query has read `total` records the driver stops them, reads the two Parquet outputs back with Spark, and prints
one JSON line: the values each holds (sorted, duplicates kept). With `batch_topic` it then runs a batch job
too (`batch_job`): the executors write `batch_rows` rows to that topic and read them back."""

import json
import os
import sys
import time

settings = json.loads(open(sys.argv[1]).read())
from pyspark.sql.streaming import StreamingQueryListener  # noqa: E402

from herd.spark import offsets_behind, wait_for_sources  # noqa: E402
from herd.spark.session import local_session  # noqa: E402
from herd.testing.wait import wait_until  # noqa: E402

root, bootstrap, total = settings["dir"], settings["bootstrap"], settings["total"]
spark = local_session(
    "herd-standalone-stream",
    master=settings["master"],
    conf={**settings["conf"], "spark.sql.streaming.minBatchesToRetain": "100"},
)


def say(what: str) -> None:
    """A timestamped line in the driver's log, which the test shows when it fails."""
    print(f"{time.strftime('%H:%M:%S')} driver_stream: {what}", file=sys.stderr, flush=True)


say("session started")


class Progress(StreamingQueryListener):
    def onQueryStarted(self, event):
        pass

    def onQueryIdle(self, event):
        pass

    def onQueryTerminated(self, event):
        pass

    def onQueryProgress(self, event):
        p = event.progress
        source = p.sources[0]
        line = {
            "query": p.name,
            "batch": p.batchId,
            "rows": p.numInputRows,
            "at": time.time(),
            "end": json.loads(source.endOffset),
            "behind": offsets_behind(source),
        }
        with open(settings["progress"], "a") as out:
            out.write(json.dumps(line) + "\n")


spark.streams.addListener(Progress())


def source():
    return (
        spark.readStream.format("herd")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", settings["topic"])
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", settings["per_trigger"])
        .load()
    )


def write_batch(frame, batch_id):
    frame.write.mode("overwrite").parquet(f"{root}/foreach/batch={batch_id}")


trigger = {"processingTime": "300 milliseconds"}
# The first query creates its source before the others start (herd.spark.streams: a Spark race on the map of
# environment variables that every query of a Python data source shares).
parquet = (
    source()
    .selectExpr("CAST(value AS STRING) AS v", "partition", "offset")
    .writeStream.queryName("parquet")
    .format("parquet")
    .option("path", f"{root}/parquet")
    .option("checkpointLocation", f"{root}/cp-parquet")
    .trigger(**trigger)
    .start()
)
wait_for_sources(parquet)
queries = [
    parquet,
    source()
    .selectExpr("CAST(value AS STRING) AS v")
    .writeStream.queryName("foreach")
    .foreachBatch(write_batch)
    .option("checkpointLocation", f"{root}/cp-foreach")
    .trigger(**trigger)
    .start(),
    source()
    .select("key", "value")
    .writeStream.queryName("copy")
    .format("herd")
    .option("kafka.bootstrap.servers", bootstrap)
    .option("topic", settings["sink_topic"])
    .option("checkpointLocation", f"{root}/cp-copy")
    .trigger(**trigger)
    .start(),
]


def batch_job(topic: str, rows: int) -> dict:
    """The executors write `rows` rows ("w0000"...) to `topic` with format("herd"), then read the topic back; the
    master, the executors, the values read, and the process ids of the Python workers that read them."""
    frame = spark.createDataFrame([("w%04d" % i,) for i in range(rows)], "value string").repartition(4)
    frame.write.format("herd").mode("append").option("kafka.bootstrap.servers", bootstrap).option("topic", topic).save()
    read = spark.read.format("herd").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic).load()
    readers = read.rdd.mapPartitions(lambda rows: [(os.getpid(), [bytes(r.value) for r in rows])]).collect()
    executors = spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()
    return {
        "master": spark.sparkContext.master,
        "executors": len(executors) - 1,
        "driver_pid": os.getpid(),
        "reader_pids": sorted({pid for pid, _ in readers}),
        "values": sorted(v.decode() for _, values in readers for v in values),
    }


say("queries started")


def read_up_to(query) -> int:
    progress = query.lastProgress
    if not progress:
        return 0
    return sum(sum(parts.values()) for parts in json.loads(progress["sources"][0]["endOffset"]).values())


try:

    def all_read() -> bool:
        if all(read_up_to(q) >= total for q in queries):
            return True
        for q in queries:
            if q.exception() is not None:
                raise RuntimeError(f"query {q.name} failed: {q.exception()}")
        return False

    wait_until(
        all_read,
        settings.get("timeout", 240),
        lambda: f"every query to read {total} records (read {[read_up_to(q) for q in queries]})",
        interval=0.2,
    )
    say("every query has read every record")
    for q in queries:
        q.stop()
    parquet = [r.v for r in spark.read.parquet(f"{root}/parquet").select("v").collect()]
    foreach = [r.v for r in spark.read.parquet(f"{root}/foreach").select("v").collect()]
    out = {"parquet": sorted(parquet), "foreach": sorted(foreach)}
    if "batch_topic" in settings:
        out["batch"] = batch_job(settings["batch_topic"], settings["batch_rows"])
    print(json.dumps(out))
finally:
    spark.stop()
