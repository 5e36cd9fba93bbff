"""The transactional data path over real sockets, on one in-process broker: a transactional Produce (v9, with its
transactional id), Fetch read_committed at the oldest (v4) and newest (v18, topics by id) versions stopping at the
last stable offset and waking from its long poll when a marker moves it, ListOffsets latest read_committed, and
the same partition after a restart of the broker (the aborted index read back from `.txnindex`)."""

from __future__ import annotations

import threading
import time
from typing import Any

from batches import idempotent_batch, records_of
from inprocess import InProcessBroker
from kio.schema.errors import ErrorCode
from rawkafka import RawClient

from herd.client.wire import request_builder
from herd.testing.wait import collect_until

P = 8800
# the data path alone: a producer id no transaction coordinator knows, markers appended to the log directly, so
# the coordinator's verification of a first transactional write (KIP-890 part 1) is off
UNVERIFIED = {"offsets.topic.num.partitions": "1", "transaction.partition.verification.enable": "false"}


def produce(client: RawClient, records: bytes) -> Any:
    b = request_builder(0, 9)
    request = b.request(
        transactional_id="tx",
        acks=-1,
        timeout=5000,
        topic_data=(
            b("TopicProduceData", name="t", partition_data=(b("PartitionProduceData", index=0, records=records),)),
        ),
    )
    return client.request(0, 9, request).responses[0].partition_responses[0]


def fetch(client: RawClient, version: int, offset: int, topic_id: Any = None, wait_ms: int = 0) -> Any:
    b = request_builder(1, version)
    request = b.request(
        replica_id=-1,
        max_wait=wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=1,
        session_id=0,
        session_epoch=-1,
        forgotten_topics_data=(),
        rack_id="",
        topics=(
            b(
                "FetchTopic",
                topic="t",
                topic_id=topic_id,
                partitions=(
                    b(
                        "FetchPartition",
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    ),
                ),
            ),
        ),
    )
    return client.request(1, version, request).responses[0].partitions[0]


def latest_committed(client: RawClient) -> int:
    b = request_builder(2, 11)
    request = b.request(
        replica_id=-1,
        isolation_level=1,
        timeout=5000,
        topics=(
            b(
                "ListOffsetsTopic",
                name="t",
                partitions=(b("ListOffsetsPartition", partition_index=0, current_leader_epoch=-1, timestamp=-1),),
            ),
        ),
    )
    return client.request(2, 11, request).topics[0].partitions[0].offset


def marker(broker: InProcessBroker, commit: bool) -> None:
    async def write() -> None:
        server_broker = broker.server.broker
        server_broker.cluster.get("t").partitions[0].append_control(P, 0, commit, 0, server_broker.now_ms())
        server_broker.notify_append(("t", 0))

    broker.run(write())


def test_read_committed_over_the_wire_and_after_a_restart(tmp_path) -> None:
    props = {"log.dirs": str(tmp_path), **UNVERIFIED}
    broker = InProcessBroker(props)
    try:
        broker.run(_create(broker))
        topic_id = broker.server.broker.cluster.get("t").topic_id
        with RawClient(broker.port) as client:
            assert produce(client, idempotent_batch(P, 0, 0, 3, transactional=True)).error_code == ErrorCode.none
            for version in (4, 18):
                answer = fetch(client, version, 0, topic_id)
                assert (answer.error_code, answer.high_watermark, answer.last_stable_offset) == (ErrorCode.none, 3, 0)
                assert not answer.records and answer.aborted_transactions == ()
            assert latest_committed(client) == 0
            # a read_committed fetch waiting in long poll wakes when the abort moves the last stable offset
            threading.Timer(0.2, marker, (broker, False)).start()
            started = time.monotonic()
            woken = fetch(client, 18, 0, topic_id, wait_ms=5000)
            assert time.monotonic() - started < 4
            assert [o for o, _ in records_of(woken.records)] == [0, 1, 2, 3]  # the marker too, as Kafka sends it
            assert [(t.producer_id, t.first_offset) for t in woken.aborted_transactions] == [(P, 0)]
            assert latest_committed(client) == 4
    finally:
        broker.stop()
    again = InProcessBroker(props)
    try:
        with RawClient(again.port) as client:
            answer = fetch(client, 4, 0)
            assert [(t.producer_id, t.first_offset) for t in answer.aborted_transactions] == [(P, 0)]
            assert answer.last_stable_offset == 4
    finally:
        again.stop()


async def _create(broker: InProcessBroker) -> None:
    broker.server.broker.cluster.create_topic("t", 1)


def test_librdkafka_read_committed_skips_aborted_records_and_markers(tmp_path) -> None:
    """confluent-kafka's consumer (librdkafka), read_committed: the committed transaction's records and the plain
    record, never the aborted ones nor the markers; read_uncommitted: every data record. This checks herd's marker
    batches and aborted list against a real client's reading of them."""
    from confluent_kafka import Consumer, TopicPartition

    broker = InProcessBroker({"log.dirs": str(tmp_path), **UNVERIFIED})
    try:
        broker.run(_create(broker))
        with RawClient(broker.port) as client:
            value = lambda i: b"committed-%d" % i  # noqa: E731
            produce(client, idempotent_batch(P, 0, 0, 3, transactional=True, value=value))
            marker(broker, True)
            produce(client, idempotent_batch(P, 0, 3, 2, transactional=True, value=b"aborted"))
            marker(broker, False)
            plain = idempotent_batch(P + 1, 0, 0, 1, value=b"plain")
            assert produce(client, plain).error_code == ErrorCode.none
        for isolation, expected in (("read_committed", [b"committed-0", b"committed-1", b"committed-2", b"plain"]),
                                    ("read_uncommitted", [b"committed-0", b"committed-1", b"committed-2",
                                                          b"aborted", b"aborted", b"plain"])):  # fmt: skip
            consumer = Consumer(
                {
                    "bootstrap.servers": broker.bootstrap,
                    "group.id": "g",
                    "isolation.level": isolation,
                    "enable.auto.commit": False,
                }
            )
            consumer.assign([TopicPartition("t", 0, 0)])
            try:
                got = collect_until(
                    lambda: [m.value() for m in consumer.consume(100, timeout=0.2) if m.error() is None],
                    lambda got: len(got) >= len(expected),
                    20,
                )
            finally:
                consumer.close()
            assert got == expected, isolation
    finally:
        broker.stop()
