"""An idempotent producer's state survives a restart of the broker (issue 16, item 5), over a real `herd serve`
process: raw Produce requests carry the producer's batches, and after a graceful stop and after a kill -9 a
retried batch written before is answered as a duplicate with its first offsets (not appended again), a gap in
the sequence is refused with OUT_OF_ORDER_SEQUENCE_NUMBER, and DescribeProducers tells the restored state."""

from __future__ import annotations

import datetime
import time
from typing import Any

from batches import idempotent_batch
from groupmembers import create_topic
from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
from kio.schema.errors import ErrorCode
from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64
from rawkafka import RawClient

TOPIC = "idempotent"
PID = 4242


def batch(seq: int, count: int = 2, epoch: int = 0) -> bytes:
    """A batch of producer PID, stamped now (a producer whose last batch is older than producer.id.expiration.ms
    is not restored, as on Kafka)."""
    return idempotent_batch(
        PID,
        epoch,
        seq,
        count,
        timestamp=int(time.time() * 1000),
        timestamp_step=0,
        value=lambda i: b"value-%d" % (seq + i),
    )


def produce(port: int, records: bytes) -> tuple[ErrorCode, int]:
    """(error, base offset) of a Produce of `records` to partition 0."""
    with RawClient(port) as client:
        resp = client.request(0, 9, ProduceRequest(
            transactional_id=None, acks=i16(-1), timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)),
            topic_data=(TopicProduceData(name=TOPIC, partition_data=(
                PartitionProduceData(index=i32(0), records=records),)),)))  # fmt: skip
    answer = resp.responses[0].partition_responses[0]
    return answer.error_code, answer.base_offset


def log_end(port: int) -> int:
    """The partition's latest offset (ListOffsets LATEST, v7): its log end on a single broker."""
    with RawClient(port) as client:
        latest = ListOffsetsPartition(partition_index=i32(0), current_leader_epoch=i32(-1), timestamp=i64(-1))
        resp = client.request(
            2,
            7,
            ListOffsetsRequest(
                replica_id=i32(-1), isolation_level=i8(0), topics=(ListOffsetsTopic(name=TOPIC, partitions=(latest,)),)
            ),
        )
    (partition,) = resp.topics[0].partitions
    assert partition.error_code == ErrorCode.none
    return partition.offset


def producers(port: int) -> list[Any]:
    with RawClient(port) as client:
        resp = client.request(
            61, 0, DescribeProducersRequest(topics=(TopicRequest(name=TOPIC, partition_indexes=(i32(0),)),))
        )
    (partition,) = resp.topics[0].partitions
    assert partition.error_code == ErrorCode.none
    return list(partition.active_producers)


def check_restored(port: int, last_seq: int, end: int) -> None:
    """After a restart: the last batch (sequence last_seq - 1) is a duplicate at end - 2, a gap is refused, the
    log did not grow, and DescribeProducers tells the producer's last sequence."""
    assert log_end(port) == end
    assert produce(port, batch(last_seq - 1)) == (ErrorCode.none, end - 2)
    assert log_end(port) == end  # the duplicate was not appended again
    error, _ = produce(port, batch(last_seq + 5))
    assert error == ErrorCode.out_of_order_sequence_number
    assert log_end(port) == end  # nor the batch after the gap
    (state,) = producers(port)
    assert (state.producer_id, state.producer_epoch, state.last_sequence) == (PID, 0, last_seq)
    assert (state.coordinator_epoch, state.current_txn_start_offset) == (-1, -1)
    assert produce(port, batch(last_seq + 1)) == (ErrorCode.none, end)  # the next one is appended


def test_duplicates_and_gaps_are_still_recognised_after_a_stop_and_after_a_kill(broker_factory) -> None:
    broker = broker_factory({"log.segment.bytes": "400"})  # a roll (and a snapshot) every few batches
    create_topic(broker.bootstrap, TOPIC, 1)
    offsets = [produce(broker.port, batch(seq)) for seq in range(0, 16, 2)]
    assert offsets == [(ErrorCode.none, seq) for seq in range(0, 16, 2)]
    assert produce(broker.port, batch(8)) == (ErrorCode.none, 8)  # a duplicate before any restart

    assert broker.stop() == 0
    broker.restart()
    check_restored(broker.port, last_seq=15, end=16)  # appended 16-17

    # 18-19: after the last snapshot, read back from the log after the kill
    assert produce(broker.port, batch(18)) == (ErrorCode.none, 18)
    broker.kill()
    broker.restart()
    check_restored(broker.port, last_seq=19, end=20)
