"""The transactional data path through the API handlers of a real broker on the in-memory filesystem: Produce
accepting transactional batches with Kafka's checks, Fetch read_committed stopping at the last stable offset with
the aborted transactions of the range, ListOffsets latest under read_committed. Each response also goes through
kio's writer and reader, as it would on the wire (v4's nullable aborted list included)."""

from __future__ import annotations

import asyncio
import inspect
from datetime import timedelta
from typing import Any

import pytest
from batches import idempotent_batch, make_batch, records_of
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v4.request import FetchPartition as FetchPartitionV4
from kio.schema.fetch.v4.request import FetchRequest as FetchRequestV4
from kio.schema.fetch.v4.request import FetchTopic as FetchTopicV4
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.list_offsets.v2.request import ListOffsetsPartition as ListOffsetsPartitionV2
from kio.schema.list_offsets.v2.request import ListOffsetsRequest as ListOffsetsRequestV2
from kio.schema.list_offsets.v2.request import ListOffsetsTopic as ListOffsetsTopicV2
from kio.schema.produce.v11.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.serial import entity_reader
from kio.static.primitive import i32Timedelta

from herd.config import BrokerConfig
from herd.log.fs import MemoryFileSystem
from herd.log.records import control_batch
from herd.log.store import SegmentStore
from herd.protocol.messages import RequestHeader, encode_body, response_class
from herd.server.apis import fetch, list_offsets, produce
from herd.server.broker import Broker, RequestContext

P, Q = 4000, 5000
NO_WAIT = i32Timedelta.parse(timedelta(0))


def call(broker: Broker, api: Any, version: int, request: Any) -> Any:
    """The handler's response, after a trip through kio's writer and reader."""
    outcome = api.handle(RequestContext(broker, RequestHeader(api.API_KEY, version, 1, "test"), "127.0.0.1"), request)
    if inspect.isawaitable(outcome):
        outcome = asyncio.get_event_loop().run_until_complete(outcome)
    cls = response_class(api.API_KEY, version)
    decoded, _ = entity_reader(cls)(encode_body(outcome), 0)
    return decoded


def produce_to(broker: Broker, records: bytes, transactional_id: str | None = "tx") -> Any:
    request = ProduceRequest(
        transactional_id=transactional_id,
        acks=-1,
        timeout=NO_WAIT,
        topic_data=(TopicProduceData(name="t", partition_data=(PartitionProduceData(index=0, records=records),)),),
    )
    return call(broker, produce, 11, request).responses[0].partition_responses[0]


def fetch_from(broker: Broker, offset: int, isolation: int, version: int = 12, max_bytes: int = 1 << 20) -> Any:
    if version == 4:
        request: Any = FetchRequestV4(
            max_wait=NO_WAIT,
            min_bytes=0,
            isolation_level=isolation,
            topics=(
                FetchTopicV4(
                    topic="t",
                    partitions=(FetchPartitionV4(partition=0, fetch_offset=offset, partition_max_bytes=max_bytes),),
                ),
            ),
        )
    else:
        request = FetchRequest(
            max_wait=NO_WAIT,
            min_bytes=0,
            isolation_level=isolation,
            topics=(
                FetchTopic(
                    topic="t",
                    partitions=(FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=max_bytes),),
                ),
            ),
            forgotten_topics_data=(),
        )
    return call(broker, fetch, version, request).responses[0].partitions[0]


def latest(broker: Broker, isolation: int, timestamp: int = -1) -> int:
    request = ListOffsetsRequestV2(
        replica_id=-1,
        isolation_level=isolation,
        topics=(
            ListOffsetsTopicV2(name="t", partitions=(ListOffsetsPartitionV2(partition_index=0, timestamp=timestamp),)),
        ),
    )
    answer = call(broker, list_offsets, 2, request).topics[0].partitions[0]
    assert answer.error_code == ErrorCode.none
    return answer.offset


@pytest.fixture
def broker() -> Any:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    # the data path's handlers alone: no transaction coordinator runs, so no KIP-890 verification
    config = BrokerConfig.from_properties({"transaction.partition.verification.enable": "false"})
    b = Broker(config, SegmentStore("/data", MemoryFileSystem()))
    b.start()
    b.cluster.create_topic("t", 1)
    yield b
    b.close()
    loop.close()
    asyncio.set_event_loop(None)


def txn_batch(pid: int, seq: int, epoch: int = 0, count: int = 2, timestamp: int = 1000) -> bytes:
    return idempotent_batch(
        pid, epoch, seq, count, transactional=True, timestamp=timestamp, value=lambda i: b"%d-%d" % (pid, seq + i)
    )


