"""Issue 20: a real Spark standalone cluster (tests/sparkcluster.py: a master and two workers, each a JVM of its
own, executors in their own JVMs and Python workers) reads and writes a three-node herd cluster with format("herd").
The driver is a process of its own (driver_stream.py), so the test process's local SparkSession (tests/spark) is
not involved.

One scenario, run once for the module (`pipeline`: every start of a driver and its executors costs tens of
seconds): a streaming pipeline of three queries runs while a herd node and then the driver are killed with SIGKILL;
the driver started again finishes the streams, then runs a batch job that writes rows from the executors and reads
them back. The tests check what each part must show.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from pgcluster import create_topic_on, leaders_of
from processes import file_text, show_on_failure
from sparkcluster import SRC, SparkStandalone

from herd.testing import HerdCluster
from herd.testing.wait import wait_until

pytest.importorskip("pyspark")
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition  # noqa: E402

# A node's lease is renewed every 500 ms for 2.5 s, so a killed node's partitions move within about 3 s.
HERD_OVERRIDES = {
    "offsets.topic.num.partitions": "3",
    "broker.session.timeout.ms": "2500",
    "broker.heartbeat.interval.ms": "500",
}


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandalone]:
    with SparkStandalone(tmp_path_factory.mktemp("spark-standalone"), workers=2) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def herd(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HerdCluster]:
    """Three herd nodes over PostgreSQL; a test that kills one starts it again."""
    cluster = HerdCluster(
        tmp_path_factory.mktemp("standalone-herd"), overrides=HERD_OVERRIDES, database_url=pg_url, faults=False
    )
    with cluster.start(nodes=3, balanced=False):
        yield cluster


# -- a herd node and the driver killed under a streaming pipeline (driver_stream.py) ---------------------------


def _progress(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _read_up_to(path: Path, query: str, topic: str, partitions: set[int] | None = None) -> int:
    """The records `query` has read of `topic` (of `partitions`, if given), from its last progress line."""
    ends = [line["end"].get(topic, {}) for line in _progress(path) if line["query"] == query]
    return sum(o for p, o in ends[-1].items() if partitions is None or int(p) in partitions) if ends else 0


def _wait(condition, what: str, driver: Driver, timeout: float = 120.0) -> None:
    def holds() -> bool:
        if condition():
            return True
        assert driver.proc.poll() is None, f"the driver exited ({driver.proc.returncode}) before {what}: {driver.log()}"
        return False

    wait_until(holds, timeout, lambda: f"{what}: {driver.log()}", interval=0.1)


def _topic_values(bootstrap: str, topic: str) -> list[str]:
    """Every value in `topic`, read from the start to the high watermark of each partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "standalone-check", "enable.auto.commit": False})
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        values, done = [], {p for p, end in ends.items() if end == 0}

        def read() -> bool:
            if len(done) < len(ends):
                for m in consumer.consume(500, 0.5):
                    if m.error() is None:
                        values.append(m.value().decode())
                        if m.offset() + 1 >= ends[m.partition()]:
                            done.add(m.partition())
            return len(done) >= len(ends)

        wait_until(
            read, 60, lambda: f"{topic} read back to its end ({len(done)} of {len(ends)} partitions)", interval=0
        )
        return values
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def pipeline(standalone: SparkStandalone, herd: HerdCluster, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Three queries (Parquet, foreachBatch by batch id, a herd topic) read the herd topic `events` on the executors.
    The leader of its partition 0 is killed with SIGKILL: the test waits until reads of the partitions it led have
    gone on while it is down, and starts it again. Then the driver is killed with SIGKILL and started again from
    the checkpoints; it finishes the streams, then runs the batch job (topic `spread`). What the second driver
    printed, with what was produced, what the herd sink holds and every batch's progress."""
    per_trigger, phase = 300, 600
    tmp_path = tmp_path_factory.mktemp("pipeline")
    work, progress = tmp_path / "stream", tmp_path / "progress.jsonl"
    bootstrap = herd.bootstrap  # every node, the killed one included: clients must find the others
    settings = {
        "master": standalone.url,
        "conf": standalone.executor_conf(),
        "topic": "events",
        "sink_topic": "copied",
        "dir": str(work),
        "progress": str(progress),
        "per_trigger": per_trigger,
        "bootstrap": bootstrap,
        "total": 3 * phase,
        "batch_topic": "spread",
        "batch_rows": 300,
    }
    for topic in ("events", "copied", "spread"):
        create_topic_on(herd, topic, 4)
    produced: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})

    def produce(n: int) -> None:
        for i in range(len(produced), len(produced) + n):
            producer.produce("events", value=b"e%05d" % i, partition=i % 4)
            produced.append("e%05d" % i)
        assert producer.flush(60) == 0

    produce(phase)
    leaders = leaders_of(herd, "events")
    victim = leaders[0]
    led = {p for p, node in leaders.items() if node == victim}

    first = Driver(settings, "first")
    try:
        _wait(lambda: _read_up_to(progress, "parquet", "events") >= phase // 2, "the first batches", first)
        herd.kill(victim)
        before = _read_up_to(progress, "parquet", "events", led)
        produce(phase)  # the idempotent producer waits out the failover of the partitions `victim` led
        _wait(
            lambda: (
                _read_up_to(progress, "parquet", "events", led) > before
                and _read_up_to(progress, "copy", "events", led) > before
            ),
            f"reads of {sorted(led)} going on without node {victim}",
            first,
        )
        herd.restart(victim)
        produce(phase // 2)
        _wait(lambda: _read_up_to(progress, "parquet", "events") > 2 * phase, "a batch of the last records", first)
    finally:
        first.kill()
    produce(phase // 2)  # what only the restarted driver can read

    result = Driver(settings, "second").result(timeout=300)
    return {
        **result,
        "produced": sorted(produced),
        "per_trigger": per_trigger,
        "progress": _progress(progress),
        "copied": Counter(_topic_values(bootstrap, "copied")),
        "leaders of spread": leaders_of(herd, "spread"),
    }


def test_the_executors_of_two_workers_write_to_and_read_from_a_three_node_herd_cluster(
    standalone: SparkStandalone, pipeline: dict
) -> None:
    """format("herd") as a sink and as a source on the executors of both workers: the partitions' leaders are spread
    over the three nodes, and every row written is read back once, by Python workers that are not the driver."""
    batch = pipeline["batch"]
    assert len(set(pipeline["leaders of spread"].values())) == 3
    assert batch["master"] == standalone.url and batch["executors"] == 2
    assert batch["values"] == ["w%04d" % i for i in range(300)]  # every row once
    assert batch["reader_pids"] and batch["driver_pid"] not in batch["reader_pids"]


def test_a_streaming_pipeline_rides_through_a_killed_herd_node_and_a_killed_driver(pipeline: dict) -> None:
    """Parquet and foreachBatch by batch id hold every record exactly once; the herd sink every record at least
    once, duplicates only from the one batch run again; each batch's progress says how far behind it was."""
    produced, copied = pipeline["produced"], pipeline["copied"]
    assert pipeline["parquet"] == produced, "the Parquet sink lost or repeated a record"
    assert pipeline["foreach"] == produced, "foreachBatch by batch id lost or repeated a record"
    assert set(copied) == set(produced), "the herd sink lost a record"
    duplicates = sum(copied.values()) - len(copied)
    print(f"herd sink: {duplicates} duplicates of {len(produced)} records after a driver kill")
    assert duplicates <= pipeline["per_trigger"] + 4, f"{duplicates} duplicates: more than the one batch run again"
    lines = [line for line in pipeline["progress"] if line["query"] == "parquet" and line["rows"]]
    assert any(line["behind"]["maxOffsetsBehindLatest"] > 0 for line in lines)  # maxOffsetsPerTrigger held it back
    assert lines[-1]["behind"] == {
        "minOffsetsBehindLatest": 0,
        "maxOffsetsBehindLatest": 0,
        "avgOffsetsBehindLatest": 0.0,
    }


class Driver:
    """driver_stream.py as a process group of its own (the Python driver and its JVM), its output in files."""

    def __init__(self, settings: dict, name: str) -> None:
        base = Path(settings["dir"]).with_name(name)
        base.with_suffix(".json").write_text(json.dumps(settings))
        self.out, self.err = base.with_suffix(".out"), base.with_suffix(".log")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH")) if p)}
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(Path(__file__).with_name("driver_stream.py")), str(base.with_suffix(".json"))],
                stdout=out,
                stderr=err,
                env=env,
                start_new_session=True,
            )
        show_on_failure(f"spark driver {name} ({self.err})", self.proc, file_text(self.err))

    def log(self) -> str:
        """The first lines that name an exception, then the log's tail: a JVM stack's tail alone hides what was
        thrown (soak of 37d8149, run 5: only ObjectOutputStream frames were shown)."""
        text = self.err.read_text(errors="replace")
        named = [
            line
            for line in text.splitlines()
            if ("Exception" in line or "Error" in line) and not line.lstrip().startswith("at ")
        ]
        return "\n".join(named[:8]) + "\n...\n" + text[-3000:]

    def kill(self) -> None:
        """SIGKILL to the driver and its JVM."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def result(self, timeout: float) -> dict:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"the driver did not finish within {timeout} s: {self.log()}") from None
        assert self.proc.returncode == 0, self.log()
        return json.loads(self.out.read_text().strip().splitlines()[-1])
