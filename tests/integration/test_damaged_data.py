"""Damaged data, over a real broker (issue 11): a segment with a flipped byte after a clean stop keeps every
intact record (item 5), and a produced batch whose records are corrupt under a recomputed CRC is refused with
CORRUPT_MESSAGE / INVALID_RECORD while the partition stays consumable by a real client (item 9)."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest
from batches import GZIP, LZ4, SNAPPY, ZSTD, client_batch
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64
from rawkafka import RawClient

from herd.log.batch import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER_SIZE, iter_headers


def produce_raw(port: int, topic: str, records: bytes) -> tuple[ErrorCode, str | None]:
    with RawClient(port) as client:
        resp = client.request(
            0,
            9,
            ProduceRequest(
                transactional_id=None,
                acks=i16(-1),
                timeout=i32Timedelta.parse(__import__("datetime").timedelta(seconds=5)),
                topic_data=(
                    TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=i32(0), records=records),)),
                ),
            ),
        )
    partition = resp.responses[0].partition_responses[0]
    return partition.error_code, partition.error_message


def fetch_offsets(port: int, topic: str, start: int, end: int) -> tuple[list[int], list[int]]:
    """Offsets readable with raw Fetches from `start` to `end`, and those answered with CORRUPT_MESSAGE (skipped
    one at a time, as a consumer reset by an operator would)."""
    import datetime

    from batches import records_of

    got, corrupt, offset = [], [], start
    with RawClient(port) as client:
        while offset < end:
            resp = client.request(1, 12, FetchRequest(
                replica_id=i32(-1), max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=0)),
                min_bytes=i32(0), max_bytes=i32(1 << 20), isolation_level=i8(0), session_id=i32(0),
                session_epoch=i32(-1), cluster_id=None, rack_id="", forgotten_topics_data=(),
                topics=(FetchTopic(topic=topic, partitions=(FetchPartition(
                    partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(offset),
                    last_fetched_epoch=i32(-1), log_start_offset=i64(-1),
                    partition_max_bytes=i32(1 << 20)),)),)))  # fmt: skip
            partition = resp.responses[0].partitions[0]
            if partition.error_code == ErrorCode.corrupt_message:
                corrupt.append(offset)
                offset += 1
                continue
            assert partition.error_code == ErrorCode.none, partition.error_code
            records = [o for o, _ in records_of(bytes(partition.records)) if o >= offset]
            got += records
            offset = records[-1] + 1
    return got, corrupt


def test_a_flipped_byte_after_a_clean_stop_keeps_every_intact_record(broker_factory):
    """The case found: 1,000 records acknowledged (acks=all), clean stop, one byte flipped in the middle of the
    segment: the next start used to cut the log there, 500 records gone and nothing logged."""
    broker = broker_factory({"num.partitions": "1"})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=0)
    for i in range(100):  # 100 batches of 10
        for j in range(10):
            producer.send("damaged", value=b"record-%04d" % (10 * i + j), partition=0)
        producer.flush()
    producer.close()
    assert broker.stop() == 0
    segment = broker.data_dir / "damaged-0" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    headers = list(iter_headers(data))
    middle = headers[len(headers) // 2]
    data[middle.position + HEADER_SIZE + 3] ^= 0xFF
    segment.write_bytes(bytes(data))
    broker.restart()
    lost = range(middle.base_offset, middle.next_offset)
    got, corrupt = fetch_offsets(broker.port, "damaged", 0, 1000)
    assert got == [o for o in range(1000) if o not in lost]
    assert corrupt == list(lost)
    log = broker.log()
    assert "00000000000000000000.log: damaged batch" in log and f"offsets {lost[0]}-{lost[-1]}" in log, log
    # A real consumer reads up to the damage, sees the error, and once moved past it reads the rest.
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=3000)  # fmt: skip
    tp = TopicPartition("damaged", 0)
    consumer.assign([tp])
    consumer.seek(tp, lost[-1] + 1)
    values = [m.value for m in consumer]
    consumer.close()
    assert values == [b"record-%04d" % o for o in range(lost[-1] + 1, 1000)]


def corrupted(codec: int) -> bytes:
    """A real client's batch with one byte of its compressed records damaged and its CRC recomputed."""
    batch = bytearray(client_batch([1_700_000_000_000 + i for i in range(50)], codec))
    batch[(HEADER_SIZE + len(batch)) // 2] ^= 0x5A
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c.crc32c(bytes(batch[ATTRIBUTES_OFFSET:])))
    return bytes(batch)


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_a_corrupt_compressed_batch_is_refused_and_the_partition_stays_readable(broker_factory, codec):
    broker = broker_factory({"num.partitions": "1"})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    producer.send("t", value=b"before", partition=0).get(10)
    error, message = produce_raw(broker.port, "t", corrupted(codec))
    assert error in (ErrorCode.corrupt_message, ErrorCode.invalid_record), (error, message)
    assert message and "batch at byte 0" in message
    good_error, _ = produce_raw(broker.port, "t", client_batch([1_700_000_000_000], codec))
    assert good_error == ErrorCode.none
    producer.send("t", value=b"after", partition=0).get(10)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=3000)  # fmt: skip
    consumer.assign([TopicPartition("t", 0)])
    values = [m.value for m in consumer]
    consumer.close()
    assert values[0] == b"before" and values[-1] == b"after" and len(values) == 3


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def test_a_decompression_bomb_is_refused_without_taking_the_brokers_memory(broker_factory):
    """1 MB of gzip inflating to 1 GiB: MESSAGE_TOO_LARGE, and the broker's peak memory stays far from 1 GiB (it
    held the whole output before); the partition takes normal batches afterwards."""
    import zlib

    broker = broker_factory({"num.partitions": "1"})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    producer.send("t", value=b"before", partition=0).get(10)  # creates the topic
    producer.close()
    deflate = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = bytes(1 << 20)
    bomb = b"".join(deflate.compress(chunk) for _ in range(1024)) + deflate.flush()
    plain = bytearray(client_batch([1_700_000_000_000]))
    batch = bytearray(plain[:HEADER_SIZE] + bomb)
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">h", batch, ATTRIBUTES_OFFSET, GZIP)
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c.crc32c(bytes(batch[ATTRIBUTES_OFFSET:])))
    error, message = produce_raw(broker.port, "t", bytes(batch))
    assert error == ErrorCode.message_too_large, (error, message)
    assert "decompresses to more than 67108864 bytes" in (message or "")
    assert _peak_rss_mb(broker.proc.pid) < 500
    assert produce_raw(broker.port, "t", client_batch([1_700_000_000_001], GZIP))[0] == ErrorCode.none
