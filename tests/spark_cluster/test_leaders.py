"""Issue 20, item 2: the connector's reads follow a partition's leader on a three-node herd cluster, without Spark
(what the tasks and the driver run, called directly; test_standalone.py shows the same inside a Spark cluster).

A range being read when its partition's leader moves (NOT_LEADER_OR_FOLLOWER from the old leader) and when the new
leader is killed with SIGKILL (a connection reset, then refused) is read to its end from where it was, every
record once, by both fetchers; the driver's ListOffsets rides through a killed leader instead of failing the
query."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Iterator

import pytest
from pgcluster import create_topic_on, leaders_of

from herd.testing import HerdCluster

pytest.importorskip("pyarrow")
from confluent_kafka import Producer  # noqa: E402

from herd.spark import fetch, native  # noqa: E402
from herd.spark.broker import BrokerView  # noqa: E402
from herd.spark.offsets import OffsetRange  # noqa: E402

RECORDS = 1200
OVERRIDES = {
    "broker.session.timeout.ms": "2500",
    "broker.heartbeat.interval.ms": "500",
    "offsets.topic.num.partitions": "3",
    "herd.http.listener": "127.0.0.1:0",
    "herd.faults.enable": "true",
}
_HTTP = re.compile(r"herd http listening on ([\w.:\[\]-]+):(\d+)")


@pytest.fixture(scope="module")
def herd(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HerdCluster]:
    cluster = HerdCluster(tmp_path_factory.mktemp("leaders"), overrides=OVERRIDES, database_url=pg_url, faults=False)
    with cluster.start(nodes=3, balanced=False):
        yield cluster


def _fill(herd: HerdCluster, topic: str) -> str:
    """`topic` with one partition of RECORDS records in batches of 20 (so a range takes many Fetch answers)."""
    create_topic_on(herd, topic, 1)
    producer = Producer({"bootstrap.servers": herd.bootstrap, "linger.ms": 0, "enable.idempotence": True})
    for start in range(0, RECORDS, 20):
        for i in range(start, start + 20):
            producer.produce(topic, b"r%05d" % i, partition=0)
        assert producer.flush(30) == 0
    return herd.bootstrap


def _move(herd: HerdCluster, topic: str, to: int) -> None:
    """Move partition 0's leadership to node `to` (POST /v1/moves on node 0's HTTP listener)."""
    host, port = _HTTP.search(herd.log(0)).groups()
    body = json.dumps({"topic": topic, "partition": 0, "to": to}).encode()
    request = urllib.request.Request(
        f"http://{host}:{port}/v1/moves", body, method="POST", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status == 200


def _read_across_a_move_and_a_kill(herd: HerdCluster, topic: str, chunks: Iterator[list[int]]) -> list[int]:
    """Read the range chunk by chunk: after the first chunk the leadership moves to another node, after a few more
    that node is killed (and started again once the range is read)."""
    read: list[int] = []
    first = leaders_of(herd, topic)[0]
    moved_to = killed = None
    after_kill = 0
    for n, offsets in enumerate(chunks):
        read.extend(offsets)
        if n == 0:
            moved_to = (first + 1) % 3
            _move(herd, topic, moved_to)
        elif n == 3:
            killed = moved_to
            herd.kill(killed)
        elif killed is not None:
            after_kill += len(offsets)
    assert killed is not None and after_kill, "the range was read before the leader moved and died"
    herd.restart(killed)
    return read


def _native_chunks(bootstrap: str, topic: str) -> Iterator[list[int]]:
    settings = native.NativeSettings.of({"bootstrap.servers": bootstrap, "max.partition.fetch.bytes": 1024})
    for columns in native.read_columns(
        settings, OffsetRange(topic, 0, 0, RECORDS), fail_on_data_loss=True, with_headers=False, poll_timeout_ms=30_000
    ):
        yield [o for o in columns.offsets.to_pylist() if o < RECORDS]


def _librdkafka_chunks(bootstrap: str, topic: str) -> Iterator[list[int]]:
    # a small local queue: librdkafka must keep fetching while the leader moves and dies, not prefetch it all
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": "leaders-reader",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
        "max.partition.fetch.bytes": 1024,
        "fetch.wait.max.ms": 100,
        "queued.min.messages": 20,
        "queued.max.messages.kbytes": 1,
        "fetch.queue.backoff.ms": 20,
    }
    settings = fetch.ReadSettings(tuple(sorted(config.items())), True, False, 30_000, 100, "librdkafka")
    for messages in fetch.read_messages(settings, OffsetRange(topic, 0, 0, RECORDS)):
        yield [m.offset() for m in messages]


@pytest.mark.parametrize("fetcher", ["native", "librdkafka"])
def test_a_range_is_read_to_its_end_across_a_moved_and_a_killed_leader(herd: HerdCluster, fetcher: str) -> None:
    topic = f"follow-{fetcher}"
    bootstrap = _fill(herd, topic)
    chunks = (_native_chunks if fetcher == "native" else _librdkafka_chunks)(bootstrap, topic)
    try:
        read = _read_across_a_move_and_a_kill(herd, topic, chunks)
    finally:
        chunks.close()
        fetch.close_cached_clients()
    assert read == list(range(RECORDS)), "a record was skipped or read twice"


def test_the_drivers_list_offsets_rides_through_a_killed_leader(herd: HerdCluster) -> None:
    """The driver asks for the topics and the latest offsets before each micro-batch; right after the leader dies
    a first attempt may wait on the dead node (seen in a soak: a Metadata request queued on it until the 30 s
    timeout failed the query), and the next ones go to a node that is up."""
    topic = "follow-driver"
    bootstrap = _fill(herd, topic)
    view = BrokerView({"bootstrap.servers": bootstrap}, "leaders-driver")
    try:
        assert view.latest([(topic, 0)]) == {(topic, 0): RECORDS}
        victim = leaders_of(herd, topic)[0]
        herd.kill(victim)
        started = time.monotonic()
        assert view.topics()[topic] == 1  # Metadata first, as latestOffset asks: a request queued on the dead node
        assert view.latest([(topic, 0)]) == {(topic, 0): RECORDS}
        print(f"Metadata and ListOffsets answered {time.monotonic() - started:.1f} s after the leader was killed")
    finally:
        view.close()
    herd.restart(victim)