def test_read_committed_stops_at_the_last_stable_offset_and_lists_the_aborted(broker: Broker) -> None:
    log = broker.cluster.get("t").partitions[0]
    assert produce_to(broker, make_batch([b"a", b"b"]), None).error_code == ErrorCode.none
    assert produce_to(broker, txn_batch(P, 0)).base_offset == 2
    assert produce_to(broker, txn_batch(Q, 0)).base_offset == 4
    assert produce_to(broker, make_batch([b"c"]), None).base_offset == 6
    # P and Q are open: read_committed sees the first two records only, read_uncommitted everything
    committed = fetch_from(broker, 0, 1)
    assert (committed.high_watermark, committed.last_stable_offset) == (7, 2)
    assert [o for o, _ in records_of(committed.records)] == [0, 1] and committed.aborted_transactions == ()
    uncommitted = fetch_from(broker, 0, 0)
    assert len(records_of(uncommitted.records)) == 7 and uncommitted.aborted_transactions is None
    assert uncommitted.last_stable_offset == 2
    above = fetch_from(broker, 5, 1)  # between the LSO and the high watermark: nothing, and no error
    assert (above.error_code, above.records, above.aborted_transactions) == (ErrorCode.none, b"", ())
    assert fetch_from(broker, 8, 1).error_code == ErrorCode.offset_out_of_range
    assert (latest(broker, 1), latest(broker, 0)) == (2, 7)

    log.append_control(P, 0, False, 0, broker.now_ms())  # abort P: the LSO moves to Q's first offset
    assert latest(broker, 1) == 4
    mid = fetch_from(broker, 0, 1)
    assert [o for o, _ in records_of(mid.records)] == [0, 1, 2, 3]
    assert [(t.producer_id, t.first_offset) for t in mid.aborted_transactions] == [(P, 2)]
    log.append_control(Q, 0, True, 0, broker.now_ms())
    done = fetch_from(broker, 4, 1)
    assert done.last_stable_offset == done.high_watermark == 9 and latest(broker, 1) == 9
    # P's aborted transaction overlaps [4, 9): its marker is at 7, its first offset 2 is below 9
    assert [(t.producer_id, t.first_offset) for t in done.aborted_transactions] == [(P, 2)]
    assert [(t.producer_id, t.first_offset) for t in fetch_from(broker, 8, 1).aborted_transactions] == []
    first_only = fetch_from(broker, 0, 1, max_bytes=1)  # KIP-74: the first batch (0-1), before P's transaction
    assert [o for o, _ in records_of(first_only.records)] == [0, 1] and first_only.aborted_transactions == ()
    v4 = fetch_from(broker, 0, 1, version=4)
    assert [(t.producer_id, t.first_offset) for t in v4.aborted_transactions] == [(P, 2)]
    assert fetch_from(broker, 0, 0, version=4).aborted_transactions is None


def test_a_search_by_time_under_read_committed_finds_nothing_at_or_above_the_last_stable_offset(
        broker: Broker) -> None:  # fmt: skip
    produce_to(broker, make_batch([b"a"], timestamp_ms=1_000_000), None)
    produce_to(broker, txn_batch(P, 0, timestamp=2_000_000))
    assert latest(broker, 1, timestamp=0) == 0
    assert latest(broker, 1, timestamp=1_000_001) == -1  # only P's open records are that late
    assert latest(broker, 0, timestamp=1_000_001) == 1


def test_produce_checks_transactional_batches_as_kafka(broker: Broker) -> None:
    # transactional records without a transactional id: every partition refused (KafkaApis.handleProduceRequest)
    assert produce_to(broker, txn_batch(P, 0), None).error_code == ErrorCode.transactional_id_authorization_failed
    second = make_batch([b"y"]) + txn_batch(P, 0)  # the second batch is the transactional one
    assert produce_to(broker, second, None).error_code == ErrorCode.transactional_id_authorization_failed
    # a transactional id with plain batches is fine
    assert produce_to(broker, make_batch([b"x"]), "tx").error_code == ErrorCode.none
    assert produce_to(broker, txn_batch(P, 0, epoch=1)).error_code == ErrorCode.none
    assert produce_to(broker, idempotent_batch(P, 1, 2)).error_code == ErrorCode.invalid_txn_state
    assert produce_to(broker, control_batch(P, 1, True, 0, 0)).error_code == ErrorCode.invalid_record
    broker.cluster.get("t").partitions[0].append_control(P, 2, False, 0, broker.now_ms())  # a bump to 2
    assert produce_to(broker, txn_batch(P, 2, epoch=1)).error_code == ErrorCode.invalid_producer_epoch
    assert produce_to(broker, txn_batch(P, 0, epoch=2)).error_code == ErrorCode.none


def test_describe_producers_shows_the_open_transaction_and_the_markers_coordinator_epoch(broker: Broker) -> None:
    from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest

    from herd.server.apis import describe_producers

    def described() -> dict[int, tuple[int, int, int, int]]:
        request = DescribeProducersRequest(topics=(TopicRequest(name="t", partition_indexes=(0,)),))
        states = call(broker, describe_producers, 0, request).topics[0].partitions[0].active_producers
        return {
            s.producer_id: (s.producer_epoch, s.last_sequence, s.coordinator_epoch, s.current_txn_start_offset)
            for s in states
        }

    produce_to(broker, make_batch([b"a"]), None)
    produce_to(broker, txn_batch(P, 0))
    assert described() == {P: (0, 1, -1, 1)}
    broker.cluster.get("t").partitions[0].append_control(P, 1, False, 6, broker.now_ms())  # aborted, epoch bumped
    broker.cluster.get("t").partitions[0].append_control(Q, 3, True, 6, broker.now_ms())  # a marker only
    assert described() == {P: (1, -1, 6, -1), Q: (3, -1, 6, -1)}
